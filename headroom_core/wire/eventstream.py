"""AWS event-stream framing (Amazon Bedrock's streamed responses: ``InvokeModelWithResponseStream``
and ``ConverseStream``), as a :class:`~headroom_core.wire.protocol.StreamFraming`.

A frame (AWS, "Event stream encoding", the ``application/vnd.amazon.eventstream`` content type):
a 12-byte prelude (total length, headers length, both 4-byte big-endian, and the CRC-32 of those
8 bytes), the headers (each: name length 1 byte, name, value type 1 byte, for strings (type 7) a
2-byte length and the UTF-8 value), the payload, and the CRC-32 of everything before it. Frames
are decoded with botocore's own decoder (:class:`botocore.eventstream.EventStreamBuffer`, which
checks both CRCs); frames the proxy makes are encoded here (botocore has no encoder).

Each frame becomes an :class:`~headroom_core.wire.sse.SSEEvent` whose ``raw`` is the frame's exact
bytes (a pass-through sends them on), ``event`` the ``:event-type`` header (``chunk``,
``messageStart``, …; for an exception frame its ``:exception-type``) and ``data`` the JSON the
frame carries: for a ``chunk`` (InvokeModel) the base64 ``bytes`` member's decoded text (the
model's own event, e.g. an Anthropic Messages stream event), else the payload itself.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from typing import Any

from headroom_core.wire.sse import SSEEvent

#: The content type of an event-stream response.
CONTENT_TYPE = "application/vnd.amazon.eventstream"
#: The largest frame AWS allows (16 MiB, "Event stream encoding"); a longer prelude is not a frame.
MAX_FRAME = 16 * 1024 * 1024
_PRELUDE = 12
_STRING = 7


def frame(headers: list[tuple[str, str]], payload: bytes) -> bytes:
    """One event-stream frame with string ``headers`` (name, value) and ``payload``."""
    hb = b""
    for name, value in headers:
        n, v = name.encode("utf-8"), value.encode("utf-8")
        hb += bytes([len(n)]) + n + bytes([_STRING]) + len(v).to_bytes(2, "big") + v
    total = _PRELUDE + len(hb) + len(payload) + 4
    prelude = total.to_bytes(4, "big") + len(hb).to_bytes(4, "big")
    prelude += zlib.crc32(prelude).to_bytes(4, "big")
    msg = prelude + hb + payload
    return msg + zlib.crc32(msg).to_bytes(4, "big")


def event_frame(event_type: str, payload: str) -> bytes:
    """An ``event`` frame of type ``event_type`` carrying the JSON text ``payload``."""
    return frame(
        [(":event-type", event_type), (":content-type", "application/json"), (":message-type", "event")],
        payload.encode("utf-8"),
    )


#: The Bedrock runtime's stream exception for a failure of each kind (Amazon Bedrock API
#: reference, "ConverseStream" / "InvokeModelWithResponseStream", errors): over a rate limit,
#: unavailable or overloaded, timed out, anything else.
EXCEPTIONS = {
    "rate_limited": "throttlingException",
    "overloaded": "serviceUnavailableException",
    "timed_out": "modelTimeoutException",
}
SERVER_EXCEPTION = "internalServerException"


def exception_frame(exception_type: str, message: str) -> bytes:
    """An ``exception`` frame of type ``exception_type`` (``throttlingException`` …) carrying
    ``{"message": message}``, as Bedrock ends a stream it fails."""
    payload = json.dumps({"message": message})
    return frame(
        [(":exception-type", exception_type), (":content-type", "application/json"), (":message-type", "exception")],
        payload.encode("utf-8"),
    )


def exception_event(kind: str, message: str) -> SSEEvent:
    """:func:`exception_frame` for a failure of ``kind`` (a key of :data:`EXCEPTIONS`, else a
    server error) as the event the parser would make of it."""
    etype = EXCEPTIONS.get(kind, SERVER_EXCEPTION)
    return SSEEvent(exception_frame(etype, message), f"exception:{etype}", json.dumps({"message": message}))


def chunk_frame(data: str) -> bytes:
    """An InvokeModel stream ``chunk`` frame carrying the model's event ``data`` (JSON text),
    base64-encoded in the payload's ``bytes`` member."""
    return event_frame("chunk", json.dumps({"bytes": base64.b64encode(data.encode("utf-8")).decode("ascii")}))


def is_frame(raw: bytes) -> bool:
    """Whether ``raw`` is one whole frame (its prelude's total length is its length)."""
    return len(raw) >= _PRELUDE + 4 and int.from_bytes(raw[:4], "big") == len(raw)


def _decode(raw: bytes) -> Any:
    from botocore.eventstream import EventStreamBuffer  # type: ignore[import-untyped]  # imported when a Bedrock stream arrives

    buf = EventStreamBuffer()
    buf.add_data(raw)
    return next(iter(buf))


def _event(raw: bytes) -> SSEEvent:
    msg = _decode(raw)
    headers = msg.headers
    kind = str(headers.get(":message-type", "event"))
    etype = str(headers.get(":exception-type" if kind == "exception" else ":event-type", "") or "") or None
    text = msg.payload.decode("utf-8", "replace")
    if etype == "chunk" and kind == "event":
        try:
            inner = json.loads(text).get("bytes")
            text = base64.b64decode(inner, validate=True).decode("utf-8") if isinstance(inner, str) else text
        except (ValueError, AttributeError, binascii.Error):
            pass
    return SSEEvent(raw, etype if kind == "event" else f"exception:{etype or kind}", text)


class EventStreamParser:
    """Cuts an event-stream into :class:`SSEEvent` frames as bytes arrive. Bytes that are not
    frames (a corrupt prelude or CRC) end the parsing: they and everything after them come back
    as opaque events (``data`` empty), passed on as they came."""

    def __init__(self) -> None:
        self._buf = b""
        self._broken = False

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Frames completed by ``chunk``; ``b""`` (the end) returns what is left as an opaque event."""
        if self._broken:
            return [SSEEvent(chunk, None, "")] if chunk else []
        if not chunk:
            rest, self._buf = self._buf, b""
            return [SSEEvent(rest, None, "")] if rest else []
        self._buf += chunk
        out: list[SSEEvent] = []
        while len(self._buf) >= _PRELUDE:
            total = int.from_bytes(self._buf[:4], "big")
            if not _PRELUDE + 4 <= total <= MAX_FRAME:
                return out + self._break()
            if len(self._buf) < total:
                break
            raw = self._buf[:total]
            try:
                ev = _event(raw)
            except Exception:  # noqa: BLE001 - botocore's ParserError family, or no message
                return out + self._break()
            self._buf = self._buf[total:]
            out.append(ev)
        return out

    def _break(self) -> list[SSEEvent]:
        self._broken = True
        rest, self._buf = self._buf, b""
        return [SSEEvent(rest, None, "")]


class EventStreamFraming:
    """The :class:`~headroom_core.wire.protocol.StreamFraming` of AWS event-stream responses."""

    content_types: tuple[str, ...] = (CONTENT_TYPE,)

    def streams(self, content_type: str) -> bool:
        return CONTENT_TYPE in content_type.lower()

    def parser(self) -> EventStreamParser:
        return EventStreamParser()

    def terminated(self, events: list[SSEEvent]) -> list[SSEEvent]:
        """Whole frames only: a frame the stream's end cut short cannot be ended, it is dropped."""
        return [e for e in events if is_frame(e.raw)]


EVENT_STREAM = EventStreamFraming()
