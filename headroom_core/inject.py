"""Appending the proxy's context block to the tail of the latest user message.

Only the latest message may carry it, and only when that message is the user's (Anthropic
``tool_result`` turns are user messages too): ``system`` and ``tools`` are the cached prefix and
never change. On later turns the frozen prefix re-sends the message with the same block.
"""

from __future__ import annotations

from typing import Any

from headroom_core.wire import jsonedit
from headroom_core.wire.detect import Dialect
from headroom_core.wire.request_view import RequestView, view_of

BLOCK_HEADER = "<headroom-context>"
BLOCK_FOOTER = "</headroom-context>"


def wrap(text: str) -> str:
    """The injected block: ``text`` between the proxy's tags, so the model (and a later turn's
    parser) can tell it from what the user wrote."""
    return f"{BLOCK_HEADER}\n{text.strip()}\n{BLOCK_FOOTER}"


def tail_text_edits(d: Dialect | RequestView, body: dict[str, Any], text: str) -> list[jsonedit.Edit]:
    """The edits that append ``wrap(text)`` to the latest message, or ``[]`` when the latest
    message is not the user's (the block is then not injected this turn).

    When the client marked the message's last block with ``cache_control``, the marker moves to
    the appended block, so the breakpoint still ends the message (the provider caches the
    context block with it) and the breakpoint count stays the client's. ``d``: the dialect, or
    the request's :class:`~headroom_core.wire.request_view.RequestView` (then ``body`` is its body).
    """
    v = d if isinstance(d, RequestView) else view_of(d, body)
    seq = v.conversation
    if not seq or not isinstance(seq[-1], dict) or not v.latest_is_user:
        return []
    last = seq[-1]
    i = len(seq) - 1
    block = wrap(text)
    key = v.dialect.content_key
    content = last.get(key)
    at = v.path_of(i, key)
    if isinstance(content, str):
        return [jsonedit.Replace(at, [v.text_part(content), v.text_part(block)])]
    if isinstance(content, list):
        added: dict[str, Any] = v.text_part(block)
        tail = content[-1] if content else None
        if isinstance(tail, dict) and "cache_control" in tail:
            added["cache_control"] = tail["cache_control"]
            return [jsonedit.RemoveMember(at + (len(content) - 1,), "cache_control"), jsonedit.Append(at, added)]
        return [jsonedit.Append(at, added)]
    return []
