"""The order in which tool definitions go upstream.

``tools`` is the start of every cached prefix, so its order matters as much as its bytes. Agents
re-order equal tool sets (Claude Code lists its MCP tools in another order after a resume, and a
resumed conversation is often a new session for the proxy, its system prompt refreshed). The
proxy sends one deterministic order per scope (project and client identity): the order in
which the scope first sent each tool. The first request of a scope fixes the order of its tools
as the client listed them; tools first seen later come after all known ones, in the order the
client lists them. So:

- an equal set, however the client lists it, goes upstream in one order, in every session of
  the scope: a re-ordered set is a cache read;
- while the client keeps its order, the proxy's order is the client's: a tool the client adds
  at the end, changes or removes is the first difference at the same place;
- a tool the client adds in the middle goes after the known ones: the first difference comes
  later than the client's, never earlier;
- the proxy's own tools (fixed per session) come after all of the client's.

:class:`ToolOrder` keeps the order in the database (table ``tool_order``), so every proxy
sharing it sends the same order. The functions here are pure.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from headroom_core.db import lock_wait
from headroom_core.db.models import ToolOrder as ToolOrderRow
from headroom_core.db.upsert import upsert_many

log = logging.getLogger("headroom")


def tool_id(tool: Any) -> str:
    """A tool's identity: its name (Anthropic and Responses ``name``, Chat Completions
    ``function.name``), else its ``type`` (built-in tools), else ``""``."""
    if not isinstance(tool, dict):
        return ""
    name = tool.get("name")
    if isinstance(name, str):
        return name
    fn = tool.get("function")
    if isinstance(fn, dict) and isinstance(fn.get("name"), str):
        return fn["name"]
    t = tool.get("type")
    return f"type:{t}" if isinstance(t, str) else ""


def unique_ids(tools: list[Any]) -> list[str]:
    """:func:`tool_id` of each tool, a repeated id suffixed with ``#2``, ``#3``… in list order
    (at most 256 characters each)."""
    return unique([tool_id(t) for t in tools])


def unique(ids: list[str]) -> list[str]:
    """``ids`` cut to 240 characters, a repeated one suffixed with ``#2``, ``#3``… in list
    order (at most 256 characters each)."""
    seen: dict[str, int] = {}
    out: list[str] = []
    for i in ids:
        i = i[:240]
        n = seen.get(i, 0) + 1
        seen[i] = n
        out.append(i if n == 1 else f"{i}#{n}")
    return out


def ordered(ids: list[str], seq: dict[str, int]) -> list[int]:
    """Indexes into ``ids`` (the client's tools, in its order) in the order to send them: by
    ``seq`` (each id's place in the scope's order); ids without one after, in the client's order."""
    return sorted(range(len(ids)), key=lambda n: (0, seq[ids[n]], ids[n]) if ids[n] in seq else (1, n, ""))


class ToolOrder:
    """The scopes' tool orders: read through a copy in memory, extended in the database."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions
        self._seq: dict[str, dict[str, int]] = {}
        self._lock = threading.Lock()

    def _load(self, scope: str) -> dict[str, int]:
        with self._sessions() as s:
            rows = s.execute(select(ToolOrderRow.tool_id, ToolOrderRow.seq).where(ToolOrderRow.scope == scope)).all()
        seq = {tid: n for tid, n in rows}
        with self._lock:
            self._seq[scope] = seq
        return seq

    def order(self, scope: str, ids: list[str], learn: bool = True) -> list[int]:
        """:func:`ordered` for ``ids`` in ``scope``; with ``learn`` the ids the scope has not
        sent before are added to its order first (after every known one, in list order). When
        another process holds the database locked past the caller's lock-wait budget
        (:mod:`headroom_core.db.lock_wait`) they are ordered as learning would order them and
        learned by a later request (logged). Raises SQLAlchemy's other errors."""
        with self._lock:
            seq = self._seq.get(scope)
        if seq is None or any(i not in seq for i in ids):
            seq = self._load(scope)  # another proxy may have added them
            missing = [i for i in ids if i not in seq]
            if missing and learn:
                now = datetime.now(timezone.utc).replace(tzinfo=None)
                start = max(seq.values(), default=-1) + 1
                try:
                    with self._sessions.begin() as s:
                        rows = [
                            dict(scope=scope, tool_id=i, seq=start + n, created_at=now) for n, i in enumerate(missing)
                        ]
                        upsert_many(s, ToolOrderRow, rows, ["scope", "tool_id"], update=())
                    seq = self._load(scope)
                except OperationalError as e:
                    if not lock_wait.is_lock_wait(e):
                        raise
                    log.warning(
                        "headroom: the database is locked by another process; %d new tools ordered as sent, learned later",
                        len(missing),
                    )
                    seq = {**seq, **{i: start + n for n, i in enumerate(missing)}}
        return ordered(ids, seq)
