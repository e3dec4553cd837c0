"""Newline-delimited JSON streams (Ollama's ``application/x-ndjson``), as a
:class:`~headroom_core.wire.protocol.StreamFraming`: one JSON object a line, each an
:class:`~headroom_core.wire.sse.SSEEvent` whose ``raw`` is the line with its ``\\n`` and ``data``
the line's text."""

from __future__ import annotations

from headroom_core.wire.sse import SSEEvent

#: Content types of such streams (``application/x-ndjson``; ``application/jsonl`` as some servers say).
CONTENT_TYPES = ("application/x-ndjson", "application/jsonl", "application/ndjson")


class NDJSONParser:
    """Cuts a stream into lines as bytes arrive; ``feed(b"")`` returns a last line without ``\\n``."""

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        if not chunk:
            rest, self._buf = self._buf, b""
            return [SSEEvent(rest, None, rest.decode("utf-8", "replace").strip())] if rest else []
        self._buf += chunk
        *lines, self._buf = self._buf.split(b"\n")
        return [SSEEvent(line + b"\n", None, line.decode("utf-8", "replace").strip()) for line in lines]


class NDJSONFraming:
    """The :class:`~headroom_core.wire.protocol.StreamFraming` of NDJSON streams."""

    content_types: tuple[str, ...] = CONTENT_TYPES

    def streams(self, content_type: str) -> bool:
        ct = content_type.lower()
        return any(t in ct for t in CONTENT_TYPES)

    def parser(self) -> NDJSONParser:
        return NDJSONParser()

    def terminated(self, events: list[SSEEvent]) -> list[SSEEvent]:
        """A last line cut short is ended with ``\\n`` when it is JSON, else dropped."""
        out = []
        for ev in events:
            if ev.raw.endswith(b"\n"):
                out.append(ev)
            elif ev.parsed is not None:
                out.append(SSEEvent(ev.raw + b"\n", None, ev.data))
        return out


NDJSON = NDJSONFraming()
