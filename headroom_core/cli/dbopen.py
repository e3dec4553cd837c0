"""Opening the database from the CLI. Read-only commands (``stats``, ``doctor``, ``cache
report``, ``memory list``, …) open only a database that exists: a SQLite file that is not there
yet is reported, never created (the proxy creates it, owner-only, on first start)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL (``~`` expanded), or None for another backend or ``:memory:``."""
    u = make_url(url)
    if u.get_backend_name() != "sqlite" or not u.database or u.database == ":memory:":
        return None
    return Path(u.database).expanduser()


def safe_url(url: str) -> str:
    """``url`` with its password hidden, for messages."""
    return make_url(url).render_as_string(hide_password=True)


def open_existing(url: str) -> sessionmaker[Session] | None:
    """The session factory of ``url`` (migrated), or None when it is a SQLite file that does
    not exist. Raises :class:`~headroom_core.db.engine.DatabaseError` when it cannot be opened."""
    from headroom_core.db.engine import open_database

    f = sqlite_file(url)
    if f is not None and not f.is_file():
        return None
    return open_database(url)
