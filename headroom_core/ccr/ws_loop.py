"""The retrieval loop over a Responses WebSocket: pure decisions, no I/O.

The same loop as over HTTP (:class:`headroom_core.ccr.loop.StreamLoop` with
:mod:`headroom_core.wire.reply_responses`), fed one JSON server event per text frame instead of
SSE bytes. :class:`WsRetrieveLoop` follows the server events of ONE turn (the response a
``response.create`` started) and says, per event, what to do with it:

- :class:`Pass`: forward the frame unchanged (its exact bytes).
- :class:`Hold`: do not forward it (a proxy call's item; the terminal event, decided on at the
  end of the turn).
- :class:`Emit`: send these frames to the client instead of the current one (a frame with a
  renumbered ``output_index``/``sequence_number``, a follow-up's events, the last events).
- :class:`Settle`: the turn ended and the model called the proxy's tools. The caller answers
  ``calls`` (all of them, side effects included, e.g. a ``memory_save``; in a worker thread, it
  may block) and hands the results to :meth:`WsRetrieveLoop.resolve`, which returns the frames
  for the client and, when ``follow_up`` is set, the ``response.create`` frame to send upstream
  on the same socket.

What the client sees is one response (see :mod:`headroom_core.wire.reply_responses`): one
``response.created``; the output items of every round except the proxy's calls, ``output_index``
counting on across rounds; ``sequence_number`` counting on without gaps; one terminal event whose
``response`` lists the visible items of every round with summed usage. When the rounds run out,
the response ends with the text so far and a notice (:data:`headroom_core.ccr.loop.NOTICE_ROUNDS`).
When the provider fails a follow-up (an ``error`` event, a ``response.failed``), the client gets a
``response.failed`` with the provider's error and the text so far, which it may retry
(:attr:`WsRetrieveLoop.status` keeps the ``error`` event's status for the ledger); a follow-up the
proxy could not build or send ends with :data:`~headroom_core.ccr.loop.NOTICE_FAILED`. A response
the model's token limit cut (``response.incomplete``) is never followed up, even when it calls the
proxy's tools: the client gets it, those calls removed (:func:`headroom_core.ccr.loop.after_round`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from headroom_core.ccr.loop import StreamLoop
from headroom_core.wire import reply_responses
from headroom_core.wire.assemble_responses import TERMINAL as _RESPONSE_TERMINAL
from headroom_core.wire.blocks import ToolCall, Usage
from headroom_core.wire.sse import SSEEvent

#: Server events after which a turn is over.
TERMINAL = _RESPONSE_TERMINAL | {"error"}


@dataclass(frozen=True)
class Pass:
    """Forward the current server frame unchanged."""


@dataclass(frozen=True)
class Hold:
    """Do not forward the current frame."""


@dataclass(frozen=True)
class Emit:
    """Send ``frames`` (UTF-8 JSON text payloads, in order) to the client instead of the current
    frame; an empty tuple drops it."""

    frames: tuple[bytes, ...]


@dataclass(frozen=True)
class Settle:
    """The turn ended with calls to the proxy's tools: answer ``calls``, then call
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


def _payload(ev: SSEEvent) -> bytes:
    """A frame payload: the event's JSON text, ``data`` (a frame's own text when it passes
    unchanged; WebSocket text frames are UTF-8, so the bytes are the frame's). Never ``raw``:
    that is the event's SSE encoding, which no WebSocket carries."""
    return ev.data.encode("utf-8")


@dataclass
class WsRetrieveLoop:
    """Follows one turn's server events (see the module docstring).

    ``request``: the JSON text of the Responses body that went upstream; ``hidden``: the proxy's
    tool names offered in it; ``max_rounds``: the most follow-ups (``retrieve_max_rounds``);
    ``frame_prefix``/``frame_suffix``: the client frame's text around the body (empty when the
    body's members are at top level, else e.g. ``'{"type":"response.create","response":'`` and
    ``'}'``), reused for follow-up frames.

    After the turn: ``done`` is True, ``final`` the response object the client got in its
    terminal event (None for an ``error`` event), ``rounds`` the follow-ups made, ``called``
    the names of every function call of every round, :attr:`usage` the summed usage, ``status``
    the ``status`` of the provider's ``error`` event that failed a follow-up (else None).
    """

    request: str = field(repr=False)
    hidden: frozenset[str]
    max_rounds: int
    frame_prefix: str = ""
    frame_suffix: str = ""
    done: bool = field(init=False, default=False)
    status: int | None = field(init=False, default=None)
    final: dict[str, Any] | None = field(init=False, repr=False, default=None)
    _loop: StreamLoop = field(init=False, repr=False)
    _settling: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        self._loop = StreamLoop(reply_responses, self.request, self.hidden, self.max_rounds)

    @property
    def rounds(self) -> int:
        """Follow-ups made so far."""
        return self._loop.rounds

    @property
    def called(self) -> list[str]:
        """Every function call's name over all rounds."""
        return self._loop.called

    @property
    def usage(self) -> Usage:
        """Usage summed over every round's response."""
        return self._loop.usage

    def feed(self, payload: bytes) -> Step:
        """The decision for one server event frame's ``payload`` (a text frame's bytes).
        Frames after the turn ended, or while a :class:`Settle` is unresolved, pass. Never raises
        on bad input: a frame that is not JSON passes like any unknown event."""
        if self.done or self._settling:
            return Pass()
        # the frame's JSON text as the data of one SSE event: the form the reply module reads
        ev = SSEEvent.make(payload.decode("utf-8", "replace"))
        out = self._loop.feed_events([ev])
        d = ev.parsed
        typ = d.get("type") if isinstance(d, dict) else None
        if typ == "error" and self._loop.rounds > 0 and isinstance(d, dict) and type(d.get("status")) is int:
            self.status = d["status"]
        if typ in TERMINAL:
            out += self._loop.end_round_events()
            p = self._loop.pending
            if p is not None:
                self._settling = True
                self._before = out
                return Settle(p.calls, p.follow_up)
            self._after(out)
        if len(out) == 1 and out[0] is ev:
            return Pass()
        if not out:
            return Hold()
        return Emit(tuple(_payload(e) for e in out))

    def resolve(self, results: list[tuple[ToolCall, str]]) -> Resolution:
        """After :class:`Settle`: ``results`` pairs each call with the proxy's answer text.

        With ``follow_up``, returns the follow-up frame (the request sent so far, this turn's
        response exactly as sent and the results, in the client's frame shape); the loop then
        follows the follow-up's events. Without, returns the client's last events (the proxy's
        calls removed); the turn is over. Raises ``RuntimeError`` when no Settle is pending."""
        if not self._settling:
            raise RuntimeError("resolve() without a pending Settle")
        self._settling = False
        before = [_payload(e) for e in getattr(self, "_before", [])]
        p = self._loop.pending
        assert p is not None
        if p.follow_up:
            try:
                body = self._loop.next_request(results).decode("utf-8")
            except ValueError as e:
                evs = self._loop.fail_events(f"the follow-up request could not be built: {e}")
                self._after(evs)
                return Resolution(tuple(before + [_payload(e) for e in evs]), None)
            return Resolution(tuple(before), (self.frame_prefix + body + self.frame_suffix).encode("utf-8"))
        evs = self._loop.finish_events()
        self._after(evs)
        return Resolution(tuple(before + [_payload(e) for e in evs]), None)

    def fail(self, why: str) -> tuple[bytes, ...]:
        """Something failed after the first response (e.g. the follow-up frame could not be
        sent): the frames that end the client's response with a notice."""
        self._settling = False
        evs = self._loop.fail_events(why)
        self._after(evs)
        return tuple(_payload(e) for e in evs)

    def _after(self, events: list[SSEEvent]) -> None:
        """The turn is over: remember the response the client got in its terminal event."""
        self.done = True
        for e in events:
            d = e.parsed
            if isinstance(d, dict) and d.get("type") in _RESPONSE_TERMINAL and isinstance(d.get("response"), dict):
                self.final = d["response"]
