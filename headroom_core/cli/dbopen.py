"""Opening the database from the CLI. Read-only commands (``stats``, ``doctor``, ``cache
report``, ``memory list``, …) open only a database that exists: a SQLite file that is not there
yet is reported, never created (the proxy creates it, owner-only, on first start)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # SQLAlchemy is imported when a URL is read: `headroom wrap`, `--version` start without it
    from sqlalchemy.orm import Session, sessionmaker


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL (``~`` expanded), or None for another backend or ``:memory:``."""
    from sqlalchemy.engine import make_url

    u = make_url(url)
    if u.get_backend_name() != "sqlite" or not u.database or u.database == ":memory:":
        return None
    return Path(u.database).expanduser()


def safe_url(url: str) -> str:
    """``url`` with its password hidden, for messages."""
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def sqlite_path_problem(url: str) -> str | None:
    """Why the SQLite file of ``url`` could never be created (None when it could, or for other
    backends): a folder on its path is a file, or the path names a folder."""
    f = sqlite_file(url)
    if f is None:
        return None
    if f.is_dir():
        return f"{safe_url(url)}: {f} is a folder, not a database file"
    for p in f.parents:
        if p.exists():
            return None if p.is_dir() else f"{safe_url(url)}: {p} is a file, not a folder"
    return None


def open_existing(url: str) -> sessionmaker[Session] | None:
    """The session factory of ``url`` (migrated), or None when it is a SQLite file that does
    not exist. Raises :class:`~headroom_core.db.engine.DatabaseError` when it cannot be opened
    (or its path could never hold a SQLite file)."""
    from headroom_core.db.engine import DatabaseError, open_database

    why = sqlite_path_problem(url)
    if why:
        raise DatabaseError(why)
    f = sqlite_file(url)
    if f is not None and not f.is_file():
        return None
    return open_database(url)
