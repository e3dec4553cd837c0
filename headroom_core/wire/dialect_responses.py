"""The :class:`OpenAIResponses` dialect (:class:`~headroom_core.wire.protocol.WireDialect`): request side
:mod:`headroom_core.wire.openai_responses`, response side :mod:`headroom_core.wire.reply_responses`."""

from __future__ import annotations

from typing import Any

from headroom_core.wire import calls, image_refs, openai_responses, reply_responses
from headroom_core.wire.blocks import ToolCall
from headroom_core.wire.detect import Dialect
from headroom_core.wire.protocol import DialectBase


class OpenAIResponses(DialectBase):
    """OpenAI Responses API (``POST …/responses`` and WebSocket ``response.create`` frames;
    :mod:`headroom_core.wire.openai_responses`)."""

    def __init__(self) -> None:
        super().__init__(
            Dialect.OPENAI_RESPONSES, openai_responses, reply_responses, "input", "input_text", False, True,
            paths=("/responses",), count_paths=("/responses/input_tokens",),
        )  # fmt: skip

    image_finder = staticmethod(image_refs.responses_images)

    def shape_error(self, body: dict[str, Any]) -> str:
        return "" if "input" in body else "no input"

    def tool_calls(self, body: dict[str, Any]) -> dict[str, ToolCall]:
        return calls.responses_calls(body)
