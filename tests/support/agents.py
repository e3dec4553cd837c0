"""Find an agent program installed by ``scripts/agents`` (real coding agents as test clients).

``scripts/agents`` installs pinned releases (Claude Code, Codex CLI, opencode, Aider) into a
cache folder outside the repo; ``scripts/test`` runs it before pytest. A test asks
:func:`agent_exe` for the executable and is skipped, with the reason the installer recorded,
when it is not there.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "agents"


def agents_dir() -> Path:
    """The cache folder ``scripts/agents`` installs into (same rule as the script), as the real
    environment gives it: a test run's isolated HOME records it in ``TESTS_AGENTS_CACHE``
    (tests/support/isolation.py)."""
    env = os.environ.get("TESTS_AGENTS_CACHE") or os.environ.get("HEADROOM_TEST_AGENTS_DIR")
    if env:
        return Path(env)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "headroom-test-agents"


def agent_exe(name: str) -> Path:
    """Path of the installed executable of agent ``name`` (``claude``, ``codex``, ``opencode``,
    ``aider``), as recorded in its install folder's stamp by ``scripts/agents``.

    Raises ``pytest.skip.Exception`` (the test is skipped) when it is not installed, with the
    reason ``scripts/agents`` recorded (registry unreachable, install failed, ...) or the command
    that installs it.
    """
    root = agents_dir()
    env = {**os.environ, "HEADROOM_TEST_AGENTS_DIR": str(root)}
    out = subprocess.run(["bash", str(SCRIPT), "path", name], env=env, capture_output=True, text=True, timeout=60)
    if out.returncode == 0 and out.stdout.strip():
        exe = Path(out.stdout.strip())
        if os.access(exe, os.X_OK):
            return exe
    reasons = sorted(root.glob(f"{name}-*.skipped")) if root.is_dir() else []
    if reasons:
        why = reasons[-1].read_text(errors="replace").strip()
        pytest.skip(f"agent {name} not installed: {why} (scripts/agents {name} tries again)")
    pytest.skip(f"agent {name} not installed: run `bash scripts/agents {name}` (scripts/test does)")
    raise AssertionError("unreachable")  # pytest.skip raises; this satisfies type checkers


# -- running an agent through ``headroom wrap`` -----------------------------------------------

HEADROOM = str(Path(sys.executable).parent / "headroom")


def base_env(**extra: str) -> dict[str, str]:
    """A typical user's environment for an agent run: this one without proxy variables, CA
    variables or ``HEADROOM_*`` (the test sets its own), plus ``extra``."""
    from headroom_core.cli import agent_env as ae

    drop = {*ae.CERT_VARS, *ae.BUNDLE_VARS}
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy") and k not in drop and not (k.startswith("HEADROOM_") and not k.startswith("HEADROOM_TEST_"))}
    env.update(extra)
    return env


@dataclass(frozen=True)
class Wrapped:
    """One proxy that ``headroom wrap`` starts: its ``HEADROOM_HOME`` and port, trusting the
    scripted upstream's certificate ``upstream_cert``."""

    home: Path
    port: int
    upstream_cert: Path

    @property
    def db(self) -> Path:
        """The proxy's SQLite database."""
        return self.home / "headroom.db"

    def run(self, command: list[str], *, env: dict[str, str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """``headroom wrap … command`` with local hosts through the proxy (``--no-proxy ''``);
        ``env`` is the agent's environment (``HEADROOM_HOME`` is set to :attr:`home`)."""
        args = [HEADROOM, "wrap", "--quiet", "--port", str(self.port), "--set", f"ssl_verify_upstream_trusted_ca={self.upstream_cert}", "--no-proxy", ""]
        return subprocess.run([*args, *command], env={**env, "HEADROOM_HOME": str(self.home)}, cwd=cwd, capture_output=True, text=True, timeout=timeout)

    def stop(self) -> None:
        """Stop the proxy ``wrap`` started (its ledger committed on the way out)."""
        subprocess.run([HEADROOM, "proxy", "--stop", "--port", str(self.port)], env=base_env(HEADROOM_HOME=str(self.home)), capture_output=True, timeout=60)

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        """Rows of ``sql`` on the proxy's database (read-only)."""
        con = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)
        try:
            return con.execute(sql).fetchall()
        finally:
            con.close()


def prefix_breaks(bodies: list[str], parts: tuple[str, ...] = ("tools", "system", "messages")) -> tuple[list[str], int]:
    """The prompt-cache rule over one conversation's request bodies as the upstream got them, in
    order: every ``tools`` entry and ``system`` block of a request, and every message but its last
    (the one a client extends or re-marks), reach the upstream byte for byte in the next request
    (``cache_control`` aside: clients move it). Returns the breaks (``"<request>:<part>[i]"``) and
    how many elements were compared."""
    from headroom_core.wire import jsonedit

    def elements(text: str, part: str) -> list[str]:
        try:
            return [jsonedit.strip_member(text[a:b], "cache_control") for a, b in jsonedit.element_spans(text, (part,))]
        except jsonedit.JSONPathError:
            return []

    breaks: list[str] = []
    compared = 0
    for n, (a, b) in enumerate(zip(bodies, bodies[1:]), start=1):
        for part in parts:
            ea, eb = elements(a, part), elements(b, part)
            if part == "messages":
                ea = ea[:-1]
            for i, x in enumerate(ea):
                compared += 1
                if i >= len(eb) or eb[i] != x:
                    breaks.append(f"{n}:{part}[{i}]")
    return breaks, compared
