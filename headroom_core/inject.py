"""Appending the proxy's context block to the tail of the latest user message.

Only the latest message may carry it, and only when that message is the user's (Anthropic
``tool_result`` turns are user messages too): ``system`` and ``tools`` are the cached prefix and
never change. On later turns the frozen prefix re-sends the message with the same block.
"""

from __future__ import annotations

from typing import Any

from headroom_core.wire import jsonedit
from headroom_core.wire.detect import Dialect

BLOCK_HEADER = "<headroom-context>"
BLOCK_FOOTER = "</headroom-context>"


def wrap(text: str) -> str:
    """The injected block: ``text`` between the proxy's tags, so the model (and a later turn's
    parser) can tell it from what the user wrote."""
    return f"{BLOCK_HEADER}\n{text.strip()}\n{BLOCK_FOOTER}"


def tail_text_edits(d: Dialect, body: dict[str, Any], text: str) -> list[jsonedit.Edit]:
    """The edits that append ``wrap(text)`` to the latest message, or ``[]`` when the latest
    message is not the user's (the block is then not injected this turn).

    When the client marked the message's last block with ``cache_control``, the marker moves to
    the appended block, so the breakpoint still ends the message (the provider caches the
    context block with it) and the breakpoint count stays the client's.
    """
    key = "input" if d is Dialect.OPENAI_RESPONSES else "messages"
    seq = body.get(key)
    if not isinstance(seq, list) or not seq or not isinstance(seq[-1], dict):
        return []
    last = seq[-1]
    i = len(seq) - 1
    if last.get("role") != "user":
        return []
    block = wrap(text)
    part_type = "input_text" if d is Dialect.OPENAI_RESPONSES else "text"
    content = last.get("content")
    if isinstance(content, str):
        return [jsonedit.Replace((key, i, "content"), [{"type": part_type, "text": content}, {"type": part_type, "text": block}])]
    if isinstance(content, list):
        added: dict[str, Any] = {"type": part_type, "text": block}
        tail = content[-1] if content else None
        if isinstance(tail, dict) and "cache_control" in tail:
            added["cache_control"] = tail["cache_control"]
            return [jsonedit.RemoveMember((key, i, "content", len(content) - 1), "cache_control"), jsonedit.Append((key, i, "content"), added)]
        return [jsonedit.Append((key, i, "content"), added)]
    return []
