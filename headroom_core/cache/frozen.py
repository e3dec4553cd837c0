"""The frozen prefix of a session: what the proxy already sent is sent again, byte for byte.

Per session the proxy remembers, for every message of the conversation list it forwarded, the
keyed hash of the client's exact JSON text of that message (``raw_hash``), the keyed hash of its
content modulo ``cache_control`` and string-vs-text-block (``norm_hash``,
:func:`headroom_core.cache.carry.norm_hash`) and the exact JSON text it sent. On the next turn,
client messages that match the remembered ones (a common prefix) are frozen: they go upstream
as last time, with the client's current ``cache_control`` markers carried onto them (a client
that re-sends a message in the same bytes gets the same bytes sent; one that only moved its
markers or wrote a string as one text block gets the earlier bytes with its markers). The first message that does not match starts the live zone; a
mismatch inside the remembered list means the client edited its history (e.g. compaction), and
the session's prefix starts anew from there.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable


@dataclass(frozen=True)
class FrozenEntry:
    """Message ``position`` as the client sent it (``raw_hash``, ``norm_hash``), the exact text
    the proxy sent (``sent_text``) and whether that differs from the client's bytes
    (``modified``: compressed outputs, an injected block); ``tokens_*``: estimated tokens of the tool outputs it changed in that message, before and
    after; ``offloads``: ``(retrieval key, path of the original's text inside the message)`` of
    every original its markers name (the client re-sends the original there); ``blocks``:
    ``(kind, tool name, tokens before, tokens after)`` of each tool output it changed (what a
    replay of it saves, by kind, for the ledger); ``deferred``: the paths inside the message of
    the tool outputs it sent whole for want of time (a :data:`~headroom_core.compress.result.DEFERRED`
    decision), which a later turn may compress once (:mod:`headroom_core.cache.late`)."""

    position: int
    raw_hash: str
    norm_hash: str
    sent_text: str
    modified: bool = False
    tokens_before: int = 0
    tokens_after: int = 0
    offloads: tuple[tuple[str, tuple], ...] = ()
    blocks: tuple[tuple[str, str, int, int], ...] = ()
    deferred: tuple[tuple, ...] = ()


@dataclass(frozen=True)
class LiveZone:
    """``start``: index of the first message the proxy may change; ``replay``: ``(index, text)``
    of frozen messages to send as the proxy sent them before (markers carried); ``entries``:
    the frozen entries as they stand after this request (hashes of the client's current bytes);
    ``history_edited``: the client's list diverged from the remembered one before its end;
    ``tokens_*``: what the replayed messages' changes weigh, before and after (estimates);
    ``blocks``: the changed tool outputs of the replayed messages (see :class:`FrozenEntry`)."""

    start: int
    replay: tuple[tuple[int, str], ...]
    entries: tuple[FrozenEntry, ...] = ()
    history_edited: bool = False
    tokens_before: int = 0
    tokens_after: int = 0
    blocks: tuple[tuple[str, str, int, int], ...] = ()


def live_zone(
    raw_hashes: list[str],
    frozen: list[FrozenEntry],
    norm_of: Callable[[int], str],
    carry_onto: Callable[[int, FrozenEntry], str | None],
) -> LiveZone:
    """Pure decision: match the client's messages against the remembered entries.

    ``raw_hashes[i]`` is the keyed hash of the client's message ``i``; ``norm_of(i)`` its
    normal hash (asked only when the raw hash differs); ``carry_onto(i, entry)`` the proxy's
    earlier text of message ``i`` (``entry.sent_text``) with the client's current breakpoints
    (None: cannot be carried, the message is then live). A message matched by its normal hash only is replayed
    from the earlier bytes even when the proxy had not changed it (``modified`` then turns on:
    the bytes sent differ from the client's current ones).
    """
    replay: list[tuple[int, str]] = []
    entries: list[FrozenEntry] = []
    blocks: list[tuple[str, str, int, int]] = []
    before = after = 0
    for i, h in enumerate(raw_hashes):
        if i >= len(frozen):
            break
        e = frozen[i]
        if e.raw_hash != h:
            if e.norm_hash != norm_of(i):
                break
            moved = carry_onto(i, e)
            if moved is None:
                break
            e = replace(e, raw_hash=h, sent_text=moved, modified=True)
        entries.append(e)
        if e.modified:
            replay.append((i, e.sent_text))
            before += e.tokens_before
            after += e.tokens_after
            blocks.extend(e.blocks)
    start = len(entries)
    return LiveZone(start, tuple(replay), tuple(entries), start < len(frozen), before, after, tuple(blocks))
