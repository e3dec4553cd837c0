"""The ``headroom_retrieve`` tool: its definition and the proxy's answer to a call."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from headroom_core.ccr.store import OriginalsStore
from headroom_core.compress.markers import normalize_key
from headroom_core.wire.blocks import ErrorAnswer, ImageAnswer, ToolCall

if TYPE_CHECKING:
    from headroom_core.extensions import RequestContext
    from headroom_core.runtime import Runtime

TOOL_NAME = "headroom_retrieve"
TOOL_DESCRIPTION = (
    "Get back content that the proxy shortened. Tool outputs in this conversation may contain "
    "markers like [headroom omitted 480 of 500 items; headroom_retrieve key=<24 hex digits>]. "
    "Call this tool with that key to receive the complete original output, byte for byte, "
    "when the omitted part matters for the task."
)
TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"key": {"type": "string", "description": "The 24-hex-digit key from the marker."}},
    "required": ["key"],
}


def answer(call: ToolCall, store: OriginalsStore, scope: str = "") -> str:
    """The tool result text for one ``headroom_retrieve`` call made in ``scope``: the original,
    or an :class:`~headroom_core.wire.blocks.ErrorAnswer` that says what was wrong (missing key
    argument, malformed key, unknown key, an image original that cannot be read). A
    key stored in another scope (project or client identity) gets the same answer as an unknown
    key."""
    args = call.arguments
    raw = args.get("key") if isinstance(args, dict) else None
    if raw is None:
        return ErrorAnswer('headroom_retrieve error: the call needs a "key" argument (24 hex digits from a marker).')
    key = normalize_key(raw)
    if key is None:
        return ErrorAnswer(
            f"headroom_retrieve error: {str(raw)[:80]!r} is not a retrieval key (24 hex digits from a marker)."
        )
    found = store.get(key, scope)
    if found.text is None:
        return ErrorAnswer(
            f"headroom_retrieve error: no original is stored under key {key} (unknown, or expired); work with the shortened output."
        )
    if found.kind == "image":
        return image_answer(key, found.text)
    return found.text


def image_answer(key: str, data_url: str) -> str:
    """The answer for an image original (stored as its ``data:`` URL, kind ``"image"``): an
    :class:`~headroom_core.wire.blocks.ImageAnswer` that each dialect sends as an image."""
    from headroom_core.compress.images import parse_data_url

    parsed = parse_data_url(data_url)
    if parsed is None:
        return ErrorAnswer(f"headroom_retrieve error: the original stored under key {key} is not a readable image.")
    return ImageAnswer(
        f"The full-size original image (key {key}, {parsed.media_type}, {len(parsed.data)} bytes):",
        parsed.media_type,
        data_url.split(",", 1)[1],
    )


class RetrieveTool:
    """``headroom_retrieve`` as a proxy tool: offered to every session whose first request is
    an agent's (it offers tools or holds tool outputs) and at least ``retrieve_min_bytes`` (not
    a toy's: a small session would pay the definition on every turn for outputs too small to
    compress), for the whole session
    (decided at its first request, so ``tools`` never changes mid-session); answered from the
    originals store of the request's scope."""

    name = TOOL_NAME
    description = TOOL_DESCRIPTION
    schema = TOOL_SCHEMA

    def offered(self, rt: "Runtime", ctx: "RequestContext") -> bool:
        if not rt.settings.compress or ctx.size < rt.settings.retrieve_min_bytes:
            return False
        tools = ctx.view.tools
        return bool(isinstance(tools, list) and tools) or bool(ctx.view.tool_outputs)

    def answer(self, rt: "Runtime", ctx: "RequestContext | None", call: ToolCall) -> str:
        if ctx is None:
            return f"{self.name} error: the proxy lost this request's context; try again in the next turn."
        return answer(call, rt.store, ctx.scope)
