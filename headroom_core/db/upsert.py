"""Idempotent writes that hold under concurrency (several threads or proxies on one database).

SQLite and PostgreSQL both have ``INSERT … ON CONFLICT``; SQLAlchemy exposes it per dialect
(``sqlalchemy.dialects.sqlite.insert`` / ``sqlalchemy.dialects.postgresql.insert``). Other
backends fall back to read-then-write inside the caller's transaction.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session


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


_insert = dialect_insert


def upsert(
    s: Session, model: type, values: Mapping[str, Any], keys: Sequence[str], update: Sequence[str] | None = None, add: Sequence[str] = ()
) -> None:
    """Insert ``values`` into ``model``'s table, or, when a row with the same ``keys`` exists,
    set its ``update`` columns (default: every non-key column given, except ``add``) to
    ``values`` and add ``values`` to its ``add`` columns (counters: one atomic statement, so
    concurrent writers lose no increment). Raises SQLAlchemy errors."""
    cols = [c for c in values if c not in keys and c not in add] if update is None else list(update)
    ins = _insert(s, model)
    if ins is None:
        row = s.get(model, tuple(values[k] for k in keys))
        if row is None:
            s.add(model(**values))
        else:
            for c in cols:
                setattr(row, c, values[c])
            for c in add:
                setattr(row, c, getattr(row, c) + values[c])
        return
    stmt = ins.values(**values)
    set_ = {c: stmt.excluded[c] for c in cols}
    set_.update({c: getattr(model, c) + stmt.excluded[c] for c in add})
    stmt = stmt.on_conflict_do_update(index_elements=list(keys), set_=set_) if set_ else stmt.on_conflict_do_nothing(index_elements=list(keys))
    s.execute(stmt)


def insert_ignore(s: Session, model: type, values: Mapping[str, Any], keys: Sequence[str]) -> bool:
    """Insert ``values`` unless a row with the same ``keys`` exists (then nothing happens, and
    the database logs no error). Returns True when this call inserted the row."""
    ins = dialect_insert(s, model)
    if ins is None:
        if s.get(model, tuple(values[k] for k in keys)) is not None:
            return False
        s.add(model(**values))
        s.flush()
        return True
    stmt = ins.values(**values).on_conflict_do_nothing(index_elements=list(keys)).returning(getattr(model, keys[0]))
    return s.execute(stmt).first() is not None  # a row comes back only when inserted
