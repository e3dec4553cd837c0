"""How ledger rows reach the database: idempotent counters and a background writer.

Two faults this module exists for:

* concurrent first requests of one client and project both inserted the same ``tool_usage``
  row (``UNIQUE constraint failed``) and one request's row was lost. Counters are now one
  ``INSERT … ON CONFLICT DO UPDATE SET offered = offered + excluded.offered`` (SQLite ≥ 3.24 and
  PostgreSQL; SQLAlchemy's ``sqlite.insert`` / ``postgresql.insert``), atomic in the database,
  so any number of threads and proxy processes sharing a database count every request;
* under load the rows were written from mitmproxy's default thread pool, queued behind the
  compression work, and a ``kill -9`` lost nearly all of them. :class:`LedgerWriter` has its
  own thread that takes what was submitted and commits it at once (everything queued meanwhile
  goes in the same transaction), so a request's row is on disk within one commit's time
  (milliseconds; bounded by ``flush_seconds`` plus the database's own latency), and a restart
  finds it (SQLite in WAL mode keeps committed transactions across a killed process). Before
  that, :meth:`LedgerWriter.submit` writes the entry to the ledger journal
  (:mod:`headroom_core.ledger_journal`): the addons await the future it returns before the
  answer goes out, which is done at once for a journaled entry (else once committed), so every
  answered request is on disk, and the next start writes what a killed proxy had not committed.
"""

from __future__ import annotations

import functools
import logging
import os
import queue
import stat
import threading
import time
from concurrent.futures import Future
from typing import Any, Callable, Iterable, cast

from sqlalchemy import Connection, Table, case, func, insert, select
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from headroom_core.db.engine import core_connection
from headroom_core.db.models import RequestOutcome, ToolUsage
from headroom_core.errors import EnvironmentProblem
from headroom_core.ledger_entry import Entry
from headroom_core.ledger_journal import LedgerJournal, Segment, encode, orphans

log = logging.getLogger("headroom")


def write_entries(sessions: sessionmaker[Session], entries: Iterable[Entry]) -> None:
    """Write ``entries`` in one transaction: their rows, and their tool counts added to
    ``tool_usage`` atomically (see the module docstring). Raises SQLAlchemy's errors."""
    entries = list(entries)
    with sessions.begin() as s:
        _add_rows(s, entries)
        _add_counts(s, _merged_counts(entries))


def _set_aside(path: Any, lines: list[bytes]) -> None:
    """Append ``lines`` to ``<path>.bad`` (owner-only, a regular file: a FIFO or link there is
    refused, never waited on). Raises ``OSError``."""
    fd = os.open(
        f"{path}.bad", os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0), 0o600
    )
    with os.fdopen(fd, "ab") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path}.bad is not a regular file")
        f.write(b"".join(lines))


def _missing(sessions: sessionmaker[Session], entries: list[Entry]) -> list[Entry]:
    """Those of ``entries`` none of whose rows is in ``request_outcomes`` (by ``entry_id``; an
    entry's rows are committed in one transaction). Raises SQLAlchemy's errors."""
    have: set[str] = set()
    ids = [e.id for e in entries]
    with sessions() as s:
        for i in range(0, len(ids), 500):
            have.update(s.scalars(select(RequestOutcome.entry_id).where(RequestOutcome.entry_id.in_(ids[i : i + 500]))))
    return [e for e in entries if e.id not in have]


def write_missing(sessions: sessionmaker[Session], entries: Iterable[Entry]) -> int:
    """For entries whose row commit was reported failed (it may have landed) and whose counts
    were never written: in one transaction, the rows of those the database lacks (by
    ``entry_id``) and the tool counts of all of them. Returns how many entries' rows it wrote.
    Raises SQLAlchemy's errors (nothing written then)."""
    entries = list(entries)
    missing = _missing(sessions, entries)
    with sessions.begin() as s:
        _add_rows(s, missing)
        _add_counts(s, _merged_counts(entries))
    return len(missing)


def _together_else_each(
    write: Callable[[list[Entry]], object], entries: list[Entry], where: str, written: Callable[[Entry], None]
) -> list[Entry]:
    """``write(entries)`` in one transaction, else (the database refuses some entry) one
    transaction per entry; ``written`` is called for each entry written. Returns the entries
    refused (each logged with ``where``). Raises ``OperationalError`` (the database unavailable,
    not a refusal): what was written before stays written."""
    bad: list[Entry] = []
    try:
        if entries:
            write(entries)
        for e in entries:
            written(e)
    except OperationalError:
        raise
    except Exception:  # noqa: BLE001 - some entry the database refuses: each on its own
        for e in entries:
            try:
                write([e])
            except OperationalError:
                raise
            except Exception as err:  # noqa: BLE001 - set aside, with its reason in the log
                log.error("headroom: %s: entry %s refused by the database (%s)", where, e.id, err)
                bad.append(e)
            else:
                written(e)
    return bad


def write_rows(sessions: sessionmaker[Session], entries: Iterable[Entry]) -> None:
    """Write the ``request_outcomes`` rows of ``entries`` in one transaction (one executemany:
    about 0.2 ms for a request's row on SQLite). Raises SQLAlchemy's errors."""
    with core_connection(sessions, begin=True) as c:
        _add_rows(c, list(entries))


def write_counts(sessions: sessionmaker[Session], entries: Iterable[Entry]) -> None:
    """Add the tool counts of ``entries`` (merged per client, project and tool) to
    ``tool_usage`` in one transaction. Raises SQLAlchemy's errors."""
    counts = _merged_counts(list(entries))
    if counts:
        with sessions.begin() as s:
            _add_counts(s, counts)


def _merged_counts(entries: list[Entry]) -> dict[tuple[str, str, str], list]:
    counts: dict[tuple[str, str, str], list] = {}
    for e in entries:
        for name, (o, c) in e.tools.items():
            k = (e.client[:64], e.project[:512], name[:256])
            acc = counts.setdefault(k, [0, 0, e.seen_at, 0])
            acc[0] += o
            acc[1] += c
            # offered since last called (evidence for tools on demand): a request that called the
            # tool resets it, in submission order
            acc[3] = 0 if c else acc[3] + o
            if e.seen_at is not None and (acc[2] is None or e.seen_at > acc[2]):
                acc[2] = e.seen_at
    return counts


#: The ``request_outcomes`` INSERT, built once (executed with a list of rows: executemany).
_INSERT_ROWS = insert(cast(Table, RequestOutcome.__table__))


def _add_rows(s: Session | Connection, entries: list[Entry]) -> None:
    rows = [r for e in entries for r in e.rows]
    if rows:
        # all rows carry the same columns (ledger.record builds them)
        s.execute(_INSERT_ROWS, rows)


def _add_counts(s: Session, counts: dict[tuple[str, str, str], list]) -> None:
    if not counts:
        return
    values = [
        {
            "client": k[0],
            "project": k[1],
            "tool_name": k[2],
            "offered": o,
            "called": c,
            "offered_since_called": since,
            "last_seen_at": seen,
        }
        for k, (o, c, seen, since) in sorted(counts.items())  # one order: no deadlock between writers
    ]
    name = s.get_bind().dialect.name
    if name in ("sqlite", "postgresql"):
        # one statement, compiled once (SQLAlchemy's cache), executed for every row (executemany)
        s.execute(_upsert(name), values)
        return
    # Other databases: read, then update or insert; a concurrent insert is retried as an update.
    for v in values:
        for _attempt in range(3):
            try:
                with s.begin_nested():
                    row = s.scalars(
                        select(ToolUsage)
                        .where(
                            ToolUsage.client == v["client"],
                            ToolUsage.project == v["project"],
                            ToolUsage.tool_name == v["tool_name"],
                        )
                        .with_for_update()
                    ).one_or_none()
                    if row is None:
                        s.add(ToolUsage(**v))
                    else:
                        row.offered += v["offered"]
                        row.called += v["called"]
                        older = (
                            v["last_seen_at"] is not None
                            and row.last_seen_at is not None
                            and v["last_seen_at"] < row.last_seen_at
                        )
                        if not older:
                            row.offered_since_called = (
                                v["offered_since_called"]
                                if v["called"]
                                else (row.offered_since_called or 0) + v["offered_since_called"]
                            )
                        if v["last_seen_at"] is not None and (
                            row.last_seen_at is None or v["last_seen_at"] > row.last_seen_at
                        ):
                            row.last_seen_at = v["last_seen_at"]
                    s.flush()
                break
            except IntegrityError:
                continue


@functools.cache
def _upsert(dialect: str) -> Any:
    """The ``tool_usage`` counter upsert of ``dialect`` (``"sqlite"`` or ``"postgresql"``), with
    a bound parameter per column: executed with a list of rows. ``last_seen_at`` never moves
    back (SQLite's two-argument ``max``, PostgreSQL's ``GREATEST``)."""
    from sqlalchemy.dialects import postgresql, sqlite

    T = cast(Table, ToolUsage.__table__)  # typed FromClause on a mapped class; it is the Table
    stmt = sqlite.insert(T) if dialect == "sqlite" else postgresql.insert(T)
    return stmt.on_conflict_do_update(
        index_elements=[T.c.client, T.c.project, T.c.tool_name],
        set_={
            "offered": T.c.offered + stmt.excluded.offered,
            "called": T.c.called + stmt.excluded.called,
            # called in this batch: the count since the last call; else it grows. An entry older
            # than the row (recovered after a crash, or written on a later try) leaves it as is
            "offered_since_called": case(
                (stmt.excluded.last_seen_at < T.c.last_seen_at, T.c.offered_since_called),
                (stmt.excluded.called > 0, stmt.excluded.offered_since_called),
                else_=func.coalesce(T.c.offered_since_called, 0) + stmt.excluded.offered_since_called,
            ),
            # the later of the two: an entry recovered after a crash may be older than the row
            "last_seen_at": (
                func.max(
                    func.coalesce(T.c.last_seen_at, stmt.excluded.last_seen_at),
                    func.coalesce(stmt.excluded.last_seen_at, T.c.last_seen_at),
                )
                if dialect == "sqlite"
                else func.greatest(T.c.last_seen_at, stmt.excluded.last_seen_at)
            ),
        },
    )


class DatabaseUnavailable(OperationalError, EnvironmentProblem):
    """The database could not be opened (its cause is ``orig``): the ledger's entries wait in
    the journal. An ``OperationalError``, as a database that went away mid-run raises."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(None, None, cause)

    def __str__(self) -> str:
        return f"the database cannot be opened ({self.orig})"


#: At most this many entries whose commit failed are held in memory to be written again (~1 KB
#: each); the lines of any more stay in the journal for the next start.
RETRY_KEEP = 10_000

#: Queued by :meth:`LedgerWriter.flush`: write the counts held back now.
_FLUSH = "flush"


class LedgerWriter:
    """Writes :class:`Entry` objects from its own daemon thread, in batches.

    :meth:`submit` never blocks and never raises; it returns a future resolved once the entry's
    ``request_outcomes`` row's commit has ended (True: on disk; False: dropped), which an async
    caller can await (``asyncio.wrap_future``) so an answer is not sent before its row is
    committed. The thread takes the first waiting entry, waits at most ``flush_seconds`` for more
    (0: none), and commits the rows of everything waiting (at most ``max_batch`` entries) in one
    transaction. The ``tool_usage`` counts are held back and written, merged, in one transaction
    at most ``counts_seconds`` later (0: right after the rows): an agent offering 200 tools
    costs 200 counter upserts (~10 ms of the GIL) per write, which its answer no longer waits
    for, and under load one write counts many requests. A killed proxy may lose the counts of its
    last ``counts_seconds``, never an answered request's row. A failed commit is retried
    (``retries`` times, backing off from 0.1 s) and then logged: the ledger never holds up
    traffic. A journaled entry's line stays, and the entry is written again every
    ``retry_seconds`` until the database takes it (each once, by entry id; at most
    ``RETRY_KEEP`` entries held for this, the others written by the next start); an entry
    without a journal is dropped. :meth:`flush` waits until everything submitted so far is committed, counts
    included; :meth:`close` flushes and stops the thread (mitmproxy's ``done`` hook).

    ``sessions`` may be None with ``open_sessions`` given: the database is opened by calling it
    when first needed, and again after each failure (a PostgreSQL server not up yet, a database
    that cannot be opened, issue 36 item 6): meanwhile every entry is journaled and answered as
    usual, and its row is written once the database opens, as is the journal of a stopped proxy
    (:meth:`recover`, retried every ``retry_seconds`` until it ran).
    """

    def __init__(
        self,
        sessions: sessionmaker[Session] | None,
        *,
        open_sessions: Callable[[], sessionmaker[Session]] | None = None,
        flush_seconds: float = 0.0,
        counts_seconds: float = 1.0,
        max_batch: int = 500,
        retries: int = 5,
        journal: LedgerJournal | None = None,
        retry_seconds: float = 10.0,
    ) -> None:
        if sessions is None and open_sessions is None:
            raise TypeError("LedgerWriter needs sessions or open_sessions")
        self._opened = sessions
        self._open = open_sessions
        self._journal = journal
        self._flush_s = flush_seconds
        self._counts_s = counts_seconds
        self._max = max_batch
        self._retries = retries
        self._q: queue.SimpleQueue[tuple[Entry, Future, Segment | None] | str | None] = queue.SimpleQueue()
        self._cv = threading.Condition()
        self._submitted = 0
        self._done = 0
        self._closed = False
        self._held: list[Entry] = []  # counts not written yet (the thread's own)
        self._held_n = 0  # entries whose rows are written and counts held
        self._retry_s = retry_seconds
        self._failed: list[tuple[Entry, Segment]] = []  # journaled entries whose commit failed
        self._retry_at: float | None = None  # when they are tried again
        self._recover_at: float | None = None  # when recover() runs again (the database did not open)
        self._thread = threading.Thread(target=self._run, name="headroom-ledger", daemon=True)
        self._thread.start()

    @property
    def _sessions(self) -> sessionmaker[Session]:
        """The database's sessions, opened now if not yet. Raises :class:`DatabaseUnavailable`."""
        if self._opened is None:
            assert self._open is not None
            try:
                self._opened = self._open()
            except Exception as e:  # noqa: BLE001 - any reason it cannot be opened: unavailable for now
                raise DatabaseUnavailable(e) from e
        return self._opened

    @property
    def pending(self) -> int:
        """Entries submitted whose row or counts are not yet committed (or dropped)."""
        with self._cv:
            return self._submitted - self._done

    @property
    def journaled(self) -> bool:
        """Whether entries are journaled (:mod:`headroom_core.ledger_journal`)."""
        return self._journal is not None

    def submit(self, entry: Entry) -> Future:
        """Queue ``entry`` for the next commit; the future resolves to True once the entry is
        durable: at once when it is in the journal (a restart after ``kill -9`` writes it), else
        once its row is committed; False when it was dropped (a failed commit, or submitted
        after :meth:`close`). With a journal this writes one line to a file (microseconds)."""
        done: Future = Future()
        seg: Segment | None = None
        with self._cv:
            if self._closed:
                done.set_result(False)
                return done
            if self._journal is not None:
                try:
                    seg = self._journal.append(entry)
                except Exception as e:  # noqa: BLE001 - a full disk: this answer waits for the commit instead
                    log.warning("headroom: ledger journal not written (%s); the answer waits for the database", e)
            self._submitted += 1
            # queued under the lock: a flush or close that counted this entry queues its marker
            # behind it, never ahead (SimpleQueue.put never blocks)
            self._q.put((entry, done, seg))
        if seg is not None:
            done.set_result(True)
        return done

    def recover(self) -> int:
        """Write the journaled entries of processes that ended (``kill -9``, a failed commit)
        that the database lacks (by ``entry_id``), rows and counts, and delete their segments;
        the number of entries written. Entries the database refuses and lines that are not
        entries are kept in ``<segment>.bad`` (logged). Called once at start-up, off the event
        loop. Raises nothing: a segment that cannot be written is logged and kept for a later
        start."""
        if self._journal is None:
            return 0
        try:
            self._sessions  # noqa: B018 - opened now, or unavailable: all segments wait
        except DatabaseUnavailable as e:
            self._recover_at = time.monotonic() + self._retry_s
            self._q.put(_FLUSH)  # the thread learns when to try again
            log.warning(
                "headroom: %s; answered requests stay in the ledger journal and are written once it opens (tried every %g s)",
                e,
                self._retry_s,
            )
            return 0
        self._recover_at = None
        written = 0
        seen: set[str] = set()  # an entry in two segments (a copied file) is written once
        for o in orphans(self._journal.directory):
            try:
                n, bad = self._recover_segment(o.path, o.entries, seen)
                written += n  # in the database, whatever happens to the segment
                if bad or o.unreadable:
                    _set_aside(o.path, [encode(e) for e in bad] + o.unreadable)
                    log.warning(
                        "headroom: ledger journal %s: %d lines not written (%d unreadable, %d refused), kept in %s.bad",
                        o.path,
                        len(bad) + o.skipped,
                        o.skipped,
                        len(bad),
                        o.path,
                    )
            except Exception:  # noqa: BLE001 - the database unavailable, or .bad unwritable: all kept
                log.exception("headroom: ledger journal %s could not be written; kept for a later start", o.path)
                o.release()
                continue
            o.remove()
        if written:
            log.info(
                "headroom: %d answered requests written to the ledger from the journal of a stopped proxy", written
            )
        return written

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait up to ``timeout`` seconds until everything submitted is committed, counts
        included (written now, not ``counts_seconds`` later); True if so. An entry whose commit
        failed counts as done: it waits in the journal for a later try (or start)."""
        deadline = time.monotonic() + timeout
        with self._cv:
            target = self._submitted
            if self._done >= target:
                return True
            self._q.put(_FLUSH)
            while self._done < target:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(left)
        return True

    def close(self, timeout: float = 10.0) -> bool:
        """Flush (up to ``timeout`` seconds) and stop the thread; True if nothing was left."""
        ok = self.flush(timeout)
        with self._cv:
            self._closed = True
            self._q.put(None)  # behind every entry submitted before the close
        self._thread.join(timeout=1.0)
        if self._journal is not None and not self._thread.is_alive():
            self._journal.close()
        return ok

    def _recover_segment(self, path: Any, entries: list[Entry], seen: set[str]) -> tuple[int, list[Entry]]:
        """Write those of a segment's ``entries`` the database lacks and ``seen`` does not hold,
        in one transaction, else one transaction each: ``(how many were written, those the
        database refused)``; ``seen`` gets the written ids. Raises ``OperationalError`` (the
        database unavailable: not a refusal) and any error of the lookup."""
        missing = [e for e in _missing(self._sessions, entries) if e.id not in seen]
        bad = _together_else_each(
            lambda es: write_entries(self._sessions, es), missing, f"ledger journal {path}", lambda e: seen.add(e.id)
        )
        return len(missing) - len(bad), bad

    def _run(self) -> None:
        counts_due: float | None = None  # when the held counts are written
        while True:
            try:
                due = [t for t in (counts_due, self._retry_at, self._recover_at) if t is not None]
                wait = max(0.0, min(due) - time.monotonic()) if due else None
                first = self._q.get(timeout=wait)
            except queue.Empty:
                first = _FLUSH
            if first is None or first == _FLUSH:
                self._write_held()
                counts_due = None
                if first is None:
                    return
                self._retry_if_due()
                if self._recover_at is not None and time.monotonic() >= self._recover_at:
                    self.recover()
                continue
            assert isinstance(first, tuple)
            batch: list[tuple[Entry, Future, Segment | None]] = [first]
            stop = now = False
            deadline = time.monotonic() + self._flush_s
            while len(batch) < self._max:
                try:
                    left = deadline - time.monotonic()
                    item = self._q.get(timeout=left) if left > 0 else self._q.get_nowait()
                except queue.Empty:
                    break
                if not isinstance(item, tuple):  # stop (None) or flush
                    stop, now = item is None, True
                    break
                batch.append(item)
            entries = [e for e, _, _ in batch]
            ok = self._write(write_rows, entries, rows=True)
            for _, done, seg in batch:
                if seg is None and done.set_running_or_notify_cancel():  # False: the waiter cancelled it
                    done.set_result(ok)
            if ok:
                if self._journal is not None:
                    self._journal.settle(seg for _, _, seg in batch if seg is not None)
                self._retry_if_due()
            else:  # their lines stay in the journal: tried again later, else by a later start
                self._failed += [(e, seg) for e, _, seg in batch if seg is not None][
                    : max(0, RETRY_KEEP - len(self._failed))
                ]
                if self._failed and self._retry_at is None:
                    self._retry_at = time.monotonic() + self._retry_s
            # counts of rows not written stay with their journal lines: a start writes both
            self._held += [
                Entry(client=e.client, project=e.project, tools=e.tools, seen_at=e.seen_at)
                for e, _, seg in batch
                if e.tools and (ok or seg is None)
            ]
            self._held_n += len(entries)
            if now or self._counts_s <= 0 or (counts_due is not None and time.monotonic() >= counts_due):
                self._write_held()
                counts_due = None
            elif counts_due is None:
                counts_due = time.monotonic() + self._counts_s
            if stop:
                return

    def _retry_if_due(self) -> None:
        """Write the journaled entries whose commit failed, once ``retry_seconds`` have passed
        since it failed: the rows of those the database lacks (by entry id: a commit reported as
        failed may have landed) and the counts of all of them (never written: a failed batch's
        counts are not held), in one transaction, and settle their journal lines. The
        database still unavailable: tried again ``retry_seconds`` later. An entry it refuses
        stays in the journal for the next start, which sets it aside. Raises nothing."""
        if not self._failed or self._retry_at is None or time.monotonic() < self._retry_at:
            return
        assert self._journal is not None  # only journaled entries are kept for a retry
        items, self._failed, self._retry_at = self._failed, [], None
        segment = {e.id: seg for e, seg in items}
        settled: list[Segment] = []
        try:
            bad = _together_else_each(
                lambda es: write_missing(self._sessions, es),
                [e for e, _ in items],
                "ledger",
                lambda e: settled.append(segment.pop(e.id)),
            )
            for e in bad:  # its line stays: the next start sets it aside
                del segment[e.id]
        except Exception as e:  # noqa: BLE001 - still unavailable: their lines stay, tried again later
            log.warning(
                "headroom: %d ledger entries still not written (%s); trying again in %g s",
                len(segment),
                e,
                self._retry_s,
            )
            self._failed, self._retry_at = (
                [(en, seg) for en, seg in items if en.id in segment] + self._failed,
                time.monotonic() + self._retry_s,
            )
        self._journal.settle(settled)
        if settled:
            log.info("headroom: %d ledger entries written on a later try", len(settled))

    def _write_held(self) -> None:
        if self._held:
            self._write(write_counts, self._held)
        with self._cv:
            self._done += self._held_n
            self._cv.notify_all()
        self._held, self._held_n = [], 0

    def _write(
        self, write: Callable[[sessionmaker[Session], Iterable[Entry]], None], batch: list[Entry], rows: bool = False
    ) -> bool:
        """``write(sessions, batch)``, retried on a database error; ``rows``: a retry writes only
        the entries the database lacks (a commit reported as failed may have landed)."""
        delay = 0.1
        for attempt in range(self._retries + 1):
            try:
                write(self._sessions, batch if attempt == 0 or not rows else _missing(self._sessions, batch))
                return True
            except (OperationalError, IntegrityError) as e:
                if attempt == self._retries:
                    log.error("headroom: %d ledger entries could not be written (%s)", len(batch), e)
                    return False
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
            except Exception:  # noqa: BLE001 - the ledger never breaks traffic
                log.exception("headroom: %d ledger entries could not be written", len(batch))
                return False
        return False
