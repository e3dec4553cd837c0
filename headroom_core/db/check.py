"""Can the database of a URL be used? Checked before a proxy starts, so an unreachable server or
a file that cannot be opened is reported in one line and in seconds, not after the proxy's
start-up timeout or as a traceback in its log (issue 34).

:func:`database_problem` names the cause from what happened, never from a driver's wording:

* PostgreSQL: a TCP connection to the URL's host and port first (refused, unknown host, no
  answer within the timeout), then a login with the driver; when that fails, a login to the
  server's ``postgres`` database with the same credentials tells a missing database (or one the
  user may not connect to) from a refused login (user or password).
* SQLite: the file's folder can be written (the proxy creates the file and its ``-wal``/``-shm``
  files), an existing file can be opened read-write and is a SQLite database.

SQLAlchemy and the driver are imported when a check runs (``headroom wrap`` starts without them).
"""

from __future__ import annotations

import os
import socket
import sqlite3
from pathlib import Path

#: Seconds a check waits for a TCP connection, and for the driver's login.
CONNECT_TIMEOUT = 4.0
#: PostgreSQL's port when the URL names none (libpq's default).
PG_PORT = 5432
#: SQLite's result codes of a database another connection holds (SQLITE_BUSY, SQLITE_LOCKED;
#: https://www.sqlite.org/rescode.html): the proxy waits for it, so it is no reason to refuse.
SQLITE_BUSY_CODES = (5, 6)


def database_problem(url: str, timeout: float = CONNECT_TIMEOUT) -> str | None:
    """Why the database of SQLAlchemy ``url`` cannot be used now, as one line of plain text
    naming the cause and the place (``"connection refused at 127.0.0.1:5999: no PostgreSQL server
    listens there"``), or None when it can (a SQLite file that does not exist yet but can be
    created counts as usable). The URL's password is never in the text. Waits at most about
    ``2 * timeout`` seconds (TCP, then the login; a third login only after a failed one)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        u = make_url(url)
    except (ArgumentError, ValueError) as e:
        return f"{url!r} is not a database URL ({e})"
    backend = u.get_backend_name()
    if backend == "sqlite":
        return _sqlite_problem(u.database or "")
    if backend == "postgresql":
        host = u.host or ""
        if host and not host.startswith("/"):
            port = u.port or PG_PORT
            if why := tcp_problem(host, port, timeout):
                return why
        return _login_problem(url, timeout, postgres=True)
    return _login_problem(url, timeout, postgres=False)


def tcp_problem(host: str, port: int, timeout: float = CONNECT_TIMEOUT) -> str | None:
    """Why no TCP connection to ``host:port`` can be made within ``timeout`` seconds (None when
    one can): connection refused, host not found, no answer, or the system's reason."""
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except ConnectionRefusedError:
        return f"connection refused at {where}: no database server listens there"
    except socket.gaierror as e:
        return f"host {host!r} not found ({e.strerror})"
    except TimeoutError:
        return f"no answer from {where} within {timeout:.0f} s (a firewall, or the wrong host or port)"
    except OSError as e:
        return f"cannot reach {where}: {e.strerror or e}"


def _engine(url: str, timeout: float, postgres: bool):
    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    args = {"connect_timeout": max(1, round(timeout))} if postgres else {}
    return create_engine(url, poolclass=NullPool, connect_args=args)


def _login(url: str, timeout: float, postgres: bool) -> BaseException | None:
    """The error of connecting to ``url`` and running ``SELECT 1`` (None when it worked)."""
    from sqlalchemy import text
    from sqlalchemy.exc import NoSuchModuleError

    try:
        eng = _engine(url, timeout, postgres)
    except (ImportError, NoSuchModuleError) as e:  # the URL's driver is not installed (or unknown)
        return e
    try:
        with eng.connect() as c:
            c.execute(text("SELECT 1"))
        return None
    except Exception as e:  # noqa: BLE001 - the driver's error, summarised by the caller
        return e
    finally:
        eng.dispose()


def _server_words(e: BaseException) -> str:
    """The server's (or driver's) own reason, on one line, without the driver's preamble."""
    msg = " ".join(str(getattr(e, "orig", None) or e).split())
    msg = msg.split("(Background on this error", 1)[0].rsplit(" failed: ", 1)[-1]
    return msg.strip().removeprefix("FATAL:").strip() or type(e).__name__


def _login_problem(url: str, timeout: float, postgres: bool) -> str | None:
    from sqlalchemy.engine import make_url

    e = _login(url, timeout, postgres)
    if e is None:
        return None
    from sqlalchemy.exc import NoSuchModuleError

    u = make_url(url)
    if isinstance(e, (ImportError, NoSuchModuleError)):
        return f"the database driver for {u.drivername!r} is not installed ({e}); install it in Headroom's environment (PostgreSQL: pip install 'psycopg[binary]')"
    user, db = u.username or "(default user)", u.database or ""
    if postgres:
        maintenance = u.set(database="postgres").render_as_string(hide_password=False)
        if db and db != "postgres" and _login(maintenance, timeout, postgres) is None:
            if _pg_database_exists(maintenance, db, timeout) is False:
                return f"database {db!r} does not exist on that server (user {user!r} can log in): create it (createdb {db}) or name another one in the URL"
            return f"user {user!r} may not connect to database {db!r}: {_server_words(e)}"
        return f"cannot log in as user {user!r}: {_server_words(e)}; check the user and password in the URL (and that a PostgreSQL server listens there)"
    return _server_words(e)


def _pg_database_exists(url: str, name: str, timeout: float) -> bool | None:
    """Whether the server of ``url`` has a database ``name`` (None when that cannot be asked)."""
    from sqlalchemy import text

    eng = _engine(url, timeout, True)
    try:
        with eng.connect() as c:
            return c.execute(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}).first() is not None
    except Exception:  # noqa: BLE001 - unknown: the caller reports the login error as it is
        return None
    finally:
        eng.dispose()


def _sqlite_problem(database: str) -> str | None:
    """Why the SQLite file ``database`` cannot be opened or created (None when it can, and for
    ``:memory:`` and ``file:`` URIs, which are left to SQLite)."""
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    f = Path(database).expanduser()
    if f.is_dir():
        return f"{f} is a folder, not a database file"
    folder = next((p for p in f.parents if p.exists()), None)
    if folder is None or not folder.is_dir():
        return f"{folder} is a file, not a folder" if folder else f"no folder of {f} exists"
    if f.parent.exists() and not os.access(f.parent, os.W_OK | os.X_OK):
        return f"the folder {f.parent} is not writable by this user (SQLite writes its -wal and -shm files there)"
    if not f.exists():
        return (
            None
            if os.access(folder, os.W_OK | os.X_OK)
            else f"cannot create {f}: the folder {folder} is not writable by this user"
        )
    if not os.access(f, os.R_OK | os.W_OK):
        return f"{f} is not readable and writable by this user"
    try:
        con = sqlite3.connect(f.resolve().as_uri() + "?mode=rw", uri=True, timeout=0.2)
        try:
            con.execute("PRAGMA schema_version").fetchone()
        finally:
            con.close()
    except sqlite3.DatabaseError as e:
        if getattr(e, "sqlite_errorcode", None) in SQLITE_BUSY_CODES:
            return None  # another process holds it (a proxy migrating it): busy, not broken
        return f"{f} cannot be opened as a SQLite database ({e})"
    return None
