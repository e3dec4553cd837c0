"""Find an agent program installed by ``scripts/agents`` (real coding agents as test clients).

``scripts/agents`` installs pinned releases (Claude Code, Codex CLI, opencode, Aider) into a
cache folder outside the repo; ``scripts/test`` runs it before pytest. A test asks
:func:`agent_exe` for the executable and is skipped, with the reason the installer recorded,
when it is not there.

The agent tests' shared pieces: :class:`Wrapped` (a ``headroom wrap`` proxy), :func:`play_wrapped`
(the scripted task played once through it, an :class:`AgentRun`), the checks every agent's run
must pass (``check_*``), :func:`prefix_breaks`, :func:`settled` and :func:`query` (ledger rows).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from headroom_core.compress import markers
from tests.support.proxy import free_port
from tests.support.scripted import ScriptedModel, make_workspace, play
from tests.support.upstream import RecordedRequest, Upstream

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
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.lower().endswith("_proxy")
        and k not in drop
        and not (k.startswith("HEADROOM_") and not k.startswith("HEADROOM_TEST_"))
    }
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

    def run(
        self, command: list[str], *, env: dict[str, str], cwd: Path, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        """``headroom wrap … command`` with local hosts through the proxy (``--no-proxy ''``);
        ``env`` is the agent's environment (``HEADROOM_HOME`` is set to :attr:`home`)."""
        args = [
            HEADROOM,
            "wrap",
            "--quiet",
            "--port",
            str(self.port),
            "--set",
            f"ssl_verify_upstream_trusted_ca={self.upstream_cert}",
            "--no-proxy",
            "",
        ]
        return subprocess.run(
            [*args, *command],
            env={**env, "HEADROOM_HOME": str(self.home)},
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def stop(self) -> None:
        """Stop the proxy ``wrap`` started (its ledger committed on the way out)."""
        subprocess.run(
            [HEADROOM, "proxy", "--stop", "--port", str(self.port)],
            env=base_env(HEADROOM_HOME=str(self.home)),
            capture_output=True,
            timeout=60,
        )

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        """Rows of ``sql`` on the proxy's database (read-only)."""
        return query(self.db, sql, timeout=5.0)


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


# -- shared pieces of the agent tests (tests/e2e/agents/) ---------------------------------------

RUN_TIMEOUT = 300  # seconds for a whole agent run (it takes a few)


def settled(read: Callable[[], Any], ok: Callable[[Any], bool], timeout: float = 60.0) -> Any:
    """``read()`` once ``ok`` of it holds (ledger rows are committed after the answers), else its
    last value after ``timeout`` seconds (polled every 0.1 s)."""
    deadline = time.monotonic() + timeout
    while True:
        got = read()
        if ok(got) or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def query(db: Path, sql: str, timeout: float = 30.0) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` on the SQLite database ``db`` (read-only; ``timeout`` seconds for a lock)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=timeout)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


@dataclass(frozen=True)
class AgentRun:
    """What one wrapped agent run of the scripted task left: its process result, the upstream's
    records, the scripted model, the task, the proxy and the agent's HOME."""

    proc: subprocess.CompletedProcess[str]
    requests: list[RecordedRequest]
    model: ScriptedModel
    task: play.Task
    proxy: Wrapped
    home: Path

    def task_requests(self) -> list[RecordedRequest]:
        """The model requests of the task's conversation (side requests left out), in order."""
        main = {i for i, mv in self.model.moves if not isinstance(mv, play.Side)}
        return [r for r in self.requests if r.index in main]

    def why(self) -> str:
        """The run's exit status, output tails, refused requests and moves (a failure's message)."""
        moves = [(i, type(mv).__name__, getattr(mv, "step", "")) for i, mv in self.model.moves]
        return f"rc={self.proc.returncode}\nstdout: {self.proc.stdout[-1500:]}\nstderr: {self.proc.stderr[-1500:]}\ninvalid: {self.model.invalid}\nmoves: {moves}"


R = TypeVar("R", bound=AgentRun)


def play_wrapped(
    root: Path, command: list[str], env: Callable[[Upstream, Path], dict[str, str]], make: Callable[..., R]
) -> R:
    """Play the scripted task once: a workspace under ``root``, a scripted HTTPS upstream, and
    ``command`` (the agent) run through ``headroom wrap`` with ``env(upstream, home)`` as its
    environment (``home`` is ``root/home``, made if missing); the proxy is stopped before
    returning ``make(proc, requests, model, task, proxy, home)``."""
    task = make_workspace(root / "workspace")
    home = root / "home"
    home.mkdir(exist_ok=True)
    with Upstream() as up:
        model = ScriptedModel(task).install(up)
        assert up.cert_path is not None
        proxy = Wrapped(root / "headroom-home", free_port(), up.cert_path)
        agent_env = env(up, home)
        try:
            proc = proxy.run(command, env=agent_env, cwd=task.workspace, timeout=RUN_TIMEOUT)
        finally:
            proxy.stop()
        return make(proc, up.requests, model, task, proxy, home)


def check_whole_play(run: AgentRun) -> None:
    """The agent finished with the final text, every request valid, every step of the play done."""
    assert run.proc.returncode == 0, run.why()
    assert play.FINAL_SENTINEL in run.proc.stdout, run.why()
    assert run.model.invalid == [], run.why()
    steps = [getattr(mv, "step", "final") for _, mv in run.model.moves if not isinstance(mv, play.Side)]
    assert steps == ["json", "log", "read", "fail", "fix", "retrieve", "final"], run.why()


def check_json_compressed(got_json: str) -> None:
    """The play's JSON array as the upstream got it: at least 60% smaller (the issue's target),
    with a retrieval marker."""
    records = play.records_text()
    assert len(got_json) <= 0.4 * len(records), (len(got_json), len(records), got_json[:500])
    assert markers.find_marker_keys(got_json), got_json[:500]


def check_log_compressed(got_log: str) -> None:
    """The play's build log as the upstream got it: smaller, both error lines kept verbatim."""
    log = play.build_log_text()
    assert len(got_log) < 0.6 * len(log), (len(got_log), len(log))
    for line in log.splitlines():
        if ": error: " in line:
            assert line in got_log


def check_retrieve_answered(run: AgentRun, outputs: Callable[[RecordedRequest], dict[str, play.Output]]) -> None:
    """``headroom_retrieve`` was answered by the proxy with the JSON array's original items, and
    the agent never showed the proxy's name. ``outputs`` reads a request's tool outputs by step."""
    with_retrieve = [r for r in run.task_requests() if "retrieve" in outputs(r)]
    assert with_retrieve, run.why()
    answer = outputs(with_retrieve[0])["retrieve"].text
    # the key the model asked for is the JSON array's: its original items come back
    assert '"name": "item-150"' in answer and '"name": "item-300"' in answer, answer[:500]
    assert "headroom" not in run.proc.stdout.lower().replace(play.FINAL_SENTINEL.lower(), "")


def check_transcript_clean(logs: list[Path], agent: str) -> None:
    """The agent's own session logs ``logs`` are the session's and never name the proxy's tool
    nor its omission marker."""
    assert logs, f"{agent} wrote no session log under the test HOME"
    text = "\n".join(p.read_text(errors="replace") for p in logs)
    assert "python3 tools/stats.py" in text  # the log is the session's
    assert "headroom_retrieve" not in text
    assert "headroom omitted" not in text


def check_live_learning(run: AgentRun) -> None:
    """Live learning recorded the play's failed -> fixed pair for the workspace's project."""
    rows = run.proxy.query("SELECT project, rule_kind, text FROM learn_evidence")
    mine = [(k, t) for p, k, t in rows if p == str(run.task.workspace)]
    assert any("tools/stats.py" in t for _, t in mine), rows


def check_learn_finds_pair(run: AgentRun) -> None:
    """``headroom learn --dry-run`` over the agent's own session log (in its HOME) finds the pair."""
    out = subprocess.run(
        [HEADROOM, "learn", "--project", str(run.task.workspace), "--dry-run", "--min-evidence", "1"],
        env=base_env(HOME=str(run.home), HEADROOM_HOME=str(run.proxy.home), COLUMNS="200"),
        cwd=run.task.workspace, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "tools/stats.py" in out.stdout, out.stdout + out.stderr
