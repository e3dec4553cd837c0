"""The frozen prefix of a session: what the proxy already sent is sent again, byte for byte.

Per session the proxy remembers, for every message of the conversation list it forwarded, the
SHA-256 of the client's exact JSON text of that message and, when the proxy changed it, the exact
JSON text it sent instead. On the next turn, client messages that match the remembered ones (a
common prefix) are frozen: they go upstream exactly as last time. The first message that does
not match starts the live zone; a mismatch inside the remembered list means the client edited
its history (e.g. compaction), and the session's prefix starts anew from there.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timezone

from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from headroom_core.db.models import FrozenMessage


def message_hash(text: str) -> str:
    """SHA-256 hex of one message's exact JSON text (UTF-8)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class FrozenEntry:
    """Message ``position``: the client's ``client_hash`` and what the proxy sent instead
    (``forwarded_text``), or None when the proxy sent the client's own bytes; ``tokens_*``: the
    estimated tokens of the tool outputs it changed in that message, before and after."""

    position: int
    client_hash: str
    forwarded_text: str | None
    tokens_before: int = 0
    tokens_after: int = 0


@dataclass(frozen=True)
class LiveZone:
    """``start``: index of the first message the proxy may change; ``replay``: ``(index, text)``
    of frozen messages that must be sent as the proxy sent them before; ``history_edited``: the
    client's list diverged from the remembered one before its end; ``tokens_*``: what the
    replayed messages' changes weigh, before and after (estimates)."""

    start: int
    replay: tuple[tuple[int, str], ...]
    history_edited: bool
    tokens_before: int = 0
    tokens_after: int = 0


def live_zone(client_hashes: list[str], frozen: list[FrozenEntry]) -> LiveZone:
    """Pure decision: match the client's message hashes against the remembered entries."""
    replay: list[tuple[int, str]] = []
    before = after = 0
    for i, h in enumerate(client_hashes):
        if i >= len(frozen) or frozen[i].client_hash != h:
            return LiveZone(i, tuple(replay), i < len(frozen), before, after)
        if frozen[i].forwarded_text is not None:
            replay.append((i, frozen[i].forwarded_text))
            before += frozen[i].tokens_before
            after += frozen[i].tokens_after
    n = len(client_hashes)
    return LiveZone(n, tuple(replay), n < len(frozen), before, after)


class FrozenStore:
    """Loads and saves the frozen entries of sessions (database, with an in-memory copy of the
    ``memory_sessions`` most recent sessions)."""

    def __init__(self, sessions: sessionmaker[Session], memory_sessions: int = 64) -> None:
        self._sessions = sessions
        self._mem: OrderedDict[str, list[FrozenEntry]] = OrderedDict()
        self._max = memory_sessions
        self._lock = threading.Lock()

    def load(self, session_key: str) -> list[FrozenEntry]:
        """The remembered entries of ``session_key``, by position (empty for a new session)."""
        with self._lock:
            hit = self._mem.get(session_key)
            if hit is not None:
                self._mem.move_to_end(session_key)
                return list(hit)
        with self._sessions() as s:
            rows = s.scalars(select(FrozenMessage).where(FrozenMessage.session_key == session_key).order_by(FrozenMessage.position))
            entries = [FrozenEntry(r.position, r.client_hash, r.forwarded_text, r.tokens_before, r.tokens_after) for r in rows]
        # only a gap-free prefix is usable
        entries = [e for i, e in enumerate(entries) if e.position == i and all(x.position == j for j, x in enumerate(entries[:i]))]
        self._remember(session_key, entries)
        return list(entries)

    def save(self, session_key: str, entries: list[FrozenEntry], keep: int) -> None:
        """Replace everything from position ``keep`` on with ``entries[keep:]``."""
        now = datetime.now(timezone.utc).replace(tzinfo=None)
        with self._sessions.begin() as s:
            s.execute(delete(FrozenMessage).where(FrozenMessage.session_key == session_key, FrozenMessage.position >= keep))
            for e in entries[keep:]:
                s.add(
                    FrozenMessage(
                        session_key=session_key,
                        position=e.position,
                        client_hash=e.client_hash,
                        forwarded_text=e.forwarded_text,
                        tokens_before=e.tokens_before,
                        tokens_after=e.tokens_after,
                        updated_at=now,
                    )
                )
        self._remember(session_key, list(entries))

    def _remember(self, key: str, entries: list[FrozenEntry]) -> None:
        with self._lock:
            self._mem[key] = entries
            self._mem.move_to_end(key)
            while len(self._mem) > self._max:
                self._mem.popitem(last=False)
