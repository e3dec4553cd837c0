"""JSON-array streams (Google's ``:streamGenerateContent`` without ``alt=sse``: the response body
``[{…}\\n,\\r\\n{…}\\n]`` sent in chunks as each element is ready), as a
:class:`~headroom_core.wire.protocol.StreamFraming`, and :class:`JSONArrayReply`, any SSE reply
side (:class:`~headroom_core.wire.protocol.ReplySide`) speaking that framing.

The framing (Google's REST streaming, "Method: models.streamGenerateContent": without ``alt=sse``
the stream is one JSON array, ``application/json``) is found by structure, not by line breaks:
:class:`JSONArrayParser` tracks nesting and strings, so an element ends at the bracket that
closes it, whatever whitespace and separators the server puts between elements.

Each element becomes an :class:`~headroom_core.wire.sse.SSEEvent` with ``event`` :data:`ITEM`,
``data`` the element's JSON text and ``raw`` its exact bytes with what came before it since
the previous event (the opening ``[`` or the ``,`` and whitespace): the events' ``raw`` joined
are the stream's bytes. The closing ``]`` (with the whitespace before it) is an event
:data:`END` with empty ``data``; a body that is not an array is one event with ``event`` None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from headroom_core.wire.blocks import ToolCall, Usage
from headroom_core.wire.protocol import ReplySide, ReplyStream, WrappedStream
from headroom_core.wire.sse import SSEEvent

#: ``event`` of an array element and of the array's end.
ITEM = "item"
END = "end"
#: Content types of such streams (the header says JSON; the request's path says it is a stream).
CONTENT_TYPES = ("application/json",)
#: Between elements the proxy writes (Google's own separator).
SEPARATOR = b"\r\n,\r\n"

_WS = b" \t\r\n"
_OUTSIDE = re.compile(rb'["{}\[\],]')
_INSIDE = re.compile(rb'["\\]')


class JSONArrayParser:
    """Cuts a JSON array stream into its elements as bytes arrive (see the module docstring);
    ``feed(b"")`` (the end) returns what is left: an element cut short (``data`` its text, not
    JSON), the bytes after the ``]``, or a body that is not an array."""

    def __init__(self) -> None:
        self._buf = b""
        self._scan = 0  # where scanning resumes in _buf
        self._depth = 0  # 1: inside the array, between or in scalar elements; 2+: inside an element
        self._in_str = False
        self._esc = False
        self._start = -1  # start of the current element's text in _buf (-1: none yet)
        self._state = "open"  # open (before '['), items, closed (after ']'), other (not an array)

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        if not chunk:
            rest, self._buf = self._buf, b""
            if not rest:
                return []
            body = (
                (rest[self._start :] if self._start >= 0 else rest.lstrip(b" \t\r\n[,"))
                .decode("utf-8", "replace")
                .strip()
            )
            return [
                SSEEvent(
                    rest, ITEM if self._state == "items" and body else None, body if self._state != "closed" else ""
                )
            ]
        self._buf += chunk
        out: list[SSEEvent] = []
        self._run(out)
        return out

    def _emit(self, out: list[SSEEvent], end: int, event: str | None, data: bytes) -> None:
        out.append(SSEEvent(self._buf[:end], event, data.decode("utf-8", "replace")))
        self._buf = self._buf[end:]
        self._scan = 0
        self._start = -1

    def _run(self, out: list[SSEEvent]) -> None:
        buf = self._buf
        if self._state == "open":
            s = buf.lstrip(_WS)
            if not s:
                return
            if not s.startswith(b"["):
                self._state = "other"  # one value (an error object): passed whole at the end
                return
            self._state, self._depth, self._scan = "items", 1, len(buf) - len(s) + 1
        if self._state != "items":
            return
        i = self._scan
        while True:
            buf = self._buf
            if self._in_str:
                m = _INSIDE.search(buf, i)
                if m is None:
                    self._scan = len(buf)
                    return
                i = m.end()
                if m.group() == b"\\":
                    if i >= len(buf):  # the escaped character has not arrived
                        self._scan = m.start()
                        return
                    i += 1
                    continue
                self._in_str = False
                continue
            if self._start < 0:  # between elements: skip separators and whitespace
                while i < len(buf) and buf[i] in b" \t\r\n,":
                    i += 1
                if i >= len(buf):
                    self._scan = i
                    return
                if buf[i] == ord("]"):
                    self._state = "closed"
                    self._emit(out, i + 1, END, b"")
                    return
                self._start = i
            m = _OUTSIDE.search(buf, i)
            if m is None:
                self._scan = len(buf)
                return
            i, c = m.end(), m.group()
            if c == b'"':
                self._in_str = True
            elif c in (b"{", b"["):
                self._depth += 1
            elif c in (b"}", b"]") and self._depth > 1:
                self._depth -= 1
                if self._depth == 1:
                    self._emit(out, i, ITEM, buf[self._start : i])
                    i = 0
            elif self._depth == 1:  # ',' or ']' ending a scalar element
                self._emit(out, m.start(), ITEM, buf[self._start : m.start()].strip())
                i = 0


class JSONArrayFraming:
    """The :class:`~headroom_core.wire.protocol.StreamFraming` of JSON-array streams: a response
    is such a stream when its content type is JSON (the reply side using this framing is chosen
    for requests whose path asks for that stream, :meth:`WireDialect.reply_for`)."""

    content_types: tuple[str, ...] = CONTENT_TYPES

    def streams(self, content_type: str) -> bool:
        ct = content_type.lower()
        return any(t in ct for t in CONTENT_TYPES)

    def parser(self) -> JSONArrayParser:
        return JSONArrayParser()

    def terminated(self, events: list[SSEEvent]) -> list[SSEEvent]:
        """Elements that are JSON (an element cut short, or bytes that are none, dropped)."""
        return [ev for ev in events if ev.parsed is not None]


JSON_ARRAY = JSONArrayFraming()


def _body(raw: bytes) -> bytes:
    """An element event's bytes without what came before the element (``[``, ``,``, whitespace)."""
    return raw.lstrip(b" \t\r\n[,")


@dataclass
class ArrayState:
    """One response's state: the wrapped side's state, and what the client has been sent of the
    array (its ``[``, its ``]``)."""

    inner: Any
    opened: bool = False
    closed: bool = False


class _ArrayStream(WrappedStream):
    """One round: upstream elements into the wrapped side's round, its events out as elements."""

    def __init__(self, inner: ReplyStream, state: ArrayState, round_no: int) -> None:
        super().__init__(inner)
        self.state = state
        self.round_no = round_no
        # the upstream events fed in, by id and kept alive: an id is an object's only while it
        # lives, and a new event of the wrapped side must never be taken for one of them (its
        # bytes are SSE-framed: passing them would put "data: " into the array)
        self._fed: dict[int, SSEEvent] = {}

    def _element(self, e: SSEEvent) -> SSEEvent:
        """``e`` as the client's next element: an upstream element passed unchanged keeps its
        bytes when its separator is the one due here, else its text gets the due one."""
        st = self.state
        mine = self._fed.get(id(e)) is e
        if mine and e.event != ITEM:  # not an array element: as it came
            return e
        lead = e.raw[: len(e.raw) - len(_body(e.raw))] if mine else b""
        if not st.opened:
            st.opened = True
            if mine and b"[" in lead:
                return e
            return SSEEvent(b"[" + (_body(e.raw) if mine else e.data.encode("utf-8")), ITEM, e.data)
        if mine and b"," in lead and b"[" not in lead:
            return e
        return SSEEvent(SEPARATOR + (_body(e.raw) if mine else e.data.encode("utf-8")), ITEM, e.data)

    def feed(self, ev: SSEEvent) -> list[SSEEvent]:
        if ev.event == END or (ev.event is None and ev.parsed is None and not ev.data):
            # the array's end (and bytes after it): the proxy ends the array itself at close,
            # except when the client's own stream ends here unfinished (nothing follows then)
            if self.round_no == 0 and not self.inner.complete and not self.state.closed:
                self.state.closed = True
                return [ev] if self.state.opened or ev.event != END else [SSEEvent(b"[" + ev.raw.lstrip(_WS), END, "")]
            return []
        self._fed[id(ev)] = ev
        return [self._element(e) for e in self.inner.feed(ev)]

    def close(self, notice: str | None, texts: list[str]) -> list[SSEEvent]:
        return self._last([self._element(e) for e in self.inner.close(notice, texts)])

    def failure(self, err: Any, texts: list[str]) -> list[SSEEvent]:
        """The wrapped side's failure events (its error object last) as the array's last
        elements, then the array's end."""
        return self._last([self._element(e) for e in self.inner.failure(err, texts)])

    def _last(self, out: list[SSEEvent]) -> list[SSEEvent]:
        """``out`` and the array's end (once)."""
        if not self.state.closed:
            self.state.closed = True
            out.append(SSEEvent(b"\r\n]" if self.state.opened else b"[]", END, ""))
            self.state.opened = True
        return out


@dataclass(frozen=True)
class JSONArrayReply:
    """A :class:`~headroom_core.wire.protocol.ReplySide` whose streams are JSON arrays: ``inner``
    (a reply side whose stream view reads and makes SSE events carrying one response object
    each, e.g. :mod:`headroom_core.wire.reply_gemini`) fed the array's elements; its events go to
    the client as elements (an element it passes unchanged keeps its bytes), ``[`` once and ``]``
    at the very end of the response (a follow-up round's array joins the client's one). The
    non-streamed methods are the inner side's."""

    inner: ReplySide

    @property
    def framing(self) -> JSONArrayFraming:
        return JSON_ARRAY

    def ViewState(self) -> ArrayState:  # noqa: N802 - the protocol's name
        return ArrayState(self.inner.ViewState())

    def StreamView(self, hidden: frozenset[str], state: Any, round_no: int) -> ReplyStream:  # noqa: N802
        return _ArrayStream(self.inner.StreamView(hidden, state.inner, round_no), state, round_no)

    def merge(self, texts: list[str], hidden: frozenset[str], notice: str | None) -> str:
        return self.inner.merge(texts, hidden, notice)

    def followup(self, request: str, message: str, results: list[tuple[ToolCall, str]]) -> str:
        return self.inner.followup(request, message, results)

    def tool_calls(self, resp: dict[str, Any]) -> list[ToolCall]:
        return self.inner.tool_calls(resp)

    def usage(self, resp: dict[str, Any]) -> Usage:
        return self.inner.usage(resp)

    def completed(self, resp: dict[str, Any]) -> bool:
        return self.inner.completed(resp)

    def truncated(self, resp: dict[str, Any]) -> bool:
        return self.inner.truncated(resp)

    def notice_message(self, notice: str, model: str = "") -> str:
        return self.inner.notice_message(notice, model)
