"""How long a database statement may wait for another writer's lock: long in the background,
briefly on a request's path (issue 36, item 3).

Another process holding the database's write lock (a second proxy, the CLI, a ``sqlite3``
shell in ``BEGIN EXCLUSIVE``) made every request wait for SQLite's busy timeout, 10 s per write,
twice per request. Now the work a client waits for (the plan, storing the session's state, the
observers, answering the proxy's tools) runs inside :func:`bounded`: a lock-wait budget of
:data:`REQUEST_WAIT_SECONDS` for the whole unit, shared by its transactions. Each transaction
begun meanwhile waits at most what is left of it (SQLite: ``PRAGMA busy_timeout``; PostgreSQL:
``lock_timeout`` for the transaction, and ``statement_timeout`` :data:`REQUEST_STATEMENT_SECONDS`),
and the time it took, from its begin to its commit or rollback, is taken from the budget: what
is spent is time in the database (waits included), never the unit's other work (compressing a
large output before the first write spends nothing). Past it the statement fails
(:func:`is_lock_wait`), and the caller fails open. Work outside any budget (the ledger's writer
thread, migrations, the CLI) keeps :data:`BACKGROUND_WAIT_SECONDS`.

The budget is a :class:`contextvars.ContextVar`: it follows a request into ``asyncio.to_thread``
and ``contextvars.copy_context().run``, never into another request's thread.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from sqlalchemy import Connection, Engine, event

#: Lock wait of work outside a budget (seconds): the ledger writer, migrations, the CLI.
#: SQLite's busy timeout as it was before budgets.
BACKGROUND_WAIT_SECONDS = 10.0
#: Lock wait a request's unit of work may spend in all (seconds): a fraction of a model's
#: answer time, long enough for another proxy's ordinary commits (milliseconds each).
REQUEST_WAIT_SECONDS = 0.5
#: Longest a PostgreSQL statement inside a budget may run (seconds; ``statement_timeout``).
REQUEST_STATEMENT_SECONDS = 5.0

#: SQLite's result codes for a lock held by another connection (``SQLITE_BUSY``, ``SQLITE_LOCKED``).
_SQLITE_BUSY = frozenset({5, 6})
#: PostgreSQL's SQLSTATEs for ``lock_timeout`` (``lock_not_available``) and ``statement_timeout``
#: (``query_canceled``).
_PG_TIMEOUT = frozenset({"55P03", "57014"})


class _Budget:
    """Seconds of database time a unit of work has ``left`` (shared by the threads it hands a
    copy of its context to; a race between two of them costs at most one transaction's time)."""

    __slots__ = ("left",)

    def __init__(self, seconds: float) -> None:
        self.left = seconds


_budget: ContextVar[_Budget | None] = ContextVar("headroom_db_lock_budget", default=None)
#: Key of a transaction's ``(budget, start)`` in its DBAPI connection's ``info``.
_STARTED = "headroom_budget_started"


@contextmanager
def bounded(seconds: float = REQUEST_WAIT_SECONDS) -> Iterator[None]:
    """Run the block with a budget of ``seconds`` of database time (lock waits included) shared by
    every transaction begun in it, in this context and the contexts copied from it; inside an
    outer budget, the outer one goes on being spent."""
    if _budget.get() is not None:
        yield
        return
    token = _budget.set(_Budget(seconds))
    try:
        yield
    finally:
        _budget.reset(token)


def wait_left() -> float | None:
    """Seconds the current budget has left (0 when spent), None outside a budget."""
    b = _budget.get()
    return None if b is None else max(0.0, b.left)


def is_lock_wait(e: BaseException) -> bool:
    """Whether ``e`` (a SQLAlchemy error, a driver's, or one raised from either) is a statement
    that gave up waiting for another connection's lock: SQLite ``SQLITE_BUSY``/``SQLITE_LOCKED``
    (by result code), PostgreSQL ``lock_timeout``/``statement_timeout`` (by SQLSTATE)."""
    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        code = getattr(cur, "sqlite_errorcode", None)
        if isinstance(code, int) and (code & 0xFF) in _SQLITE_BUSY:
            return True
        if getattr(cur, "sqlstate", None) in _PG_TIMEOUT:
            return True
        cur = getattr(cur, "orig", None) or cur.__cause__ or cur.__context__
    return False


def _started(conn: Connection) -> float | None:
    """Note the transaction's start against the current budget; what the budget has left."""
    b = _budget.get()
    if b is None:
        return None
    conn.connection.info[_STARTED] = (b, time.monotonic())
    return max(0.0, b.left)


def _ended(conn: Connection) -> None:
    started = conn.connection.info.pop(_STARTED, None)
    if started is not None:
        b, t0 = started
        b.left -= time.monotonic() - t0


def _sqlite_begin(conn: Connection) -> None:
    left = _started(conn)
    ms = round(1000 * (BACKGROUND_WAIT_SECONDS if left is None else min(left, BACKGROUND_WAIT_SECONDS)))
    info = conn.connection.info  # the DBAPI connection's: kept across checkouts
    if info.get("busy_ms") != ms:
        conn.connection.dbapi_connection.execute(f"PRAGMA busy_timeout={int(ms)}")  # type: ignore[union-attr]
        info["busy_ms"] = ms


def _pg_begin(conn: Connection) -> None:
    left = _started(conn)
    if left is None:
        return  # the server's own settings (none by default)
    cur = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        # for this transaction only (``is_local``): the pool's connection keeps no trace
        cur.execute(
            "SELECT set_config('lock_timeout', %s, true), set_config('statement_timeout', %s, true)",
            (f"{max(1, round(1000 * left))}ms", f"{round(1000 * REQUEST_STATEMENT_SECONDS)}ms"),
        )
    finally:
        cur.close()


def install(engine: Engine) -> None:
    """Make every transaction on ``engine`` wait for locks as the current budget says (SQLite and
    PostgreSQL; other backends keep their own settings)."""
    name = engine.dialect.name
    if name == "sqlite":
        event.listen(engine, "begin", _sqlite_begin)
    elif name == "postgresql":
        event.listen(engine, "begin", _pg_begin)
    else:
        return
    event.listen(engine, "commit", _ended)
    event.listen(engine, "rollback", _ended)
