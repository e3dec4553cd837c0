"""Engine, sessions and migrate-on-start.

Any SQLAlchemy URL works; the default is a SQLite file under the Headroom home, opened in WAL
mode so several proxy processes and the CLI can share it. PostgreSQL is the scale-out path.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from headroom_core.db import lock_wait, sqlite_file
from headroom_core.db.types import scrub_parameters
from headroom_core.errors import EnvironmentProblem

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"
#: The PostgreSQL advisory lock (a number fixed for Headroom: "HeadRoom" in ASCII) that
#: migrations run under, so proxies of a team starting at the same moment migrate one at a time.
MIGRATION_LOCK = 0x48656164526F6F6D

log = logging.getLogger("headroom")
_lock = threading.Lock()
_engines: dict[str, Engine] = {}


class DatabaseError(RuntimeError, EnvironmentProblem):
    """The database could not be opened or migrated; the message says which URL and why."""


def _sqlite_pragmas(dbapi_conn, record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    busy_ms = round(1000 * lock_wait.BACKGROUND_WAIT_SECONDS)
    cur.execute(f"PRAGMA busy_timeout={busy_ms}")
    record.info["busy_ms"] = busy_ms  # each transaction sets its own (headroom_core.db.lock_wait)
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


def create_private_file(path: Path) -> None:
    """Create ``path`` (and its missing folders, mode 0700) readable and writable by its owner
    only (mode 0600) unless it exists. The database holds tool outputs and memories; SQLite
    gives its ``-wal`` and ``-shm`` files the database file's mode. Raises :class:`OSError`."""
    if path.exists():
        return
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass


#: SQLite connections kept open / opened beyond those at most (SQLAlchemy ``QueuePool``; its
#: defaults are 5 / 10).
SQLITE_POOL_SIZE = 16
SQLITE_MAX_OVERFLOW = 16
#: PostgreSQL connections a proxy keeps open / opens beyond those at most: 20 per process, one
#: for every thread that may write at once (asyncio's default pool of ``min(32, CPUs + 4)``
#: threads, the ledger writer, observers) on up to 14 CPUs. A team of N proxies needs the
#: server's ``max_connections`` >= 20 N plus a few for the CLI (PostgreSQL's default, 100, serves
#: 4 proxies). A thread waits up to 30 s for a connection when all are taken.
PG_POOL_SIZE = 10
PG_MAX_OVERFLOW = 10


def make_engine(url: str) -> Engine:
    """Create an engine for ``url``; for a SQLite file, create it owner-only (0600) with its
    folder, and turn on WAL. Raises :class:`DatabaseError` when the file cannot be created
    (e.g. its folder is a file).

    Every engine writes any ``str`` (lone surrogates and NULs of JSON strings become U+FFFD in
    ordinary columns; :class:`~headroom_core.db.types.AnyText` columns keep them exactly)."""
    u = make_url(url)
    if u.get_backend_name() == "sqlite":
        if u.database and u.database != ":memory:" and not u.database.startswith("file:"):
            f = Path(u.database).expanduser()
            try:
                create_private_file(f)
            except OSError as e:
                raise DatabaseError(f"cannot create the SQLite database {f}: {_blocker(f) or e.strerror or e}") from e
        # Connections kept open for every thread that may write at once (asyncio's default pool,
        # the ledger writer, observers): past ``pool_size`` SQLAlchemy opens and closes a connection
        # (and runs the pragmas) per checkout, which under load costs more than the query.
        eng = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": lock_wait.BACKGROUND_WAIT_SECONDS},
            pool_size=SQLITE_POOL_SIZE,
            max_overflow=SQLITE_MAX_OVERFLOW,
        )
        event.listen(eng, "connect", _sqlite_pragmas)
    else:
        eng = create_engine(
            url, pool_pre_ping=True, pool_size=PG_POOL_SIZE, max_overflow=PG_MAX_OVERFLOW, pool_timeout=30
        )
    event.listen(eng, "before_cursor_execute", scrub_parameters, retval=True)
    lock_wait.install(eng)  # a request's statements wait for locks only as long as its budget
    return eng


def migrate(engine: Engine) -> None:
    """Apply every Alembic migration in ``migrations/`` (idempotent). The history is one line
    since ``0010_one_line`` joined the earlier feature branches: a new migration revises the
    single head (tests/unit/test_migrations_linear.py); ``heads`` is still what is upgraded to,
    so a database on any earlier branch point gets there.

    Raises :class:`DatabaseError` naming the URL (password hidden) when it fails.
    """
    # Alembic's own progress lines ("setup plugin …" on import, "Context impl …") would land in
    # the proxy's log; what was migrated is said once below
    logging.getLogger("alembic").setLevel(logging.WARNING)
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    try:
        with engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                # the proxies of a team may start at the same moment: the first migrates, the
                # others wait here (the lock ends with this transaction) and find nothing to do
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
            before = _heads(conn)
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "heads")
            after = _heads(conn)
        if after != before:
            log.info("headroom: database migrated to %s", ", ".join(sorted(after)))
    except Exception as e:  # noqa: BLE001 - re-raised with the URL named, on one line
        first = str(getattr(e, "orig", None) or e).strip().splitlines()
        raise DatabaseError(
            f"cannot open {engine.url.render_as_string(hide_password=True)}: {type(getattr(e, 'orig', None) or e).__name__}: {first[0] if first else ''}"
        ) from e


def _heads(conn) -> set[str]:
    """The Alembic revisions the database on ``conn`` is at (empty before the first)."""
    from alembic.runtime.migration import MigrationContext

    return set(MigrationContext.configure(conn).get_current_heads())


def _blocker(f: Path) -> str:
    """What stands in the way of creating ``f`` when its nearest existing ancestor is a file
    (``"/x is a file, not a folder"``); "" otherwise."""
    for p in [f.parent, *f.parent.parents]:
        if p.exists():
            return "" if p.is_dir() else f"{p} is a file, not a folder"
    return ""


def open_database(url: str) -> sessionmaker[Session]:
    """Engine for ``url``, migrated to head once per process, as a session factory.

    A SQLite file is opened by one process at a time (:func:`~headroom_core.db.sqlite_file.opening`:
    proxies starting together migrate once), and a damaged one is set aside with one log line
    before a new one is created in its place (:mod:`headroom_core.db.sqlite_file`). Raises
    :class:`DatabaseError` when the database cannot be opened or migrated."""
    with _lock:
        eng = _engines.get(url)
        if eng is None:
            f = sqlite_path(url)
            try:
                with sqlite_file.opening(f) if f is not None else nullcontext():
                    if f is not None and (found := sqlite_file.damage(f)) is not None:
                        sqlite_file.set_aside(f, found)
                    eng = _make_and_migrate(url)
            except OSError as e:  # the lock file (its folder may be a file), or the damaged file's rename
                raise DatabaseError(
                    f"cannot create the SQLite database {f}: {_blocker(f)}"
                    if f is not None and _blocker(f)
                    else f"cannot open the SQLite database {f}: {e.strerror or e}"
                ) from e
            _engines[url] = eng
    return sessionmaker(eng, expire_on_commit=False)


def _make_and_migrate(url: str) -> Engine:
    try:
        eng = make_engine(url)
    except (ImportError, ValueError) as e:  # a driver that is not installed, a bad URL
        raise DatabaseError(
            f"cannot open {make_url(url).render_as_string(hide_password=True)}: {type(e).__name__}: {e}"
        ) from e
    try:
        migrate(eng)
    except DatabaseError:
        eng.dispose()  # a later try makes a new one: no pool left behind per failed start
        raise
    return eng


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite ``url`` (``~`` expanded), None for another backend, ``:memory:`` or a
    ``file:`` URI. Raises :class:`DatabaseError` for a URL that cannot be read."""
    try:
        u = make_url(url)
    except Exception as e:  # noqa: BLE001 - SQLAlchemy's ArgumentError, a bad port, …
        raise DatabaseError(f"cannot open {url!r}: {type(e).__name__}: {e}") from e
    if u.get_backend_name() != "sqlite" or not u.database or u.database == ":memory:" or u.database.startswith("file:"):
        return None
    return Path(u.database).expanduser()


def opened_engines() -> list[Engine]:
    """The engines this process opened (:func:`open_database`), for a checkpoint at stop."""
    with _lock:
        return list(_engines.values())


@contextmanager
def core_connection(sessions: sessionmaker[Session], begin: bool = False) -> Iterator[Connection | Session]:
    """Where to run a Core statement on the database of ``sessions``: a connection of its engine
    (an ORM session around one prebuilt Core statement about doubles its cost), or a session
    when the sessionmaker has no engine bound. With ``begin`` it is one transaction, committed
    when the block ends and rolled back when it raises. Raises SQLAlchemy's errors."""
    bind = sessions.kw.get("bind")
    if bind is None:
        with sessions.begin() if begin else sessions() as s:
            yield s
    else:
        with bind.begin() if begin else bind.connect() as c:
            yield c
