"""The SQLite file itself (issue 36, items 6, 7 and 8), through real mitmdump processes and the
anthropic SDK:

* a damaged database (emptied, not a SQLite file, failing ``quick_check``) is moved aside with
  its ``-wal``/``-shm`` and one log line saying what was found, where it went and how to
  recover; a new one takes its place and every answered request is recorded in it. A 0-byte
  file in a home never used is a new database, used as it is;
* proxies starting together on one file migrate it once, every round;
* a stopped proxy leaves its data in ``headroom.db`` (checkpointed: the file alone holds it), and
  ``headroom backup`` copies a database in use into one file.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support.clients import anthropic_client
from tests.support.proxy import ADDON_SCRIPT, MitmProxy
from tests.support.upstream import Reply

HEADROOM = str(Path(sys.executable).parent / "headroom")


def _ask(upstream, px, model: str) -> None:
    upstream.responder = lambda rec: Reply.text("ok")
    msg = anthropic_client(upstream, px, timeout=120).messages.create(
        model=model, max_tokens=20, messages=[{"role": "user", "content": f"hello from {model}"}]
    )
    assert msg.content[0].text == "ok"


def _models(db: Path) -> list[str]:
    """The ``model`` of every ledger row of the SQLite file ``db`` (read with the sqlite3 module)."""
    con = sqlite3.connect(db)
    try:
        return sorted(r[0] for r in con.execute("SELECT model FROM request_outcomes"))
    finally:
        con.close()


def _wait_models(db: Path, n: int, timeout: float = 60.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = _models(db)
        except sqlite3.Error:
            got = []
        if len(got) >= n or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def _ready(px: MitmProxy, timeout: float = 180.0) -> None:
    """Wait until ``px`` is warmed up; fail at once when its warm-up failed or it exited."""
    deadline = time.monotonic() + timeout
    while not re.search(r"headroom: ready", log := px.log_text(since_start=True)):
        assert "warm-up failed" not in log and px.running and time.monotonic() < deadline, log[-3000:]
        time.sleep(0.1)


def _damage(db: Path, how: str) -> bytes:
    """Damage the stopped proxy's database ``how``; the bytes left in the file."""
    if how == "emptied":
        db.write_bytes(b"")
    elif how == "not sqlite":
        db.write_bytes(b"these bytes were overwritten by something else\n" * 200)
    else:  # pages after the first overwritten: the header is intact, quick_check fails
        data = bytearray(db.read_bytes())
        page = int.from_bytes(data[16:18], "big") or 65536
        assert len(data) >= 3 * page
        data[page : len(data)] = bytes([0xA5]) * (len(data) - page)
        db.write_bytes(bytes(data))
    return db.read_bytes()


@pytest.mark.parametrize("how", ["emptied", "not sqlite", "quick_check fails"])
def test_a_damaged_database_is_moved_aside_and_every_answer_recorded(upstream, proxy_factory, how):
    px = proxy_factory(ADDON_SCRIPT)
    _ready(px)
    db = px.home / "headroom.db"
    _ask(upstream, px, "before-1")
    _ask(upstream, px, "before-2")
    assert _wait_models(db, 2) == ["before-1", "before-2"]
    px.stop()
    left = _damage(db, how)
    px.start()
    _ready(px)
    log = px.log_text(since_start=True)
    lines = [ln for ln in log.splitlines() if "was damaged" in ln]
    assert len(lines) == 1, log[-3000:]
    m = re.search(r"headroom: the database (\S+) was damaged: (.+); moved to (\S+) and a new empty database", lines[0])
    assert m is not None and m.group(1) == str(db)
    moved = Path(m.group(3))
    assert moved.parent == db.parent and moved.name.startswith("headroom.db.damaged-")
    assert moved.read_bytes() == left  # kept as it was, to recover from
    assert {"emptied": "0 bytes, though the database was used before", "not sqlite": "not a SQLite database",
            "quick_check fails": ""}[how] in m.group(2)  # fmt: skip
    assert "sqlite3 " in lines[0] and ".recover" in lines[0]  # how to recover
    for i in range(3):
        _ask(upstream, px, f"after-{i}")
    assert _wait_models(db, 3) == ["after-0", "after-1", "after-2"]  # every answer recorded in the new database
    assert os.stat(db).st_mode & 0o777 == 0o600


def test_an_empty_file_in_a_new_home_is_a_new_database(upstream, tmp_path):
    """A 0-byte headroom.db with no trace of earlier use (``touch``, or a first start stopped
    before it made the tables) is not damage: used as it is, nothing moved, no error line."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "headroom.db").touch()
    with MitmProxy(ADDON_SCRIPT, home=home) as px:
        _ready(px)
        _ask(upstream, px, "first")
        assert _wait_models(home / "headroom.db", 1) == ["first"]
        assert "damaged" not in px.log_text()
    assert not list(home.glob("headroom.db.damaged-*"))


ROUNDS, PROXIES = 3, 3


def test_proxies_starting_together_on_one_file_migrate_once(upstream, tmp_path):
    """Before: 2 of 4 tries, one proxy's warm-up failed (``table compression_decisions already
    exists``). Each round: 3 mitmdumps on one fresh home started at the same moment; all warm
    up, the database is at the one head with every table, and each proxy records its request."""
    from sqlalchemy import create_engine, inspect

    from headroom_core.db.engine import migrate

    ref = create_engine(f"sqlite:///{tmp_path / 'ref.db'}")
    migrate(ref)
    want_tables = set(inspect(ref).get_table_names())
    with ref.connect() as c:
        want_head = [r[0] for r in c.exec_driver_sql("SELECT version_num FROM alembic_version")]
    ref.dispose()
    for rnd in range(ROUNDS):
        home = tmp_path / f"home-{rnd}"
        home.mkdir()
        proxies = [MitmProxy(ADDON_SCRIPT, home=home, startup_timeout=180) for _ in range(PROXIES)]
        barrier = threading.Barrier(PROXIES)
        errors: list[BaseException] = []

        def start(p: MitmProxy) -> None:
            barrier.wait(60)
            try:
                p.start()
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=start, args=(p,)) for p in proxies]
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join(300)
            assert not errors, errors
            for p in proxies:
                _ready(p)
            for i, p in enumerate(proxies):
                _ask(upstream, p, f"round-{rnd}-proxy-{i}")
            db = home / "headroom.db"
            assert _wait_models(db, PROXIES) == [f"round-{rnd}-proxy-{i}" for i in range(PROXIES)]
            con = sqlite3.connect(db)
            try:
                tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                head = [r[0] for r in con.execute("SELECT version_num FROM alembic_version")]
            finally:
                con.close()
            assert tables == want_tables and head == want_head
            migrated = sum(p.log_text().count("database migrated to") for p in proxies)
            assert migrated == 1, f"round {rnd}: {migrated} proxies migrated"
        finally:
            for p in proxies:
                p.cleanup()


def _headroom(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEADROOM_") and not k.lower().endswith("_proxy")}
    return subprocess.run(
        [HEADROOM, *args],
        env={**env, "HEADROOM_HOME": str(home), "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_stopped_proxy_leaves_its_data_in_the_database_file_and_backup_copies_one_in_use(
    upstream, proxy_factory, tmp_path
):
    px = proxy_factory(ADDON_SCRIPT)
    _ready(px)
    db = px.home / "headroom.db"
    for i in range(3):
        _ask(upstream, px, f"kept-{i}")
    assert _wait_models(db, 3) == ["kept-0", "kept-1", "kept-2"]
    # while it runs: `headroom backup PATH` copies the database in use (its -wal content included) into one file
    copy = tmp_path / "copies" / "headroom-copy.db"
    out = _headroom(px.home, "backup", str(copy))
    assert out.returncode == 0, out.stderr
    assert f"copied to {copy}" in out.stdout
    assert _models(copy) == ["kept-0", "kept-1", "kept-2"]
    assert os.stat(copy).st_mode & 0o777 == 0o600 and not Path(f"{copy}-wal").exists()
    again = _headroom(px.home, "backup", str(copy))  # never overwrites
    assert again.returncode == 2 and "exists already" in again.stderr
    # stopped: the data is in headroom.db itself; a copy of that one file holds every row
    assert px.stop() == 0
    wal = Path(f"{db}-wal")
    assert not wal.exists() or wal.stat().st_size == 0
    alone = tmp_path / "alone" / "headroom.db"
    alone.parent.mkdir()
    shutil.copyfile(db, alone)
    assert _models(alone) == ["kept-0", "kept-1", "kept-2"]
    # the default place: the home's backups folder
    out = _headroom(px.home, "backup")
    assert out.returncode == 0, out.stderr
    (made,) = (px.home / "backups").glob("headroom-*.db")
    assert _models(made) == ["kept-0", "kept-1", "kept-2"]


def test_backup_of_a_postgresql_database_says_to_use_pg_dump(tmp_path):
    out = _headroom(tmp_path, "backup", "--db-url", "postgresql://u:secret@127.0.0.1:1/h")
    assert out.returncode == 2
    assert "pg_dump" in out.stderr and "secret" not in out.stderr
