"""The originals store: byte-exact offloaded text under its retrieval key, per scope, sealed.

Originals belong to the scope (project and client identity) that stored them and are found
only from it. They live for ``ttl_seconds`` since they were last stored, refreshed or read,
survive restarts (they are rows in the database, sealed with :class:`~headroom_core.db.sealed.Sealer`),
and the total is bounded by ``max_bytes`` with least-recently-used eviction. Every call is one
short unit of work (one SQLAlchemy session).

A live session keeps its originals alive: each request that re-sends a tool output whose
marker the proxy forwards refreshes the original (:meth:`OriginalsStore.keep`), storing it again
from the client's copy when it had expired or was evicted.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Sequence

from sqlalchemy import CursorResult, Result, delete, func, select, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from headroom_core.db import lock_wait
from headroom_core.db.models import Original
from headroom_core.db.sealed import SECRET_BYTES, Sealer
from headroom_core.db.upsert import upsert_many

log = logging.getLogger("headroom")


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def _rowcount(result: Result[Any]) -> int:
    """Rows an UPDATE or DELETE matched: ``Session.execute`` is typed to return a ``Result``; for
    those statements it is a ``CursorResult``, which has ``rowcount``."""
    assert isinstance(result, CursorResult)
    return result.rowcount or 0


@dataclass(frozen=True)
class Retrieved:
    """What a retrieval found: ``text`` is None when the key is unknown, expired or of another
    scope (the three are indistinguishable to the caller)."""

    key: str
    text: str | None
    kind: str = ""


def _row(scope: str, key: str) -> str:
    return f"original:{scope}:{key}"


class OriginalsStore:
    """Put, get, keep alive and evict originals. ``ttl_seconds`` seconds, ``max_bytes`` bytes of
    UTF-8 text in all; ``sealer`` seals them at rest (None: a key of this process only, so what
    it stores is unreadable after it ends — for tools that need no persistence)."""

    #: A kept-alive original is written again at most once per this share of the TTL.
    REFRESH_SHARE = 0.1

    def __init__(
        self, sessions: sessionmaker[Session], ttl_seconds: int, max_bytes: int, sealer: Sealer | None = None
    ) -> None:
        self._sessions = sessions
        self._ttl = timedelta(seconds=ttl_seconds)
        self._max_bytes = max_bytes
        self._sealer = sealer or Sealer(secrets.token_bytes(SECRET_BYTES))
        self._refreshed: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()

    def put(self, key: str, text: str, kind: str, scope: str = "") -> None:
        """Store ``text`` under ``key`` in ``scope`` (refreshing its time if already there), then
        evict. Raises SQLAlchemy errors."""
        self.put_many([(key, text, kind)], scope)
        self.evict()

    def put_many(
        self, originals: Sequence[tuple[str, str, str]], scope: str = "", also: Callable[[Session], None] | None = None
    ) -> None:
        """Store every ``(key, text, kind)`` of ``originals`` in ``scope`` (refreshing the time of
        those already there) in one transaction, with ``also(session)``: the caller's writes that
        must commit with them or not at all (the decisions that name them). Sealed before the
        transaction begins. No eviction: the caller runs :meth:`evict` later, off the request's
        path. Raises SQLAlchemy's errors; then nothing of it is stored."""
        now = _now()
        unique = {key: (key, text, kind) for key, text, kind in originals}  # a key is its text's hash
        rows = [
            dict(scope=scope, key=key, data=self._sealer.seal(text, _row(scope, key)), kind=kind,
                 size_bytes=len(text.encode("utf-8", "surrogatepass")), created_at=now, last_used_at=now)
            for key, text, kind in unique.values()
        ]  # fmt: skip
        with self._sessions.begin() as s:
            upsert_many(s, Original, rows, ["scope", "key"], update=["last_used_at"])
            if also is not None:
                also(s)
        t = time.monotonic()
        with self._lock:
            for key in unique:
                self._refreshed[(scope, key)] = t

    def keep(self, key: str, text: str, scope: str = "", kind: str = "original") -> None:
        """Keep the original ``text`` of ``key`` retrievable: refresh its time (at most once per
        :data:`REFRESH_SHARE` of the TTL per process), or store it again when it is gone."""
        t = time.monotonic()
        with self._lock:
            last = self._refreshed.get((scope, key))
            if last is not None and t - last < self._ttl.total_seconds() * self.REFRESH_SHARE:
                return
        now = _now()
        with self._sessions.begin() as s:
            n = _rowcount(
                s.execute(
                    update(Original)
                    .where(Original.scope == scope, Original.key == key, Original.last_used_at >= now - self._ttl)
                    .values(last_used_at=now)
                )
            )
        if n:
            with self._lock:
                self._refreshed[(scope, key)] = t
            return
        self.put(key, text, kind, scope)

    def get(self, key: str, scope: str = "") -> Retrieved:
        """The original under ``key`` in ``scope`` (refreshing its time), or ``text=None``. A read,
        then the refresh in its own transaction: a database that cannot take the refresh (held
        locked by another process past the caller's lock-wait budget,
        :mod:`headroom_core.db.lock_wait`; full; read-only) still answers, the refresh skipped
        (logged). Raises SQLAlchemy's errors of the read."""
        now = _now()
        with self._sessions() as s:
            row = s.get(Original, (scope, key))
            if row is None or row.last_used_at < now - self._ttl:
                return Retrieved(key=key, text=None)
            text = self._sealer.open(row.data, _row(scope, key))
            if text is None:
                return Retrieved(key=key, text=None)
            kind = row.kind
        try:
            with self._sessions.begin() as s:
                s.execute(update(Original).where(Original.scope == scope, Original.key == key).values(last_used_at=now))
        except SQLAlchemyError as e:
            why = (
                "the database is locked by another process"
                if lock_wait.is_lock_wait(e)
                else f"the database refused it: {type(e).__name__}"
            )
            log.warning("headroom: %s; original %s answered without refreshing its time", why, key[:16])
        return Retrieved(key=key, text=text, kind=kind)

    def evict(self) -> int:
        """Delete expired originals, then the least recently used until under ``max_bytes``.

        Returns the number of rows deleted.
        """
        now = _now()
        deleted = 0
        with self._sessions.begin() as s:
            deleted += _rowcount(s.execute(delete(Original).where(Original.last_used_at < now - self._ttl)))
            total = s.scalar(select(func.coalesce(func.sum(Original.size_bytes), 0))) or 0
            if total <= self._max_bytes:
                return deleted
            for scope, key, size in s.execute(
                select(Original.scope, Original.key, Original.size_bytes).order_by(Original.last_used_at, Original.key)
            ):
                if total <= self._max_bytes:
                    break
                s.execute(delete(Original).where(Original.scope == scope, Original.key == key))
                total -= size
                deleted += 1
        with self._lock:
            self._refreshed.clear()
        return deleted
