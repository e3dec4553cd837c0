"""One client connection of the Responses API over WebSocket, as Codex speaks it: its state and
what each frame does to it (no mitmproxy here; ``addons/headroom_ws.py`` translates flows and
frames into calls on a :class:`WsConnection`, as ``addons/headroom_llm.py`` does with
:mod:`headroom_core.turn` for HTTP).

What a connection keeps (one per WebSocket, made at the upgrade request):

- the upgrade request's lowercase headers (``x-headroom-*`` included) and whether its path is a
  Responses endpoint;
- the turns in flight (:attr:`WsConnection.pending`, first in first out: the Responses
  WebSocket runs one response at a time), each a :class:`~headroom_core.turn.Turn` with, when the
  frame offered the proxy's own tools, the :class:`~headroom_core.ccr.ws_loop.WsRetrieveLoop`
  following its events;
- the conversation: the project and session of the first frame that named them, the
  :class:`~headroom_core.ws_conversation.Adoption` when a project-less start named its project
  later, and the history (input items and each response's output items) the observers see a
  frame with (:mod:`headroom_core.ws_conversation`);
- whether the proxy closed it (a refused frame): nothing more goes upstream then.

What the addon calls, per hook:

- a client text frame: ``await`` :meth:`WsConnection.client_frame` -> a :class:`Relay` (the
  frame rewritten, unchanged, or refused with a close);
- a server text frame: :meth:`WsConnection.server_frame` -> a :class:`Relay`, or a
  :class:`~headroom_core.ccr.ws_loop.Settle` when the turn ended with calls to the proxy's tools,
  then ``await`` :meth:`WsConnection.settle` -> a :class:`Relay` (the client's frames, and the
  follow-up ``response.create`` to send upstream on the same socket);
- the connection's end: :meth:`WsConnection.end`.

Faults (issue 36), each checked through a real mitmdump in ``tests/e2e/test_ws_faults_e2e.py``:

- the client leaves: mitmproxy closes the upstream socket at once (the provider stops the
  response), and no follow-up is sent for nobody: a client gone while the proxy answered its
  tools gets none (:meth:`WsConnection.settle`'s ``gone``), one gone at any other moment closed
  the socket the follow-up would go on; turns in flight are abandoned and recorded with
  :data:`CLIENT_CLOSED_REQUEST` (:meth:`WsConnection.end`);
- the provider fails a follow-up (an ``error`` event: a rate limit, an overloaded server; a
  ``response.failed``): the client's response ends with a ``response.failed`` carrying the
  provider's error and the model's text so far (:mod:`headroom_core.wire.reply_responses`), which
  Codex retries; the ledger row has the ``error`` event's status;
- a call to the proxy's tools in a response the token limit cut (``response.incomplete``,
  ``max_output_tokens``) is never carried out: the client gets the incomplete response;
- the upstream socket is cut during a follow-up: mitmproxy closes the client's socket too (the
  client sees the close at once and retries, as after any cut), the turn is recorded without a
  response.

A :class:`Relay` says what becomes of the frame being relayed and what the hook awaits before it
goes out (:attr:`Relay.wait`: the frame that ends a turn for the client waits until the turn's
ledger row is durable and what it taught is written, :meth:`~headroom_core.turn.Turn.durable`).
The design: docs/architecture.md ("WebSocket").
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import Coroutine
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

from headroom_core import ws_conversation, ws_policy
from headroom_core.ccr import ws_loop
from headroom_core.request_plan import Action, plan_request_async
from headroom_core.scope import Conversation, credential, scope_of
from headroom_core.turn import Turn, Turns
from headroom_core.wire import responses_ws as rws
from headroom_core.wire.blocks import ToolCall
from headroom_core.wire.dialects import Route

log = logging.getLogger("headroom")

#: The ledger's status of a turn whose client left before its response ended (nginx's "client
#: closed request"; the HTTP path records the same).
CLIENT_CLOSED_REQUEST = 499

#: A ``response.create`` frame's body is a Responses API request (known from the frame itself).
_FRAME_ROUTE = Route(rws.DIALECT)
_TERMINAL_BYTES = tuple(f'"{t}"'.encode() for t in rws.TERMINAL_EVENTS)
_OUTPUT_ITEM_DONE = b'"response.output_item.done"'


@dataclass(frozen=True)
class Relay:
    """What becomes of the frame being relayed (a text frame's payload, UTF-8 JSON), in order:

    ``frames``: None, the frame goes on unchanged; ``()``, it is dropped; else the first takes
    its place and the rest follow it, in the same direction. ``upstream``: a ``response.create``
    frame the proxy sends upstream after it (a follow-up). ``refusal``: the client's frame is
    refused: dropped, the client gets ``refusal.event``, then both sides are closed with
    ``refusal.code`` and ``refusal.reason`` (:mod:`headroom_core.ws_policy`). ``wait``: awaited
    before the frame goes out (None: nothing to wait for; the hook stays synchronous)."""

    frames: tuple[bytes, ...] | None = None
    upstream: bytes | None = None
    refusal: ws_policy.Refusal | None = None
    wait: Coroutine[Any, Any, None] | None = None


#: The frame goes on unchanged, nothing awaited.
UNCHANGED = Relay()


@dataclass
class PendingTurn:
    """A forwarded ``response.create`` (its :class:`~headroom_core.turn.Turn`) waiting for its
    terminal server event; ``loop`` follows its events when the proxy offered its own tools."""

    turn: Turn
    loop: ws_loop.WsRetrieveLoop | None = None
    #: the connection's conversation through this frame (history and the frame's input items)
    items: tuple[Any, ...] = ()
    #: the output items of ``response.output_item.done`` events (when the terminal event has none)
    outputs: list[Any] = field(default_factory=list)


class WsConnection:
    """One Responses WebSocket connection (see the module docstring).

    ``headers``: the upgrade request's headers, lowercase names (``x-headroom-*`` included,
    read before the HTTP addon removes them); ``path``: the upgrade request's path (query
    allowed); ``key``: the ordering key of its turns (:meth:`~headroom_core.turn.Turns.begin`: one
    per connection); ``where``: host and path for log lines (never the query: it may carry a key).
    The client's ``user-agent`` header names the ledger's client.
    """

    def __init__(self, headers: Mapping[str, str], path: str, *, key: str, where: str) -> None:
        self.headers = dict(headers)
        self.responses_path = rws.is_responses_path(path)
        self.key = key
        self.where = where
        self.user_agent = self.headers.get("user-agent", "")
        #: the turns in flight (FIFO: one response at a time)
        self.pending: deque[PendingTurn] = deque()
        #: the proxy closed the connection (a refused frame): nothing more goes upstream
        self.closed = False
        #: the project and session of the connection's first frame that named them: frames that
        #: continue it take them (:mod:`headroom_core.ws_conversation`)
        self.conversation: Conversation | None = None
        #: the connection's items so far (input items and responses' output items), for the observers
        self.history: tuple[Any, ...] = ()
        #: the connection's project-less conversation named its project: rows of its earlier
        #: frames still to be recorded take the named one
        self.adopted: ws_conversation.Adoption | None = None

    @property
    def _where_ws(self) -> str:
        return f"{self.where} (WebSocket)"

    # -- client frames ---------------------------------------------------------------------------

    def carries(self, content: bytes) -> bool:
        """Whether a client text frame's ``content`` may be a ``response.create`` to plan: on a
        Responses path any frame, elsewhere one that says so in its first 4 KiB."""
        return self.responses_path or rws.looks_like_create(content)

    def drops(self, head: bytes) -> bool:
        """Whether a client text frame that starts with ``head`` (its first 4 KiB, or all of it
        when shorter) and passed ``ws_max_frame_bytes`` while it still arrives may be dropped
        as it arrives (``addons/headroom_ws_limit.py``): it will be refused by its size
        (:meth:`client_frame` with ``dropped``), or the connection is closed already. A frame
        this connection passes unchanged (not a ``response.create`` where frames are told apart
        by their content) never is: it goes upstream whole."""
        return self.closed or self.carries(head)

    async def client_frame(self, rt: Any, turns: Turns, content: bytes, dropped: int = 0) -> Relay:
        """A client text frame's ``content``: planned as ``POST /v1/responses``
        (:func:`~headroom_core.request_plan.plan_request_async`, under the compression timeout,
        as the conversation the connection pinned), its turn begun (``turns``; ``rt`` the
        runtime). Returns the frame rewritten (the compressed body spliced in, every other byte
        the client's), unchanged (not a ``response.create``, nothing to change), or refused
        (over a size limit: :mod:`headroom_core.ws_policy`; the refusal's ledger row recorded).
        ``dropped``: bytes of the frame before ``content`` that were not kept (:meth:`drops`):
        the frame is refused by its whole size. A frame after the proxy closed the connection
        is dropped. Never raises on the frame's content."""
        if self.closed:
            return Relay(frames=())
        if not dropped and not self.carries(content):
            return UNCHANGED
        s = rt.settings
        refusal = ws_policy.frame_refusal(s, len(content) + dropped)
        if refusal is not None:
            return self._refuse(rt, refusal)
        if dropped:  # only a frame over the limit is cut short; it can never go on
            return Relay(frames=())
        frame = rws.parse_create(content)
        if frame is None:
            return UNCHANGED
        cred = credential(self.headers, rws.RESPONSES_PATH)
        continues = ws_conversation.continues(
            self.conversation, frame.body, self.headers, lambda p: scope_of(p, cred, rt.sealer)
        )
        plan = await plan_request_async(
            rt,
            "POST",
            rws.RESPONSES_PATH,
            self.headers,
            frame.body_bytes,
            s.compress_timeout_seconds,
            route_=_FRAME_ROUTE,
            continues=continues,
        )
        move = ws_conversation.adoption(self.conversation, plan.conversation)
        self.conversation = ws_conversation.pin(self.conversation, plan.conversation)
        if move is not None:
            self.adopted = move
            log.info(
                "headroom: %s: the conversation names its project now; its earlier rows move to it", self._where_ws
            )
        before = ws_conversation.history_before(self.history, frame.body)
        refusal = ws_policy.plan_refusal(s, plan)
        if refusal is not None:
            return self._refuse(rt, refusal)
        out = UNCHANGED
        if plan.action is Action.REWRITE and plan.body is not None:
            out = Relay(frames=(frame.with_body(plan.body),))
            log.info(
                "headroom: %s: %s, %d -> %d bytes", self._where_ws, plan.reason, plan.bytes_before, plan.bytes_after
            )
        if plan.dialect is not None:
            observed = (
                replace(plan, context=ws_conversation.observed_context(plan.context, before))
                if plan.context is not None
                else plan
            )
            turn = turns.begin(rt, plan, key=self.key, user_agent=self.user_agent, observe_as=observed, move=move)
            loop = None
            if plan.hidden_tools:
                sent = plan.body if plan.action is Action.REWRITE and plan.body is not None else frame.body_bytes
                loop = ws_loop.WsRetrieveLoop(
                    sent.decode("utf-8"),
                    plan.hidden_tools,
                    s.retrieve_max_rounds,
                    frame.text[: frame.start],
                    frame.text[frame.end :],
                )
            self.pending.append(PendingTurn(turn, loop, ws_conversation.frame_items(before, frame.body)))
        return out

    def _refuse(self, rt: Any, refusal: ws_policy.Refusal) -> Relay:
        """Close the connection for ``refusal`` and record it (the ledger's row)."""
        self.closed = True
        log.warning("headroom: %s refused and closed with %d: %s", self._where_ws, refusal.code, refusal.reason)
        self._record(Turn(rt, refusal.plan, user_agent=self.user_agent), refusal.code)
        return Relay(frames=(), refusal=refusal)

    # -- server frames ---------------------------------------------------------------------------

    def server_frame(self, content: bytes) -> Relay | ws_loop.Settle:
        """A server text frame's ``content`` (one JSON event). Events of a turn without the
        proxy's tools pass untouched; its terminal event records the turn and waits for its row
        (:attr:`Relay.wait`). Events of a turn that offered the proxy's tools go as its
        :class:`~headroom_core.ccr.ws_loop.WsRetrieveLoop` decides; a
        :class:`~headroom_core.ccr.ws_loop.Settle` is returned as is, for :meth:`settle`."""
        if self.pending and self.pending[0].loop is not None:
            return self._loop_event(self.pending[0], content)
        return self._plain_event(content)

    def _plain_event(self, content: bytes) -> Relay:
        """A server event of a turn without the proxy's tools (the usual case: most events
        are not looked into)."""
        if not self.pending:
            return UNCHANGED
        if _OUTPUT_ITEM_DONE not in content and not any(t in content for t in _TERMINAL_BYTES):
            return UNCHANGED
        event = _event(content)
        if event is None:
            return UNCHANGED
        typ = event.get("type")
        if typ == "response.output_item.done" and isinstance(event.get("item"), dict):
            self.pending[0].outputs.append(event["item"])  # for the history, when the terminal event has no output
            return UNCHANGED
        if typ not in rws.TERMINAL_EVENTS:
            return UNCHANGED
        p = self.pending.popleft()
        resp = event.get("response") if isinstance(event.get("response"), dict) else None
        self.history = ws_conversation.with_response(p.items, (resp or {}).get("output") or p.outputs)
        committed = self._record(p.turn, 200 if typ != "error" else None, resp)
        return Relay(wait=p.turn.durable(committed, self._where_ws))

    def _loop_event(self, p: PendingTurn, content: bytes) -> Relay | ws_loop.Settle:
        """A server event of a turn that offered the proxy's tools (module docstring)."""
        assert p.loop is not None
        step = p.loop.feed(content)
        if isinstance(step, ws_loop.Settle):
            return step
        if isinstance(step, ws_loop.Hold):
            out = Relay(frames=())
        elif isinstance(step, ws_loop.Emit):
            out = Relay(frames=step.frames)
        else:
            out = UNCHANGED
        wait = p.turn.durable(self._turn_over(p), self._where_ws, taught=p.loop.done)
        return replace(out, wait=wait) if wait is not None else out

    async def settle(self, step: ws_loop.Settle, gone: Callable[[], bool] = lambda: False) -> Relay:
        """The current turn ended with calls to the proxy's tools (``step``): answers them
        (:meth:`~headroom_core.turn.Turn.answer`, off the event loop, as the turn's follow-up),
        and returns what replaces the terminal event for the client and the follow-up
        ``response.create`` to send upstream (when the model gets the answers); a turn that is
        over waits for its row. An error while answering ends the client's response coherently
        (:meth:`~headroom_core.ccr.ws_loop.WsRetrieveLoop.fail`). ``gone``: whether the client
        has left, asked once the answers are in: then nothing is sent either way (no follow-up
        for nobody; the turn is recorded at :meth:`end`). Call once per Settle, before the next
        server frame."""
        p = self.pending[0]
        assert p.loop is not None
        results: list[tuple[ToolCall, str]] = []
        try:
            results = await p.turn.follow_up(_answers(p.turn, step.calls))
            if gone():
                p.turn.abandon()
                log.info(
                    "headroom: %s: the client left while the proxy answered its tools: no follow-up", self._where_ws
                )
                return Relay(frames=())
            res = p.loop.resolve(results)
        except Exception as e:  # noqa: BLE001 - the client still gets a coherent end of its response
            log.exception("headroom: %s: answering the proxy's tools failed", self._where_ws)
            res = ws_loop.Resolution(p.loop.fail(type(e).__name__), None)
        if res.to_upstream is not None:
            log.info(
                "headroom: %s: answered %d proxy tool call(s), follow-up %d",
                self._where_ws,
                len(results),
                p.loop.rounds,
            )
        elif step.calls:
            log.warning(
                "headroom: %s: proxy tool calls carried out and removed (client calls in the same turn, or rounds exhausted)",
                self._where_ws,
            )
        wait = p.turn.durable(self._turn_over(p), self._where_ws, taught=p.loop.done)
        return Relay(frames=res.to_client, upstream=res.to_upstream, wait=wait)

    def _turn_over(self, p: PendingTurn) -> Future | None:
        """Record the turn once its loop saw the last terminal event the client gets; the future
        of the row's commit (None: the turn goes on, or nothing was queued)."""
        loop = p.loop
        if loop is None or not loop.done or not self.pending or self.pending[0] is not p:
            return None
        self.pending.popleft()
        self.history = ws_conversation.with_response(p.items, (loop.final or {}).get("output"))
        status = loop.status if loop.status is not None else 200 if loop.final is not None else None
        return self._record(p.turn, status, loop.final, loop)

    # -- the end ---------------------------------------------------------------------------------

    def end(self, *, client_left: bool = False) -> None:
        """The connection ended: every turn still in flight is abandoned (a follow-up still to
        come is never sent: :meth:`~headroom_core.turn.Turn.abandon`) and recorded without a
        response, with :data:`CLIENT_CLOSED_REQUEST` when the client closed it
        (``client_left``), else no status (the upstream or the proxy closed it)."""
        while self.pending:
            p = self.pending.popleft()
            p.turn.abandon()
            self._record(p.turn, CLIENT_CLOSED_REQUEST if client_left else None, loop=p.loop)

    def _record(
        self,
        turn: Turn,
        status: int | None,
        resp: dict[str, Any] | None = None,
        loop: ws_loop.WsRetrieveLoop | None = None,
    ) -> Future | None:
        """Record ``turn`` (:meth:`~headroom_core.turn.Turn.record`; its usage and calls from
        ``resp``, the terminal event's response, or from the proxy's ``loop``: the rounds it
        saw end, all of them once it is done); the future of
        the row's commit (None: not queued). Only the frame that ends the turn for the client
        waits for it. A turn planned before the connection named its project is recorded under
        that project."""
        if turn.rt is None:
            return None
        return turn.record(
            status_code=status,
            response=resp,
            usage=loop.usage if loop is not None else None,
            rounds=loop.rounds if loop is not None else 0,
            called=list(loop.called) if loop is not None else None,
            conversation=ws_conversation.row_conversation(self.adopted, self.conversation, turn.plan.project),
        )


def _event(content: bytes) -> dict[str, Any] | None:
    """A server frame's JSON object (None: not JSON, or not an object)."""
    try:
        event = json.loads(content)
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


async def _answers(turn: Turn, calls: Any) -> list[tuple[ToolCall, str]]:
    """The proxy's answers to ``calls``, in order."""
    return [(c, await turn.answer(c)) for c in calls]
