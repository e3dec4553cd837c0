"""A SQLite database file before SQLite opens it: one opener at a time, and a damaged file set
aside, never silently replaced (issue 36, items 6 and 7).

* **One opener at a time.** Two proxies starting on one file both found no tables and both
  created them (``table compression_decisions already exists``). :func:`opening` holds an
  exclusive ``flock`` on ``<file>.lock`` (owner-only, beside the database; PostgreSQL has its
  advisory lock, :data:`~headroom_core.db.engine.MIGRATION_LOCK`) around the check, the file's
  creation and the migration: the first migrates, the others wait and find nothing to do.
* **A damaged file is set aside.** An emptied file made the proxy create a fresh database in
  its place: ledger, memories and rules gone without a word. :func:`damage` tells what is wrong
  (from the file itself, never from an error's wording); :func:`set_aside` renames the file with
  its ``-wal`` and ``-shm`` to ``<file>.damaged-<UTC time>`` (``…-wal``, ``…-shm``: SQLite finds
  them again when the copy is opened) and logs one line saying what was found, where it went
  and how to recover. A new database is then created in its place.

What counts as damaged:

* a file that does not start with SQLite's header (``SQLite format 3\\0``);
* a file that fails ``PRAGMA quick_check`` (or cannot be read as a database at all);
* a file of 0 bytes **where a database was used before**: its ``-wal`` file holds data, or its
  folder holds the Headroom home's ``secret.key`` or ``ledger-journal`` (created once a proxy
  ran there). A 0-byte file without these is a new database (``touch``, or a first start
  stopped before it created the tables) and is used as it is: a brand-new home differs from an
  emptied database by these traces alone.
"""

from __future__ import annotations

import fcntl
import logging
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("headroom")

#: The first 16 bytes of every SQLite 3 database file (https://www.sqlite.org/fileformat.html).
SQLITE_HEADER = b"SQLite format 3\x00"
#: Files beside a database that show a Headroom home was used (created by a proxy's first run).
USE_TRACES = ("secret.key", "ledger-journal")
#: Seconds :func:`opening` waits for another process's open (its migration) at most.
OPEN_LOCK_SECONDS = 120.0


@dataclass(frozen=True)
class Damage:
    """What is wrong with a database file: ``what`` in words (``"0 bytes, though …"``)."""

    what: str


def _companions(f: Path) -> list[Path]:
    return [f.with_name(f.name + s) for s in ("-wal", "-shm")]


def damage(f: Path) -> Damage | None:
    """What is wrong with the SQLite file ``f`` (see the module docstring), or None when it is
    a usable database, a new one, or missing. Reads the file (``quick_check`` reads every page:
    bench/bench_faults.py prints its time); writes nothing but what SQLite's own recovery of a
    ``-wal`` file does. Raises nothing."""
    try:
        size = f.stat().st_size
    except OSError:
        return None  # missing (or unreadable: SQLite says why when it opens it)
    if size == 0:
        traces = [p.name for p in [f.parent / t for t in USE_TRACES] if p.exists()]
        wal = _companions(f)[0]
        if wal.exists() and wal.stat().st_size > 0:
            traces.insert(0, wal.name)
        return (
            Damage(f"0 bytes, though the database was used before ({', '.join(traces)} beside it)") if traces else None
        )
    try:
        with open(f, "rb") as fh:
            head = fh.read(len(SQLITE_HEADER))
    except OSError:
        return None
    if head != SQLITE_HEADER:
        return Damage(f"not a SQLite database ({size} bytes that do not start with SQLite's header)")
    try:
        con = sqlite3.connect(f.resolve().as_uri() + "?mode=rw", uri=True, timeout=10)
        try:
            rows = [r[0] for r in con.execute("PRAGMA quick_check(3)")]
        finally:
            con.close()
    except sqlite3.OperationalError as e:
        if getattr(e, "sqlite_errorcode", 0) & 0xFF in (5, 6):  # locked by another process: not damage
            return None
        return Damage(f"unreadable as a database ({e})")
    except sqlite3.DatabaseError as e:
        return Damage(f"unreadable as a database ({e})")
    if rows != ["ok"]:
        return Damage(f"PRAGMA quick_check failed: {'; '.join(str(r) for r in rows)[:300]}")
    return None


def set_aside(f: Path, found: Damage) -> Path:
    """Rename ``f`` and its ``-wal`` and ``-shm`` files to ``<f>.damaged-<UTC time>`` (plus the
    same suffixes) and log one line saying ``found``, where they went and how to recover.
    Returns the new path of the database file. Raises ``OSError`` when ``f`` cannot be renamed."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    dest = f.with_name(f"{f.name}.damaged-{stamp}")
    n = 1
    while dest.exists():
        n += 1
        dest = f.with_name(f"{f.name}.damaged-{stamp}-{n}")
    os.rename(f, dest)
    moved = []
    for c, suffix in zip(_companions(f), ("-wal", "-shm")):
        if c.exists():
            try:
                os.rename(c, dest.with_name(dest.name + suffix))
                moved.append(suffix)
            except OSError as e:
                log.warning("headroom: could not move %s beside %s: %s", c, dest, e)
    also = f" (with its {' and '.join(moved)})" if moved else ""
    # a warning, not an error: mitmproxy exits on an error logged during its start
    log.warning(
        "headroom: the database %s was damaged: %s; moved to %s%s and a new empty database created in its place. "
        "To recover, stop the proxy and try `sqlite3 %s .recover | sqlite3 recovered.db`, then put recovered.db at %s",
        f, found.what, dest, also, dest, f,
    )  # fmt: skip
    return dest


@contextmanager
def opening(f: Path, timeout: float = OPEN_LOCK_SECONDS) -> Iterator[None]:
    """Hold the exclusive lock of opening ``f`` (``<f>.lock``, created owner-only with its
    folder) for the block: one process at a time checks, creates and migrates the file. Waits
    up to ``timeout`` seconds, then goes on without it (logged): a stuck opener never stops a
    start. Raises ``OSError`` when the lock file cannot be created."""
    f.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(f.with_name(f.name + ".lock"), os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    log.warning(
                        "headroom: another process has been opening %s for %.0f s; going on without waiting", f, timeout
                    )
                    break
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # releases the lock
