"""Idempotent writes that hold under concurrency (several threads or proxies on one database).

SQLite and PostgreSQL both have ``INSERT … ON CONFLICT``; SQLAlchemy exposes it per dialect
(``sqlalchemy.dialects.sqlite.insert`` / ``sqlalchemy.dialects.postgresql.insert``). Other
backends fall back to read-then-write inside the caller's transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from operator import itemgetter
from typing import Any, Mapping, Sequence, cast

from sqlalchemy import ColumnElement, Table, func
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from headroom_core.db.types import scrub_for

_STATEMENTS: dict[tuple, Any] = {}


def dialect_insert(s: Session, model: type):
    """An ``INSERT`` into ``model``'s table that has ``on_conflict_do_update``/``_do_nothing``
    (``excluded`` names the proposed row) for the session's database; None for a backend
    without ``ON CONFLICT`` (then read-then-write)."""
    name = s.get_bind().dialect.name
    if name == "sqlite":
        return sqlite.insert(model)
    if name == "postgresql":
        return postgresql.insert(model)
    return None


def _statement(
    dialect: str,
    model: type,
    keys: tuple[str, ...],
    cols: tuple[str, ...],
    add: tuple[str, ...] = (),
    returning: bool = False,
) -> Any:
    """The ``INSERT … ON CONFLICT`` statement for these columns, built once: values go as bound
    parameters, so SQLAlchemy's compiled cache serves it (values written into the statement
    would be hashed into its cache key on every call, slow for large ones). ``add`` columns
    are summed with the existing row's; ``returning`` returns the first key of an inserted row."""
    k = (dialect, model, keys, cols, add, returning)
    stmt = _STATEMENTS.get(k)
    if stmt is None:
        # on the model's Table, not the mapped class: a Core statement skips the ORM's bulk
        # persistence layer (about half of a small upsert's time)
        t = cast(Table, model.__table__)  # type: ignore[attr-defined]
        ins = sqlite.insert(t) if dialect == "sqlite" else postgresql.insert(t)
        set_: dict[str, ColumnElement[Any]] = {c: ins.excluded[c] for c in cols}
        set_.update({c: func.coalesce(t.c[c], 0) + ins.excluded[c] for c in add})
        stmt = (
            ins.on_conflict_do_update(index_elements=list(keys), set_=set_)
            if set_
            else ins.on_conflict_do_nothing(index_elements=list(keys))
        )
        if returning:
            stmt = stmt.returning(t.c[keys[0]])
        _STATEMENTS[k] = stmt
    return stmt


def upsert(
    s: Session,
    model: type,
    values: Mapping[str, Any],
    keys: Sequence[str],
    update: Sequence[str] | None = None,
    add: Sequence[str] = (),
) -> None:
    """Insert ``values`` into ``model``'s table, or, when a row with the same ``keys`` exists,
    set its ``update`` columns (default: every non-key column given, except ``add``) to
    ``values`` and add ``values`` to its ``add`` columns (counters: one atomic statement, so
    concurrent writers lose no increment). Raises SQLAlchemy errors."""
    cols = tuple(c for c in values if c not in keys and c not in add) if update is None else tuple(update)
    dialect = s.get_bind().dialect.name
    if dialect not in ("sqlite", "postgresql"):
        row = s.get(model, tuple(values[k] for k in keys))
        if row is None:
            s.add(model(**values))
        else:
            for c in cols:
                setattr(row, c, values[c])
            for c in add:  # as SQL (``SET c = coalesce(c, 0) + :v``): a concurrent writer's increment is kept
                setattr(row, c, func.coalesce(getattr(model, c), 0) + values[c])
        return
    s.execute(_statement(dialect, model, tuple(keys), cols, tuple(add)), dict(values))


def upsert_many(
    s: Session, model: type, rows: Sequence[Mapping[str, Any]], keys: Sequence[str], update: Sequence[str] | None = None
) -> None:
    """:func:`upsert` of several rows with the same columns, in one statement execution."""
    if not rows:
        return
    dialect = s.get_bind().dialect.name
    if dialect not in ("sqlite", "postgresql"):
        for r in rows:
            upsert(s, model, r, keys, update)
        return
    cols = tuple(c for c in rows[0] if c not in keys) if update is None else tuple(update)
    s.execute(_statement(dialect, model, tuple(keys), cols), [dict(r) for r in rows])


#: Per (dialect, model, keys, columns): the compiled SQL text, its parameter order (None: named
#: parameters) and each column's bind processor, for :class:`BulkUpsert`.
_BULK: dict[tuple, tuple[str, tuple[str, ...] | None, tuple[Any, ...]]] = {}


@dataclass(frozen=True)
class BulkUpsert:
    """:func:`upsert_many` (every non-key column set on conflict) of many rows, prepared before
    the transaction and run at the database driver's ``executemany`` speed.

    :meth:`prepare` does all the per-row work (each value through its column's own SQLAlchemy
    bind processor, as :func:`upsert_many` would: booleans, datetimes, binaries; strings scrubbed
    as the engine's statement hook does, :func:`~headroom_core.db.types.scrub_parameters`) and
    compiles the same statement once per dialect; :meth:`run` only hands the rows to the
    driver inside the caller's transaction. A writer holds the database's write lock for the
    driver's time only: storing a new 60,000-message session's state held SQLite's lock 2.7 s
    with SQLAlchemy's per-row parameter handling inside the transaction, about 0.6 s so
    (``bench/bench_plan.py --cases many``). SQLite and PostgreSQL; other backends run
    :func:`upsert_many` in :meth:`run`."""

    model: type
    rows: Sequence[Mapping[str, Any]]
    keys: tuple[str, ...]
    sql: str = ""
    params: Sequence[Any] = ()

    @classmethod
    def prepare(
        cls, dialect: Dialect | None, model: type, rows: Sequence[Mapping[str, Any]], keys: Sequence[str]
    ) -> "BulkUpsert":
        """The rows (all with the same columns) made ready for ``dialect`` (an engine's; None:
        not known, :meth:`run` then runs :func:`upsert_many`)."""
        if not rows or dialect is None or dialect.name not in ("sqlite", "postgresql"):
            return cls(model, rows, tuple(keys))
        names = tuple(rows[0])
        k = (dialect.name, model, tuple(keys), names)
        known = _BULK.get(k)
        if known is None:
            compiled = _statement(dialect.name, model, tuple(keys), tuple(c for c in names if c not in keys)).compile(
                dialect=dialect
            )
            order = tuple(compiled.positiontup) if compiled.positional and compiled.positiontup is not None else None
            table = cast(Table, model.__table__)  # type: ignore[attr-defined]
            procs = tuple(table.c[c].type.dialect_impl(dialect).bind_processor(dialect) for c in (order or names))
            known = _BULK[k] = (compiled.string, order, procs)
        sql, order, procs = known
        cols = order or names
        values = [list(t) for t in map(itemgetter(*cols), rows)] if len(cols) > 1 else [[r[cols[0]]] for r in rows]
        for j, p in enumerate(procs):  # a column at a time, only those with a processor
            if p is None:
                continue
            memo: dict[Any, Any] = {}  # a value repeated down the rows (a timestamp, a flag) is processed once
            for v in values:
                x = v[j]
                if x is None:
                    continue
                if not isinstance(x, (bool, int, str, datetime)):  # bytes (each its own), anything else
                    v[j] = p(x)
                    continue
                mk = (type(x), x)  # True and 1 apart
                y = memo.get(mk, memo)
                v[j] = y if y is not memo else memo.setdefault(mk, p(x))
        params: list[Any] = list(map(tuple, values)) if order is not None else [dict(zip(cols, v)) for v in values]
        _, params = scrub_for(dialect.name, params)
        return cls(model, rows, tuple(keys), sql, params)

    def run(self, s: Session) -> None:
        """Write the rows in ``s``'s transaction (its connection, so its lock-wait budget).
        Raises SQLAlchemy errors (a driver's error comes wrapped in its SQLAlchemy class)."""
        if not self.rows:
            return
        if not self.sql:
            upsert_many(s, self.model, self.rows, self.keys)
            return
        conn = s.connection()
        dbapi = conn.connection.driver_connection
        assert dbapi is not None
        cur = dbapi.cursor()
        try:  # the driver's own executemany: the values are ready, the engine's hooks ran in prepare
            cur.executemany(self.sql, self.params)
        except conn.dialect.loaded_dbapi.Error as e:
            raise DBAPIError.instance(self.sql, None, e, conn.dialect.loaded_dbapi.Error, dialect=conn.dialect) from e
        finally:
            cur.close()


def insert_ignore(s: Session, model: type, values: Mapping[str, Any], keys: Sequence[str]) -> bool:
    """Insert ``values`` unless a row with the same ``keys`` exists (then nothing happens, and
    the database logs no error). Returns True when this call inserted the row."""
    dialect = s.get_bind().dialect.name
    if dialect not in ("sqlite", "postgresql"):
        if s.get(model, tuple(values[k] for k in keys)) is not None:
            return False
        s.add(model(**values))
        s.flush()
        return True
    # a row comes back only when inserted
    return s.execute(_statement(dialect, model, tuple(keys), (), returning=True), dict(values)).first() is not None
