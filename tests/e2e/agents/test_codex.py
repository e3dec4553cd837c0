"""Codex CLI (npm ``@openai/codex``, pinned by scripts/agents) as a real test client, through
``headroom wrap``, once over HTTP (SSE) and once over the Responses WebSocket, against the
scripted model (a strict Responses endpoint, tests/support/scripted/responses.py) on a scratch
workspace; and what Codex does when the proxy refuses a frame for its size.

The task, played by the upstream from what each request holds: a JSON array on stdout, a long
build log, a file read, a command that fails and then its fix, one ``headroom_retrieve`` call
with a key from a marker of the compressed JSON, a final answer. Codex runs ``codex exec``
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
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from headroom_core.cli import agent_env as ae
from headroom_core.compress import markers
from headroom_core.db.engine import open_database
from headroom_core.db.models import RequestOutcome
from headroom_core.learn.models import LearnEvidence
from tests.support.agents import agent_exe
from tests.support.proxy import free_port
from tests.support.scripted.responses import Responses, is_responses
from tests.support.upstream import RecordedRequest, Reply, ToolCall, Upstream

HEADROOM = str(Path(sys.executable).parent / "headroom")
MODEL = "gpt-5.5"  # a model Codex 0.171 knows: exec_command, output cut at 10,000 tokens (not bytes)
FINAL = "FINAL: the codex task is done"
JSON_CMD = "python3 list_items.py"
LOG_CMD = "python3 build.py"
READ_CMD = "cat NOTES.md"
FAIL_CMD = "hrtest tests"  # not a command: exit 127
FIX_CMD = "python3 -m hrtest tests"
PLAY = (("call_json", JSON_CMD), ("call_log", LOG_CMD), ("call_read", READ_CMD), ("call_fail", FAIL_CMD), ("call_fix", FIX_CMD))
ERROR_LINE = "error: src/net/socket.c:1042: undefined reference to `ssl_ctx_new'"


def codex_exe() -> str:
    """The installed pinned Codex (scripts/agents installs it), else the test skips saying why."""
    return str(agent_exe("codex"))


def workspace(root: Path) -> Path:
    """A scratch project: a script printing a 300-item JSON array, a build printing a long log
    with one error, notes to read, and a module the fixed command runs."""
    ws = root / "project"
    ws.mkdir()
    (ws / "list_items.py").write_text(
        "import json\n"
        "print(json.dumps([{'id': i, 'name': f'item-{i}', 'status': 'open' if i % 3 else 'closed',"
        " 'owner': f'user{i % 7}', 'labels': ['bug', 'p2'] if i % 5 == 0 else []} for i in range(300)]))\n"
    )
    (ws / "build.py").write_text(
        "for i in range(400):\n"
        "    print(f'[{i:4d}/400] CC src/module_{i % 40}/file_{i}.c -o build/obj/file_{i}.o')\n"
        f"    if i == 377:\n        print({ERROR_LINE!r})\n"
        "print('make: *** [Makefile:12: all] Error 1')\n"
    )
    (ws / "NOTES.md").write_text("# Notes\nThe release branch is `release/2.4`; ship on Thursday.\n")
    (ws / "hrtest.py").write_text("print('3 passed in 0.01s')\n")
    return ws.resolve()


class CodexPlay:
    """The scripted model for Codex: each request's reply decided from the conversation it holds
    (never from a count of requests), every request checked strictly first. ``refused`` keeps
    what the strict endpoint refused (the test asserts there is nothing)."""

    def __init__(self) -> None:
        self.api = Responses()
        self.refused: list[list[str]] = []
        self.retrieve_key: str | None = None

    def __call__(self, rec: RecordedRequest) -> Any:
        if not is_responses(rec):
            return None
        found = self.api.problems(rec)
        if found:
            self.refused.append(found)
            return self.api.refusal(rec, found)
        view = self.api.view(rec)
        if view.prewarm:
            return self.api.reply(rec, Reply(text=None))
        done = {o.call_id: o for o in view.outputs}
        for call_id, cmd in PLAY:
            if call_id not in done:
                return self.api.reply(rec, Reply(tool_calls=(ToolCall("exec_command", {"cmd": cmd}, call_id),)))
        if "headroom_retrieve" in view.tools and not any(o.name == "headroom_retrieve" for o in view.outputs):
            keys = markers.find_marker_keys(done["call_json"].text)
            if keys:
                self.retrieve_key = keys[0]
                return self.api.reply(rec, Reply(tool_calls=(ToolCall("headroom_retrieve", {"key": keys[0]}, "call_retrieve"),)))
        return self.api.reply(rec, Reply(text=FINAL))


def settled(read: Callable[[], Any], want: Callable[[Any], bool], timeout: float = 60.0) -> Any:
    """``read()`` once ``want`` holds for it (rows are written after the answer), else its last value."""
    deadline = time.monotonic() + timeout
    while True:
        got = read()
        if want(got) or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def run_codex(tmp_path: Path, up: Upstream, *, websocket: bool, sets: tuple[str, ...] = ()) -> dict[str, Any]:
    """``headroom wrap --no-proxy '' codex exec …`` on a fresh workspace; the proxy is stopped
    before returning. Returns the completed process and the folders it used."""
    exe = codex_exe()
    home, codex_home = tmp_path / "headroom-home", tmp_path / "codex-home"
    home.mkdir()
    codex_home.mkdir()
    ws = workspace(tmp_path)
    (codex_home / "config.toml").write_text(
        f'model = "{MODEL}"\nmodel_provider = "scripted"\n\n[model_providers.scripted]\nname = "scripted"\n'
        f'base_url = "{up.url}/v1"\nwire_api = "responses"\nenv_key = "SCRIPTED_API_KEY"\n'
        f"supports_websockets = {'true' if websocket else 'false'}\n"
    )
    drop = {*ae.CERT_VARS, *ae.BUNDLE_VARS}
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy") and k not in drop and not k.startswith(("HEADROOM_", "CODEX_"))}
    env.update(HEADROOM_HOME=str(home), CODEX_HOME=str(codex_home), SCRIPTED_API_KEY="sk-scripted", COLUMNS="200")
    port = free_port()
    args = [HEADROOM, "wrap", "--port", str(port), "--no-proxy", "", "--set", f"ssl_verify_upstream_trusted_ca={up.cert_path}"]
    for s in sets:
        args += ["--set", s]
    cmd = [exe, "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "-C", str(ws), "Do the task the model plays."]
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


def agent_output(records: list[dict[str, Any]], call_id: str) -> str:
    """The envelope-wrapped output Codex itself kept for ``call_id`` (what it sent upstream)."""
    for r in records:
        p = r.get("payload") or {}
        if r.get("type") == "response_item" and p.get("type") == "function_call_output" and p.get("call_id") == call_id:
            return p["output"]
    raise AssertionError(f"no output of {call_id} in the rollout")


def sent_output(up: Upstream, call_id: str) -> str:
    """The output of ``call_id`` as it first went upstream."""
    for r in up.requests:
        for it in (r.json or {}).get("input") or () if isinstance(r.json, dict) else ():
            if isinstance(it, dict) and it.get("type") == "function_call_output" and it.get("call_id") == call_id:
                return it["output"]
    raise AssertionError(f"no output of {call_id} went upstream")


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
            assert b.json["input"][: len(before)] == before, f"request {b.index} rewrote items request {a.index} had sent"


def check_common(run: dict[str, Any], up: Upstream, play: CodexPlay, *, websocket: bool) -> list[RequestOutcome]:
    out = run["out"]
    assert out.returncode == 0, out.stderr[-3000:]
    assert FINAL in out.stdout, out.stdout + out.stderr[-2000:]
    assert play.refused == [], play.refused
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
        [HEADROOM, "learn", "--project", str(run["ws"]), "--from", str(run["codex_home"] / "sessions"), "--dry-run", "--min-evidence", "1", "--target", "AGENTS.md"],
        env=run["env"], capture_output=True, text=True, timeout=120, cwd=run["ws"],
    )
    assert learned.returncode == 0, learned.stderr
    assert FAIL_CMD in learned.stdout and FIX_CMD in learned.stdout, learned.stdout + learned.stderr
    # JSON and log outputs compressed upstream (the envelope's saving measured on the whole output)
    original, sent = agent_output(records, "call_json"), sent_output(up, "call_json")
    assert original.startswith("Chunk ID: ") and "\nOutput:\n[" in original
    assert sent_output(up, "call_read") == agent_output(records, "call_read")  # a small read passes as is
    assert sent.split("\nOutput:\n", 1)[0] == original.split("\nOutput:\n", 1)[0], "the envelope's header changed"
    assert len(sent) <= 0.4 * len(original), f"JSON output saved {1 - len(sent) / len(original):.0%} (want >= 60%)"
    log_original, log_sent = agent_output(records, "call_log"), sent_output(up, "call_log")
    assert len(log_sent) < len(log_original) / 2 and ERROR_LINE in log_sent
    # the model called headroom_retrieve with the marker's key; the proxy answered it unseen
    assert play.retrieve_key is not None and play.retrieve_key not in text
    return got


@pytest.fixture
def scripted(tmp_path) -> Any:
    with Upstream() as up:
        play = CodexPlay()
        up.responder = play
        yield up, play


def test_codex_over_http(scripted, tmp_path):
    up, play = scripted
    run = run_codex(tmp_path, up, websocket=False)
    assert all(r.method == "POST" for r in llm_requests(up))
    check_common(run, up, play, websocket=False)


def test_codex_over_websocket_is_one_session(scripted, tmp_path):
    up, play = scripted
    run = run_codex(tmp_path, up, websocket=True)
    frames = llm_requests(up)
    assert frames and all(r.method == "WS" for r in frames), [r.method for r in frames]
    assert frames[0].json.get("generate") is False  # the prewarm frame
    assert all(f.json.get("previous_response_id") for f in frames[1:])
    rows = check_common(run, up, play, websocket=True)
    assert len({r.session_key for r in rows}) == 1, "one WebSocket conversation split into several sessions"


def test_codex_on_an_oversized_websocket_frame_stops_at_once_for_compaction(scripted, tmp_path):
    """A frame over ``ws_max_frame_bytes`` (the prewarm, ~30 kB, over a 20 kB limit): the proxy
    sends the ``context_length_exceeded`` error event, then closes with 1009. Codex ends the turn
    at once saying its context window is full (so its next turn compacts first), without
    falling back to HTTP nor retrying the same request; nothing went upstream."""
    up, play = scripted
    run = run_codex(tmp_path, up, websocket=True, sets=("headroom_ws_max_frame_bytes=20000",))
    out = run["out"]
    assert out.returncode == 1, out.stdout + out.stderr[-2000:]
    assert "ran out of room in the model's context window" in out.stderr, out.stderr[-2000:]
    assert "Falling back from WebSockets to HTTPS" not in out.stderr
    assert "Reconnecting" not in out.stderr
    assert [r.method for r in up.requests if r.method != "GET"] == []  # no frame, no HTTP fallback upstream
    assert up.ws_closes and up.ws_closes[0][0] == 1009
