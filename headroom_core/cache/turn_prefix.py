"""One request's prompt prefix compared with the previous turn of its session, as sent upstream:
the facts ``headroom show`` prints (issue 34) and the ledger keeps (``request_outcomes.facts``).

The provider's prompt cache reuses the longest prefix of ``tools``, ``system`` and messages that
is byte-identical to one it saw; so what matters is whether the ``tools`` text is the same as
last turn, whether the system prompt is, and how many leading messages went out in the same
bytes. The previous turn's forwarded messages and tools are the session's stored state
(:class:`~headroom_core.cache.session_store.SessionRecord`); the system prompt is compared by a
keyed hash recorded per request (a later reader compares it with the previous request's).
Pure functions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class TurnPrefix:
    """A request's prefix against the previous turn of its session.

    ``known``: the session had an earlier turn (all other comparisons are against it; when
    False they say nothing). ``messages``: messages this request sent; ``previous_messages``:
    messages the previous turn sent; ``same_messages``: leading messages sent byte for byte as
    the previous turn sent them; ``same_bytes``: UTF-8 bytes of the ``tools`` text and those
    messages when the ``tools`` text is the same (0 otherwise: nothing after it is a cached
    prefix); ``tools_same``: the ``tools`` text (without
    ``cache_control``) equals last turn's (None: no earlier turn); ``first_difference``:
    ``"tools"``, ``"message N"`` (0-based; the first message sent differently, or the first new
    one), or ``""`` when nothing differs; ``system_hash``: 16 hex digits of a keyed hash of the
    system prompt as sent ("" without one)."""

    known: bool
    messages: int
    previous_messages: int
    same_messages: int
    same_bytes: int
    tools_same: bool | None
    first_difference: str
    system_hash: str = ""


def compare_turn(
    known: bool,
    previous: Sequence[str],
    previous_tools: str | None,
    sent: Sequence[tuple[int, int]],
    text: str,
    sent_tools: str | None,
    system_hash: str = "",
    equal: Callable[[str, str], bool] | None = None,
) -> TurnPrefix:
    """Compare a request with its session's previous turn: ``previous`` the JSON texts of the
    messages that turn sent, ``previous_tools`` its ``tools`` text; ``sent`` the spans of this
    request's messages in ``text`` (the body sent) and ``sent_tools`` its ``tools`` text. Only
    the leading equal messages are sliced out of ``text`` (stops at the first difference).
    ``equal(before, now)``, when given, is asked for a message whose bytes differ (e.g. equal
    but for the ``cache_control`` markers, which the provider's prefix does not include)."""
    if not known:
        return TurnPrefix(False, len(sent), 0, 0, 0, None, "", system_hash)
    tools_same = (previous_tools or "") == (sent_tools or "")
    same = 0
    same_bytes = len((sent_tools or "").encode("utf-8", "surrogatepass")) if tools_same else 0
    for (a, b), before in zip(sent, previous):
        if (b - a != len(before) or text[a:b] != before) and (equal is None or not equal(before, text[a:b])):
            break
        same += 1
        if tools_same:  # after a changed tools text nothing is a cached prefix
            same_bytes += len(before.encode("utf-8", "surrogatepass"))
    if not tools_same:
        first = "tools"
    elif same < len(sent):
        first = f"message {same}"
    else:
        first = ""
    return TurnPrefix(True, len(sent), len(previous), same, same_bytes, tools_same, first, system_hash)


def system_digest(digest: Callable[..., str], texts: Sequence[str]) -> str:
    """16 hex digits of ``digest("system", *texts)`` (the system members' JSON texts as sent), ""
    when there are none."""
    return digest("system", *texts)[:16] if texts else ""
