"""One Responses WebSocket, one conversation (issue 31): Codex sends one full ``response.create``
(its ``<environment_context>`` names the working directory), then a warm-up frame
(``generate: false``) and turns with ``previous_response_id`` that carry only the new items.
Through a real ``mitmdump -s addons/headroom.py`` to the local upstream, every frame's ledger
row names the first frame's project and session, its failures are learned under that project,
and a connection that names no project is a conversation of its own, never pooled with another
connection's."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from headroom_core.db.engine import open_database
from headroom_core.db.models import RequestOutcome
from headroom_core.learn.models import LearnEvidence, LearnFailure
from headroom_core.project import is_conversation
from tests.e2e.test_ws_e2e import read_turn, wait_until
from tests.support.clients import ws_connect
from tests.support.proxy import ADDON_SCRIPT
from tests.support.upstream import Reply, ToolCall

PROJECT = "/work/codex-proj"
ENV = f"<environment_context>\n  <cwd>{PROJECT}</cwd>\n  <approval_policy>never</approval_policy>\n  <shell>bash</shell>\n</environment_context>"
SHELL = {
    "type": "function",
    "name": "shell",
    "parameters": {"type": "object", "properties": {"command": {"type": "array", "items": {"type": "string"}}}},
}


@pytest.fixture(scope="module")
def proxy(module_proxy_factory):
    return module_proxy_factory(ADDON_SCRIPT)


def frame(model: str, input_items: list[dict], **extra) -> str:
    body = {
        "model": model,
        "instructions": "You are Codex.",
        "input": input_items,
        "tools": [SHELL],
        "stream": True,
        **extra,
    }
    return json.dumps({"type": "response.create", **body})


def message(role: str, text: str) -> dict:
    return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}


def call(cid: str, cmd: str) -> dict:
    return {
        "type": "function_call",
        "call_id": cid,
        "name": "shell",
        "arguments": json.dumps({"command": ["bash", "-lc", cmd]}),
    }


def output(cid: str, text: str) -> dict:
    return {"type": "function_call_output", "call_id": cid, "output": text}


def rows(proxy, model: str, n: int) -> list[RequestOutcome]:
    sessions = open_database(f"sqlite:///{proxy.home / 'headroom.db'}")

    def read():
        with sessions() as s:
            got = list(
                s.scalars(select(RequestOutcome).where(RequestOutcome.model == model).order_by(RequestOutcome.id))
            )
        return got if len(got) >= n else None

    return wait_until(read, timeout=30) or []


def run_connection(upstream, proxy, model: str, first: list[dict]) -> None:
    """A Codex-like connection: the full first frame, a warm-up, two incremental turns."""
    with ws_connect(upstream, proxy, additional_headers={"user-agent": "codex_cli_rs/0.169.0"}) as ws:
        upstream.script(Reply.text("ok", response_id="resp_a"))
        ws.send(frame(model, first))
        read_turn(ws)
        upstream.script(Reply.text("", response_id="resp_w"))
        ws.send(frame(model, [], generate=False, previous_response_id="resp_a"))
        read_turn(ws)
        upstream.script(Reply.text("ok", response_id="resp_b"))
        ws.send(
            frame(model, [output("call_2", "bash: line 1: pytest: command not found")], previous_response_id="resp_w")
        )
        read_turn(ws)
        upstream.script(Reply.text("done", response_id="resp_c"))
        ws.send(
            frame(
                model,
                [output("call_3", "3 passed in 0.02s"), message("user", "thanks, now commit")],
                previous_response_id="resp_b",
            )
        )
        read_turn(ws)


def test_every_frame_of_a_connection_has_the_first_frames_project_and_session(upstream, proxy):
    first = [
        message("developer", ENV),
        message("user", "run the tests"),
        call("call_1", "pytest tests"),
        output("call_1", "/bin/sh: 1: pytest: not found"),
    ]
    run_connection(upstream, proxy, "gpt-ws-named", first)
    got = rows(proxy, "gpt-ws-named", 4)
    assert len(got) == 4
    assert [r.project for r in got] == [PROJECT] * 4
    assert len({r.session_key for r in got}) == 1
    # the failure (known from its text only) is learned under the connection's project
    sessions = open_database(f"sqlite:///{proxy.home / 'headroom.db'}")

    def failures():
        with sessions() as s:
            return [
                (f.project, f.error) for f in s.scalars(select(LearnFailure).where(LearnFailure.project == PROJECT))
            ]

    assert ("/work/codex-proj", "pytest: not found") in (wait_until(failures, timeout=30) or [])


def test_connections_without_a_project_are_each_their_own_conversation(upstream, proxy):
    first = [message("user", "run the tests"), call("call_1", "ls"), output("call_1", "tests")]
    run_connection(upstream, proxy, "gpt-ws-anon-1", first)
    run_connection(upstream, proxy, "gpt-ws-anon-2", [message("user", "tidy the readme"), *first[1:]])
    one, two = rows(proxy, "gpt-ws-anon-1", 4), rows(proxy, "gpt-ws-anon-2", 4)
    assert len(one) == len(two) == 4
    for conn in (one, two):
        assert len({r.project for r in conn}) == 1 and is_conversation(conn[0].project)
        assert len({r.session_key for r in conn}) == 1
    assert one[0].project != two[0].project and one[0].session_key != two[0].session_key
    assert "global" not in {r.project for r in one + two}


def test_a_connection_that_names_its_project_late_is_one_conversation_of_that_project(upstream, proxy):
    """Codex 0.171's shape: a warm-up holding only the developer message (no working directory),
    then a ``previous_response_id`` frame with the ``<environment_context>`` and the prompt, then
    frames with only the outputs of the calls the previous response made. Every row (the
    warm-up's too, written before the project was known) names the project, one session key;
    the failed call (made by one response, answered in the next frame) and the call that fixed
    it (made by a later response) form live learning's pair under the project."""
    model = "gpt-ws-late"
    with ws_connect(upstream, proxy, additional_headers={"user-agent": "codex_cli_rs/0.171.0"}) as ws:
        upstream.script(Reply.text("", response_id="resp_w"))
        ws.send(frame(model, [message("developer", "You run commands for the user.")], generate=False))
        read_turn(ws)
        upstream.script(
            Reply(
                tool_calls=(ToolCall("shell", {"command": ["bash", "-lc", "hrtest tests"]}, "call_f"),),
                response_id="resp_1",
            )
        )
        ws.send(frame(model, [message("user", ENV), message("user", "run the tests")], previous_response_id="resp_w"))
        read_turn(ws)
        upstream.script(
            Reply(
                tool_calls=(ToolCall("shell", {"command": ["bash", "-lc", "python3 -m hrtest tests"]}, "call_g"),),
                response_id="resp_2",
            )
        )
        ws.send(
            frame(model, [output("call_f", "bash: line 1: hrtest: command not found")], previous_response_id="resp_1")
        )
        read_turn(ws)
        upstream.script(Reply.text("done", response_id="resp_3"))
        ws.send(frame(model, [output("call_g", "3 passed in 0.01s")], previous_response_id="resp_2"))
        read_turn(ws)
    sessions = open_database(f"sqlite:///{proxy.home / 'headroom.db'}")

    def settled_rows():
        with sessions() as s:
            got = list(s.scalars(select(RequestOutcome).where(RequestOutcome.model == model)))
        return got if len(got) >= 4 and {r.project for r in got} == {PROJECT} else None

    got = wait_until(settled_rows, timeout=30)
    assert got, [(r.project, r.session_key) for r in rows(proxy, model, 4)]
    assert len({r.session_key for r in got}) == 1

    def evidence():
        with sessions() as s:
            return [e.text for e in s.scalars(select(LearnEvidence).where(LearnEvidence.project == PROJECT))] or None

    ev = wait_until(evidence, timeout=30) or []
    assert any("hrtest tests" in t and "python3 -m hrtest tests" in t for t in ev), ev
    with sessions() as s:
        assert not [e.project for e in s.scalars(select(LearnEvidence)) if is_conversation(e.project)]
