"""The :class:`AnthropicMessages` dialect (:class:`~headroom_core.wire.protocol.WireDialect`): request side
:mod:`headroom_core.wire.anthropic`, response side :mod:`headroom_core.wire.reply_anthropic`."""

from __future__ import annotations

import json
from typing import Any

from headroom_core.wire import anthropic, calls, image_refs, reply_anthropic
from headroom_core.wire.blocks import ToolCall
from headroom_core.wire.detect import Dialect, path_only
from headroom_core.wire.protocol import DialectBase


class AnthropicMessages(DialectBase):
    """Anthropic Messages API (``POST …/v1/messages``; :mod:`headroom_core.wire.anthropic`)."""

    def __init__(self) -> None:
        super().__init__(
            Dialect.ANTHROPIC_MESSAGES,
            anthropic,
            reply_anthropic,
            "messages",
            "text",
            True,
            False,
            "anthropic",
            count_paths=("/messages/count_tokens",),
        )

    def serves(self, path: str) -> bool:
        """``…/v1/messages``, a bare ``/messages``, or ``…/messages`` under a ``/v1`` path."""
        p = path_only(path)
        return p.endswith("/v1/messages") or p == "/messages" or p.endswith("/messages") and "/v1" in p

    image_finder = staticmethod(image_refs.anthropic_images)

    def shape_error(self, body: dict[str, Any]) -> str:
        return "" if isinstance(body.get("messages"), list) else "no messages list"

    def tool_calls(self, body: dict[str, Any]) -> dict[str, ToolCall]:
        return calls.anthropic_calls(body)

    def cache_lifetime_seconds(self, body: dict[str, Any]) -> float:
        """Anthropic ("Prompt caching", docs.anthropic.com/en/docs/build-with-claude/prompt-caching):
        5 minutes, or 1 hour for breakpoints marked ``"ttl": "1h"``."""
        return 3600.0 if '"ttl":"1h"' in json.dumps(body, separators=(",", ":")) else 300.0
