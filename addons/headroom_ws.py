"""The WebSocket addon: the Responses API over WebSocket, as Codex speaks it, on any host.

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

The proxy's own tools, as over HTTP (:mod:`headroom_core.ccr.ws_loop` decides, this addon only
moves frames): from a ``response.output_item.added`` that calls one of them, the turn's server
events are held back (dropped now, kept). At the end of the turn, when every call was the
proxy's, the proxy answers them (``answer_call`` in a worker thread) and sends the follow-up as a
new ``response.create`` frame upstream on the same WebSocket (``inject.websocket`` with
``to_client=False``: mitmproxy 11.0.2 makes it a ``from_client`` message and relays it to the
server); the follow-up's events reach the client as the continuation of the same response.
Otherwise the proxy's calls are carried out and the held events go to the client without them.
Frames the proxy injects (follow-ups upstream, released events to the client) come back through
``websocket_message`` with ``WebSocketMessage.injected`` set and are left alone, so a follow-up is
never planned or compressed a second time.

Refusals close the connection, because a WebSocket has no per-message error status: a client
frame over ``ws_max_frame_bytes`` (or a body over ``max_body_bytes``), or a large frame whose
compression failed or timed out (over ``fail_open_max_bytes``, when set), is dropped, the client
gets an in-band ``error`` event (``context_length_exceeded``: what makes Codex compact before it
retries, :mod:`headroom_core.ws_policy`), and both the client and the upstream connection are
closed with code 1009 and a reason that tells the agent to compact its context. Frames that are
not JSON, not ``response.create``, or binary pass unchanged.

The frame that ends a turn for the client (its terminal event, or the last frames the proxy
releases in its place) goes out once the turn's ledger row is durable, as an HTTP answer does:
in the ledger journal (at once), or committed when there is no journal (at most
``headroom_core.turn.LEDGER_WAIT`` seconds): a proxy killed at any moment has every answered turn on disk.
Only that connection's frames wait (mitmproxy relays a message when its async
``websocket_message`` hook returns, and queues the connection's later events behind it, in
order); other flows and connections go on.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Coroutine

from mitmproxy import ctx, http
from mitmproxy.websocket import WebSocketMessage

from headroom_core import ws_conversation, ws_policy
from headroom_core.ccr import ws_loop
from headroom_core.request_plan import Action, plan_request_async
from headroom_core.scope import Conversation, credential, scope_of
from headroom_core.turn import Turn, Turns
from headroom_core.wire import responses_ws as rws
from headroom_core.wire.dialects import Route

import headroom_ws_close
from headroom_headers import header_dict
from headroom_options import State

log = logging.getLogger("headroom")

KEY = "headroom_ws"
#: A ``response.create`` frame's body is a Responses API request (known from the frame itself).
_FRAME_ROUTE = Route(rws.DIALECT)
_TERMINAL_BYTES = tuple(f'"{t}"'.encode() for t in rws.TERMINAL_EVENTS)
_OUTPUT_ITEM_DONE = b'"response.output_item.done"'


@dataclass
class _Pending:
    """A forwarded ``response.create`` (its :class:`~headroom_core.turn.Turn`) waiting for its
    terminal server event; ``loop`` follows its events when the proxy offered its own tools."""

    turn: Turn
    loop: ws_loop.WsRetrieveLoop | None = None
    #: the connection's conversation through this frame (history and the frame's input items)
    items: tuple[Any, ...] = ()
    #: the output items of ``response.output_item.done`` events (when the terminal event has none)
    outputs: list[Any] = field(default_factory=list)


@dataclass
class WsFlowState:
    """Per WebSocket flow: the upgrade request's lowercase headers (``x-headroom-*`` included,
    captured before the HTTP addon strips them), whether the path is a Responses endpoint, the
    turns in flight (FIFO: the Responses WebSocket runs one response at a time), and whether the
    proxy has closed the connection."""

    headers: dict[str, str]
    responses_path: bool
    pending: deque[_Pending] = field(default_factory=deque)
    closed: bool = False
    #: the project and session of the connection's first frame that named them: frames that
    #: continue it take them (:mod:`headroom_core.ws_conversation`)
    conversation: Conversation | None = None
    #: the connection's items so far (input items and responses' output items), for the observers
    history: tuple[Any, ...] = ()
    #: the connection's project-less conversation named its project: rows of its earlier
    #: frames still to be recorded take the named one
    adopted: ws_conversation.Adoption | None = None


class ResponsesWebSocket:
    """mitmproxy addon (hooks ``requestheaders``, ``websocket_message``, ``websocket_end``,
    ``done``)."""

    def __init__(self, state: State) -> None:
        self.state = state
        #: the frames' turns after forwarding, ordered per connection
        self.turns = Turns()

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        if flow.request.headers.get("upgrade", "").lower() != "websocket":
            return
        headers = header_dict(flow.request.headers)
        flow.metadata[KEY] = WsFlowState(headers, rws.is_responses_path(flow.request.path))

    def websocket_message(self, flow: http.HTTPFlow) -> Coroutine[Any, Any, None] | None:
        # Sync for server events (no await on their path) except the one that ends a turn (it
        # waits for the ledger's commit), a coroutine for client frames.
        rt = self.state.runtime
        st: WsFlowState | None = flow.metadata.get(KEY)
        if rt is None or st is None or flow.websocket is None:
            return None
        msg = flow.websocket.messages[-1]
        if msg.injected:
            return None
        if st.closed:
            if msg.from_client:
                msg.drop()  # refused: nothing more goes upstream on this connection
            return None
        if msg.from_client:
            return self._client_frame(flow, st)
        if st.pending and st.pending[0].loop is not None:
            return self._loop_event(flow, st, st.pending[0])
        return self._server_event(flow, st)

    async def _client_frame(self, flow: http.HTTPFlow, st: WsFlowState) -> None:
        rt = self.state.runtime
        assert rt is not None and flow.websocket is not None
        msg = flow.websocket.messages[-1]
        if not msg.is_text:
            return
        content = msg.content
        if not (st.responses_path or rws.looks_like_create(content)):
            return
        s = rt.settings
        refusal = ws_policy.frame_refusal(s, len(content))
        if refusal is not None:
            self._refuse(flow, st, refusal)
            return
        frame = rws.parse_create(content)
        if frame is None:
            return
        cred = credential(st.headers, rws.RESPONSES_PATH)
        continues = ws_conversation.continues(st.conversation, frame.body, st.headers, lambda p: scope_of(p, cred, rt.sealer))
        plan = await plan_request_async(
            rt, "POST", rws.RESPONSES_PATH, st.headers, frame.body_bytes, s.compress_timeout_seconds, route_=_FRAME_ROUTE, continues=continues
        )
        move = ws_conversation.adoption(st.conversation, plan.conversation)
        st.conversation = ws_conversation.pin(st.conversation, plan.conversation)
        if move is not None:
            st.adopted = move
            log.info("headroom: %s (WebSocket): the conversation names its project now; its earlier rows move to it", _where(flow))
        before = ws_conversation.history_before(st.history, frame.body)
        refusal = ws_policy.plan_refusal(s, plan)
        if refusal is not None:
            self._refuse(flow, st, refusal)
            return
        if plan.action is Action.REWRITE and plan.body is not None:
            msg.content = frame.with_body(plan.body)
            log.info("headroom: %s (WebSocket): %s, %d -> %d bytes", _where(flow), plan.reason, plan.bytes_before, plan.bytes_after)
        if plan.dialect is not None:
            observed = replace(plan, context=ws_conversation.observed_context(plan.context, before)) if plan.context is not None else plan
            ua = flow.request.headers.get("user-agent", "")
            turn = self.turns.begin(rt, plan, key=f"ws {flow.id}", user_agent=ua, observe_as=observed, move=move)
            loop = None
            if plan.hidden_tools:
                sent = plan.body if plan.action is Action.REWRITE and plan.body is not None else frame.body_bytes
                loop = ws_loop.WsRetrieveLoop(
                    sent.decode("utf-8"), plan.hidden_tools, s.retrieve_max_rounds, frame.text[: frame.start], frame.text[frame.end :]
                )
            st.pending.append(_Pending(turn, loop, ws_conversation.frame_items(before, frame.body)))

    def _refuse(self, flow: http.HTTPFlow, st: WsFlowState, refusal: ws_policy.Refusal) -> None:
        assert flow.websocket is not None
        flow.websocket.messages[-1].drop()
        st.closed = True
        log.warning("headroom: %s (WebSocket) refused and closed with %d: %s", _where(flow), refusal.code, refusal.reason)
        # in this order on the connection: the error event tells the agent to compact (see ws_policy)
        _inject(flow, refusal.event, to_client=True)
        headroom_ws_close.close(flow, refusal.code, refusal.reason)
        self._record(flow, st, Turn(self.state.runtime, refusal.plan, user_agent=flow.request.headers.get("user-agent", "")), refusal.code)

    def _server_event(self, flow: http.HTTPFlow, st: WsFlowState) -> Coroutine[Any, Any, None] | None:
        """A server event of a turn without the proxy's tools: passes untouched; a terminal one
        records the turn and is held until its row is committed (the coroutine returned)."""
        assert flow.websocket is not None
        msg = flow.websocket.messages[-1]
        if not st.pending or not msg.is_text:
            return None
        content = msg.content
        if _OUTPUT_ITEM_DONE not in content and not any(t in content for t in _TERMINAL_BYTES):
            return None
        try:
            event = json.loads(content)
        except ValueError:
            return None
        if not isinstance(event, dict):
            return None
        if event.get("type") == "response.output_item.done" and isinstance(event.get("item"), dict):
            st.pending[0].outputs.append(event["item"])  # for the history, when the terminal event has no output
            return None
        if event.get("type") not in rws.TERMINAL_EVENTS:
            return None
        p = st.pending.popleft()
        resp = event.get("response") if isinstance(event.get("response"), dict) else None
        st.history = ws_conversation.with_response(p.items, (resp or {}).get("output") or p.outputs)
        committed = self._record(flow, st, p.turn, 200 if event.get("type") != "error" else None, resp)
        return p.turn.durable(committed, _where_ws(flow))

    def _loop_event(self, flow: http.HTTPFlow, st: WsFlowState, p: _Pending) -> Coroutine[Any, Any, None] | None:
        """A server event of a turn that offered the proxy's tools (see the module docstring)."""
        assert flow.websocket is not None and p.loop is not None
        msg = flow.websocket.messages[-1]
        if not msg.is_text:
            return None
        step = p.loop.feed(msg.content)
        if isinstance(step, ws_loop.Hold):
            msg.drop()
        elif isinstance(step, ws_loop.Emit):
            _replace(flow, msg, step.frames)
        elif isinstance(step, ws_loop.Settle):
            return self._settle(flow, st, p, step)
        return p.turn.durable(self._turn_over(flow, st, p), _where_ws(flow), taught=p.loop.done)

    async def _settle(self, flow: http.HTTPFlow, st: WsFlowState, p: _Pending, step: ws_loop.Settle) -> None:
        """The turn ended with held events: answer the proxy's calls off the event loop, then
        release frames to the client and/or send the follow-up upstream."""
        assert p.loop is not None and flow.websocket is not None
        msg = flow.websocket.messages[-1]  # the terminal event; taken before any await
        try:
            results = await p.turn.follow_up(_answers(p.turn, step.calls))
            res = p.loop.resolve(results)
        except Exception as e:  # noqa: BLE001 - the client still gets a coherent end of its response
            log.exception("headroom: %s (WebSocket): answering the proxy's tools failed", _where(flow))
            res = ws_loop.Resolution(p.loop.fail(type(e).__name__), None)
        _replace(flow, msg, res.to_client)
        if res.to_upstream is not None:
            log.info("headroom: %s (WebSocket): answered %d proxy tool call(s), follow-up %d", _where(flow), len(results), p.loop.rounds)
            _inject(flow, res.to_upstream, to_client=False)
        elif step.calls:
            log.warning("headroom: %s (WebSocket): proxy tool calls carried out and removed (client calls in the same turn, or rounds exhausted)", _where(flow))
        wait = p.turn.durable(self._turn_over(flow, st, p), _where_ws(flow), taught=p.loop.done)
        if wait is not None:
            await wait

    def _turn_over(self, flow: http.HTTPFlow, st: WsFlowState, p: _Pending) -> Future | None:
        """Record the turn once its loop saw the last terminal event the client gets; the future
        of the row's commit (None: the turn goes on, or nothing was queued)."""
        loop = p.loop
        if loop is None or not loop.done or not st.pending or st.pending[0] is not p:
            return None
        st.pending.popleft()
        st.history = ws_conversation.with_response(p.items, (loop.final or {}).get("output"))
        return self._record(flow, st, p.turn, 200 if loop.final is not None else None, loop.final, loop)

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        st: WsFlowState | None = flow.metadata.get(KEY)
        while st is not None and st.pending:
            self._record(flow, st, st.pending.popleft().turn, None)

    def done(self) -> None:
        """On shutdown: diagnostics not yet run are dropped."""
        self.turns.close()

    @staticmethod
    def _record(
        flow: http.HTTPFlow, st: WsFlowState, turn: Turn, status: int | None, resp: dict[str, Any] | None = None, loop: ws_loop.WsRetrieveLoop | None = None
    ) -> Future | None:
        """Record ``turn`` (:meth:`~headroom_core.turn.Turn.record`; its usage and calls from
        ``resp``, the terminal event's response, or from the proxy's ``loop``); the future of
        the row's commit (None: not queued). Only the frame that ends the turn for the client
        waits for it. A turn planned before the connection named its project is recorded under
        that project."""
        if turn.rt is None:
            return None
        done = loop if loop is not None and loop.done else None
        return turn.record(
            status_code=status,
            response=resp,
            usage=done.usage if done else None,
            rounds=loop.rounds if loop is not None else 0,
            called=list(done.called) if done else None,
            conversation=ws_conversation.row_conversation(st.adopted, st.conversation, turn.plan.project),
        )


async def _answers(turn: Turn, calls: Any) -> list[tuple[Any, str]]:
    """The proxy's answers to ``calls``, in order."""
    return [(c, await turn.answer(c)) for c in calls]


def _where_ws(flow: http.HTTPFlow) -> Callable[[], str]:
    """The flow for a log line, made only when one is written."""
    return lambda: f"{_where(flow)} (WebSocket)"


def _replace(flow: http.HTTPFlow, msg: WebSocketMessage, frames: tuple[bytes, ...]) -> None:
    """Send ``frames`` to the client instead of the current server frame (none: drop it). The
    first takes the current frame's place; the rest are injected, and mitmproxy relays them
    after it (injected events queue behind the running ``websocket_message`` hook)."""
    if not frames:
        msg.drop()
        return
    msg.content = frames[0]
    for f in frames[1:]:
        _inject(flow, f, to_client=True)


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
