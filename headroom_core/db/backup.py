"""A SQLite database whole in one file: checkpointed when a proxy stops, and copied while in use
(``headroom backup``; issue 36, item 8).

In WAL mode (:mod:`headroom_core.db.engine`) committed transactions go to ``headroom.db-wal``
first and reach ``headroom.db`` at a checkpoint: a copy of ``headroom.db`` alone, taken after a
stop, could miss everything since the last one. :func:`checkpoint_all` runs
``PRAGMA wal_checkpoint(TRUNCATE)`` on every SQLite database the process opened (mitmproxy's
``done`` hook), so a stopped proxy leaves its data in the database file and an empty ``-wal``.
:func:`backup_sqlite` copies a database that may be in use with SQLite's online backup API
(``sqlite3.Connection.backup``: a consistent snapshot, ``-wal`` content included) into one
self-contained file. PostgreSQL has its own tool for this (``pg_dump``).
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

from headroom_core.db import lock_wait
from headroom_core.db.engine import create_private_file, opened_engines

log = logging.getLogger("headroom")

#: Seconds a checkpoint at stop waits for another process's lock (another proxy sharing the file).
CHECKPOINT_WAIT_SECONDS = 2.0


def checkpoint_all() -> int:
    """``PRAGMA wal_checkpoint(TRUNCATE)`` on every SQLite database this process opened, then
    close their idle connections. Returns how many were checkpointed completely (a database
    another process is reading or writing is checkpointed as far as it can be, and counts not).
    Raises nothing: a stop never fails on it (logged)."""
    whole = 0
    for eng in opened_engines():
        if eng.dialect.name != "sqlite":
            continue
        try:
            with lock_wait.bounded(CHECKPOINT_WAIT_SECONDS), eng.connect() as c:
                busy, _log_frames, _moved = c.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)").one()
            whole += 0 if busy else 1
            eng.dispose()
        except Exception as e:  # noqa: BLE001 - the data stays in the -wal file, as before
            log.warning(
                "headroom: the database %s was not checkpointed at stop (%s); its -wal file holds recent data",
                eng.url.database,
                e,
            )
    return whole


def backup_sqlite(source: Path, dest: Path) -> int:
    """Copy the SQLite database ``source`` (in use or not) into ``dest``, a new file created
    owner-only (mode 0600: it holds tool outputs and memories), as one self-contained file.
    Returns its size in bytes. Raises ``FileExistsError`` when ``dest`` exists,
    ``FileNotFoundError`` when ``source`` does not, ``sqlite3.Error`` when it cannot be read."""
    if not source.is_file():
        raise FileNotFoundError(f"no database at {source}")
    if dest.exists():
        raise FileExistsError(f"{dest} exists already")
    create_private_file(dest)
    try:
        src = sqlite3.connect(
            source.resolve().as_uri() + "?mode=rw", uri=True, timeout=lock_wait.BACKGROUND_WAIT_SECONDS
        )
        try:
            out = sqlite3.connect(dest)
            try:
                src.backup(out)
                out.execute("PRAGMA journal_mode=DELETE")  # the copy's pages in its own file, no -wal beside it
            finally:
                out.close()
        finally:
            src.close()
    except BaseException:
        dest.unlink(missing_ok=True)
        raise
    return dest.stat().st_size
