"""One Responses WebSocket connection in-process (:class:`headroom_core.ws_connection.WsConnection`,
no mitmproxy, no mitmdump) on a real runtime and database: client frames planned and compressed,
server events followed to the turn's end and its ledger row, the conversation pinned and adopted,
a refused frame closing the connection, the proxy's own tools answered with a follow-up frame,
turns in flight recorded at the end. The server events are the ones the test upstream renders
(``tests/support/upstream.py``, the code that speaks to the proxy end to end)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from sqlalchemy import select

from headroom_core.ccr import retrieve, ws_loop
from headroom_core.compress import markers
from headroom_core.compress.tokens import TokenCounter
from headroom_core.db.models import RequestOutcome
from headroom_core.runtime import Runtime
from headroom_core.settings import load_settings
from headroom_core.turn import Turns
from headroom_core.ws_connection import UNCHANGED, Relay, WsConnection
from tests.support.upstream import RecordedRequest, Reply, _ResponsesRenderer

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
BIG = json.dumps(ROWS)
HEADERS = {"user-agent": "codex_cli_rs/0.50.0", "authorization": "Bearer sk-test-ws", "x-headroom-project": "/src/ws"}
PROJECT = "/work/ws-adopt"
ENV = f"<environment_context>\n  <cwd>{PROJECT}</cwd>\n  <shell>bash</shell>\n</environment_context>"


def frame(
    output: str = BIG, *, call: str = "c1", previous: str | None = None, nested: bool = False, **extra: Any
) -> bytes:
    body: dict[str, Any] = {
        "model": "gpt-5",
        "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object"}}],
        "input": [
            {"type": "function_call", "call_id": call, "name": "shell", "arguments": "{}"},
            {"type": "function_call_output", "call_id": call, "output": output},
        ],
        **extra,
    }
    if previous is not None:
        body["previous_response_id"] = previous
    return json.dumps(
        {"type": "response.create", "response": body} if nested else {"type": "response.create", **body}
    ).encode()


def events(reply: Reply, sent: bytes) -> list[bytes]:
    """The event frames the test upstream sends for ``reply`` to the frame ``sent``."""
    body = json.loads(sent)
    rec = RecordedRequest("WS", "/v1/responses", [], sent, body, 0.0)
    return [json.dumps(ev).encode() for ev in _ResponsesRenderer.events(rec, body, reply)]


def sent_of(content: bytes, out: Relay) -> bytes:
    """The frame that went upstream for a client frame."""
    return out.frames[0] if out.frames else content


def rows(rt: Runtime) -> list[RequestOutcome]:
    assert rt.ledger.flush(10.0)
    with rt.sessions() as s:
        return list(s.execute(select(RequestOutcome).order_by(RequestOutcome.id)).scalars())


async def relay(conn: WsConnection, frames: list[bytes]) -> list[bytes]:
    """Every server frame through ``conn`` as the addon carries them out: what the client gets,
    and each follow-up frame sent upstream as ``b'UP ' + frame``."""
    got: list[bytes] = []
    for f in frames:
        out = conn.server_frame(f)
        if isinstance(out, ws_loop.Settle):
            out = await conn.settle(out)
        got.extend([f] if out.frames is None else out.frames)
        if out.upstream is not None:
            got.append(b"UP " + out.upstream)
        if out.wait is not None:
            await out.wait
    return got


def connection(path: str = "/v1/responses", headers: dict[str, str] | None = None) -> WsConnection:
    return WsConnection(
        headers if headers is not None else HEADERS, path, key="ws test", where="api.openai.com/v1/responses"
    )


def test_a_frame_is_compressed_and_its_turn_recorded_at_the_terminal_event(runtime: Runtime):
    conn, turns = connection(), Turns()

    async def scenario() -> None:
        content = frame()
        out = await conn.client_frame(runtime, turns, content)
        assert out.frames is not None and len(out.frames[0]) < len(content) and out.refusal is None
        assert [p.turn.plan.project for p in conn.pending] == ["/src/ws"]
        turn = conn.pending[0].turn
        frames = events(Reply.text("fine", input_tokens=51, output_tokens=2), sent_of(content, out))
        assert all(conn.server_frame(f) == UNCHANGED for f in frames[:-1])
        end = conn.server_frame(frames[-1])
        assert isinstance(end, Relay) and end.frames is None
        if end.wait is not None:
            await end.wait
        assert not conn.pending
        assert turn.answered and turn.observed is not None
        await asyncio.wait_for(asyncio.wrap_future(turn.observed), 30)
        turns.close()

    asyncio.run(scenario())
    (row,) = rows(runtime)
    assert (row.dialect, row.client, row.project, row.usage_input_tokens, row.status_code, row.action) == (
        "openai-responses",
        "codex_cli_rs",
        "/src/ws",
        51,
        200,
        "compressed",
    )
    # the history holds the frame's items and the response's output, for the next frame's observers
    assert [i["type"] for i in conn.history] == ["function_call", "function_call_output", "message"]


def test_frames_that_are_not_response_create_pass_and_begin_no_turn(runtime: Runtime):
    conn, turns = connection(path="/v1/realtime"), Turns()

    async def scenario() -> list[Relay]:
        outs = [
            await conn.client_frame(runtime, turns, c)
            for c in (b"not json", b'{"type":"response.cancel"}', b'{"type":"session.update","input":[]}')
        ]
        turns.close()
        return outs

    assert asyncio.run(scenario()) == [UNCHANGED] * 3
    assert (
        not conn.pending
        and not conn.carries(b'{"type":"session.update"}')
        and conn.carries(b'{"type": "response.create"}')
    )
    assert rows(runtime) == []


def test_an_oversized_frame_is_refused_closes_the_connection_and_is_recorded(tmp_path: Path, counter: TokenCounter):
    rt = Runtime(load_settings({"home": str(tmp_path), "ws_max_frame_bytes": 5000}, env={}))
    rt.__dict__["counter"] = counter
    conn, turns = connection(), Turns()

    async def scenario() -> tuple[Relay, Relay]:
        first = await conn.client_frame(rt, turns, frame())
        later = await conn.client_frame(rt, turns, frame("small"))
        turns.close()
        return first, later

    first, later = asyncio.run(scenario())
    assert first.frames == () and first.refusal is not None and first.refusal.code == 1009
    assert json.loads(first.refusal.event)["error"]["code"] == "context_length_exceeded"
    assert conn.closed and later == Relay(frames=())  # nothing more goes upstream
    (row,) = rows(rt)
    assert (row.status_code, row.action) == (1009, "rejected")


def test_a_frame_cut_short_as_it_arrived_is_refused_by_its_whole_size(tmp_path: Path, counter: TokenCounter):
    """``dropped`` (addons/headroom_ws_limit.py: the bytes of a frame over the limit not kept):
    the tail alone is small, the refusal and its row name the whole size."""
    rt = Runtime(load_settings({"home": str(tmp_path), "ws_max_frame_bytes": 5000}, env={}))
    rt.__dict__["counter"] = counter
    conn, turns = connection(), Turns()
    tail = b'xxxx"}]}'

    async def scenario() -> Relay:
        out = await conn.client_frame(rt, turns, tail, dropped=1_000_000)
        turns.close()
        return out

    out = asyncio.run(scenario())
    assert out.frames == () and out.refusal is not None and out.refusal.code == 1009 and conn.closed
    assert f"request of {1_000_000 + len(tail)} B exceeds 5000 B" in out.refusal.reason
    (row,) = rows(rt)
    assert (row.status_code, row.action, row.body_bytes_before) == (1009, "rejected", 1_000_000 + len(tail))


def test_only_a_frame_the_connection_will_refuse_may_be_dropped_as_it_arrives():
    """On a Responses path every text frame is planned (and refused over the limit); elsewhere
    only one that says it is a ``response.create`` in its first 4 KiB: any other goes whole."""
    assert connection().drops(b'{"type":"session.update"}')
    other = connection("/backend/ws")
    assert other.drops(b'{"type": "response.create", "model"') and not other.drops(b'{"type":"session.update","x":"')
    other.closed = True
    assert other.drops(b"anything")


def test_a_connection_adopts_the_project_a_later_frame_names(runtime: Runtime):
    headers = {k: v for k, v in HEADERS.items() if k != "x-headroom-project"}
    conn, turns = connection(headers=headers), Turns()

    async def scenario() -> None:
        warm = json.dumps(
            {
                "type": "response.create",
                "model": "gpt-5",
                "generate": False,
                "input": [],
                "instructions": "You are Codex.",
            }
        ).encode()
        await conn.client_frame(runtime, turns, warm)
        assert conn.conversation is not None and conn.conversation.scope.project.startswith("conversation:")
        first_key = conn.conversation.session_key
        named = json.dumps(
            {"type": "response.create", "model": "gpt-5", "previous_response_id": "resp_w", "instructions": "You are Codex.",
             "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": ENV}]}]}
        ).encode()  # fmt: skip
        await conn.client_frame(runtime, turns, named)
        last = conn.pending[-1].turn
        assert conn.conversation.scope.project == PROJECT and conn.conversation.session_key == first_key
        assert conn.adopted is not None and conn.adopted.new_project == PROJECT
        for _ in range(2):  # both turns end; the warm-up's row is recorded under the named project
            for f in events(Reply.text("ok"), warm):
                out = conn.server_frame(f)
                assert isinstance(out, Relay)
                if out.wait is not None:
                    await out.wait
        await asyncio.wait_for(asyncio.wrap_future(last.observed), 30)
        turns.close()

    asyncio.run(scenario())
    assert [r.project for r in rows(runtime)] == [PROJECT, PROJECT]


def test_the_proxys_tool_is_answered_and_the_follow_up_goes_upstream(runtime: Runtime):
    conn, turns = connection(), Turns()
    answer = "Issues 1 and 2 are open."

    async def scenario() -> tuple[bytes, list[bytes], list[bytes]]:
        content = frame(nested=True)
        out = await conn.client_frame(runtime, turns, content)
        sent = sent_of(content, out)
        turn = conn.pending[0].turn
        assert conn.pending[0].loop is not None  # the proxy offered headroom_retrieve
        key = markers.offload_key(BIG)
        first = await relay(
            conn,
            events(
                Reply.tool_call(retrieve.TOOL_NAME, {"key": key}, "call_r", input_tokens=100, output_tokens=4), sent
            ),
        )
        follow = [f for f in first if f.startswith(b"UP ")]
        assert len(follow) == 1 and len(conn.pending) == 1  # the turn goes on
        second = await relay(conn, events(Reply.text(answer, input_tokens=300, output_tokens=9), follow[0][3:]))
        assert not conn.pending and turn.answered
        await asyncio.wait_for(asyncio.wrap_future(turn.observed), 30)
        turns.close()
        return follow[0][3:], first, second

    up, first, second = asyncio.run(scenario())
    frame_ = json.loads(up)
    assert list(frame_) == ["type", "response"]  # the client's nested frame shape
    assert frame_["response"]["input"][-1] == {"type": "function_call_output", "call_id": "call_r", "output": BIG}
    seen = [json.loads(f) for f in first + second if not f.startswith(b"UP ")]
    # no event shows the proxy's call (response objects echo the tools offered, the proxy's too)
    assert retrieve.TOOL_NAME not in json.dumps([{k: v for k, v in e.items() if k != "response"} for e in seen])
    assert [it["type"] for it in seen[-1]["response"]["output"]] == ["message"]
    assert [e["type"] for e in seen].count("response.created") == 1 and seen[-1]["type"] == "response.completed"
    assert [e["sequence_number"] for e in seen] == list(range(len(seen)))
    assert "".join(e["delta"] for e in seen if e["type"] == "response.output_text.delta") == answer
    (row,) = rows(runtime)
    assert (row.retrieve_rounds, row.usage_input_tokens, row.usage_output_tokens, row.status_code) == (1, 400, 13, 200)


def test_turns_in_flight_at_the_end_are_recorded_without_a_response(runtime: Runtime):
    conn, turns = connection(), Turns()

    async def scenario() -> None:
        await conn.client_frame(runtime, turns, frame())
        assert len(conn.pending) == 1
        turn = conn.pending[0].turn
        conn.end()
        assert not conn.pending and turn.answered
        await asyncio.wait_for(asyncio.wrap_future(turn.observed), 30)
        turns.close()

    asyncio.run(scenario())
    (row,) = rows(runtime)
    assert (row.project, row.status_code, row.usage_input_tokens) == ("/src/ws", None, None)


def test_a_client_gone_while_the_proxy_answers_gets_no_follow_up_and_a_499_row(runtime: Runtime):
    conn, turns = connection(), Turns()

    async def scenario() -> list[Relay]:
        content = frame()
        out = await conn.client_frame(runtime, turns, content)
        turn = conn.pending[0].turn
        frames = events(
            Reply.tool_call(
                retrieve.TOOL_NAME, {"key": markers.offload_key(BIG)}, "call_r", input_tokens=100, output_tokens=4
            ),
            sent_of(content, out),
        )
        outs = [conn.server_frame(f) for f in frames[:-1]]
        settle = conn.server_frame(frames[-1])
        assert isinstance(settle, ws_loop.Settle)
        outs.append(await conn.settle(settle, gone=lambda: True))
        assert len(conn.pending) == 1  # the turn waits for the connection's end
        conn.end(client_left=True)
        assert turn.answered
        await asyncio.wait_for(asyncio.wrap_future(turn.observed), 30)
        turns.close()
        return outs

    outs = asyncio.run(scenario())
    assert all(isinstance(o, Relay) and o.upstream is None for o in outs)  # nothing for nobody
    assert outs[-1].frames == ()
    (row,) = rows(runtime)
    assert (row.status_code, row.retrieve_rounds, row.usage_input_tokens) == (499, 0, 100)  # the round it paid for


def test_a_provider_error_on_a_follow_up_ends_the_response_failed_with_its_error(runtime: Runtime):
    conn, turns = connection(), Turns()
    error = {
        "type": "requests",
        "code": "rate_limit_exceeded",
        "message": "Rate limit reached. Please try again in 1.4s.",
        "param": None,
    }

    async def scenario() -> tuple[list[bytes], list[bytes]]:
        content = frame()
        out = await conn.client_frame(runtime, turns, content)
        turn = conn.pending[0].turn
        first = await relay(
            conn,
            events(
                Reply.tool_call(
                    retrieve.TOOL_NAME,
                    {"key": markers.offload_key(BIG)},
                    "call_r",
                    text="Looking.",
                    input_tokens=100,
                    output_tokens=4,
                ),
                sent_of(content, out),
            ),
        )
        (up,) = [f[3:] for f in first if f.startswith(b"UP ")]
        partial = [
            f
            for f in events(Reply.text("Issues 1 and 2", input_tokens=300, output_tokens=9), up)
            if b'"response.output_text.done"' not in f
        ][:5]
        second = await relay(conn, [*partial, json.dumps({"type": "error", "status": 429, "error": error}).encode()])
        assert not conn.pending and turn.answered
        await asyncio.wait_for(asyncio.wrap_future(turn.observed), 30)
        turns.close()
        return [f for f in first if not f.startswith(b"UP ")], second

    first, second = asyncio.run(scenario())
    seen = [json.loads(f) for f in first + second]
    assert [e["sequence_number"] for e in seen] == list(range(len(seen)))
    last = seen[-1]
    assert (
        last["type"] == "response.failed"
        and last["response"]["status"] == "failed"
        and last["response"]["error"] == error
    )
    assert [it["content"][0]["text"] for it in last["response"]["output"]] == ["Looking.", "Issues"]  # the text so far
    (row,) = rows(runtime)
    assert (row.status_code, row.retrieve_rounds) == (429, 1)
