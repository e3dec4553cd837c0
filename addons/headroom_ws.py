"""The WebSocket addon: the Responses API over WebSocket, as Codex speaks it, on any host.

Per client ``response.create`` frame it takes the same steps as the HTTP path
(:func:`headroom_core.request_plan.plan_request_async` on the frame's Responses body, under the
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
``headroom_commit.LEDGER_WAIT`` seconds): a proxy killed at any moment has every answered turn on disk.
Only that connection's frames wait (mitmproxy relays a message when its async
``websocket_message`` hook returns, and queues the connection's later events behind it, in
order); other flows and connections go on.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any, Coroutine

from mitmproxy import ctx, http
from mitmproxy.websocket import WebSocketMessage

from headroom_core import conversation_move, ledger, ws_conversation, ws_policy
from headroom_core.ccr import ws_loop
from headroom_core.extensions import answer_call
from headroom_core.request_plan import Action, RequestPlan, plan_request_async, run_diagnostics, run_observers
from headroom_core.scope import Conversation, credential, scope_of
from headroom_core.wire import responses_ws as rws
from headroom_core.wire.dialects import Route

import headroom_ws_close
from headroom_commit import until_committed
from headroom_headers import header_dict
from headroom_options import State

log = logging.getLogger("headroom")

KEY = "headroom_ws"
#: A ``response.create`` frame's body is a Responses API request (known from the frame itself).
_FRAME_ROUTE = Route(rws.DIALECT)
_TERMINAL_BYTES = tuple(f'"{t}"'.encode() for t in rws.TERMINAL_EVENTS)
_OUTPUT_ITEM_DONE = b'"response.output_item.done"'


@dataclass
class _Turn:
    """A forwarded ``response.create`` waiting for its terminal server event; ``loop`` follows
    its events when the proxy offered its own tools."""

    plan: RequestPlan
    started: float
    loop: ws_loop.WsRetrieveLoop | None = None
    taught: asyncio.Future | None = None  # the observers' run; the frame that ends the turn waits for it
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
    pending: deque[_Turn] = field(default_factory=deque)
    closed: bool = False
    #: the latest turn's diagnostics (after its observers and the turn before's diagnostics)
    logged: asyncio.Future | None = None
    #: the project and session of the connection's first frame that named them: frames that
    #: continue it take them (:mod:`headroom_core.ws_conversation`)
    conversation: Conversation | None = None
    #: the connection's items so far (input items and responses' output items), for the observers
    history: tuple[Any, ...] = ()
    #: the connection's project-less conversation named its project: rows of its earlier
    #: frames still to be recorded take the named one
    adopted: ws_conversation.Adoption | None = None


class ResponsesWebSocket:
    """mitmproxy addon (hooks ``requestheaders``, ``websocket_message``, ``websocket_end``)."""

    def __init__(self, state: State) -> None:
        self.state = state

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
            taught = asyncio.get_running_loop().run_in_executor(None, _observe, rt, observed, move)
            st.logged = asyncio.ensure_future(_diagnose(rt, plan, taught, st.logged))
            loop = None
            if plan.hidden_tools:
                sent = plan.body if plan.action is Action.REWRITE and plan.body is not None else frame.body_bytes
                loop = ws_loop.WsRetrieveLoop(
                    sent.decode("utf-8"), plan.hidden_tools, s.retrieve_max_rounds, frame.text[: frame.start], frame.text[frame.end :]
                )
            st.pending.append(_Turn(plan, time.monotonic(), loop, taught, ws_conversation.frame_items(before, frame.body)))

    def _refuse(self, flow: http.HTTPFlow, st: WsFlowState, refusal: ws_policy.Refusal) -> None:
        assert flow.websocket is not None
        flow.websocket.messages[-1].drop()
        st.closed = True
        log.warning("headroom: %s (WebSocket) refused and closed with %d: %s", _where(flow), refusal.code, refusal.reason)
        # in this order on the connection: the error event tells the agent to compact (see ws_policy)
        _inject(flow, refusal.event, to_client=True)
        headroom_ws_close.close(flow, refusal.code, refusal.reason)
        self._record_later(flow, refusal.plan, None, refusal.code)

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
        turn = st.pending.popleft()
        resp = event.get("response") if isinstance(event.get("response"), dict) else None
        st.history = ws_conversation.with_response(turn.items, (resp or {}).get("output") or turn.outputs)
        return _after_commit(flow, self._record_later(flow, turn.plan, resp, 200 if event.get("type") != "error" else None), turn.taught)

    def _loop_event(self, flow: http.HTTPFlow, st: WsFlowState, turn: _Turn) -> Coroutine[Any, Any, None] | None:
        """A server event of a turn that offered the proxy's tools (see the module docstring)."""
        assert flow.websocket is not None and turn.loop is not None
        msg = flow.websocket.messages[-1]
        if not msg.is_text:
            return None
        step = turn.loop.feed(msg.content)
        if isinstance(step, ws_loop.Hold):
            msg.drop()
        elif isinstance(step, ws_loop.Emit):
            _replace(flow, msg, step.frames)
        elif isinstance(step, ws_loop.Settle):
            return self._settle(flow, st, turn, step)
        return _after_commit(flow, self._turn_over(flow, st, turn), turn.taught if turn.loop.done else None)

    async def _settle(self, flow: http.HTTPFlow, st: WsFlowState, turn: _Turn, step: ws_loop.Settle) -> None:
        """The turn ended with held events: answer the proxy's calls off the event loop, then
        release frames to the client and/or send the follow-up upstream."""
        rt = self.state.runtime
        assert rt is not None and turn.loop is not None and flow.websocket is not None
        msg = flow.websocket.messages[-1]  # the terminal event; taken before any await
        try:
            results = [(c, await asyncio.to_thread(answer_call, rt, turn.plan.context, c)) for c in step.calls]
            res = turn.loop.resolve(results)
        except Exception as e:  # noqa: BLE001 - the client still gets a coherent end of its response
            log.exception("headroom: %s (WebSocket): answering the proxy's tools failed", _where(flow))
            res = ws_loop.Resolution(turn.loop.fail(type(e).__name__), None)
        _replace(flow, msg, res.to_client)
        if res.to_upstream is not None:
            log.info("headroom: %s (WebSocket): answered %d proxy tool call(s), follow-up %d", _where(flow), len(results), turn.loop.rounds)
            _inject(flow, res.to_upstream, to_client=False)
        elif step.calls:
            log.warning("headroom: %s (WebSocket): proxy tool calls carried out and removed (client calls in the same turn, or rounds exhausted)", _where(flow))
        wait = _after_commit(flow, self._turn_over(flow, st, turn), turn.taught if turn.loop.done else None)
        if wait is not None:
            await wait

    def _turn_over(self, flow: http.HTTPFlow, st: WsFlowState, turn: _Turn) -> Future | None:
        """Record the turn once its loop saw the last terminal event the client gets; the future
        of the row's commit (None: the turn goes on, or nothing was queued)."""
        loop = turn.loop
        if loop is None or not loop.done or not st.pending or st.pending[0] is not turn:
            return None
        st.pending.popleft()
        st.history = ws_conversation.with_response(turn.items, (loop.final or {}).get("output"))
        return self._record_later(flow, turn.plan, loop.final, 200 if loop.final is not None else None, loop)

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        st: WsFlowState | None = flow.metadata.get(KEY)
        while st is not None and st.pending:
            self._record_later(flow, st.pending.popleft().plan, None, None)

    def _record_later(
        self, flow: http.HTTPFlow, plan: RequestPlan, resp: dict[str, Any] | None, status: int | None, loop: ws_loop.WsRetrieveLoop | None = None
    ) -> Future | None:
        """Queue the ledger row for the ledger's writer thread; the future of its commit (None:
        not queued). Only the frame that ends the turn for the client waits for it. A turn
        planned before the connection named its project is recorded under that project."""
        st: WsFlowState | None = flow.metadata.get(KEY)
        if st is not None and st.adopted is not None and st.conversation is not None and plan.project == st.adopted.old_project:
            plan = replace(plan, project=st.conversation.scope.project, conversation=st.conversation)
        return self._record(plan, resp, status, flow.request.headers.get("user-agent", ""), loop)

    def _record(
        self, plan: RequestPlan, resp: dict[str, Any] | None, status: int | None, user_agent: str, loop: ws_loop.WsRetrieveLoop | None = None
    ) -> Future | None:
        rt = self.state.runtime
        if rt is None:
            return None
        done = loop if loop is not None and loop.done else None
        try:
            return ledger.record_turn(
                None,  # the writer opens the database: journaled while it cannot
                plan,
                user_agent=user_agent,
                status_code=status,
                response=resp,
                usage=done.usage if done else None,
                rounds=loop.rounds if loop is not None else 0,
                called=list(done.called) if done else None,
                writer=rt.ledger,
            )
        except Exception:  # noqa: BLE001 - the ledger never breaks traffic
            log.exception("headroom: could not record the WebSocket turn")
            return None


def _observe(rt: Any, plan: RequestPlan, move: ws_conversation.Adoption | None) -> None:
    """In a worker thread: first, when the frame gave the connection its project, the rows its
    earlier frames wrote move to it (once the ledger's queue is written); then the observers."""
    if move is not None:
        try:
            rt.ledger.flush(30.0)
            moved = conversation_move.move_conversation(rt.sessions, move)
            log.info("headroom: WebSocket conversation %s moved to its project: %s", move.old_project, {k: v for k, v in moved.items() if v})
        except Exception:  # noqa: BLE001 - the rows stay where they are; traffic goes on
            log.exception("headroom: could not move the WebSocket conversation's rows to its project")
    run_observers(rt, plan)


async def _diagnose(rt: Any, plan: RequestPlan, taught: asyncio.Future, previous: asyncio.Future | None) -> None:
    """The turn's diagnostics (the prefix log), in a worker thread once its observers and the
    previous turn's diagnostics are done; no frame waits for them."""
    await asyncio.wait([f for f in (taught, previous) if f is not None])
    await asyncio.get_running_loop().run_in_executor(None, run_diagnostics, rt, plan)


def _after_commit(flow: http.HTTPFlow, committed: Future | None, taught: asyncio.Future | None = None) -> Coroutine[Any, Any, None] | None:
    """For a ``websocket_message`` hook: :func:`~headroom_commit.until_committed` of
    ``committed`` (a ledger row's commit) and ``taught`` (the turn's observers); mitmproxy relays
    the current frame, and what was injected after it, when the hook returns. None when there is
    nothing to wait for."""
    if (committed is None or committed.done()) and (taught is None or taught.done()):
        return None
    return until_committed(committed, f"{_where(flow)} (WebSocket)", taught)



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
