"""The lock-wait budget on a real SQLite database (headroom_core/db/lock_wait.py): what a unit of
work spends is its time in the database, a lock held past it fails the statement as a lock wait,
and work outside a budget keeps the background wait."""

from __future__ import annotations

import sqlite3
import time

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from headroom_core.db import lock_wait
from headroom_core.db.engine import make_engine


@pytest.fixture
def db(tmp_path):
    f = tmp_path / "headroom.db"
    eng = make_engine(f"sqlite:///{f}")
    with eng.begin() as c:
        c.execute(text("CREATE TABLE t (a INTEGER)"))
    yield eng, f
    eng.dispose()


def _busy_ms(eng) -> int:
    with eng.connect() as c:
        return int(c.exec_driver_sql("PRAGMA busy_timeout").scalar())


def test_other_work_spends_nothing_and_a_held_lock_spends_it_all(db):
    eng, f = db
    with lock_wait.bounded(0.3):
        time.sleep(0.4)  # the unit's own work (compressing): not database time
        with eng.begin() as c:
            c.execute(text("INSERT INTO t VALUES (1)"))
        left = lock_wait.wait_left()
        assert left is not None and 0.2 < left <= 0.3
        other = sqlite3.connect(f, isolation_level=None)
        other.execute("BEGIN EXCLUSIVE")
        try:
            with pytest.raises(OperationalError) as e, eng.begin() as c:
                c.execute(text("INSERT INTO t VALUES (2)"))
            assert lock_wait.is_lock_wait(e.value)
            assert lock_wait.wait_left() == 0.0
            with lock_wait.bounded(5.0):  # inside: the outer budget goes on being spent
                with pytest.raises(OperationalError), eng.begin() as c:
                    c.execute(text("INSERT INTO t VALUES (3)"))
        finally:
            other.execute("ROLLBACK")
            other.close()
    assert lock_wait.wait_left() is None
    assert _busy_ms(eng) == round(1000 * lock_wait.BACKGROUND_WAIT_SECONDS)  # outside a budget
    with eng.begin() as c:
        assert c.execute(text("SELECT count(*) FROM t")).scalar() == 1


def test_an_error_that_is_not_a_lock_wait(db):
    eng, _ = db
    with pytest.raises(OperationalError) as e, eng.begin() as c:
        c.execute(text("INSERT INTO no_such_table VALUES (1)"))
    assert not lock_wait.is_lock_wait(e.value)
