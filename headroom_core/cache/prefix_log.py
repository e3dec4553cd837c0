"""The log of cache prefixes: which system prompt and tools each session used, and what changed
compared with the prefix before it (the volatile parts that broke the provider's cache).

Comparisons never cross projects: a prefix is compared with the session's own previous prefix,
else with the most similar recent prefix of the same project and dialect.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import asdict, dataclass
from datetime import datetime, timezone

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from headroom_core.cache.models import CachePrefix, CacheSessionPrefix
from headroom_core.cache.volatile import Change, Prefix, PrefixDiff, diff_prefix, nearest
from headroom_core.db.upsert import insert_ignore

#: Recent prefixes of the same project a new one is compared with.
CANDIDATES = 16
#: Distinct prefixes kept per project (older ones are deleted; their diffs stay recorded).
KEEP_PER_PROJECT = 64


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def _prefix(row: CachePrefix) -> Prefix:
    return Prefix(row.system_text, tuple((str(n), str(h)) for n, h in json.loads(row.tools_json)))


class PrefixLog:
    """Records the prefix of every request, cheaply: a session's prefix is looked up in memory
    (``memory_sessions`` recent sessions) and reaches the database only when it is new for the
    session (the first request of a session, or a prefix change).
    """

    def __init__(self, sessions: sessionmaker[Session], memory_sessions: int = 1024) -> None:
        self._sessions = sessions
        self._seen: OrderedDict[str, str] = OrderedDict()
        self._max = memory_sessions
        self._lock = threading.Lock()

    def observe(self, session_key: str, project: str, dialect: str, client: str, prefix: Prefix) -> PrefixDiff | None:
        """Record that ``session_key`` sent ``prefix``; return the diff recorded when the prefix
        is new for the session (None when it was seen before, or there was nothing to compare
        with)."""
        fp = prefix.fingerprint
        with self._lock:
            if self._seen.get(session_key) == fp:
                self._seen.move_to_end(session_key)
                return None
        project = project[:512]
        now = _now()
        diff: PrefixDiff | None = None
        try:
            diff = self._record(session_key, project, dialect, client, fp, prefix, now)
        except IntegrityError:  # another proxy process recorded the same prefix a moment ago
            diff = None
        with self._lock:
            self._seen[session_key] = fp
            self._seen.move_to_end(session_key)
            while len(self._seen) > self._max:
                self._seen.popitem(last=False)
        return diff

    def _record(
        self, session_key: str, project: str, dialect: str, client: str, fp: str, prefix: Prefix, now: datetime
    ) -> PrefixDiff | None:
        diff: PrefixDiff | None = None
        with self._sessions.begin() as s:
            if s.get(CacheSessionPrefix, (session_key, fp)) is None:
                prev_fp, diff = self._compare(s, session_key, project, dialect, fp, prefix)
                row = s.get(CachePrefix, fp)
                if row is None:  # ON CONFLICT DO NOTHING: another proxy may record it at the same moment
                    insert_ignore(
                        s,
                        CachePrefix,
                        dict(
                            fingerprint=fp,
                            project=project,
                            dialect=dialect,
                            system_text=prefix.system,
                            tools_json=json.dumps(prefix.tools),
                            created_at=now,
                            last_seen_at=now,
                        ),
                        ["fingerprint"],
                    )
                else:
                    row.last_seen_at = now
                insert_ignore(
                    s,
                    CacheSessionPrefix,
                    dict(
                        session_key=session_key,
                        fingerprint=fp,
                        project=project,
                        dialect=dialect,
                        client=client[:64],
                        previous_fingerprint=prev_fp,
                        similarity=diff.similarity if diff else None,
                        changes=json.dumps([asdict(c) for c in diff.changes] if diff else []),
                        first_seen_at=now,
                    ),
                    ["session_key", "fingerprint"],
                )  # the same session through two proxies at once: recorded once
                s.flush()
                self._prune(s, project)
        return diff

    def _compare(
        self, s: Session, session_key: str, project: str, dialect: str, fp: str, prefix: Prefix
    ) -> tuple[str | None, PrefixDiff | None]:
        own = s.execute(
            select(CachePrefix)
            .join(CacheSessionPrefix, CacheSessionPrefix.fingerprint == CachePrefix.fingerprint)
            .where(CacheSessionPrefix.session_key == session_key)
            .order_by(CacheSessionPrefix.first_seen_at.desc())
            .limit(1)
        ).scalar_one_or_none()
        if own is not None:
            return own.fingerprint, diff_prefix(_prefix(own), prefix)
        known = s.get(CachePrefix, fp)
        if known is not None and known.project == project:  # an earlier session sent the same prefix
            return fp, PrefixDiff((), 1.0, False)
        rows = s.scalars(
            select(CachePrefix)
            .where(CachePrefix.project == project, CachePrefix.dialect == dialect, CachePrefix.fingerprint != fp)
            .order_by(CachePrefix.last_seen_at.desc())
            .limit(CANDIDATES)
        ).all()
        best = nearest(((r.fingerprint, _prefix(r)) for r in rows), prefix)
        if best is None:
            return None, None
        return best[0], diff_prefix(best[1], prefix)

    @staticmethod
    def _prune(s: Session, project: str) -> None:
        old = s.scalars(
            select(CachePrefix.fingerprint)
            .where(CachePrefix.project == project)
            .order_by(CachePrefix.last_seen_at.desc())
            .offset(KEEP_PER_PROJECT)
        ).all()
        if old:
            s.execute(delete(CachePrefix).where(CachePrefix.fingerprint.in_(old)))


@dataclass(frozen=True)
class PrefixEvent:
    """One new prefix of a session, as recorded: when, compared with what, and the changes."""

    session_key: str
    project: str
    dialect: str
    client: str
    fingerprint: str
    previous_fingerprint: str | None
    similarity: float | None
    changes: tuple[Change, ...]
    first_seen_at: datetime


def prefix_events(
    sessions: sessionmaker[Session], session_key: str | None = None, project: str | None = None, limit: int = 500
) -> list[PrefixEvent]:
    """Recorded prefix events, oldest first (of one session or project when given; the most
    recent ``limit`` events)."""
    stmt = select(CacheSessionPrefix).order_by(CacheSessionPrefix.first_seen_at.desc()).limit(limit)
    if session_key is not None:
        stmt = stmt.where(CacheSessionPrefix.session_key.startswith(session_key))
    if project is not None:
        stmt = stmt.where(CacheSessionPrefix.project == project)
    with sessions() as s:
        rows = s.scalars(stmt).all()
    out = [
        PrefixEvent(
            r.session_key,
            r.project,
            r.dialect,
            r.client,
            r.fingerprint,
            r.previous_fingerprint,
            r.similarity,
            tuple(Change(**c) for c in json.loads(r.changes or "[]")),
            r.first_seen_at,
        )
        for r in rows
    ]
    return out[::-1]
