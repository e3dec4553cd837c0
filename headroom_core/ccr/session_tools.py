"""Per session: has the proxy offered ``headroom_retrieve`` yet? Once offered it stays, at the
same place, so the cached ``tools`` prefix does not flip between turns."""

from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy.orm import Session, sessionmaker

from headroom_core.db.models import SessionState


def retrieve_offered(sessions: sessionmaker[Session], session_key: str) -> bool:
    """True once :func:`mark_retrieve_offered` was called for ``session_key`` (any process)."""
    with sessions() as s:
        row = s.get(SessionState, session_key)
        return bool(row and row.retrieve_tool)


def mark_retrieve_offered(sessions: sessionmaker[Session], session_key: str, dialect: str) -> None:
    """Remember that ``session_key`` now has the retrieve tool."""
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    with sessions.begin() as s:
        row = s.get(SessionState, session_key)
        if row is None:
            s.add(SessionState(session_key=session_key, dialect=dialect, retrieve_tool=True, created_at=now, updated_at=now))
        elif not row.retrieve_tool:
            row.retrieve_tool = True
            row.updated_at = now
