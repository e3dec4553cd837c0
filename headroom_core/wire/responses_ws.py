"""OpenAI Responses API over WebSocket: ``response.create`` client frames and server event frames.

Codex opens ``wss://<host>/…/responses`` (``/v1/responses`` on the API, ``/backend-api/codex/
responses`` with a ChatGPT login) and sends one text frame per turn::

    {"type": "response.create", "model": "…", "instructions": "…", "input": [...], "tools": [...], …}

i.e. the body of ``POST …/responses`` with a ``type`` member first (codex-rs
``ResponsesWsRequest::ResponseCreate``, ``#[serde(tag = "type")]``). Some clients nest the body
instead: ``{"type": "response.create", "response": {…}}``; both are understood. The server
answers with the same JSON events the SSE form carries (``response.created`` …
``response.completed``), one per text frame.

This module only parses and splices (no policy): :func:`parse_create` finds the Responses body
inside a frame, :meth:`CreateFrame.with_body` puts a rewritten body back so every byte outside
it stays as the client sent it, :func:`close_reason` builds a close-frame reason that fits.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from headroom_core.wire import jsonedit
from headroom_core.wire.detect import Dialect

CREATE = "response.create"
#: The dialect of a ``response.create`` frame's body (:class:`~headroom_core.wire.dialects.OpenAIResponses`).
DIALECT = Dialect.OPENAI_RESPONSES
#: The path a frame's body is planned under (the dialect is known from the frame itself).
RESPONSES_PATH = "/v1/responses"
#: RFC 6455 §5.5: control frame payloads are at most 125 bytes, 2 of which are the close code.
MAX_CLOSE_REASON_BYTES = 123
#: RFC 6455 §7.4.1: "1009 indicates that an endpoint is terminating the connection because it
#: has received a message that is too big for it to process."
CLOSE_MESSAGE_TOO_BIG = 1009
#: Server events after which the turn a ``response.create`` started is over.
TERMINAL_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed", "error"})

# ``"type":"response.create"`` near the start of a frame, without parsing the whole frame.
_CREATE_SNIFF = re.compile(rb'"type"\s*:\s*"response\.create"')
_SNIFF_BYTES = 4096


@dataclass(frozen=True)
class CreateFrame:
    """A ``response.create`` frame: ``text`` the whole frame (decoded UTF-8), ``start``/``end``
    the character span of the Responses body inside it (the whole frame when the body's
    members are at top level, else the ``response`` member), ``body`` that span's parsed JSON."""

    text: str
    start: int
    end: int
    body: dict[str, Any]
    nested: bool

    @property
    def body_bytes(self) -> bytes:
        """The Responses body exactly as the client sent it (UTF-8 bytes)."""
        return self.text[self.start : self.end].encode("utf-8")

    def with_body(self, new_body: bytes) -> bytes:
        """The frame with its body replaced by ``new_body`` (UTF-8 JSON); bytes outside the body
        are unchanged. Raises ``UnicodeDecodeError`` if ``new_body`` is not UTF-8."""
        return (self.text[: self.start] + new_body.decode("utf-8") + self.text[self.end :]).encode("utf-8")


def is_responses_path(path: str) -> bool:
    """Whether a WebSocket upgrade ``path`` (query allowed) is a Responses endpoint, any host."""
    return path.split("?", 1)[0].split("#", 1)[0].rstrip("/").endswith("/responses")


def looks_like_create(content: bytes) -> bool:
    """A cheap test on the first 4 KiB: does this frame say ``"type": "response.create"``?

    Used to decide about frames too large to parse before refusing them; serialisers put
    ``type`` first (serde's internally tagged enums do)."""
    return _CREATE_SNIFF.search(content[:_SNIFF_BYTES]) is not None


def parse_create(content: bytes) -> CreateFrame | None:
    """The ``response.create`` frame in ``content`` (a text frame's payload), or None when the
    frame is not UTF-8 JSON, not an object, of another ``type``, or carries no ``input``
    (such frames pass unchanged). Never raises."""
    try:
        text = content.decode("utf-8")
        obj = json.loads(text)
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(obj, dict) or obj.get("type") != CREATE:
        return None
    if "input" in obj:
        return CreateFrame(text, 0, len(text), obj, nested=False)
    inner = obj.get("response")
    if isinstance(inner, dict) and "input" in inner:
        try:
            a, b = jsonedit.span(text, ("response",))
        except jsonedit.JSONPathError:
            return None
        return CreateFrame(text, a, b, inner, nested=True)
    return None


def is_continuation(body: dict[str, Any]) -> bool:
    """Whether a ``response.create`` body continues what the socket sent before rather than
    starting afresh: it names a ``previous_response_id`` (its ``input`` then holds only the new
    items; the server keeps the rest), or it is a warm-up (``generate: false``: nothing is
    generated; Codex sends it to prepare the next turn)."""
    prev = body.get("previous_response_id")
    return (isinstance(prev, str) and bool(prev)) or body.get("generate") is False


def event_type(content: bytes) -> str | None:
    """The ``type`` of a server event frame (None when it is not a JSON object)."""
    try:
        obj = json.loads(content)
    except (UnicodeDecodeError, ValueError):
        return None
    return obj.get("type") if isinstance(obj, dict) and isinstance(obj.get("type"), str) else None


def close_reason(text: str) -> str:
    """``text`` cut to fit a close frame (at most 123 bytes of UTF-8, whole characters)."""
    raw = text.encode("utf-8")
    if len(raw) <= MAX_CLOSE_REASON_BYTES:
        return text
    return raw[:MAX_CLOSE_REASON_BYTES].decode("utf-8", "ignore")


def too_large_reason(size: int, limit: int) -> str:
    """The close reason for a frame of ``size`` bytes over ``limit`` bytes: says what to do."""
    return close_reason(
        f"headroom: request of {size} B exceeds {limit} B. Compact your context (/compact), then retry; a resend fails again."
    )


def not_compressed_reason(size: int, limit: int) -> str:
    """The close reason for a frame of ``size`` bytes the proxy could not compress (error or
    timeout) that is over ``limit`` bytes (``fail_open_max_bytes``), so it is not sent as is."""
    return close_reason(
        f"headroom: could not compress this {size} B request (> {limit} B). Compact your context (/compact), then retry."
    )
