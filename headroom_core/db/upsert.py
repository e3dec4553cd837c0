"""Idempotent writes that hold under concurrency (several threads or proxies on one database).

SQLite and PostgreSQL both have ``INSERT … ON CONFLICT``; SQLAlchemy exposes it per dialect
(``sqlalchemy.dialects.sqlite.insert`` / ``sqlalchemy.dialects.postgresql.insert``). Other
backends fall back to read-then-write inside the caller's transaction.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session


def _insert(s: Session, model: type):
    name = s.get_bind().dialect.name
    if name == "sqlite":
        return sqlite.insert(model)
    if name == "postgresql":
        return postgresql.insert(model)
    return None


def upsert(s: Session, model: type, values: Mapping[str, Any], keys: Sequence[str], update: Sequence[str] | None = None) -> None:
    """Insert ``values`` into ``model``'s table, or, when a row with the same ``keys`` exists,
    set its ``update`` columns (default: every non-key column given) to ``values``.
    Raises SQLAlchemy errors."""
    cols = [c for c in values if c not in keys] if update is None else list(update)
    ins = _insert(s, model)
    if ins is None:
        row = s.get(model, tuple(values[k] for k in keys))
        if row is None:
            s.add(model(**values))
        else:
            for c in cols:
                setattr(row, c, values[c])
        return
    stmt = ins.values(**values)
    stmt = stmt.on_conflict_do_update(index_elements=list(keys), set_={c: stmt.excluded[c] for c in cols}) if cols else stmt.on_conflict_do_nothing(index_elements=list(keys))
    s.execute(stmt)


def insert_ignore(s: Session, model: type, values: Mapping[str, Any], keys: Sequence[str]) -> None:
    """Insert ``values`` unless a row with the same ``keys`` exists (then nothing happens)."""
    upsert(s, model, values, keys, update=())
