"""Persistence of what the proxy decided and sent per session: its tools and its frozen
messages (tables ``session_state`` and ``frozen_messages``), sealed at rest.

A copy of recent sessions is kept in memory; every load asks the database for the session's
``revision`` (one primary-key read) and reloads when another process (a proxy sharing the
database) wrote since. Writes touch only the rows that changed.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import cast

from sqlalchemy import Table, bindparam, delete, select, update
from sqlalchemy.orm import Session, sessionmaker

from headroom_core.cache.frozen import FrozenEntry
from headroom_core.db.models import FrozenMessage, SessionState
from headroom_core.db.sealed import Sealer
from headroom_core.db.upsert import insert_ignore, upsert_many


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


@dataclass(frozen=True)
class SessionTools:
    """A session's tools as the proxy sends them: ``proxy_tools`` (names, fixed at the first
    request), and the ``tools`` array text sent for the ordered tools whose hash is
    ``tools_hash`` (``text``: without ``cache_control``; None before any was sent);
    ``skeletons``: ids of the client's tools sent as skeletons among the ``seen`` ones decided
    so far (tools on demand, :mod:`headroom_core.ccr.tool_docs`: a tool keeps its status for the
    whole session)."""

    proxy_tools: tuple[str, ...] = ()
    tools_hash: str = ""
    text: str | None = None
    skeletons: tuple[str, ...] = ()
    seen: tuple[str, ...] = ()


@dataclass(frozen=True)
class SessionRecord:
    """One session as stored: ``known`` False before its first request went upstream."""

    key: str
    known: bool = False
    revision: int = 0
    tools: SessionTools = field(default_factory=SessionTools)
    messages: tuple[FrozenEntry, ...] = ()


def _skeletons(text: str | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(skeletons, seen)`` from a ``session_state.tool_skeletons`` value."""
    d = json.loads(text) if text else {}
    return tuple(d.get("skeletons") or ()), tuple(d.get("seen") or ())


_REVISION = select(SessionState.revision).where(SessionState.session_key == bindparam("key"))

# The statements of a save, built once as Core statements on the tables (values as bound
# parameters): SQLAlchemy's compiled cache serves them, and no ORM layer runs per call.
_S = cast(Table, SessionState.__table__)
_F = cast(Table, FrozenMessage.__table__)
_BUMP = update(_S).where(_S.c.session_key == bindparam("key")).values(revision=_S.c.revision + 1, updated_at=bindparam("now")).returning(_S.c.revision)
_BUMP_TOOLS = _BUMP.values(
    proxy_tools=bindparam("p_proxy_tools"), tools_hash=bindparam("p_tools_hash"), tools_text=bindparam("p_tools_text"), tool_skeletons=bindparam("p_tool_skeletons")
)
_TRUNCATE = delete(_F).where(_F.c.session_key == bindparam("key"), _F.c.position >= bindparam("n"))


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
        """The stored record of session ``key`` (``known=False`` for a new session)."""
        engine = self._sessions.kw.get("bind")
        if engine is not None:  # the one query of a known session: lighter than an ORM session
            with engine.connect() as c:
                revision = c.execute(_REVISION, {"key": key}).scalar()
            if revision is None:
                return SessionRecord(key)
            with self._lock:
                hit = self._mem.get(key)
                if hit is not None and hit.revision == revision:
                    self._mem.move_to_end(key)
                    return hit
        with self._sessions() as s:
            row = s.get(SessionState, key)
            if row is None:
                return SessionRecord(key)
            tools = SessionTools(
                tuple(json.loads(row.proxy_tools or "[]")),
                row.tools_hash or "",
                self._sealer.open(row.tools_text, _row_name(key, "tools")),
                *_skeletons(row.tool_skeletons),
            )
            rows = s.scalars(select(FrozenMessage).where(FrozenMessage.session_key == key).order_by(FrozenMessage.position)).all()
        entries: list[FrozenEntry] = []
        for r in rows:
            if r.position != len(entries):
                break  # only a gap-free prefix is usable
            fwd = self._sealer.open(r.forwarded, _row_name(key, str(r.position)))
            if fwd is None:
                break  # sealed under another key: what follows cannot be replayed
            offloads = tuple((k, tuple(p)) for k, p in json.loads(r.offloads or "[]"))
            blocks = tuple((str(k), str(t), int(b), int(a)) for k, t, b, a in json.loads(r.blocks or "[]"))
            entries.append(FrozenEntry(r.position, r.raw_hash, r.norm_hash, fwd, r.modified, r.tokens_before, r.tokens_after, offloads, blocks))
        rec = SessionRecord(key, True, row.revision, tools, tuple(entries))
        self._remember(rec)
        return rec

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
            row = s.execute(select(SessionState.session_key, SessionState.tools_text).where(SessionState.tools_hash == tools_hash).limit(1)).first()
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

    def save(self, old: SessionRecord, dialect: str, tools: SessionTools, messages: tuple[FrozenEntry, ...]) -> SessionRecord:
        """Store the session's state after a request (``old`` is what :meth:`load` gave for it):
        the tools when they changed, the message entries that changed, and a new revision.
        Returns the new record. Raises SQLAlchemy errors."""
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
                offloads=json.dumps([[k, list(p)] for k, p in e.offloads], ensure_ascii=False),
                blocks=json.dumps([list(b) for b in e.blocks], ensure_ascii=False),
                updated_at=now,
            )
            for e in changed
        ]
        bump, values = _BUMP, {"key": key, "now": now}
        if changed_tools or not old.known:
            bump = _BUMP_TOOLS
            values.update(
                p_proxy_tools=json.dumps(list(tools.proxy_tools)),
                p_tools_hash=tools.tools_hash,
                p_tools_text=None if tools.text is None else self._sealer.seal(tools.text, _row_name(key, "tools")),
                p_tool_skeletons=json.dumps({"skeletons": list(tools.skeletons), "seen": list(tools.seen)}) if tools.seen else None,
            )
        with self._sessions.begin() as s:
            insert_ignore(
                s,
                SessionState,
                dict(session_key=key, dialect=dialect, proxy_tools="[]", tools_hash="", revision=0, created_at=now, updated_at=now),
                ["session_key"],
            )
            revision = s.execute(bump, values).scalar_one()
            if len(messages) < len(old.messages) or not old.known:
                s.execute(_TRUNCATE, {"key": key, "n": len(messages)})
            upsert_many(s, FrozenMessage, rows, ["session_key", "position"])
        rec = SessionRecord(key, True, revision, tools, tuple(messages))
        self._remember(rec)
        if tools.text is not None:
            self._remember_tools(tools.tools_hash, tools.text)
        return rec

    def _remember(self, rec: SessionRecord) -> None:
        with self._lock:
            self._mem[rec.key] = rec
            self._mem.move_to_end(rec.key)
            while len(self._mem) > self._max:
                self._mem.popitem(last=False)
