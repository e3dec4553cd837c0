"""Find an agent program installed by ``scripts/agents`` (real coding agents as test clients).

``scripts/agents`` installs pinned releases (Claude Code, Codex CLI, opencode, Aider) into a
cache folder outside the repo; ``scripts/test`` runs it before pytest. A test asks
:func:`agent_exe` for the executable and is skipped, with the reason the installer recorded,
when it is not there.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "agents"


def agents_dir() -> Path:
    """The cache folder ``scripts/agents`` installs into (same rule as the script)."""
    env = os.environ.get("HEADROOM_TEST_AGENTS_DIR")
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
    out = subprocess.run(["bash", str(SCRIPT), "path", name], capture_output=True, text=True, timeout=60)
    if out.returncode == 0 and out.stdout.strip():
        exe = Path(out.stdout.strip())
        if os.access(exe, os.X_OK):
            return exe
    root = agents_dir()
    reasons = sorted(root.glob(f"{name}-*.skipped")) if root.is_dir() else []
    if reasons:
        why = reasons[-1].read_text(errors="replace").strip()
        pytest.skip(f"agent {name} not installed: {why} (scripts/agents {name} tries again)")
    pytest.skip(f"agent {name} not installed: run `bash scripts/agents {name}` (scripts/test does)")
    raise AssertionError("unreachable")  # pytest.skip raises; this satisfies type checkers
