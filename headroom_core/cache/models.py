"""Tables of the prompt-cache feature: the distinct prefixes (system prompt and tool list) the
proxy has seen per project, and which prefixes each session used, with what changed.

Created by ``migrations/versions/0004_cache_volatile.py``.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, Float, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from headroom_core.db.models import Base
from headroom_core.db.types import AnyText


class CachePrefix(Base):
    """One distinct cache-relevant prefix of a project: the system text and the tools.

    ``fingerprint`` is :attr:`headroom_core.cache.volatile.Prefix.fingerprint` (SHA-256 hex);
    ``tools_json`` a JSON list of ``[name, sha256 hex of the definition]`` (the definitions
    themselves are not stored); ``system_text`` the system prompt as the client sent it (kept so
    the next prompt of the project can be compared with it; at most a bounded number of recent
    prefixes per project are kept).
    """

    __tablename__ = "cache_prefixes"
    __table_args__ = (Index("ix_cache_prefixes_project_seen", "project", "last_seen_at"),)

    fingerprint: Mapped[str] = mapped_column(String(64), primary_key=True)
    project: Mapped[str] = mapped_column(String(512))
    dialect: Mapped[str] = mapped_column(String(32))
    system_text: Mapped[str] = mapped_column(AnyText)  # compared later: kept exactly
    tools_json: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    last_seen_at: Mapped[datetime] = mapped_column(DateTime)


class CacheSessionPrefix(Base):
    """A session used a prefix: the first request of ``session_key`` with ``fingerprint``.

    ``previous_fingerprint`` is the prefix it was compared with (the session's own previous
    prefix, else the most similar recent prefix of the same project; None when there was none),
    ``similarity`` the line similarity of the two system texts (0..1), ``changes`` a JSON list of
    :class:`headroom_core.cache.volatile.Change` objects: the parts that broke the cache.
    """

    __tablename__ = "cache_session_prefixes"

    session_key: Mapped[str] = mapped_column(String(64), primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64), primary_key=True)
    project: Mapped[str] = mapped_column(String(512), index=True)
    dialect: Mapped[str] = mapped_column(String(32))
    client: Mapped[str] = mapped_column(String(64))
    previous_fingerprint: Mapped[str | None] = mapped_column(String(64), nullable=True)
    similarity: Mapped[float | None] = mapped_column(Float, nullable=True)
    changes: Mapped[str] = mapped_column(Text)
    first_seen_at: Mapped[datetime] = mapped_column(DateTime)
