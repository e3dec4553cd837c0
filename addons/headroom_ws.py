"""The WebSocket addon: the Responses API over WebSocket, as Codex speaks it, on any host.

The connection's state (its turns in flight, conversation, history, whether it was refused) and
every decision live in :class:`headroom_core.ws_connection.WsConnection`, one per WebSocket flow
(``flow.metadata[KEY]``); this addon hands it each frame and carries out what it returns (a
:class:`~headroom_core.ws_connection.Relay`: the frame replaced, dropped or refused, a follow-up
sent upstream, a wait before the frame goes out) with mitmproxy's means. What happens:

Per client ``response.create`` frame it takes the same steps as the HTTP path
(:func:`headroom_core.request_plan.plan_request_async` on the frame's Responses body, then the
frame's :class:`~headroom_core.turn.Turn`: its observers, ledger row, proxy-tool answers and
diagnostics, after those of the connection's previous frame; under the
same compression timeout; every frame of a connection has its first frame's session key and the
project first named by any of its frames, and what its earlier frames kept under their own
conversation's project moves to that project: :mod:`headroom_core.ws_conversation`,
:mod:`headroom_core.conversation_move`): the compressed body is spliced back into the frame, every
other byte of the frame unchanged. The observers (live learning) see each frame as the
connection's whole conversation so far (earlier frames' input items and each response's output
items, which a frame with ``previous_response_id`` does not carry), as over HTTP. Server event frames pass untouched (the addon only reads the terminal
``response.completed``/``incomplete``/``failed``/``error`` events for the usage figures of the
ledger), except when the frame offered the proxy's own tools (``RequestPlan.hidden_tools``:
``headroom_retrieve``, memory tools) and the model calls one.

The proxy's own tools, as over HTTP (:mod:`headroom_core.ccr.ws_loop` decides, the connection
answers, this addon only moves frames): from a ``response.output_item.added`` that calls one of them, the turn's server
events are held back (dropped now, kept). At the end of the turn, when every call was the
proxy's, the proxy answers them (``answer_call`` in a worker thread) and sends the follow-up as a
new ``response.create`` frame upstream on the same WebSocket (``inject.websocket`` with
``to_client=False``: mitmproxy 11.0.2 makes it a ``from_client`` message and relays it to the
server); the follow-up's events reach the client as the continuation of the same response.
Otherwise the proxy's calls are carried out and the held events go to the client without them.
Frames the proxy injects (follow-ups upstream, released events to the client) come back through
``websocket_message`` with ``WebSocketMessage.injected`` set and are left alone, so a follow-up is
never planned or compressed a second time. A client that left while the proxy answered its
tools (``flow.client_conn`` no longer open; its close waits behind the running hook) gets no
follow-up, and ``websocket_end`` tells the connection who closed it
(``flow.websocket.closed_by_client``): the faults are listed in
:mod:`headroom_core.ws_connection`.

Refusals close the connection, because a WebSocket has no per-message error status: a client
frame over ``ws_max_frame_bytes`` (or a body over ``max_body_bytes``), or a large frame whose
compression failed or timed out (over ``fail_open_max_bytes``, when set), is dropped, the client
gets an in-band ``error`` event (``context_length_exceeded``: what makes Codex compact before it
retries, :mod:`headroom_core.ws_policy`), and both the client and the upstream connection are
closed with code 1009 and a reason that tells the agent to compact its context. A frame it will
refuse for its size is not held whole: once over ``ws_max_frame_bytes`` it is dropped as it
arrives (:mod:`headroom_ws_limit`), and refused when its end arrives. Frames that are not JSON,
not ``response.create``, or binary pass unchanged.

The frame that ends a turn for the client (its terminal event, or the last frames the proxy
releases in its place) goes out once the turn's ledger row is durable, as an HTTP answer does:
in the ledger journal (at once), or committed when there is no journal (at most
``headroom_core.turn.LEDGER_WAIT`` seconds): a proxy killed at any moment has every answered turn on disk.
Only that connection's frames wait (mitmproxy relays a message when its async
``websocket_message`` hook returns, and queues the connection's later events behind it, in
order); other flows and connections go on.
"""

from __future__ import annotations

from typing import Any, Coroutine

import headroom_ws_close
import headroom_ws_limit
from headroom_headers import header_dict
from headroom_options import State
from mitmproxy import ctx, http
from mitmproxy.websocket import WebSocketMessage

from headroom_core.ccr import ws_loop
from headroom_core.turn import Turns
from headroom_core.ws_connection import Relay, WsConnection

KEY = "headroom_ws"


class ResponsesWebSocket:
    """mitmproxy addon (hooks ``requestheaders``, ``websocket_message``, ``websocket_end``,
    ``done``): each WebSocket flow's :class:`~headroom_core.ws_connection.WsConnection` lives in
    ``flow.metadata[KEY]``; the hooks hand it the frames and carry out its :class:`Relay`."""

    def __init__(self, state: State) -> None:
        self.state = state
        #: the frames' turns after forwarding, ordered per connection
        self.turns = Turns()

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        if flow.request.headers.get("upgrade", "").lower() != "websocket":
            return
        # the headers as the client sent them (x-headroom-* before the HTTP addon strips them)
        flow.metadata[KEY] = conn = WsConnection(
            header_dict(flow.request.headers), flow.request.path, key=f"ws {flow.id}", where=_where(flow)
        )
        if self.state.runtime is not None:  # a frame it will refuse is dropped as it arrives
            headroom_ws_limit.guard(flow, conn, self.state.runtime.settings.ws_max_frame_bytes)

    def websocket_message(self, flow: http.HTTPFlow) -> Coroutine[Any, Any, None] | None:
        # Sync for server events (no await on their path) except the one that ends a turn (it
        # waits for the ledger's commit) and the one that settles the proxy's calls; a coroutine
        # for client frames.
        rt = self.state.runtime
        conn: WsConnection | None = flow.metadata.get(KEY)
        if rt is None or conn is None or flow.websocket is None:
            return None
        msg = flow.websocket.messages[-1]
        if msg.injected:
            return None
        if msg.from_client:
            dropped = flow.metadata.pop(headroom_ws_limit.DROPPED, 0)
            if conn.closed or dropped:
                msg.drop()  # refused, or cut short as it arrived: nothing of it goes upstream
            if conn.closed:
                return None
            return self._client_frame(flow, conn, msg, dropped) if msg.is_text else None
        if not msg.is_text:
            return None
        step = conn.server_frame(msg.content)
        if isinstance(step, ws_loop.Settle):
            return self._settle(flow, conn, msg, step)
        return _carry_out(flow, msg, step)

    async def _client_frame(
        self, flow: http.HTTPFlow, conn: WsConnection, msg: WebSocketMessage, dropped: int = 0
    ) -> None:
        out = await conn.client_frame(self.state.runtime, self.turns, msg.content, dropped)
        if out.refusal is not None:
            msg.drop()
            # in this order on the connection: the error event tells the agent to compact (see ws_policy)
            _inject(flow, out.refusal.event, to_client=True)
            headroom_ws_close.close(flow, out.refusal.code, out.refusal.reason)
            return
        await _carried_out(flow, msg, out)

    async def _settle(
        self, flow: http.HTTPFlow, conn: WsConnection, msg: WebSocketMessage, step: ws_loop.Settle
    ) -> None:
        """The turn ended with held events: the connection answers the proxy's calls, then the
        frames go to the client and/or the follow-up upstream."""
        await _carried_out(flow, msg, await conn.settle(step, gone=lambda: not flow.client_conn.connected))

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        conn: WsConnection | None = flow.metadata.get(KEY)
        if conn is not None:
            conn.end(client_left=bool(flow.websocket is not None and flow.websocket.closed_by_client))

    def done(self) -> None:
        """On shutdown: diagnostics not yet run are dropped."""
        self.turns.close()


def _carry_out(flow: http.HTTPFlow, msg: WebSocketMessage, out: Relay) -> Coroutine[Any, Any, None] | None:
    """Carry out ``out`` on the frame being relayed (``msg``): its replacement frames, then the
    frame sent upstream; returns what the hook awaits before ``msg`` goes out (None: nothing)."""
    if out.frames is not None:
        _replace(flow, msg, out.frames)
    if out.upstream is not None:
        _inject(flow, out.upstream, to_client=False)
    return out.wait


async def _carried_out(flow: http.HTTPFlow, msg: WebSocketMessage, out: Relay) -> None:
    """:func:`_carry_out` from a coroutine hook, awaiting its wait."""
    wait = _carry_out(flow, msg, out)
    if wait is not None:
        await wait


def _replace(flow: http.HTTPFlow, msg: WebSocketMessage, frames: tuple[bytes, ...]) -> None:
    """Send ``frames`` instead of the current frame (none: drop it), in its direction. The
    first takes the current frame's place; the rest are injected, and mitmproxy relays them
    after it (injected frames queue behind the running ``websocket_message`` hook)."""
    if not frames:
        msg.drop()
        return
    msg.content = frames[0]
    for f in frames[1:]:
        _inject(flow, f, to_client=not msg.from_client)


def _inject(flow: http.HTTPFlow, payload: bytes, *, to_client: bool) -> None:
    """A text frame on ``flow``'s WebSocket (mitmproxy's ``inject.websocket`` command; it logs
    and gives up when the connection is gone)."""
    ctx.master.commands.call("inject.websocket", flow, to_client, payload)


def _where(flow: http.HTTPFlow) -> str:
    """Host and path for log lines, without the query (it may carry an API key)."""
    return f"{flow.request.host}{flow.request.path.split('?', 1)[0]}"


def make(state: State) -> ResponsesWebSocket:
    """The addon instance ``addons/headroom.py`` loads."""
    return ResponsesWebSocket(state)
