"""The ledger's write-ahead journal: an answered request is on disk before its answer goes out,
without the answer waiting for a database commit.

The caller of :meth:`~headroom_core.ledger_writer.LedgerWriter.submit` (mitmproxy's event loop,
at a response's end) appends the request's ledger entry to a journal file as one JSON line: one
``write(2)`` of about 1 KB to a file opened ``O_APPEND``, some microseconds. The kernel keeps what
was written across a killed process (``kill -9``; not across a power cut, like SQLite's WAL
with ``synchronous=NORMAL``). The ledger writer's thread commits the entry to the database
milliseconds later, as before; then its line is no longer needed: a journal segment whose every
entry is committed is emptied (``ftruncate``), or deleted once it was rotated out
(``max_segment_bytes``). Before, the answer waited for the commit itself: ~1.2 ms of each
request's latency (the writer thread's wake, the write, the event loop's wake) and ~1 ms of the
proxy's CPU per request under load.

Each process writes its own segments (``<pid>-<random>.jsonl`` in the journal folder, owner-only),
each held under an exclusive ``flock`` while the process lives. A starting proxy (or any process
opening the ledger) takes the segments nobody holds (:func:`orphans`: their writer died), and the
writer adds the entries the database lacks, found by their ``entry_id``
(:meth:`~headroom_core.ledger_writer.LedgerWriter.recover`). An entry whose commit failed stays
in its segment for the next start; one the database refuses outright goes to
``<segment>.bad``. No secret is journaled: a ledger row holds figures, names and hashes (see
docs/security.md: what is kept where).

The write runs on the event loop, as mitmproxy's own log output does: a home on a file system
that stalls writes (a hung network mount) would stall the proxy with it. Headroom's home is
meant to be local (it holds the SQLite database too).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import stat
import threading
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Iterable, Iterator

from sqlalchemy import DateTime

from headroom_core.db.models import RequestOutcome
from headroom_core.ledger_entry import Entry

log = logging.getLogger("headroom")

#: Columns of ``request_outcomes`` holding a datetime (journaled as ISO 8601 text).
_DATETIME_COLUMNS = frozenset(c.name for c in RequestOutcome.__table__.columns if isinstance(c.type, DateTime))
_SUFFIX = ".jsonl"


def encode(entry: Entry) -> bytes:
    """``entry`` as one journal line (ASCII JSON, ``\\n``-terminated; lone surrogates escaped)."""
    rows = [{k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in r.items()} for r in entry.rows]
    d = {
        "id": entry.id,
        "client": entry.client,
        "project": entry.project,
        "tools": entry.tools,
        "seen_at": entry.seen_at.isoformat() if entry.seen_at else None,
        "rows": rows,
    }
    return (json.dumps(d, separators=(",", ":")) + "\n").encode("ascii")


def decode(line: bytes) -> Entry:
    """The :class:`Entry` of a journal line. Raises on a line that is not one: ``ValueError``
    (and its ``json`` subclass), ``KeyError``, ``TypeError``, ``AttributeError``, and
    ``RecursionError`` or ``OverflowError`` from ``json`` (nesting too deep, ``Infinity``)."""
    d = json.loads(line)
    rows = [
        {k: (datetime.fromisoformat(v) if k in _DATETIME_COLUMNS and isinstance(v, str) else v) for k, v in r.items()}
        for r in d["rows"]
    ]
    if not rows:
        raise ValueError("an entry without a row")
    seen = d.get("seen_at")
    tools = {str(k): [int(o), int(c)] for k, (o, c) in d.get("tools", {}).items()}
    return Entry(
        rows,
        str(d.get("client", "")),
        str(d.get("project", "")),
        tools,
        datetime.fromisoformat(seen) if seen else None,
        id=str(d["id"]),
    )


@dataclass(eq=False)
class Segment:
    """One journal file of this process: its open descriptor (held under ``flock``), its size in
    bytes, and ``pending``, its entries not yet committed to the database."""

    path: Path
    fd: int
    size: int = 0
    pending: int = 0


class LedgerJournal:
    """This process's journal segments in ``directory`` (created owner-only). Thread-safe:
    :meth:`append` from any thread (the event loop), :meth:`settle` from the ledger writer's.

    Raises ``OSError`` when the folder or the first segment cannot be created."""

    def __init__(self, directory: Path, *, max_segment_bytes: int = 4 << 20) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.directory, 0o700)  # also a folder made before, or under another umask
        self._max = max_segment_bytes
        self._lock = threading.Lock()
        self._old: list[Segment] = []  # rotated out, entries still pending
        self._seg = self._open()

    def _open(self) -> Segment:
        name = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        tmp, path = self.directory / f".{name}.tmp", self.directory / f"{name}{_SUFFIX}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
        try:
            # locked before it gets a name orphans() looks at: another process's start never
            # takes (and deletes) a segment between its creation and its lock
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.rename(tmp, path)
        except OSError:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        return Segment(path, fd)

    def append(self, entry: Entry) -> Segment:
        """Write ``entry``'s line; the segment it went to (for :meth:`settle`). Raises ``OSError``
        (a full disk: nothing of the line is left behind)."""
        line = encode(entry)
        with self._lock:
            seg = self._seg
            view = memoryview(line)
            try:
                while view:
                    view = view[os.write(seg.fd, view) :]
            except OSError:
                try:
                    os.ftruncate(seg.fd, seg.size)  # no torn line before the next one
                except OSError:  # the next lines go to a new segment (this one: a start skips its torn line)
                    self._old.append(seg)
                    self._seg = self._open()
                raise
            seg.size += len(line)
            seg.pending += 1
            return seg

    def settle(self, segments: Iterable[Segment]) -> None:
        """One committed entry for each of ``segments`` (what :meth:`append` returned); a segment
        left with nothing pending is emptied (the current one) or deleted (a rotated one); the
        current one is rotated once past ``max_segment_bytes``. Raises nothing: a failed file
        operation is logged, and leaves a segment a later start replays (idempotent)."""
        with self._lock:
            for seg in segments:
                seg.pending -= 1
            cur = self._seg
            try:
                if cur.pending == 0 and cur.size:
                    os.ftruncate(cur.fd, 0)
                    cur.size = 0
                elif cur.size > self._max:
                    self._seg = self._open()
                    self._old.append(cur)
            except OSError as e:
                log.warning("headroom: ledger journal %s: %s", cur.path, e)
            for seg in [s for s in self._old if s.pending == 0]:
                self._old.remove(seg)
                _remove(seg.path, seg.fd)

    def close(self) -> None:
        """Delete the segments whose entries are all committed and release the rest (a later
        start replays them)."""
        with self._lock:
            for seg in [*self._old, self._seg]:
                if seg.pending == 0:
                    _remove(seg.path, seg.fd)
                else:
                    os.close(seg.fd)
            self._old = []


def _remove(path: Path, fd: int) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError as e:
        log.warning("headroom: ledger journal %s: %s", path, e)
    finally:
        os.close(fd)


@dataclass
class Orphan:
    """A segment left by a process that ended (nobody holds its lock; this process does now):
    its ``entries``, each id once, and the ``unreadable`` lines (kept aside by the writer, never
    deleted). :meth:`remove` once its entries are in the database."""

    path: Path
    fd: int
    entries: list[Entry] = field(default_factory=list)
    unreadable: list[bytes] = field(default_factory=list)

    @property
    def skipped(self) -> int:
        """How many lines could not be read."""
        return len(self.unreadable)

    def remove(self) -> None:
        """Delete the segment and release it."""
        _remove(self.path, self.fd)

    def release(self) -> None:
        """Release the segment, kept for a later start."""
        os.close(self.fd)


#: Longest journal line read back (bytes): a ledger line is a few KB; longer is not one.
MAX_LINE_BYTES = 16 << 20
#: Largest segment read back (bytes): a segment rotates past 4 MB; a larger file is not one.
MAX_SEGMENT_BYTES = 1 << 30


def orphans(directory: Path) -> Iterator[Orphan]:
    """The segments in ``directory`` no living process holds, each locked by this process
    while the caller handles it (:meth:`Orphan.remove` or :meth:`Orphan.release`). Only regular
    files are read (not a symbolic link, FIFO or device named like a segment: skipped with a
    warning); a line longer than :data:`MAX_LINE_BYTES` or not an entry is unreadable. Missing
    folder: none. Raises nothing."""
    try:
        paths = sorted(Path(directory).glob(f"*{_SUFFIX}"))
    except OSError:
        return
    for path in paths:
        try:
            # O_NONBLOCK: a FIFO named like a segment must not block the start; O_NOFOLLOW: nor a
            # link to a device
            fd = os.open(path, os.O_RDWR | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            continue  # removed meanwhile
        except OSError as e:
            log.warning("headroom: ledger journal %s skipped: %s", path, e)
            continue
        try:
            st = os.fstat(fd)
        except OSError as e:
            st = None
            log.warning("headroom: ledger journal %s skipped: %s", path, e)
        if st is None or not stat.S_ISREG(st.st_mode) or st.st_size > MAX_SEGMENT_BYTES:
            os.close(fd)
            if st is not None:
                log.warning(
                    "headroom: ledger journal %s skipped: %s",
                    path,
                    "not a regular file"
                    if not stat.S_ISREG(st.st_mode)
                    else f"{st.st_size} bytes, larger than any segment",
                )
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)  # a living process's
            continue
        o = Orphan(path, fd)
        seen: set[str] = set()
        try:
            with os.fdopen(os.dup(fd), "rb") as f:
                while line := f.readline(MAX_LINE_BYTES + 1):
                    if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                        while (rest := f.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                            pass  # the rest of an overlong line
                        o.unreadable.append(line[:1024] + b" [cut]\n")
                        continue
                    if not line.strip():
                        continue
                    try:
                        entry = decode(line)
                    except Exception:  # noqa: BLE001 - any malformed line: kept aside
                        o.unreadable.append(line if line.endswith(b"\n") else line + b"\n")
                        continue
                    if entry.id not in seen:  # the same line twice (a copied file): one entry
                        seen.add(entry.id)
                        o.entries.append(entry)
        except OSError as err:
            log.warning("headroom: ledger journal %s unreadable: %s", path, err)
            o.release()
            continue
        yield o
