"""The :class:`OpenAIChat` dialect (:class:`~headroom_core.wire.protocol.WireDialect`): request side
:mod:`headroom_core.wire.openai_chat`, response side :mod:`headroom_core.wire.reply_chat`."""

from __future__ import annotations

from typing import Any

from headroom_core.wire import calls, image_refs, openai_chat, reply_chat
from headroom_core.wire.blocks import ToolCall
from headroom_core.wire.detect import Dialect
from headroom_core.wire.protocol import DialectBase


class OpenAIChat(DialectBase):
    """OpenAI Chat Completions (``POST …/chat/completions``; :mod:`headroom_core.wire.openai_chat`)."""

    def __init__(self) -> None:
        super().__init__(
            Dialect.OPENAI_CHAT, openai_chat, reply_chat, "messages", "text", False, paths=("/chat/completions",)
        )

    image_finder = staticmethod(image_refs.chat_images)

    def shape_error(self, body: dict[str, Any]) -> str:
        return "" if isinstance(body.get("messages"), list) else "no messages list"

    def tool_calls(self, body: dict[str, Any]) -> dict[str, ToolCall]:
        return calls.chat_calls(body)
