"""The ledger's write-ahead journal: an answered request is in a journal file before its answer
goes out; the writer's commit empties it; a later start writes what a stopped process had
journaled and the database lacks, exactly once."""

from __future__ import annotations

import os
import stat
import threading
import time
from datetime import datetime

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError

import headroom_core.ledger_writer as lw
from headroom_core.db.engine import open_database
from headroom_core.db.models import RequestOutcome, ToolUsage
from headroom_core.ledger_entry import Entry
from headroom_core.ledger_journal import LedgerJournal, decode, encode, orphans
from headroom_core.ledger_writer import LedgerWriter, write_entries

WHEN = datetime(2026, 12, 2, 3, 4, 5, 678901)


def _entry(i: int, project: str = "/src/app") -> Entry:
    e = Entry(client="claude-code", project=project, tools={"Read": [1, 1], "Write": [1, 0]}, seen_at=WHEN)
    e.add(
        dict(
            created_at=WHEN,
            dialect="anthropic-messages",
            client="claude-code",
            project=project,
            model=f"m{i}",
            session_key=f"s{i}",
            action="compressed",
            reason="compressed 2 tool outputs",
            body_bytes_before=1000 + i,
            body_bytes_after=400,
            tokens_before=300,
            tokens_after=100,
            blocks_compressed=2,
            tools_tokens_before=0,
            tools_tokens_after=0,
            retrieve_rounds=0,
            status_code=200,
            usage_input_tokens=10,
            usage_output_tokens=None,
            usage_cache_read_tokens=None,
            usage_cache_write_tokens=None,
            detail="[]",
        )
    )
    return e


def _rows(sessions) -> list[tuple[str, str]]:
    with sessions() as s:
        return sorted((r.model, r.entry_id) for r in s.scalars(select(RequestOutcome)))


def _usage(sessions) -> dict[str, tuple[int, int]]:
    with sessions() as s:
        return {r.tool_name: (r.offered, r.called) for r in s.scalars(select(ToolUsage))}


def _files(d) -> list[tuple[str, int]]:
    return sorted((p.name, p.stat().st_size) for p in d.glob("*.jsonl"))


def _until(done, timeout: float = 10.0) -> None:
    """Poll ``done()`` every 20 ms until it is true or ``timeout`` seconds pass (the writer's
    later try runs on its own thread); the caller asserts the outcome."""
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        time.sleep(0.02)


@pytest.fixture
def db(tmp_path):
    return open_database(f"sqlite:///{tmp_path / 'headroom.db'}")


def test_a_line_decodes_to_the_same_entry():
    """Datetimes, counts, None and a lone surrogate (a tool that cut an emoji in half) come back
    as they went in; the line is one ASCII line."""
    e = _entry(1, project="/src/caf\u00e9 \ud83d")
    line = encode(e)
    assert line.endswith(b"\n") and line.count(b"\n") == 1 and line.isascii()
    back = decode(line)
    assert back == e
    assert back.rows[0]["created_at"] == WHEN and back.rows[0]["entry_id"] == e.id and len(e.id) == 32


def test_a_submitted_entry_is_journaled_before_its_commit_and_the_commit_empties_the_journal(db, tmp_path):
    """The future resolves at once (the answer need not wait for the database); while the commit
    is held the entry's line is in the journal (owner-only); once committed the segment is
    emptied, and a clean close deletes it."""
    journal = LedgerJournal(tmp_path / "journal")
    held, real = threading.Event(), lw.write_rows

    def slow_rows(*a):
        held.wait(30)
        real(*a)

    lw.write_rows = slow_rows
    w = LedgerWriter(db, journal=journal)
    try:
        e = _entry(0)
        done = w.submit(e)
        assert done.done() and done.result() is True and w.journaled
        assert _rows(db) == []
        ((name, size),) = _files(tmp_path / "journal")
        path = tmp_path / "journal" / name
        assert size == len(encode(e)) and decode(path.read_bytes()) == e
        assert (
            stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE((tmp_path / "journal").stat().st_mode) == 0o700
        )
        held.set()
        assert w.flush(30)
        assert _rows(db) == [("m0", e.id)] and _usage(db) == {"Read": (1, 1), "Write": (1, 0)}
        assert _files(tmp_path / "journal") == [(name, 0)]
    finally:
        lw.write_rows = real
        held.set()
        assert w.close(10)
    assert _files(tmp_path / "journal") == []


def test_a_restart_writes_exactly_what_the_database_lacks(db, tmp_path):
    """A process journaled 5 entries and died (its segment unlocked) after committing 2 of them;
    the next start writes the other 3, rows and tool counts, deletes the segment, and a second
    recovery writes nothing."""
    d = tmp_path / "journal"
    dead = LedgerJournal(d)
    entries = [_entry(i) for i in range(5)]
    for e in entries:
        dead.append(e)
    write_entries(db, entries[:2])
    os.close(dead._seg.fd)  # the process ends: its lock is gone, its file stays
    w = LedgerWriter(db, journal=LedgerJournal(d))
    try:
        assert w.recover() == 3
        assert _rows(db) == sorted((f"m{i}", entries[i].id) for i in range(5))
        assert _usage(db) == {"Read": (5, 5), "Write": (5, 0)}
        assert [n for n, _ in _files(d)] == [w._journal._seg.path.name]  # the dead one is gone
        assert w.recover() == 0 and len(_rows(db)) == 5
    finally:
        w.close(10)


def test_a_living_process_segment_is_left_alone(db, tmp_path):
    """Another process's segment (locked while it lives; here another open of the file) is
    neither written nor deleted."""
    d = tmp_path / "journal"
    living = LedgerJournal(d)
    living.append(_entry(0))
    w = LedgerWriter(db, journal=LedgerJournal(d))
    try:
        assert w.recover() == 0 and _rows(db) == []
        assert living._seg.path.exists()
    finally:
        w.close(10)
        living.close()


def test_lines_that_are_not_entries_are_kept_aside_and_the_rest_written(db, tmp_path, monkeypatch):
    """A torn line, a line nested past the parser's recursion limit, a number JSON reads as
    infinity and a line longer than any entry (its first KB): each kept in ``<segment>.bad``,
    the entries around them written, the same entry twice (a copied line) once."""
    import headroom_core.ledger_journal as lj

    monkeypatch.setattr(lj, "MAX_LINE_BYTES", 4096)
    d = tmp_path / "journal"
    dead = LedgerJournal(d)
    first = _entry(0)
    odd = [b'{"id": "torn", "rows": [\n', b"[" * 100_000 + b"\n", b'{"id":"x","tools":{"R":[Infinity,0]},"rows":[]}\n']
    dead.append(first)
    for line in odd:
        os.write(dead._seg.fd, line)
    os.write(dead._seg.fd, encode(first))  # the same entry again
    os.write(dead._seg.fd, b"y" * 10_000 + b"\n")  # overlong
    dead.append(_entry(1))
    path = dead._seg.path
    os.close(dead._seg.fd)
    w = LedgerWriter(db, journal=LedgerJournal(d))
    try:
        assert w.recover() == 2 and [m for m, _ in _rows(db)] == ["m0", "m1"]
        kept = path.with_name(path.name + ".bad").read_bytes().splitlines(keepends=True)
        assert kept == [
            odd[0],
            b"[" * 1024 + b" [cut]\n",
            odd[2],
            b"y" * 1024 + b" [cut]\n",
        ]  # as read; overlong: the first KB
        assert not path.exists()
    finally:
        w.close(10)


def test_what_is_not_a_regular_file_is_skipped(db, tmp_path):
    """A FIFO, a link to a device and a folder named like a segment neither block the start,
    nor are read, nor deleted; a real segment beside them is written."""
    d = tmp_path / "journal"
    dead = LedgerJournal(d)
    dead.append(_entry(5))
    os.close(dead._seg.fd)
    os.mkfifo(d / "fifo.jsonl")
    (d / "zero.jsonl").symlink_to("/dev/zero")
    (d / "dir.jsonl").mkdir()
    w = LedgerWriter(db, journal=LedgerJournal(d))
    try:
        assert w.recover() == 1 and [m for m, _ in _rows(db)] == ["m5"]
        assert all((d / n).exists() or (d / n).is_symlink() for n in ("fifo.jsonl", "zero.jsonl", "dir.jsonl"))
    finally:
        w.close(10)


def test_an_entry_whose_commit_failed_is_written_by_the_next_start(db, tmp_path):
    """The database refuses the commit (retries exhausted): the answer went out, its line stays
    in the journal after the writer closes, and the next start writes it."""
    d = tmp_path / "journal"
    real = lw.write_rows

    def refuse(*a):
        raise OperationalError("INSERT", {}, Exception("database is locked"))

    lw.write_rows = refuse
    try:
        w = LedgerWriter(db, journal=LedgerJournal(d), retries=0)
        e = _entry(7)
        assert w.submit(e).result(1) is True
        w.flush(10)
        w.close(10)
    finally:
        lw.write_rows = real
    assert _rows(db) == [] and len(_files(d)) == 1
    assert _usage(db) == {}  # its counts stay with its line, not written without its row
    w2 = LedgerWriter(db, journal=LedgerJournal(d))
    try:
        assert w2.recover() == 1 and _rows(db) == [("m7", e.id)]
        assert _usage(db) == {"Read": (1, 1), "Write": (1, 0)}  # counted once
    finally:
        w2.close(10)


def test_an_entry_whose_commit_failed_is_written_once_the_database_is_back(db, tmp_path):
    """The database is unavailable for one commit (retries exhausted): the running writer tries
    the entry again ``retry_seconds`` later and writes it once, counts included; its journal line
    is then settled, so a clean close leaves no segment behind."""
    d = tmp_path / "journal"
    real, calls = lw.write_rows, []

    def unavailable_once(*a):
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("INSERT", {}, Exception("database is locked"))
        real(*a)

    lw.write_rows = unavailable_once
    try:
        w = LedgerWriter(db, journal=LedgerJournal(d), retries=0, retry_seconds=0.05)
        first = _entry(1)
        assert w.submit(first).result(1) is True
        w.flush(10)
        assert _rows(db) == [] and _usage(db) == {}  # failed: only in the journal so far
        second = _entry(2)
        w.submit(second)
        w.flush(10)
        _until(lambda: len(_rows(db)) >= 2)
        assert _rows(db) == sorted([("m1", first.id), ("m2", second.id)])
        w.flush(10)
        assert _usage(db) == {"Read": (2, 2), "Write": (2, 0)}  # each entry counted once
        w.close(10)
    finally:
        lw.write_rows = real
    assert _files(d) == []  # every line settled: nothing for a later start
    w2 = LedgerWriter(db, journal=LedgerJournal(d))
    try:
        assert w2.recover() == 0
    finally:
        w2.close(10)


def test_an_entry_the_database_refuses_is_set_aside_and_the_others_written(db, tmp_path):
    """A journaled entry the database can never take (here a NOT NULL column without a value:
    a line from another version) does not hold up the rest of its segment: the others are written,
    it goes to ``<segment>.bad`` (owner-only), and the segment is gone."""
    d = tmp_path / "journal"
    dead = LedgerJournal(d)
    good, odd = _entry(1), _entry(2)
    odd.rows[0]["dialect"] = None
    for e in (good, odd, _entry(3)):
        dead.append(e)
    path = dead._seg.path
    os.close(dead._seg.fd)
    w = LedgerWriter(db, journal=LedgerJournal(d))
    try:
        assert w.recover() == 2 and [m for m, _ in _rows(db)] == ["m1", "m3"]
        bad = path.with_name(path.name + ".bad")
        assert not path.exists() and [decode(x).id for x in bad.read_bytes().splitlines()] == [odd.id]
        assert stat.S_IMODE(bad.stat().st_mode) == 0o600
        assert w.recover() == 0  # set aside for good: not retried at every start
    finally:
        w.close(10)


def test_an_entry_the_journal_cannot_hold_waits_for_its_commit(db, tmp_path):
    """An entry whose line cannot be written (here a value JSON cannot encode; a full disk
    alike) is not lost: its future resolves once its row is committed."""
    w = LedgerWriter(db, journal=LedgerJournal(tmp_path / "journal"))
    try:
        e = _entry(4)
        e.rows[0]["detail"] = b"[]"  # bytes: the database takes them, JSON does not
        done = w.submit(e)
        assert done.result(30) is True and _rows(db) == [("m4", e.id)]
        assert _files(tmp_path / "journal")[0][1] == 0  # nothing of it in the journal
    finally:
        w.close(10)


def test_a_segment_is_named_only_once_locked(tmp_path):
    """A segment is created under a hidden name, locked, then renamed: a start that looks for
    orphans never sees an unlocked new segment (it would delete it, and this process would
    journal into a deleted file). Nothing hidden is left behind."""
    d = tmp_path / "journal"
    j = LedgerJournal(d)
    assert [p.name for p in d.iterdir()] == [j._seg.path.name] and j._seg.path.suffix == ".jsonl"
    assert list(orphans(d)) == []  # locked: not an orphan
    j.close()


def test_segments_rotate_and_are_deleted_once_committed(db, tmp_path):
    """Past ``max_segment_bytes`` the journal moves on to a new segment; a rotated segment is
    deleted once all its entries are committed: 200 entries leave one empty segment."""
    d = tmp_path / "journal"
    journal = LedgerJournal(d, max_segment_bytes=4096)
    opened, real_open = [], journal._open
    journal._open = lambda: opened.append(1) or real_open()  # type: ignore[method-assign]
    held, entered, real_rows = threading.Event(), threading.Event(), lw.write_rows

    def held_rows(*a):
        entered.set()
        held.wait(30)
        real_rows(*a)

    lw.write_rows = held_rows
    w = LedgerWriter(db, journal=journal)
    try:
        for i in range(200):
            w.submit(_entry(i))
            if i == 0:
                assert entered.wait(30)  # the first commit has started (and waits)
            if i == 100:
                held.set()  # a burst journaled while the first commit waits, then the rest
        assert w.flush(60)
        assert opened  # rotated at least once
        with db() as s:
            assert s.scalar(select(func.count(RequestOutcome.id))) == 200
        (f,) = _files(d)
        assert f[1] == 0
    finally:
        lw.write_rows = real_rows
        held.set()
        w.close(10)


def test_without_a_journal_the_future_waits_for_the_commit(db):
    """A writer without a journal (the folder cannot be written) resolves an entry's future
    once its row is committed, as before."""
    w = LedgerWriter(db)
    try:
        e = _entry(3)
        assert w.submit(e).result(30) is True and not w.journaled
        assert _rows(db) == [("m3", e.id)]
    finally:
        w.close(10)


def _dead_segment(d, *entries: Entry):
    dead = LedgerJournal(d)
    for e in entries:
        dead.append(e)
    os.close(dead._seg.fd)
    return dead._seg.path


def test_a_database_that_cannot_say_what_it_has_keeps_every_segment(db, tmp_path, monkeypatch):
    """The lookup of what the database has fails (not the usual "unavailable" error): every
    segment is kept as it was, nothing is written twice, and a later start writes all."""
    from sqlalchemy.exc import DatabaseError

    d = tmp_path / "journal"
    first, second = _dead_segment(d, _entry(1)), _dead_segment(d, _entry(2))

    def broken(*a):
        raise DatabaseError("SELECT", {}, Exception("database disk image is malformed"))

    monkeypatch.setattr(lw, "_missing", broken)
    w = LedgerWriter(db, journal=LedgerJournal(d))
    try:
        assert w.recover() == 0 and _rows(db) == [] and first.exists() and second.exists()
        monkeypatch.undo()
        assert w.recover() == 2 and sorted(m for m, _ in _rows(db)) == ["m1", "m2"]
    finally:
        w.close(10)


def test_a_database_lost_midway_keeps_the_segment_not_in_bad(db, tmp_path, monkeypatch):
    """One entry is refused, so the entries are written one by one; the database then becomes
    unavailable: the segment is kept whole (nothing goes to ``.bad`` for being unlucky), and
    the next start writes each entry once."""
    d = tmp_path / "journal"
    odd = _entry(2)
    odd.rows[0]["dialect"] = None
    path = _dead_segment(d, _entry(1), odd, _entry(3))
    real, calls = lw.write_entries, []

    def flaky(sessions, entries):
        calls.append(len(entries))
        if len(calls) == 3:  # the batch, the first on its own, then: gone
            raise OperationalError("INSERT", {}, Exception("database is locked"))
        return real(sessions, entries)

    monkeypatch.setattr(lw, "write_entries", flaky)
    w = LedgerWriter(db, journal=LedgerJournal(d))
    try:
        assert w.recover() == 0 and path.exists() and not path.with_name(path.name + ".bad").exists()
        assert [m for m, _ in _rows(db)] == ["m1"]
        monkeypatch.undo()
        assert w.recover() == 1 and sorted(m for m, _ in _rows(db)) == ["m1", "m3"]  # m1 not twice
        assert path.with_name(path.name + ".bad").exists() and not path.exists()
    finally:
        w.close(10)


def test_a_fifo_where_the_bad_file_goes_never_blocks_the_start(db, tmp_path):
    d = tmp_path / "journal"
    odd = _entry(2)
    odd.rows[0]["dialect"] = None
    path = _dead_segment(d, _entry(1), odd)
    os.mkfifo(path.with_name(path.name + ".bad"))
    w = LedgerWriter(db, journal=LedgerJournal(d))
    try:
        assert w.recover() == 1 and [m for m, _ in _rows(db)] == ["m1"]
        assert path.exists()  # the refused entry had nowhere to go: its segment is kept
    finally:
        w.close(10)


def test_an_older_entry_written_later_never_moves_last_seen_back(sessions):
    """A journal recovered after a crash may hold entries older than rows already written: the
    tool counts add up, and ``last_seen_at`` stays the latest (both databases' upserts)."""
    newer, older = _entry(1), _entry(2)
    newer.seen_at = datetime(2026, 12, 2, 4, 0, 0, 123456)
    older.seen_at = datetime(2026, 12, 1, 23, 59, 59, 999999)
    write_entries(sessions, [newer])
    write_entries(sessions, [older])
    with sessions() as s:
        rows = {r.tool_name: (r.offered, r.called, r.last_seen_at) for r in s.scalars(select(ToolUsage))}
    assert rows == {"Read": (2, 2, newer.seen_at), "Write": (2, 0, newer.seen_at)}
    later = _entry(3)
    later.seen_at = datetime(2026, 12, 2, 5, 0, 0, 1)
    write_entries(sessions, [later])  # a later one still moves it on
    with sessions() as s:
        assert {r.last_seen_at for r in s.scalars(select(ToolUsage))} == {later.seen_at}


def test_an_older_entry_written_later_leaves_offered_since_called_as_is(sessions):
    """In time order: a call (the count since the last call resets to 0), then two offers (2). The
    call's entry written last, as a recovery or a later try does, must not reset it."""
    called, offered1, offered2 = _entry(1), _entry(2), _entry(3)
    called.tools, called.seen_at = {"Write": [1, 1]}, datetime(2026, 1, 1)
    offered1.tools, offered1.seen_at = {"Write": [1, 0]}, datetime(2026, 1, 2)
    offered2.tools, offered2.seen_at = {"Write": [1, 0]}, datetime(2026, 1, 3)
    for e in (offered1, offered2, called):
        write_entries(sessions, [e])
    with sessions() as s:
        r = s.scalars(select(ToolUsage)).one()
        assert (r.offered, r.called, r.offered_since_called, r.last_seen_at) == (3, 1, 2, datetime(2026, 1, 3))


def test_a_commit_reported_failed_that_landed_is_written_once_counts_included(db, tmp_path):
    """The connection is lost right after the commit: the batch is reported failed though its row
    landed. The writer's own retry (``retries``) writes no second row, and the later try writes
    the counts the failed batch never wrote, once."""
    d = tmp_path / "journal"
    real, calls = lw.write_rows, []

    def lands_then_fails(*a):
        calls.append(1)
        real(*a)
        if len(calls) <= 2:
            raise OperationalError("COMMIT", {}, Exception("connection lost after the commit"))

    lw.write_rows = lands_then_fails
    try:
        w = LedgerWriter(db, journal=LedgerJournal(d), retries=1, retry_seconds=0.05)
        first = _entry(1)
        assert w.submit(first).result(1) is True
        w.flush(10)
        assert _rows(db) == [("m1", first.id)]  # written once, though tried twice
        w.submit(_entry(2))
        w.flush(10)
        _until(lambda: w.flush(10) and _usage(db) == {"Read": (2, 2), "Write": (2, 0)})
        assert _usage(db) == {"Read": (2, 2), "Write": (2, 0)}
        assert len(_rows(db)) == 2
        w.close(10)
    finally:
        lw.write_rows = real
    assert _files(d) == []
