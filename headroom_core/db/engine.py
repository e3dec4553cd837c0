"""Engine, sessions and migrate-on-start.

Any SQLAlchemy URL works; the default is a SQLite file under the Headroom home, opened in WAL
mode so several proxy processes and the CLI can share it. PostgreSQL is the scale-out path.
"""

from __future__ import annotations

import threading
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from headroom_core.db.types import scrub_parameters

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"

_lock = threading.Lock()
_engines: dict[str, Engine] = {}


class DatabaseError(RuntimeError):
    """The database could not be opened or migrated; the message says which URL and why."""


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA busy_timeout=10000")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


def make_engine(url: str) -> Engine:
    """Create an engine for ``url``; for a SQLite file, create its folder and turn on WAL.

    Every engine writes any ``str`` (lone surrogates and NULs of JSON strings become U+FFFD in
    ordinary columns; :class:`~headroom_core.db.types.AnyText` columns keep them exactly)."""
    u = make_url(url)
    if u.get_backend_name() == "sqlite":
        if u.database and u.database != ":memory:":
            Path(u.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        eng = create_engine(url, connect_args={"check_same_thread": False, "timeout": 10})
        event.listen(eng, "connect", _sqlite_pragmas)
    else:
        eng = create_engine(url, pool_pre_ping=True)
    event.listen(eng, "before_cursor_execute", scrub_parameters, retval=True)
    return eng


def migrate(engine: Engine) -> None:
    """Apply every Alembic migration in ``migrations/`` up to all heads (idempotent; each
    feature adds its own branch from 0001, so several heads are normal).

    Raises :class:`DatabaseError` naming the URL (password hidden) when it fails.
    """
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    try:
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "heads")
    except Exception as e:  # noqa: BLE001 - re-raised with the URL named
        raise DatabaseError(f"cannot migrate {engine.url.render_as_string(hide_password=True)}: {e}") from e


def open_database(url: str) -> sessionmaker[Session]:
    """Engine for ``url``, migrated to head once per process, as a session factory."""
    with _lock:
        eng = _engines.get(url)
        if eng is None:
            eng = make_engine(url)
            migrate(eng)
            _engines[url] = eng
    return sessionmaker(eng, expire_on_commit=False)
