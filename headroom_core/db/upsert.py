"""Idempotent writes that hold under concurrency (several threads or proxies on one database).

SQLite and PostgreSQL both have ``INSERT … ON CONFLICT``; SQLAlchemy exposes it per dialect
(``sqlalchemy.dialects.sqlite.insert`` / ``sqlalchemy.dialects.postgresql.insert``). Other
backends fall back to read-then-write inside the caller's transaction.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence, cast

from sqlalchemy import ColumnElement, Table, func
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session


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


def _statement(dialect: str, model: type, keys: tuple[str, ...], cols: tuple[str, ...], add: tuple[str, ...] = (), returning: bool = False) -> Any:
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
        stmt = ins.on_conflict_do_update(index_elements=list(keys), set_=set_) if set_ else ins.on_conflict_do_nothing(index_elements=list(keys))
        if returning:
            stmt = stmt.returning(t.c[keys[0]])
        _STATEMENTS[k] = stmt
    return stmt


def upsert(
    s: Session, model: type, values: Mapping[str, Any], keys: Sequence[str], update: Sequence[str] | None = None, add: Sequence[str] = ()
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


def upsert_many(s: Session, model: type, rows: Sequence[Mapping[str, Any]], keys: Sequence[str], update: Sequence[str] | None = None) -> None:
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
