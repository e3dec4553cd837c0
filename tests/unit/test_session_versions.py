"""One truth per conversation (issue 33): the session's state on a real database (SQLite and
PostgreSQL), written and read by two stores as two proxies of a team would (each with its own
in-process copy, one database).

- a store's in-process copy is used only while the database's revision is the copy's;
- a store planned from a revision another proxy has since replaced is not written over it when
  the other's turn was later (more messages), and is when its own turn was (the later turn's
  state stands, whatever order the stores commit in);
- a database that cannot answer the revision read within the request's budget: the copy is
  used and the record says it is unverified; without a copy the error is raised.
"""

from __future__ import annotations

import secrets
import sqlite3
from contextlib import contextmanager

import pytest
from sqlalchemy.exc import OperationalError

from headroom_core.cache.frozen import FrozenEntry
from headroom_core.cache.session_store import SessionRecord, SessionStore, SessionTools
from headroom_core.db import lock_wait
from headroom_core.db.sealed import SECRET_BYTES, Sealer

KEY = "s" * 32
TOOLS = SessionTools(("headroom_retrieve",), "tools-hash", '[{"name":"Bash"}]')


def entries(n: int, tag: str = "") -> tuple[FrozenEntry, ...]:
    """``n`` message entries; ``tag`` changes what message 1 went upstream as (a flip)."""
    return tuple(
        FrozenEntry(
            i, f"raw{i}", f"norm{i}", f'{{"role":"user","content":"m{i}{tag if i == 1 else ""}"}}', bool(tag) and i == 1
        )
        for i in range(n)
    )


@pytest.fixture
def stores(sessions):
    """Two proxies' session stores on one database and one key (a team's ``secret_key_file``)."""
    sealer = Sealer(secrets.token_bytes(SECRET_BYTES))
    return SessionStore(sessions, sealer), SessionStore(sessions, sealer)


def sent(rec: SessionRecord | tuple[FrozenEntry, ...]) -> list[str]:
    return [e.sent_text for e in (rec.messages if isinstance(rec, SessionRecord) else rec)]


def test_a_copy_is_used_only_while_the_database_has_its_revision(stores):
    a, b = stores
    r1 = a.save(a.load(KEY), "anthropic-messages", TOOLS, entries(2))
    assert (r1.known, r1.revision) == (True, 1)
    assert a.load(KEY) is r1  # current: the copy itself
    rb = b.load(KEY)
    assert sent(rb) == sent(r1) and rb.revision == 1 and rb is not r1  # B has no copy: read
    r2 = b.save(rb, "anthropic-messages", TOOLS, entries(4, "compressed"))
    assert r2.revision == 2
    ra = a.load(KEY)  # A's copy is of revision 1: read again
    assert ra.revision == 2 and sent(ra) == sent(r2) and ra.verified


def test_an_earlier_turn_stored_late_is_not_written_over_a_later_one(stores):
    a, b = stores
    base = a.save(a.load(KEY), "anthropic-messages", TOOLS, entries(2))
    a_turn = a.load(KEY)  # A plans turn 2 from revision 1 ...
    b_turn = b.load(KEY)
    later = b.save(b_turn, "anthropic-messages", TOOLS, entries(5, "compressed"))  # ... B stores turn 3 first
    got = a.save(a_turn, "anthropic-messages", TOOLS, entries(3, "raw"))  # A's turn 2 comes late
    assert got.revision == later.revision == base.revision + 1  # nothing written
    assert sent(got) == sent(later)
    for s in (a, b):
        now = s.load(KEY)
        assert now.revision == later.revision and sent(now) == sent(later)


def test_a_later_turn_stored_after_an_earlier_one_stands(stores):
    a, b = stores
    a.save(a.load(KEY), "anthropic-messages", TOOLS, entries(2))
    a_turn = a.load(KEY)
    b_turn = b.load(KEY)
    b.save(b_turn, "anthropic-messages", TOOLS, entries(3, "raw"))  # B's earlier turn stored first
    got = a.save(a_turn, "anthropic-messages", TOOLS, entries(5, "compressed"))  # A's later turn, from revision 1
    assert got.revision == 3 and sent(got) == sent(entries(5, "compressed"))
    for s in (a, b):
        assert sent(s.load(KEY)) == sent(entries(5, "compressed"))


def test_a_new_session_stored_by_two_proxies_at_once_keeps_the_later_turn(stores):
    a, b = stores
    a_new, b_new = a.load(KEY), b.load(KEY)
    assert not a_new.known and not b_new.known
    b.save(b_new, "anthropic-messages", TOOLS, entries(3))
    got = a.save(a_new, "anthropic-messages", TOOLS, entries(1, "x"))
    assert got.revision == 1 and sent(got) == sent(entries(3))


@contextmanager
def database_not_answering(sessions):
    """Another connection holds the database so that reads wait (SQLite: exclusive locking
    mode in WAL; PostgreSQL: an ACCESS EXCLUSIVE lock on ``session_state``)."""
    engine = sessions.kw["bind"]
    if engine.dialect.name == "sqlite":
        engine.dispose()  # the pool's connections closed: the other one takes the whole file
        other = sqlite3.connect(engine.url.database, isolation_level=None, timeout=5)
        other.execute("PRAGMA locking_mode=EXCLUSIVE")
        other.execute("BEGIN EXCLUSIVE")
        other.execute("UPDATE session_state SET dialect = dialect")
        try:
            yield
        finally:
            other.execute("ROLLBACK")
            other.execute("PRAGMA locking_mode=NORMAL")
            other.execute("SELECT count(*) FROM session_state")  # gives the lock up
            other.close()
        return
    with engine.connect() as c:
        c.exec_driver_sql("LOCK TABLE session_state IN ACCESS EXCLUSIVE MODE")
        try:
            yield
        finally:
            c.rollback()


def test_a_database_that_does_not_answer_in_budget_gives_the_copy_unverified(stores, sessions):
    a, b = stores
    r1 = a.save(a.load(KEY), "anthropic-messages", TOOLS, entries(2))
    with database_not_answering(sessions), lock_wait.bounded(0.2):
        got = a.load(KEY)
        assert got.verified is False and sent(got) == sent(r1) and got.revision == r1.revision
        with pytest.raises(OperationalError):  # B knows nothing of the session: nothing to replay
            b.load(KEY)
    assert a.load(KEY).verified  # answered again: the copy is current
