"""The originals store: byte-exact offloaded text under its retrieval key.

Originals live for ``ttl_seconds`` since they were last stored or read, survive restarts (they
are rows in the database), and the total is bounded by ``max_bytes`` with least-recently-used
eviction. Every call is one short unit of work (one SQLAlchemy session).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session, sessionmaker

from headroom_core.db.models import Original


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


@dataclass(frozen=True)
class Retrieved:
    """What a retrieval found: ``text`` is None when the key is unknown or expired."""

    key: str
    text: str | None
    kind: str = ""


class OriginalsStore:
    """Put, get and evict originals. ``ttl_seconds`` seconds, ``max_bytes`` bytes of UTF-8 text."""

    def __init__(self, sessions: sessionmaker[Session], ttl_seconds: int, max_bytes: int) -> None:
        self._sessions = sessions
        self._ttl = timedelta(seconds=ttl_seconds)
        self._max_bytes = max_bytes

    def put(self, key: str, text: str, kind: str) -> None:
        """Store ``text`` under ``key`` (or refresh its time if already there), then evict."""
        now = _now()
        size = len(text.encode("utf-8", "surrogatepass"))
        with self._sessions.begin() as s:
            row = s.get(Original, key)
            if row is None:
                s.add(Original(key=key, text=text, kind=kind, size_bytes=size, created_at=now, last_used_at=now))
            else:
                row.last_used_at = now
        self.evict()

    def get(self, key: str) -> Retrieved:
        """The original under ``key`` (refreshing its time), or ``text=None`` if unknown or expired."""
        now = _now()
        with self._sessions.begin() as s:
            row = s.get(Original, key)
            if row is None or row.last_used_at < now - self._ttl:
                return Retrieved(key=key, text=None)
            row.last_used_at = now
            return Retrieved(key=key, text=row.text, kind=row.kind)

    def evict(self) -> int:
        """Delete expired originals, then the least recently used until under ``max_bytes``.

        Returns the number of rows deleted.
        """
        now = _now()
        deleted = 0
        with self._sessions.begin() as s:
            deleted += s.execute(delete(Original).where(Original.last_used_at < now - self._ttl)).rowcount or 0
            total = s.scalar(select(func.coalesce(func.sum(Original.size_bytes), 0))) or 0
            if total <= self._max_bytes:
                return deleted
            for key, size in s.execute(select(Original.key, Original.size_bytes).order_by(Original.last_used_at, Original.key)):
                if total <= self._max_bytes:
                    break
                s.execute(delete(Original).where(Original.key == key))
                total -= size
                deleted += 1
        return deleted
