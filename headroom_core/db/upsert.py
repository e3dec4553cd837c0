"""Idempotent writes that hold under concurrency (several threads or proxies on one database).

SQLite and PostgreSQL both have ``INSERT … ON CONFLICT``; SQLAlchemy exposes it per dialect
(``sqlalchemy.dialects.sqlite.insert`` / ``sqlalchemy.dialects.postgresql.insert``). Other
backends fall back to read-then-write inside the caller's transaction.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session


_STATEMENTS: dict[tuple, Any] = {}


def _statement(dialect: str, model: type, keys: tuple[str, ...], cols: tuple[str, ...]) -> Any:
    """The ``INSERT … ON CONFLICT`` statement for these columns, built once: values go as bound
    parameters, so SQLAlchemy's compiled cache serves it (values written into the statement
    would be hashed into its cache key on every call, slow for large ones)."""
    k = (dialect, model, keys, cols)
    stmt = _STATEMENTS.get(k)
    if stmt is None:
        ins = sqlite.insert(model) if dialect == "sqlite" else postgresql.insert(model)
        stmt = ins.on_conflict_do_update(index_elements=list(keys), set_={c: ins.excluded[c] for c in cols}) if cols else ins.on_conflict_do_nothing(index_elements=list(keys))
        _STATEMENTS[k] = stmt
    return stmt


def upsert(s: Session, model: type, values: Mapping[str, Any], keys: Sequence[str], update: Sequence[str] | None = None) -> None:
    """Insert ``values`` into ``model``'s table, or, when a row with the same ``keys`` exists,
    set its ``update`` columns (default: every non-key column given) to ``values``.
    Raises SQLAlchemy errors."""
    cols = tuple(c for c in values if c not in keys) if update is None else tuple(update)
    dialect = s.get_bind().dialect.name
    if dialect not in ("sqlite", "postgresql"):
        row = s.get(model, tuple(values[k] for k in keys))
        if row is None:
            s.add(model(**values))
        else:
            for c in cols:
                setattr(row, c, values[c])
        return
    s.execute(_statement(dialect, model, tuple(keys), cols), dict(values))


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


def insert_ignore(s: Session, model: type, values: Mapping[str, Any], keys: Sequence[str]) -> None:
    """Insert ``values`` unless a row with the same ``keys`` exists (then nothing happens)."""
    upsert(s, model, values, keys, update=())
