"""Server-sent events (SSE): an incremental parser that keeps each event's exact bytes.

Follows the WHATWG HTML "server-sent events" parsing rules for ``event:`` and ``data:`` fields;
events end at a blank line (``\\n\\n``, ``\\r\\n\\r\\n`` or ``\\r\\r``). Parsing never changes the
bytes: each event carries ``raw`` so a pass-through re-emits exactly what arrived.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from headroom_core.wire import rawjson

_BOUNDARY = re.compile(rb"\r\n\r\n|\n\n|\r\r")
_LINE_END = re.compile(r"\r\n|\n|\r")


@dataclass(frozen=True)
class SSEEvent:
    """One event: ``raw`` its exact bytes (terminator included), ``event`` its type field (or
    None), ``data`` the joined ``data:`` lines."""

    raw: bytes
    event: str | None
    data: str

    @cached_property
    def parsed(self) -> Any:
        """``data`` parsed as JSON (once), or None when it is not JSON (e.g. ``[DONE]``)."""
        try:
            return json.loads(self.data)
        except (ValueError, RecursionError):
            return None

    def json(self) -> Any:
        """``data`` parsed as JSON, or None when it is not JSON (e.g. ``[DONE]``)."""
        return self.parsed

    def with_data(self, data: str) -> "SSEEvent":
        """This event with ``data`` (JSON text, written as is) instead: same event type,
        ``raw`` re-encoded (``\\n\\n``-terminated)."""
        return SSEEvent(encode_event(data, self.event), self.event, data)

    @staticmethod
    def make(data: str, event: str | None = None) -> "SSEEvent":
        """A new event carrying the JSON text ``data`` (and ``event:`` type, if given)."""
        return SSEEvent(encode_event(data, event), event, data)


def _parse_event(raw: bytes) -> SSEEvent:
    event = None
    data: list[str] = []
    for line in _LINE_END.split(raw.decode("utf-8", "replace")):
        if not line or line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "event":
            event = value
        elif field == "data":
            data.append(value)
    return SSEEvent(raw=raw, event=event, data="\n".join(data))


class SSEParser:
    """Feed bytes as they arrive; get back the events completed so far.

    ``feed(b"")`` (end of stream) flushes a last event that had no terminating blank line.
    """

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Events completed by ``chunk``; at end of stream pass ``b""``."""
        if not chunk:
            rest, self._buf = self._buf, b""
            return [_parse_event(rest)] if rest.strip() else ([] if not rest else [SSEEvent(rest, None, "")])
        self._buf += chunk
        out: list[SSEEvent] = []
        pos = 0
        for m in _BOUNDARY.finditer(self._buf):
            out.append(_parse_event(self._buf[pos : m.end()]))
            pos = m.end()
        self._buf = self._buf[pos:]
        return out


def encode_event(data: Any, event: str | None = None) -> bytes:
    """One SSE event with ``data`` as compact JSON (:func:`rawjson.dumps`; a str is written as
    it is), ``\\n\\n``-terminated; multi-line data becomes several ``data:`` lines."""
    payload = data if isinstance(data, str) else rawjson.dumps(data)
    head = f"event: {event}\n" if event else ""
    return (head + "".join(f"data: {line}\n" for line in payload.split("\n")) + "\n").encode("utf-8")


class SSEFraming:
    """How a streamed response is framed (:class:`~headroom_core.wire.protocol.StreamFraming`),
    for SSE: responses of ``content_types`` are streams, :class:`SSEParser` cuts them into
    events, and :meth:`terminated` ends a last event the stream's end cut short."""

    content_types: tuple[str, ...] = ("text/event-stream",)

    def streams(self, content_type: str) -> bool:
        """Whether a response with ``content_type`` (the header's value) is such a stream."""
        ct = content_type.lower()
        return any(t in ct for t in self.content_types)

    def parser(self) -> SSEParser:
        """A new incremental parser for one response."""
        return SSEParser()

    def terminated(self, events: list[SSEEvent]) -> list[SSEEvent]:
        """``events`` with an event the stream's end cut short (no blank line after it) dropped
        when its data is not JSON (a client would discard it, WHATWG SSE) or else ended properly."""
        out = []
        for ev in events:
            if ev.raw.endswith((b"\n\n", b"\r\r", b"\r\n\r\n")):
                out.append(ev)
            elif ev.parsed is not None:
                out.append(SSEEvent(ev.raw.rstrip(b"\r\n") + b"\n\n", ev.event, ev.data))
        return out


#: The SSE framing (every dialect's but those whose streams are framed otherwise).
SSE = SSEFraming()
