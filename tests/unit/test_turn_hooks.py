"""The addons' hooks in-process (mitmproxy's ``taddons`` and ``tflow``, no mitmdump) on a real
runtime and database: a flow or a WebSocket frame becomes one turn of
:mod:`headroom_core.turn` (compressed upstream, session stored, observers in the client's order,
its ledger row with the response's figures), and an unreachable upstream's row says so."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from pathlib import Path
from typing import Any

from mitmproxy import http
from mitmproxy.test import taddons, tflow
from mitmproxy.websocket import WebSocketMessage
from sqlalchemy import select
from wsproto.frame_protocol import Opcode

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "addons"))

import headroom_llm  # noqa: E402
import headroom_unreachable  # noqa: E402
import headroom_ws  # noqa: E402
from headroom_options import State  # noqa: E402

from headroom_core.db.models import RequestOutcome, ToolUsage  # noqa: E402
from headroom_core.runtime import Runtime  # noqa: E402

UA = "claude-cli/1.0.62 (external, cli)"
ROWS = [
    {
        "id": i,
        "name": f"service-{i % 7}",
        "status": "ok" if i % 5 else "degraded",
        "latency_ms": 20 + i % 13,
        "region": "eu-west-1",
    }
    for i in range(400)
]


def _messages_body(turns: int = 1) -> bytes:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "list the services"}]
    for t in range(turns):
        msgs.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": f"t{t}", "name": "Bash", "input": {"command": "svc list --json"}}
                ],
            }
        )
        msgs.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{t}", "content": json.dumps(ROWS)}]}
        )
    body = {
        "model": "claude-sonnet-4",
        "max_tokens": 100,
        "tools": [{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}],
        "messages": msgs,
    }
    return json.dumps(body).encode()


def _request(body: bytes, key: str = "sk-ant-test-1") -> http.HTTPFlow:
    f = tflow.tflow()
    f.request = http.Request.make(
        "POST", "https://api.anthropic.com/v1/messages", body,
        {"content-type": "application/json", "user-agent": UA, "x-api-key": key, "x-headroom-project": "/src/app"},
    )  # fmt: skip
    return f


def _reply(f: http.HTTPFlow) -> None:
    body = {"id": "m1", "type": "message", "role": "assistant", "model": "claude-sonnet-4", "content": [{"type": "text", "text": "fine"}],
            "stop_reason": "end_turn", "usage": {"input_tokens": 120, "output_tokens": 4, "cache_read_input_tokens": 30}}  # fmt: skip
    f.response = http.Response.make(200, json.dumps(body).encode(), {"content-type": "application/json"})


def _rows(rt: Runtime) -> list[RequestOutcome]:
    assert rt.ledger.flush(10.0)
    with rt.sessions() as s:
        return list(s.execute(select(RequestOutcome).order_by(RequestOutcome.id)).scalars())


def test_an_http_flow_is_compressed_stored_learned_from_and_recorded(runtime: Runtime):
    state = State()
    state.runtime = runtime
    addon = headroom_llm.LLMTraffic(state)
    seen: list[int] = []
    runtime.extensions.observers.append(lambda rt, ctx: seen.append(len(ctx.body["messages"])))

    async def scenario() -> http.HTTPFlow:
        with taddons.context(addon):
            f = _request(_messages_body())
            sent = len(f.request.content or b"")
            await addon.request(f)
            st = f.metadata["headroom"]
            assert len(f.request.content or b"") < sent and st.plan.action == "rewrite"  # compressed upstream
            assert "headroom_retrieve" in json.loads(f.request.content or b"{}")["tools"][-1]["name"]
            _reply(f)
            await addon.responseheaders(f)
            assert st.turn.stored.done()  # the session's state is stored before the client sees the answer
            await addon.response(f)
            assert "headroom" not in f.metadata and st.turn.observed.done() and st.turn.answered
            addon.done()
            return f

    asyncio.run(scenario())
    assert seen == [3]
    (row,) = _rows(runtime)
    assert (row.action, row.client, row.project, row.model, row.status_code) == (
        "compressed",
        "claude-cli",
        "/src/app",
        "claude-sonnet-4",
        200,
    )
    assert (row.usage_input_tokens, row.usage_output_tokens, row.usage_cache_read_tokens) == (120, 4, 30)
    assert row.tokens_after < row.tokens_before and row.body_bytes_after < row.body_bytes_before
    with runtime.sessions() as s:
        tools = {(t.tool_name, t.offered, t.called) for t in s.execute(select(ToolUsage)).scalars()}
    assert tools == {("Bash", 1, 0)}  # the client's tools, the proxy's own left out


def test_a_clients_next_request_is_planned_after_its_previous_one_was_learned_from(runtime: Runtime):
    state = State()
    state.runtime = runtime
    addon = headroom_llm.LLMTraffic(state)
    release = threading.Event()
    seen: list[tuple[str, int]] = []

    def observer(rt: object, ctx: Any) -> None:
        n = len(ctx.body["messages"])
        if n == 3:
            assert release.wait(10)
        seen.append((ctx.headers.get("x-api-key", ""), n))

    runtime.extensions.observers.append(observer)

    async def scenario() -> None:
        with taddons.context(addon):
            first = _request(_messages_body(1))
            await addon.request(first)
            later = _request(_messages_body(2))
            second = asyncio.ensure_future(addon.request(later))
            other = _request(_messages_body(2), key="sk-ant-other")
            await asyncio.wait_for(addon.request(other), 30)  # another client does not wait
            await asyncio.wait_for(asyncio.wrap_future(other.metadata["headroom"].turn.observed), 30)
            await asyncio.sleep(0.1)
            assert not second.done()  # waits until the first request of its client was learned from
            release.set()
            await asyncio.wait_for(second, 30)
            await asyncio.wait_for(asyncio.wrap_future(later.metadata["headroom"].turn.observed), 30)
            addon.done()

    asyncio.run(scenario())
    assert seen == [("sk-ant-other", 5), ("sk-ant-test-1", 3), ("sk-ant-test-1", 5)]


def test_an_unreachable_upstream_records_the_planned_turn_as_unreachable(runtime: Runtime):
    state = State()
    state.runtime = runtime
    llm, unreachable = headroom_llm.LLMTraffic(state), headroom_unreachable.Unreachable(state)

    async def scenario() -> http.HTTPFlow:
        with taddons.context(llm, unreachable):
            f = _request(_messages_body())
            await llm.request(f)
            f.error = tflow.flow.Error("Connection refused")  # what mitmproxy reports for a closed port
            await unreachable.error(f)
            llm.done()
            return f

    f = asyncio.run(scenario())
    assert f.metadata[headroom_unreachable.ANSWER].status_code == 502 and "headroom" not in f.metadata
    (row,) = _rows(runtime)
    assert (row.action, row.outcome, row.status_code, row.tokens_after, row.project) == (
        "unreachable",
        "unreachable",
        502,
        0,
        "/src/app",
    )
    assert row.reason.startswith("upstream api.anthropic.com:443 unreachable")


def _ws_flow() -> http.HTTPFlow:
    f = tflow.twebsocketflow(messages=False)
    f.request.path = "/v1/responses"
    f.request.headers["user-agent"] = "codex_cli_rs/0.50.0"
    f.request.headers["authorization"] = "Bearer sk-test-ws"
    f.request.headers["x-headroom-project"] = "/src/ws"
    return f


def _frame(call: str, output: str, previous: str | None = None) -> bytes:
    body: dict[str, Any] = {"type": "response.create", "model": "gpt-5", "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object"}}],
                            "input": [{"type": "function_call", "call_id": call, "name": "shell", "arguments": "{}"},
                                      {"type": "function_call_output", "call_id": call, "output": output}]}  # fmt: skip
    if previous is not None:
        body["previous_response_id"] = previous
    return json.dumps(body).encode()


async def _message(
    addon: headroom_ws.ResponsesWebSocket, f: http.HTTPFlow, content: bytes, from_client: bool
) -> WebSocketMessage:
    assert f.websocket is not None
    msg = WebSocketMessage(Opcode.TEXT, from_client, content)
    f.websocket.messages.append(msg)
    hook = addon.websocket_message(f)
    if hook is not None:
        await hook
    return msg


def test_websocket_frames_are_turns_recorded_with_the_terminal_events_usage(runtime: Runtime):
    state = State()
    state.runtime = runtime
    addon = headroom_ws.ResponsesWebSocket(state)
    seen: list[int] = []
    runtime.extensions.observers.append(lambda rt, ctx: seen.append(len(ctx.body["input"])))

    async def scenario() -> None:
        with taddons.context(addon):
            f = _ws_flow()
            addon.requestheaders(f)
            st = f.metadata[headroom_ws.KEY]
            for n, previous in ((1, None), (2, "resp_1")):
                big = json.dumps(ROWS)
                msg = await _message(addon, f, _frame(f"c{n}", big, previous), from_client=True)
                assert len(msg.content) < len(big) and len(st.pending) == 1  # compressed upstream, one turn in flight
                turn = st.pending[0].turn
                done = {"type": "response.completed", "response": {"id": f"resp_{n}", "output": [{"type": "message", "role": "assistant", "content": []}],
                                                                      "usage": {"input_tokens": 50 + n, "output_tokens": 2}}}  # fmt: skip
                await _message(addon, f, json.dumps(done).encode(), from_client=False)
                assert not st.pending and turn.answered
                await asyncio.wait_for(asyncio.wrap_future(turn.observed), 30)
            addon.done()

    asyncio.run(scenario())
    assert seen == [2, 5]  # the second frame seen as the connection's conversation so far
    rows = _rows(runtime)
    assert [(r.dialect, r.client, r.project, r.usage_input_tokens, r.status_code, r.action) for r in rows] == [
        ("openai-responses", "codex_cli_rs", "/src/ws", 51, 200, "compressed"),
        ("openai-responses", "codex_cli_rs", "/src/ws", 52, 200, "compressed"),
    ]
