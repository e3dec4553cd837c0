"""The WebSocket addon's hooks in-process (mitmproxy's ``taddons`` and ``tflow``, no mitmdump) on
a real runtime and database, for what the addon itself reads from the flow: a client that left
while the proxy answered its tools (``flow.client_conn``) gets no follow-up, its frames are
dropped, and the connection's end (``flow.websocket.closed_by_client``) records the turn as 499;
a connection the server closed records it without a status. The frames' planning, relaying and
rows are in tests/unit/test_ws_connection.py and tests/unit/test_turn_hooks.py."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from mitmproxy import http
from mitmproxy.connection import ConnectionState
from mitmproxy.test import taddons, tflow
from mitmproxy.websocket import WebSocketMessage
from sqlalchemy import select
from wsproto.frame_protocol import Opcode

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "addons"))

import headroom_ws  # noqa: E402
from headroom_options import State  # noqa: E402

from headroom_core.ccr import retrieve  # noqa: E402
from headroom_core.compress import markers  # noqa: E402
from headroom_core.db.models import RequestOutcome  # noqa: E402
from headroom_core.runtime import Runtime  # noqa: E402
from tests.support.upstream import Reply  # noqa: E402
from tests.unit.test_ws_connection import BIG, events, frame  # noqa: E402


def _flow() -> http.HTTPFlow:
    f = tflow.twebsocketflow(messages=False)
    f.request.path = "/v1/responses"
    f.request.headers["user-agent"] = "codex_cli_rs/0.50.0"
    f.request.headers["authorization"] = "Bearer sk-test-ws"
    f.request.headers["x-headroom-project"] = "/src/ws"
    return f


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


def _rows(rt: Runtime) -> list[RequestOutcome]:
    assert rt.ledger.flush(10.0)
    with rt.sessions() as s:
        return list(s.execute(select(RequestOutcome).order_by(RequestOutcome.id)).scalars())


def _turn(runtime: Runtime, *, leaves_while_answering: bool, closed_by_client: bool) -> list[WebSocketMessage]:
    """One frame whose model calls ``headroom_retrieve``. Either the client leaves while the proxy
    answers (all the turn's server frames relayed), or the connection ends before the turn's last
    frame; then the connection's end (``closed_by_client``). The server frames as the hooks left
    them."""
    state = State()
    state.runtime = runtime
    addon = headroom_ws.ResponsesWebSocket(state)

    async def scenario() -> list[WebSocketMessage]:
        with taddons.context(addon):
            f = _flow()
            addon.requestheaders(f)
            conn = f.metadata[headroom_ws.KEY]
            sent = await _message(addon, f, frame(), from_client=True)
            turn = conn.pending[0].turn
            reply = Reply.tool_call(
                retrieve.TOOL_NAME, {"key": markers.offload_key(BIG)}, "call_r", input_tokens=100, output_tokens=4
            )
            frames = events(reply, sent.content)
            out = [await _message(addon, f, x, from_client=False) for x in frames[:-1]]
            if leaves_while_answering:
                f.client_conn.state = ConnectionState.CAN_WRITE  # the client's side closed (what mitmproxy sets on EOF)
                out.append(await _message(addon, f, frames[-1], from_client=False))
            assert f.websocket is not None
            f.websocket.closed_by_client = closed_by_client
            addon.websocket_end(f)
            assert not conn.pending and turn.answered
            await asyncio.wait_for(asyncio.wrap_future(turn.observed), 30)
            addon.done()
            return out

    return asyncio.run(scenario())


def test_a_client_gone_while_the_proxy_answers_gets_no_follow_up_and_a_499_row(runtime: Runtime):
    out = _turn(runtime, leaves_while_answering=True, closed_by_client=True)
    # the terminal event is dropped and nothing is injected (taddons has no inject.websocket:
    # a follow-up sent upstream would have raised here)
    assert out[-1].dropped
    (row,) = _rows(runtime)
    assert (row.status_code, row.retrieve_rounds, row.usage_input_tokens, row.project) == (499, 0, 100, "/src/ws")


def test_a_connection_the_server_closed_mid_turn_records_its_turn_without_a_status(runtime: Runtime):
    out = _turn(runtime, leaves_while_answering=False, closed_by_client=False)
    assert (
        json.loads(out[0].content)["type"] == "response.created" and not out[0].dropped
    )  # events before the call pass
    assert out[-1].dropped  # the proxy's call is held
    (row,) = _rows(runtime)
    assert (row.status_code, row.retrieve_rounds, row.usage_input_tokens) == (None, 0, None)  # no round ended
