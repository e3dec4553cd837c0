"""Persistence of what the proxy decided and sent per session: its tools and its frozen
messages (tables ``session_state`` and ``frozen_messages``), sealed at rest.

One truth per conversation, however many proxies share the database (issue 33). Every store
bumps the session's ``revision``, and only from the revision its plan loaded: a store whose
state another proxy replaced meanwhile is not written over it (:meth:`SessionStore.save`; the
later turn's state stands). A copy of recent sessions is kept in memory, used only while it is
provably current: every load asks the database for the session's ``revision`` (one
primary-key read, inside the request's lock-wait budget, :mod:`headroom_core.db.lock_wait`) and
reloads when another process wrote since. When the database cannot answer that read, the copy
is used all the same and the record says so (``verified`` False: the plan records it). Writes
touch only the rows that changed.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import cast

from sqlalchemy import Table, bindparam, delete, select, update
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from headroom_core.cache.frozen import FrozenEntry
from headroom_core.db.models import FrozenMessage, SessionState
from headroom_core.db.sealed import Sealer
from headroom_core.db.upsert import BulkUpsert, insert_ignore

log = logging.getLogger("headroom")

#: Times a load reads again when a store committed while it read (the revision moved).
LOAD_TRIES = 3
#: Times a store is tried again on the state another proxy stored meanwhile (its turn earlier).
SAVE_TRIES = 3


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


@dataclass(frozen=True)
class SessionTools:
    """A session's tools as the proxy sends them: ``proxy_tools`` (names, fixed at the first
    request), and the ``tools`` array text sent for the ordered tools whose hash is
    ``tools_hash`` (``text``: without ``cache_control``; None before any was sent);
    ``skeletons``: ids of the client's tools sent as skeletons among the ``seen`` ones decided
    so far (tools on demand, :mod:`headroom_core.tools.on_demand`: a tool keeps its status for the
    whole session)."""

    proxy_tools: tuple[str, ...] = ()
    tools_hash: str = ""
    text: str | None = None
    skeletons: tuple[str, ...] = ()
    seen: tuple[str, ...] = ()


@dataclass(frozen=True)
class SessionRecord:
    """One session as stored: ``known`` False before its first request went upstream;
    ``revision`` the database's at the load (bumped by every store); ``verified`` False when
    the database could not say whether this process's copy is current (it was used as the
    best this proxy knows: :meth:`SessionStore.load`)."""

    key: str
    known: bool = False
    revision: int = 0
    tools: SessionTools = field(default_factory=SessionTools)
    messages: tuple[FrozenEntry, ...] = ()
    verified: bool = True


def _skeletons(text: str | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(skeletons, seen)`` from a ``session_state.tool_skeletons`` value."""
    d = json.loads(text) if text else {}
    return tuple(d.get("skeletons") or ()), tuple(d.get("seen") or ())


_REVISION = select(SessionState.revision).where(SessionState.session_key == bindparam("key"))

# The statements of a save, built once as Core statements on the tables (values as bound
# parameters): SQLAlchemy's compiled cache serves them, and no ORM layer runs per call.
_S = cast(Table, SessionState.__table__)
_F = cast(Table, FrozenMessage.__table__)
# compare-and-set: the revision moves on only from the one the store's plan loaded
_BUMP = (
    update(_S)
    .where(_S.c.session_key == bindparam("key"), _S.c.revision == bindparam("expected"))
    .values(revision=_S.c.revision + 1, updated_at=bindparam("now"))
    .returning(_S.c.revision)
)
_BUMP_TOOLS = _BUMP.values(
    proxy_tools=bindparam("p_proxy_tools"),
    tools_hash=bindparam("p_tools_hash"),
    tools_text=bindparam("p_tools_text"),
    tool_skeletons=bindparam("p_tool_skeletons"),
)
_TRUNCATE = delete(_F).where(_F.c.session_key == bindparam("key"), _F.c.position >= bindparam("n"))
_ROWS = (
    select(
        _F.c.position,
        _F.c.raw_hash,
        _F.c.norm_hash,
        _F.c.forwarded,
        _F.c.modified,
        _F.c.tokens_before,
        _F.c.tokens_after,
        _F.c.offloads,
        _F.c.blocks,
        _F.c.deferred,
    )
    .where(_F.c.session_key == bindparam("key"))
    .order_by(_F.c.position)
)


def _row_name(key: str, what: str) -> str:
    return f"session:{key}:{what}"


class SessionStore:
    """Load and save :class:`SessionRecord` s (database, with an in-memory copy of the
    ``memory_sessions`` most recent ones). Thread-safe."""

    def __init__(self, sessions: sessionmaker[Session], sealer: Sealer, memory_sessions: int = 64) -> None:
        self._sessions = sessions
        self._sealer = sealer
        self._mem: OrderedDict[str, SessionRecord] = OrderedDict()
        self._tools: OrderedDict[str, str] = OrderedDict()
        self._max = memory_sessions
        self._lock = threading.Lock()

    def load(self, key: str) -> SessionRecord:
        """The stored record of session ``key`` (``known=False`` for a new session): this
        process's copy when the database's revision is the copy's, else read from the database.
        When the revision cannot be read (a database that does not answer within the request's
        budget: SQLAlchemy's error), the copy, if there is one, is returned with ``verified``
        False; without a copy the error is raised."""
        engine = self._sessions.kw.get("bind")
        if engine is not None:  # the one query of a known session: lighter than an ORM session
            try:
                with engine.connect() as c:
                    revision = c.execute(_REVISION, {"key": key}).scalar()
            except SQLAlchemyError:
                with self._lock:
                    hit = self._mem.get(key)
                if hit is None:
                    raise
                log.warning(
                    "headroom: the database did not answer whether session %s.. changed; replaying what this proxy sent last",
                    key[:8],
                )
                return replace(hit, verified=False)
            if revision is None:
                return SessionRecord(key)
            with self._lock:
                hit = self._mem.get(key)
                if hit is not None and hit.revision == revision:
                    self._mem.move_to_end(key)
                    return hit
        rec = self._read(key)
        if rec.known:
            self._remember(rec)
        return rec

    def _read(self, key: str) -> SessionRecord:
        """The session's record as the database has it at one revision: read again when a store
        committed while it was read (the revision before and after differ), at most
        :data:`LOAD_TRIES` times. Raises SQLAlchemy's errors."""
        for _ in range(LOAD_TRIES):
            with self._sessions() as s:
                row = s.get(SessionState, key)
                if row is None:
                    return SessionRecord(key)
                revision = row.revision
                tools = SessionTools(
                    tuple(json.loads(row.proxy_tools or "[]")),
                    row.tools_hash or "",
                    self._sealer.open(row.tools_text, _row_name(key, "tools")),
                    *_skeletons(row.tool_skeletons),
                )
                rows = s.execute(_ROWS, {"key": key}).all()  # columns, not ORM objects: a long session has thousands
                after = s.execute(_REVISION, {"key": key}).scalar()
            if after == revision:
                break
        entries: list[FrozenEntry] = []
        for r in rows:
            if r.position != len(entries):
                break  # only a gap-free prefix is usable
            fwd = self._sealer.open(r.forwarded, _row_name(key, str(r.position)))
            if fwd is None:
                break  # sealed under another key: what follows cannot be replayed
            offloads = (
                tuple((k, tuple(p)) for k, p in json.loads(r.offloads)) if r.offloads and r.offloads != "[]" else ()
            )
            blocks = (
                tuple((str(k), str(t), int(b), int(a)) for k, t, b, a in json.loads(r.blocks))
                if r.blocks and r.blocks != "[]"
                else ()
            )
            deferred = tuple(tuple(p) for p in json.loads(r.deferred)) if r.deferred else ()
            entries.append(
                FrozenEntry(
                    r.position,
                    r.raw_hash,
                    r.norm_hash,
                    fwd,
                    r.modified,
                    r.tokens_before,
                    r.tokens_after,
                    offloads,
                    blocks,
                    deferred,
                )
            )
        return SessionRecord(key, True, revision, tools, tuple(entries))

    def tools_text(self, tools_hash: str) -> str | None:
        """The ``tools`` text some session sent for ``tools_hash`` (the same ordered tools and
        proxy tools, minified once), or None: a new session with a known tool list, or any
        session after a restart, does not minify it again."""
        if not tools_hash:
            return None
        with self._lock:
            hit = self._tools.get(tools_hash)
            if hit is not None:
                return hit
        with self._sessions() as s:
            row = s.execute(
                select(SessionState.session_key, SessionState.tools_text)
                .where(SessionState.tools_hash == tools_hash)
                .limit(1)
            ).first()
        if row is None or row[1] is None:
            return None
        text = self._sealer.open(row[1], _row_name(row[0], "tools"))
        if text is not None:
            self._remember_tools(tools_hash, text)
        return text

    def _remember_tools(self, tools_hash: str, text: str) -> None:
        with self._lock:
            self._tools[tools_hash] = text
            self._tools.move_to_end(tools_hash)
            while len(self._tools) > 16:
                self._tools.popitem(last=False)

    def save(
        self, old: SessionRecord, dialect: str, tools: SessionTools, messages: tuple[FrozenEntry, ...]
    ) -> SessionRecord:
        """Store the session's state after a request (``old`` is what :meth:`load` gave for it):
        the tools when they changed, the message entries that changed, and a new revision.

        Only from ``old``'s revision: when another proxy stored the session since (a turn it
        planned while this one was on its way), the state of the later turn stands. This one's
        is stored over it only when it holds more messages (this turn came later, the other
        store was of an earlier one: tried again on the stored state, at most
        :data:`SAVE_TRIES` times); else nothing is written and the stored state is returned
        (logged). Returns the record that now stands. Raises SQLAlchemy errors."""
        for _ in range(SAVE_TRIES):
            saved = self._save_from(old, dialect, tools, messages)
            if saved is not None:
                return saved
            with self._lock:
                self._mem.pop(old.key, None)  # not current: the next load reads the database
            current = self._read(old.key)
            if current.known and len(current.messages) >= len(messages):
                log.warning(
                    "headroom: session %s.. was stored by another proxy meanwhile (revision %d, %d messages); "
                    "the later turn's state stands, this turn's (%d messages) is not written over it",
                    old.key[:8], current.revision, len(current.messages), len(messages),
                )  # fmt: skip
                self._remember(current)
                return current
            old = current
        log.warning("headroom: session %s.. kept changing while this turn's state was stored; not stored", old.key[:8])
        return old

    def _save_from(
        self, old: SessionRecord, dialect: str, tools: SessionTools, messages: tuple[FrozenEntry, ...]
    ) -> SessionRecord | None:
        """One try of :meth:`save`: the record stored, or None (nothing written) when the
        session's revision moved past ``old``'s."""
        key = old.key
        now = _now()
        changed_tools = tools != old.tools
        prev = {e.position: e for e in old.messages}
        changed = [e for e in messages if (p := prev.get(e.position)) is not e and p != e]  # most are the same objects
        if old.known and not changed_tools and not changed and len(messages) == len(old.messages):
            return old
        rows = [
            dict(
                session_key=key,
                position=e.position,
                raw_hash=e.raw_hash,
                norm_hash=e.norm_hash,
                forwarded=self._sealer.seal(e.sent_text, _row_name(key, str(e.position))),
                modified=e.modified,
                tokens_before=e.tokens_before,
                tokens_after=e.tokens_after,
                offloads=json.dumps([[k, list(p)] for k, p in e.offloads], ensure_ascii=False) if e.offloads else "[]",
                blocks=json.dumps([list(b) for b in e.blocks], ensure_ascii=False) if e.blocks else "[]",
                deferred=json.dumps([list(p) for p in e.deferred], ensure_ascii=False) if e.deferred else None,
                updated_at=now,
            )
            for e in changed
        ]
        # the rows made ready before the transaction: the write lock is held for the driver's time only
        bulk = BulkUpsert.prepare(self._dialect(), FrozenMessage, rows, ["session_key", "position"])
        bump, values = _BUMP, {"key": key, "now": now, "expected": old.revision if old.known else 0}
        if changed_tools or not old.known:
            bump = _BUMP_TOOLS
            values.update(
                p_proxy_tools=json.dumps(list(tools.proxy_tools)),
                p_tools_hash=tools.tools_hash,
                p_tools_text=None if tools.text is None else self._sealer.seal(tools.text, _row_name(key, "tools")),
                p_tool_skeletons=json.dumps({"skeletons": list(tools.skeletons), "seen": list(tools.seen)})
                if tools.seen
                else None,
            )
        with self._sessions() as s:  # one transaction: committed below, else rolled back on close
            insert_ignore(
                s,
                SessionState,
                dict(
                    session_key=key,
                    dialect=dialect,
                    proxy_tools="[]",
                    tools_hash="",
                    revision=0,
                    created_at=now,
                    updated_at=now,
                ),
                ["session_key"],
            )
            revision = s.execute(bump, values).scalar_one_or_none()
            if revision is None:  # another proxy stored since the load: nothing of this store is written
                s.rollback()
                return None
            if len(messages) < len(old.messages) or not old.known:
                s.execute(_TRUNCATE, {"key": key, "n": len(messages)})
            bulk.run(s)
            s.commit()
        rec = SessionRecord(key, True, revision, tools, tuple(messages))
        self._remember(rec)
        if tools.text is not None:
            self._remember_tools(tools.tools_hash, tools.text)
        return rec

    def _dialect(self) -> Dialect | None:
        """The database's SQLAlchemy dialect (None: the sessionmaker has no engine bound)."""
        bind = self._sessions.kw.get("bind")
        return cast(Dialect, bind.dialect) if bind is not None else None

    def _remember(self, rec: SessionRecord) -> None:
        with self._lock:
            self._mem[rec.key] = rec
            self._mem.move_to_end(rec.key)
            while len(self._mem) > self._max:
                self._mem.popitem(last=False)
