"""BulkUpsert (db/upsert.py) on a real database (SQLite and PostgreSQL): the rows it writes read
back as upsert_many's do (booleans, datetimes, binaries, NULLs, text scrubbed as the engine's
hook scrubs it), a conflict updates every non-key column, and a driver's error comes wrapped in
SQLAlchemy's class; a session's state of thousands of messages round-trips through the store
that uses it."""

from __future__ import annotations

import secrets
from datetime import datetime

import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from headroom_core.cache.frozen import FrozenEntry
from headroom_core.cache.session_store import SessionRecord, SessionStore, SessionTools
from headroom_core.db.models import FrozenMessage
from headroom_core.db.sealed import SECRET_BYTES, Sealer
from headroom_core.db.upsert import BulkUpsert, upsert_many

KEYS = ["session_key", "position"]
WHEN = datetime(2026, 12, 2, 10, 30, 15, 123456)


def row(key: str, i: int, **changes) -> dict:
    r = dict(session_key=key, position=i, raw_hash=f"r{i}", norm_hash=f"n{i}", forwarded=bytes([i % 256]) * 5, modified=i % 2 == 1,
             tokens_before=i, tokens_after=i // 2, offloads="[]", blocks='[["log","Bash",9,3]]' if i % 3 == 0 else "[]",
             deferred=None if i % 4 else '[["content",0]]', updated_at=WHEN)  # fmt: skip
    r.update(changes)
    return r


def read(sessions, key: str) -> list[tuple]:
    cols = [c for c in FrozenMessage.__table__.c if c.name != "session_key"]  # type: ignore[attr-defined]
    with sessions() as s:
        return [
            tuple(r)
            for r in s.execute(
                select(*cols).where(FrozenMessage.session_key == key).order_by(FrozenMessage.position)
            ).all()
        ]


def test_the_rows_read_back_as_upsert_manys(sessions):
    dialect = sessions.kw["bind"].dialect
    rows = [row("many", i) for i in range(40)] + [
        row("many", 40, blocks='[["log","Ba\ud83dsh",1,1]]')
    ]  # a lone surrogate from a client
    with sessions.begin() as s:
        upsert_many(s, FrozenMessage, rows, KEYS)
    bulk = BulkUpsert.prepare(dialect, FrozenMessage, [dict(r, session_key="bulk") for r in rows], KEYS)
    with sessions.begin() as s:
        bulk.run(s)
    assert read(sessions, "bulk") == read(sessions, "many")
    assert read(sessions, "bulk")[40][-3] == '[["log","Ba\ufffdsh",1,1]]'  # scrubbed, as the statement hook does
    # a conflict sets every non-key column; rows not given stay
    change = dict(raw_hash="changed", modified=False, deferred='[["x"]]', forwarded=b"\x00new")
    with sessions.begin() as s:
        upsert_many(s, FrozenMessage, [row("many", 3, **change)], KEYS)
    again = BulkUpsert.prepare(dialect, FrozenMessage, [row("bulk", 3, **change)], KEYS)
    with sessions.begin() as s:
        again.run(s)
    got = read(sessions, "bulk")
    assert (
        got == read(sessions, "many") and len(got) == 41 and got[3][1] == "changed" and bytes(got[3][3]) == b"\x00new"
    )


def test_a_drivers_error_comes_as_sqlalchemys(sessions):
    dialect = sessions.kw["bind"].dialect
    twice = BulkUpsert.prepare(
        dialect, FrozenMessage, [row("dup", 1), row("dup", 1, raw_hash=None)], KEYS
    )  # NOT NULL raw_hash
    with pytest.raises(SQLAlchemyError) as e, sessions.begin() as s:
        twice.run(s)
    assert isinstance(e.value, IntegrityError)
    assert read(sessions, "dup") == []


def test_a_long_sessions_state_round_trips(sessions):
    sealer = Sealer(secrets.token_bytes(SECRET_BYTES))
    n = 5000
    msgs = tuple(
        FrozenEntry(i, f"raw{i}", f"norm{i}", f'{{"role":"user","content":"m{i}"}}', i == 7, 10 if i == 7 else 0, 4 if i == 7 else 0,
                    (("k" * 16, ("content", 0)),) if i == 7 else (), (("log", "Bash", 10, 4),) if i == 7 else (), (("content", 1),) if i == 9 else ())
        for i in range(n)
    )  # fmt: skip
    a, b = SessionStore(sessions, sealer), SessionStore(sessions, sealer)
    stored = a.save(SessionRecord("long"), "anthropic-messages", SessionTools(("headroom_retrieve",), "h", "[]"), msgs)
    assert stored.revision == 1
    got = b.load("long")  # another proxy: read from the database
    assert got.known and got.revision == 1 and got.messages == msgs
