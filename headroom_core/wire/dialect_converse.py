"""Amazon Bedrock's Converse API as a dialect (:class:`BedrockConverse`): ``POST
/model/{modelId}/converse`` (one response) and ``/model/{modelId}/converse-stream`` (AWS
event-stream), any model family; request side :mod:`headroom_core.wire.converse`, response side
:mod:`headroom_core.wire.reply_converse`. The model id is URL-encoded in the path, as for
InvokeModel (:mod:`headroom_core.wire.dialect_bedrock`).

The tools live below ``toolConfig`` (``tools_path``); the prompt cache's checkpoints are
``cachePoint`` blocks (in ``system``, ``toolConfig.tools`` and message content), which the proxy
never adds, drops or moves: they are its breakpoints, counted as ``cache_control`` is for the
Messages API (``cache_marker``). Bedrock keeps a cached prefix five minutes after its last use
("Prompt caching for faster model inference", Bedrock user guide).

Auth: SigV4 signs the body (such requests pass byte-identical: :mod:`headroom_core.wire.signed`,
unless ``bedrock_resign`` signs them again with the user's own key: :mod:`headroom_core.wire.sigv4`);
a Bedrock API key (``Authorization: Bearer …``) signs nothing, so its requests are compressed.
Errors: ``{"message"}``. Bedrock's CountTokens (``/model/{id}/count-tokens``) wraps the body in
another envelope and is left as sent.
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping

from headroom_core.wire import converse, reply_converse
from headroom_core.wire.blocks import ToolCall
from headroom_core.wire.detect import Dialect, path_only
from headroom_core.wire.dialect_bedrock import UNDER, model_in_path
from headroom_core.wire.protocol import DialectBase
from headroom_core.wire.tool_defs import ToolShape

#: The operations after ``/model/{modelId}``.
CONVERSE = ("/converse", "/converse-stream")


class BedrockConverse(DialectBase):
    """Bedrock Converse (``POST /model/{modelId}/converse`` and ``/converse-stream``)."""

    def __init__(self) -> None:
        super().__init__(
            Dialect.BEDROCK_CONVERSE, converse, reply_converse, converse.CONVERSATION, "text", True,
            cache_parts=(converse.TOOL_CONFIG, converse.SYSTEM, converse.CONVERSATION), tools_key=converse.TOOL_CONFIG,
            tools_under=converse.TOOLS_PATH[1:], system_keys=(converse.SYSTEM,), cache_marker=converse.CACHE_POINT,
        )  # fmt: skip

    def serves(self, path: str) -> bool:
        p = path_only(path)
        return UNDER in p and p.endswith(CONVERSE)

    def counts(self, path: str) -> bool:
        return False

    def shape_error(self, body: dict[str, Any]) -> str:
        return converse.shape_error(body)

    def model_of(self, body: dict[str, Any], path: str) -> str:
        return model_in_path(path)

    def tool_calls(self, body: dict[str, Any]) -> dict[str, ToolCall]:
        return converse.tool_calls(body)

    def forced_tool_names(self, body: Mapping[str, Any]) -> set[str]:
        return converse.forced_tool_names(dict(body))

    def tool_shape(self, tool: Any) -> ToolShape | None:
        """A ``toolSpec`` tool (its schema under ``inputSchema.json``); a ``cachePoint`` is none."""
        return converse.tool_shape(tool)

    def user_texts(self, item: Any) -> Iterator[str]:
        return converse.user_texts(item)

    def cache_lifetime_seconds(self, body: dict[str, Any]) -> float:
        return 300.0

    # -- body layout --------------------------------------------------------------------------

    def conversation_of(self, body: Mapping[str, Any]) -> Any:
        return body.get(converse.CONVERSATION)

    def system_member(self, body: Mapping[str, Any]) -> Any:
        return body.get(converse.SYSTEM)

    def system_value(self, body: Mapping[str, Any]) -> Any:
        return body.get(converse.SYSTEM)

    def system_text(self, body: Mapping[str, Any]) -> str:
        s = body.get(converse.SYSTEM)
        return (
            "\n".join(b["text"] for b in s if isinstance(b, dict) and isinstance(b.get("text"), str))
            if isinstance(s, list)
            else ""
        )

    def element_shape(self, m: Any) -> Any:
        return converse.element_shape(m)

    def prompt_parts(self, body: Mapping[str, Any]) -> list[tuple[Any, str]]:
        """``toolConfig.tools`` entries, ``system`` blocks, then each message's blocks (the
        first with its role), in Bedrock's cache order."""
        out: list[tuple[Any, str]] = [(t, "") for t in converse.tools(dict(body))]
        s = body.get(converse.SYSTEM)
        out += [(b, "") for b in s] if isinstance(s, list) else []
        for m in body.get(converse.CONVERSATION) or []:
            role = str(m.get("role", "")) if isinstance(m, dict) else ""
            blocks = m.get("content") if isinstance(m, dict) else None
            if isinstance(blocks, list):
                out += [(b, role if i == 0 else "") for i, b in enumerate(blocks)]
            else:
                out.append((m, role))
        return out

    def text_block(self, text: str) -> dict[str, Any]:
        return {"text": text}
