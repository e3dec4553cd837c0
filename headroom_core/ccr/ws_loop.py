"""The retrieval loop over a Responses WebSocket: pure decisions, no I/O.

Over HTTP the proxy answers calls to its own tools inside the SSE stream
(:class:`headroom_core.ccr.loop.StreamLoop`); this is the same loop for the WebSocket form of the
Responses API (one JSON server event per text frame, ``response.create`` client frames).
:class:`WsRetrieveLoop` follows the server events of ONE turn (the response a ``response.create``
started) and says, per event, what to do with it:

- :class:`Pass`: forward the frame unchanged. Every event before a ``response.output_item.added``
  whose item is a ``function_call`` to a hidden tool passes byte for byte.
- :class:`Hold`: drop the frame for now (from that call on, the turn's events are held back).
- :class:`Emit`: send these frames to the client instead of the current one (none: drop it).
  Used for the follow-up's events, relayed as the continuation of the same response.
- :class:`Settle`: the turn ended with held events. The caller answers ``calls`` (all of them,
  side effects included, e.g. a ``memory_save``; in a worker thread, it may block) and hands the
  results to :meth:`WsRetrieveLoop.resolve`, which returns the frames for the client and, when
  ``follow_up`` is set, the ``response.create`` frame to send upstream on the same socket.

The proxy continues alone only when every function call of the turn is one of its own tools, the
turn ended with ``response.completed``/``response.done``/``response.incomplete`` and fewer than
``max_rounds`` follow-ups were made (the HTTP rule, :func:`headroom_core.ccr.loop.complete_json`).
Otherwise the held events go to the client without the hidden calls' items.

What the client sees, in one response: the first turn's ``response.created``/``in_progress``;
the output items of every round except the hidden calls, ``output_index`` counting on across
rounds; the follow-ups' own ``response.created``/``in_progress`` dropped; ONE terminal event
whose ``response.output`` lists the visible items of all rounds and whose ``usage`` sums the
rounds' ``input_tokens``/``output_tokens``/``total_tokens`` (:func:`openai_responses.merge_responses`).

``sequence_number`` (Responses streaming events, "The sequence number of this event"): events
passed untouched keep the upstream's number; every frame the loop emits itself (released held
events, the follow-ups' events) is renumbered to the last client-visible number + 1, so the
client-visible sequence stays strictly increasing and gap-free after the first rewritten event.
Frames whose content does not change keep their exact bytes; changed frames are re-serialised
as compact UTF-8 JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from headroom_core.wire import openai_responses as resp_wire
from headroom_core.wire.blocks import ToolCall, Usage
from headroom_core.surrogates import escape_in_json

#: Server events after which a turn is over.
TERMINAL = frozenset({"response.completed", "response.done", "response.incomplete", "response.failed", "error"})
#: Terminal events after which the proxy may answer its calls and continue the response.
CONTINUABLE = frozenset({"response.completed", "response.done", "response.incomplete"})
#: A follow-up's opening events, dropped: the client's response was created already.
_SKIP_IN_CONTINUATION = frozenset({"response.created", "response.in_progress"})
_ITEM_EVENTS = ("response.output_item.added", "response.output_item.done")


@dataclass(frozen=True)
class Pass:
    """Forward the current server frame unchanged."""


@dataclass(frozen=True)
class Hold:
    """Do not forward the current frame now (it is kept and decided on at the end of the turn)."""


@dataclass(frozen=True)
class Emit:
    """Send ``frames`` (UTF-8 JSON text payloads, in order) to the client instead of the current
    frame; an empty tuple drops it."""

    frames: tuple[bytes, ...]


@dataclass(frozen=True)
class Settle:
    """The turn ended with held events: answer ``calls`` (the proxy's own), then call
    :meth:`WsRetrieveLoop.resolve` with the results. ``follow_up`` says whether the results go
    to the model (a follow-up ``response.create``) or the calls are only carried out."""

    calls: tuple[ToolCall, ...]
    follow_up: bool


Step = Pass | Hold | Emit | Settle


@dataclass(frozen=True)
class Resolution:
    """What :meth:`WsRetrieveLoop.resolve` decided: ``to_client`` frames replace the terminal
    frame (empty: drop it), ``to_upstream`` is the follow-up ``response.create`` frame (UTF-8
    JSON) to send on the same WebSocket, or None when the turn is over."""

    to_client: tuple[bytes, ...]
    to_upstream: bytes | None


@dataclass(frozen=True)
class _Frame:
    """A server event frame: ``raw`` payload bytes, ``data`` its parsed JSON (None if not JSON).
    Quacks like :class:`headroom_core.wire.sse.SSEEvent` for :class:`StreamAssembler`."""

    raw: bytes
    data: Any
    event: str | None = None

    def json(self) -> Any:
        return self.data


@dataclass
class _Pending:
    """The decision :meth:`WsRetrieveLoop.feed` announced with :class:`Settle`."""

    message: dict[str, Any]
    follow_up: bool


@dataclass
class WsRetrieveLoop:
    """Follows one turn's server events (see the module docstring).

    ``request``: the parsed Responses body that went upstream (``RequestPlan.forwarded``);
    ``hidden``: the proxy's tool names offered in it; ``max_rounds``: the most follow-ups
    (``retrieve_max_rounds``); ``frame_prefix``/``frame_suffix``: the client frame's text around
    the body (empty when the body's members are at top level, else e.g.
    ``'{"type":"response.create","response":'`` and ``'}'``), reused for follow-up frames.

    After the turn: ``done`` is True, ``final`` the response object the client got in its
    terminal event (None for an ``error`` event), ``rounds`` the follow-ups made, ``called``
    the names of every function call of every round, :attr:`usage` the summed usage.
    """

    request: dict[str, Any] = field(repr=False)
    hidden: frozenset[str]
    max_rounds: int
    frame_prefix: str = ""
    frame_suffix: str = ""
    rounds: int = field(init=False, default=0)
    done: bool = field(init=False, default=False)
    final: dict[str, Any] | None = field(init=False, repr=False, default=None)
    called: list[str] = field(init=False, default_factory=list)
    _asm: resp_wire.StreamAssembler = field(init=False, repr=False)
    _held: list[_Frame] = field(init=False, repr=False, default_factory=list)
    _shift: int = field(init=False, default=0)  # items of earlier rounds the client has seen
    _last_seq: int | None = field(init=False, default=None)  # last client-visible sequence_number
    _acc: dict[str, Any] | None = field(init=False, repr=False, default=None)  # earlier rounds, merged
    _messages: list[dict[str, Any]] = field(init=False, repr=False, default_factory=list)
    _pending: _Pending | None = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:
        self._asm = resp_wire.StreamAssembler(set(self.hidden))

    # -- per event ---------------------------------------------------------------------

    def feed(self, payload: bytes) -> Step:
        """The decision for one server event frame's ``payload`` (a text frame's bytes).
        Frames after the turn ended, or while a :class:`Settle` is unresolved, pass. Never raises
        on bad input: a frame that is not JSON is treated like any other event."""
        if self.done or self._pending is not None:
            return Pass()
        try:
            data = json.loads(payload)
        except (UnicodeDecodeError, ValueError):
            data = None
        f = _Frame(payload, data)
        typ = data.get("type") if isinstance(data, dict) else None
        if self._asm.accept(f) and not self._held:
            if self.rounds == 0:
                self._note_seq(data)
                if typ in TERMINAL:
                    self._finish(data)
                return Pass()
            out = self._client_bytes(f, set())
            if typ in TERMINAL:
                self._finish(data)
            return Emit(() if out is None else (out,))
        self._held.append(f)
        if typ not in TERMINAL:
            return Hold()
        msg = self._asm.message()
        calls = resp_wire.response_tool_calls(msg)
        mine = tuple(c for c in calls if c.name in self.hidden)
        go = bool(mine) and len(mine) == len(calls) and typ in CONTINUABLE and self.rounds < self.max_rounds
        self._pending = _Pending(msg, go)
        return Settle(mine, go)

    def resolve(self, results: list[tuple[ToolCall, str]]) -> Resolution:
        """After :class:`Settle`: ``results`` pairs each call with the proxy's answer text.

        With ``follow_up``, returns the follow-up frame (``openai_responses.followup_body`` of
        the request sent so far, this turn's response and the results, in the client's frame
        shape) and any held events of visible items; the loop then follows the follow-up's
        events. Without, returns the held events minus the hidden calls' items, the terminal
        event last; the turn is over. Raises ``RuntimeError`` when no Settle is pending."""
        if self._pending is None:
            raise RuntimeError("resolve() without a pending Settle")
        pending, self._pending = self._pending, None
        held, self._held = self._held, []
        gone = self._hidden_indexes(held)
        if not pending.follow_up:
            out = tuple(b for f in held if (b := self._client_bytes(f, gone)) is not None)
            self._finish(held[-1].data)
            return Resolution(out, None)
        # the terminal event is not sent: the follow-up continues this response
        out = tuple(b for f in held[:-1] if (b := self._client_bytes(f, gone)) is not None)
        visible_items = len(set(self._asm.items) - gone)
        self._remember(pending.message)
        self._acc = resp_wire.strip_calls(resp_wire.merge_responses(self._acc, pending.message, set(self.hidden)) if self._acc else pending.message, set(self.hidden))
        self.request = resp_wire.followup_body(self.request, pending.message, results)
        self.rounds += 1
        self._shift += visible_items
        self._asm = resp_wire.StreamAssembler(set(self.hidden))
        frame = self.frame_prefix + escape_in_json(json.dumps(self.request, ensure_ascii=False)) + self.frame_suffix
        return Resolution(out, frame.encode("utf-8"))

    # -- results -----------------------------------------------------------------------

    @property
    def usage(self) -> Usage:
        """Usage summed over every round's response (None where no round reported a figure)."""
        figures: list[list[int | None]] = [[], [], [], []]
        for m in self._messages:
            u = resp_wire.usage(m)
            for k, v in enumerate((u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens)):
                figures[k].append(v)
        return Usage(*[sum(v or 0 for v in vs) if any(v is not None for v in vs) else None for vs in figures])

    # -- internals ---------------------------------------------------------------------

    def _finish(self, data: Any) -> None:
        self.done = True
        resp = data.get("response") if isinstance(data, dict) else None
        msg = resp if isinstance(resp, dict) else self._asm.message()
        self._remember(msg)
        self.final = self._client_response(resp) if isinstance(resp, dict) else None

    def _remember(self, msg: dict[str, Any]) -> None:
        self._messages.append(msg)
        self.called.extend(c.name for c in resp_wire.response_tool_calls(msg))

    def _note_seq(self, data: Any) -> None:
        s = data.get("sequence_number") if isinstance(data, dict) else None
        if isinstance(s, int) and not isinstance(s, bool):
            self._last_seq = s

    def _hidden_indexes(self, frames: list[_Frame]) -> set[int]:
        """``output_index`` of every item in ``frames`` that calls a hidden tool."""
        gone: set[int] = set()
        for f in frames:
            d = f.data
            if isinstance(d, dict) and d.get("type") in _ITEM_EVENTS and isinstance(d.get("output_index"), int):
                item = d.get("item")
                if isinstance(item, dict) and item.get("type") == "function_call" and item.get("name") in self.hidden:
                    gone.add(d["output_index"])
        return gone

    def _client_response(self, resp: dict[str, Any]) -> dict[str, Any]:
        """A terminal event's ``response`` as the client gets it: earlier rounds merged in,
        hidden calls removed (the same object when nothing changes)."""
        out = resp_wire.merge_responses(self._acc, resp, set(self.hidden)) if self._acc else resp
        if any(c.name in self.hidden for c in resp_wire.response_tool_calls(out)):
            out = resp_wire.strip_calls(out, set(self.hidden))
        return out

    def _client_bytes(self, f: _Frame, gone: set[int]) -> bytes | None:
        """The frame ``f`` as the client gets it (None: not at all): items in ``gone`` removed,
        ``output_index`` closed up and shifted past earlier rounds, a follow-up's opening events
        dropped, terminal ``response`` merged, ``sequence_number`` renumbered."""
        d = f.data
        if not isinstance(d, dict):
            return f.raw
        typ = d.get("type")
        if self.rounds and typ in _SKIP_IN_CONTINUATION:
            return None
        new = dict(d)
        idx = d.get("output_index")
        if isinstance(idx, int) and not isinstance(idx, bool):
            if idx in gone:
                return None
            new["output_index"] = idx - sum(1 for g in gone if g < idx) + self._shift
        if typ in TERMINAL and isinstance(d.get("response"), dict):
            new["response"] = self._client_response(d["response"])
        seq = d.get("sequence_number")
        if isinstance(seq, int) and not isinstance(seq, bool):
            if self._last_seq is not None:
                new["sequence_number"] = self._last_seq + 1
            self._last_seq = new["sequence_number"]
        if new == d:
            return f.raw
        return escape_in_json(json.dumps(new, ensure_ascii=False, separators=(",", ":"))).encode("utf-8")
