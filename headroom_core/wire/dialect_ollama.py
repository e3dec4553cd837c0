"""The :class:`OllamaChat` dialect (:class:`~headroom_core.wire.protocol.WireDialect`): Ollama's
``POST /api/chat`` (a local model server, or any host speaking its API); request side
:mod:`headroom_core.wire.ollama`, response side :mod:`headroom_core.wire.reply_ollama` (NDJSON
streams). ``/api/generate`` (one prompt, no tools) is left as sent.

The body's layout is the Chat Completions one (``messages`` with ``system`` messages, ``tools``),
so the default layout reads it. Ollama has no priced prompt cache: its server reuses the KV cache
of a shared prefix while the model stays loaded (``keep_alive``, 5 minutes by default).
"""

from __future__ import annotations

from typing import Any

from headroom_core.wire import ollama, reply_ollama
from headroom_core.wire.blocks import ToolCall
from headroom_core.wire.detect import Dialect
from headroom_core.wire.protocol import DialectBase


class OllamaChat(DialectBase):
    """Ollama chat (``POST …/api/chat``)."""

    def __init__(self) -> None:
        super().__init__(Dialect.OLLAMA_CHAT, ollama, reply_ollama, "messages", "text", False, paths=("/api/chat",))

    def shape_error(self, body: dict[str, Any]) -> str:
        if not isinstance(body.get("messages"), list):
            return "no messages list"
        return "" if isinstance(body.get("model"), str) else "no model"

    def tool_calls(self, body: dict[str, Any]) -> dict[str, ToolCall]:
        return ollama.tool_calls(body)

    def cache_lifetime_seconds(self, body: dict[str, Any]) -> float:
        """How long the server keeps the model (and its KV cache) loaded: ``keep_alive`` in
        seconds when a number, else Ollama's default of 5 minutes."""
        ka = body.get("keep_alive")
        return float(ka) if isinstance(ka, (int, float)) and ka > 0 else 300.0
