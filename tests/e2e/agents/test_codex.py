"""Codex CLI (npm ``@openai/codex``, pinned by scripts/agents) as a real test client, through
``headroom wrap``, once over HTTP (SSE) and once over the Responses WebSocket, against the
scripted model (a strict Responses endpoint, tests/support/scripted/responses.py) on a scratch
workspace; and what Codex does when the proxy refuses a frame for its size.

The task, played by the upstream from what each request holds (the shared play of
tests/support/scripted/play.py through its Responses adapter, as for every agent with tool calls
and bench/bench_agents.py): a JSON array on stdout, a long build log, a file read (``cat``: Codex
has no read tool), a command that fails and then its fix, one ``headroom_retrieve`` call with a
key from a marker of the compressed JSON, a final answer. Codex runs ``codex exec``
(non-interactive) with a custom provider in a temporary ``CODEX_HOME``; the proxy ``wrap``
starts has its own temporary ``HEADROOM_HOME`` and trusts the upstream's certificate.
``--no-proxy ''``: the upstream is on 127.0.0.1, which ``wrap`` would otherwise leave out.

Wire facts of Codex 0.171 this relies on (recorded against the same upstream): over HTTP every
request carries the whole conversation; over WebSocket the first frame is a ``generate: false``
prewarm holding only the system (developer) message, the next continues it by
``previous_response_id`` with the rest of the context (``<environment_context>`` with the
``<cwd>``) and the prompt, and each later frame carries only the new ``function_call_output``.
Command outputs come in an envelope (``Chunk ID``, ``Wall time``, ``Process exited with code N``,
``Original token count``, ``Output:``). The session log is a rollout
``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from headroom_core.cli import agent_env as ae
from headroom_core.db.engine import open_database
from headroom_core.db.models import RequestOutcome
from headroom_core.learn.models import LearnEvidence
from tests.support.agents import HEADROOM, agent_exe, settled
from tests.support.proxy import free_port
from tests.support.scripted import ScriptedModel, make_workspace, play
from tests.support.scripted.responses import is_responses
from tests.support.upstream import RecordedRequest, Upstream

MODEL = "gpt-5.5"  # a model Codex 0.171 knows: exec_command, output cut at 10,000 tokens (not bytes)
FAIL_CMD = "python3 tool/stats.py"  # the play's wrong path: exit 2
FIX_CMD = "python3 tools/stats.py"
ERROR_LINES = [line for line in play.build_log_text().splitlines() if ": error: " in line]


def codex_exe() -> str:
    """The installed pinned Codex (scripts/agents installs it), else the test skips saying why."""
    return str(agent_exe("codex"))


def run_codex(
    tmp_path: Path, up: Upstream, model: ScriptedModel, *, websocket: bool, sets: tuple[str, ...] = ()
) -> dict[str, Any]:
    """``headroom wrap --no-proxy '' codex exec …`` on ``model``'s workspace; the proxy is stopped
    before returning. Returns the completed process and the folders it used."""
    exe = codex_exe()
    home, codex_home = tmp_path / "headroom-home", tmp_path / "codex-home"
    home.mkdir()
    codex_home.mkdir()
    ws = model.task.workspace
    (codex_home / "config.toml").write_text(
        f'model = "{MODEL}"\nmodel_provider = "scripted"\n\n[model_providers.scripted]\nname = "scripted"\n'
        f'base_url = "{up.url}/v1"\nwire_api = "responses"\nenv_key = "SCRIPTED_API_KEY"\n'
        f"supports_websockets = {'true' if websocket else 'false'}\n"
    )
    drop = {*ae.CERT_VARS, *ae.BUNDLE_VARS}
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.lower().endswith("_proxy") and k not in drop and not k.startswith(("HEADROOM_", "CODEX_"))
    }
    env.update(HEADROOM_HOME=str(home), CODEX_HOME=str(codex_home), SCRIPTED_API_KEY="sk-scripted", COLUMNS="200")
    port = free_port()
    args = [
        HEADROOM,
        "wrap",
        "--port",
        str(port),
        "--no-proxy",
        "",
        "--set",
        f"ssl_verify_upstream_trusted_ca={up.cert_path}",
    ]
    for s in sets:
        args += ["--set", s]
    cmd = [
        exe,
        "exec",
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        "-C",
        str(ws),
        play.PROMPT,
    ]
    try:
        out = subprocess.run(args + cmd, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    finally:
        subprocess.run([HEADROOM, "proxy", "--stop", "--port", str(port)], env=env, capture_output=True, timeout=60)
    return {"out": out, "home": home, "codex_home": codex_home, "ws": ws, "env": env}


def rollout(codex_home: Path) -> tuple[str, list[dict[str, Any]]]:
    """The one rollout file of the run: its text and its records."""
    (path,) = sorted((codex_home / "sessions").rglob("rollout-*.jsonl"))
    text = path.read_text()
    return text, [json.loads(line) for line in text.splitlines() if line.strip()]


def agent_output(records: list[dict[str, Any]], step: str) -> str:
    """The envelope-wrapped output Codex itself kept for the play's ``step`` (what it sent upstream)."""
    for r in records:
        p = r.get("payload") or {}
        if (
            r.get("type") == "response_item"
            and p.get("type") == "function_call_output"
            and play.step_of(str(p.get("call_id"))) == step
        ):
            return str(p["output"])
    raise AssertionError(f"no output of step {step} in the rollout")


def sent_output(up: Upstream, step: str) -> str:
    """The output of the play's ``step`` as it first went upstream."""
    for r in up.requests:
        for it in (r.json or {}).get("input") or () if isinstance(r.json, dict) else ():
            if (
                isinstance(it, dict)
                and it.get("type") == "function_call_output"
                and play.step_of(str(it.get("call_id"))) == step
            ):
                return str(it["output"])
    raise AssertionError(f"no output of step {step} went upstream")


def retrieve_key(model: ScriptedModel) -> str | None:
    """The key the scripted model asked ``headroom_retrieve`` for, if it did."""
    return next((mv.key for _, mv in model.moves if isinstance(mv, play.Retrieve)), None)


def llm_requests(up: Upstream) -> list[RecordedRequest]:
    return [r for r in up.requests if is_responses(r) and isinstance(r.json, dict)]


def check_prefix_rule(up: Upstream, websocket: bool) -> None:
    """``tools`` byte-stable across the conversation; over HTTP each request's input starts with
    the previous one's items unchanged (over WebSocket a frame carries only new items)."""
    reqs = llm_requests(up)
    tools = {json.dumps(r.json.get("tools"), separators=(",", ":")) for r in reqs}
    assert len(tools) == 1, "the tools changed within one conversation"
    if not websocket:
        for a, b in zip(reqs, reqs[1:]):
            before = a.json["input"]
            assert b.json["input"][: len(before)] == before, (
                f"request {b.index} rewrote items request {a.index} had sent"
            )


def check_common(run: dict[str, Any], up: Upstream, model: ScriptedModel, *, websocket: bool) -> list[RequestOutcome]:
    out = run["out"]
    assert out.returncode == 0, out.stderr[-3000:]
    assert play.FINAL_SENTINEL in out.stdout, out.stdout + out.stderr[-2000:]
    assert model.invalid == [], model.invalid
    steps = [getattr(mv, "step", "final") for _, mv in model.moves if not isinstance(mv, play.Side)]
    assert steps == ["json", "log", "read", "fail", "fix", "retrieve", "final"], steps
    text, records = rollout(run["codex_home"])
    # the agent's own transcript never holds the proxy's tools
    assert "headroom_retrieve" not in text
    check_prefix_rule(up, websocket)
    # the ledger names the workspace as the project
    db = open_database(f"sqlite:///{run['home'] / 'headroom.db'}")
    n_llm = len([r for r in llm_requests(up)])

    def rows() -> list[RequestOutcome]:
        with db() as s:
            return list(s.scalars(select(RequestOutcome)))

    got = settled(rows, lambda rs: len(rs) >= n_llm - 1)
    assert got and {r.project for r in got} == {str(run["ws"])}, {r.project for r in got}

    # live learning recorded the failed -> fixed pair for that project
    def evidence() -> list[str]:
        with db() as s:
            return [e.text for e in s.scalars(select(LearnEvidence).where(LearnEvidence.project == str(run["ws"])))]

    ev = settled(evidence, lambda e: any(FAIL_CMD in t and FIX_CMD in t for t in e))
    assert any(FAIL_CMD in t and FIX_CMD in t for t in ev), ev
    # `headroom learn` over Codex's own rollout finds the same pair
    learned = subprocess.run(
        [
            HEADROOM,
            "learn",
            "--project",
            str(run["ws"]),
            "--from",
            str(run["codex_home"] / "sessions"),
            "--dry-run",
            "--min-evidence",
            "1",
            "--target",
            "AGENTS.md",
        ],
        env=run["env"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=run["ws"],
    )
    assert learned.returncode == 0, learned.stderr
    assert FAIL_CMD in learned.stdout and FIX_CMD in learned.stdout, learned.stdout + learned.stderr
    # JSON and log outputs compressed upstream (the envelope's saving measured on the whole output)
    original, sent = agent_output(records, "json"), sent_output(up, "json")
    assert original.startswith("Chunk ID: ") and "\nOutput:\n[" in original
    assert sent_output(up, "read") == agent_output(records, "read")  # a small read passes as is
    assert sent.split("\nOutput:\n", 1)[0] == original.split("\nOutput:\n", 1)[0], "the envelope's header changed"
    assert len(sent) <= 0.4 * len(original), f"JSON output saved {1 - len(sent) / len(original):.0%} (want >= 60%)"
    log_original, log_sent = agent_output(records, "log"), sent_output(up, "log")
    assert len(log_sent) < 0.6 * len(log_original) and all(line in log_sent for line in ERROR_LINES)
    # the model called headroom_retrieve with the marker's key; the proxy answered it unseen
    key = retrieve_key(model)
    assert key is not None and key not in text
    return got


@pytest.fixture
def scripted(tmp_path) -> Any:
    with Upstream() as up:
        model = ScriptedModel(make_workspace(tmp_path / "project")).install(up)
        yield up, model


def test_codex_over_http(scripted, tmp_path):
    up, model = scripted
    run = run_codex(tmp_path, up, model, websocket=False)
    assert all(r.method == "POST" for r in llm_requests(up))
    check_common(run, up, model, websocket=False)


def test_codex_over_websocket_is_one_session(scripted, tmp_path):
    up, model = scripted
    run = run_codex(tmp_path, up, model, websocket=True)
    frames = llm_requests(up)
    assert frames and all(r.method == "WS" for r in frames), [r.method for r in frames]
    assert frames[0].json.get("generate") is False  # the prewarm frame
    assert all(f.json.get("previous_response_id") for f in frames[1:])
    rows = check_common(run, up, model, websocket=True)
    assert len({r.session_key for r in rows}) == 1, "one WebSocket conversation split into several sessions"


def test_codex_on_an_oversized_websocket_frame_stops_at_once_for_compaction(scripted, tmp_path):
    """A frame over ``ws_max_frame_bytes`` (the prewarm, ~30 kB, over a 20 kB limit): the proxy
    sends the ``context_length_exceeded`` error event, then closes with 1009. Codex ends the turn
    at once saying its context window is full (so its next turn compacts first), without
    falling back to HTTP nor retrying the same request; nothing went upstream."""
    up, model = scripted
    run = run_codex(tmp_path, up, model, websocket=True, sets=("headroom_ws_max_frame_bytes=20000",))
    out = run["out"]
    assert out.returncode == 1, out.stdout + out.stderr[-2000:]
    assert "ran out of room in the model's context window" in out.stderr, out.stderr[-2000:]
    assert "Falling back from WebSockets to HTTPS" not in out.stderr
    assert "Reconnecting" not in out.stderr
    assert [r.method for r in up.requests if r.method != "GET"] == []  # no frame, no HTTP fallback upstream
    assert up.ws_closes and up.ws_closes[0][0] == 1009
