"""A conversation that named its project late: what was kept under its own project and scope
moves to the project it named, so the conversation has one truth.

A Responses WebSocket connection may name no working directory in its first frames (Codex's
warm-up holds only its developer message) and name it in a later one; the connection then
adopts that project with its one session key (:mod:`headroom_core.ws_conversation`). What was
written for its first frames under the conversation's own project (``conversation:…``) and
scope follows, in one transaction:

- rows keyed by project alone: the ledger's ``request_outcomes``, ``memories``, the prefix log
  (``cache_prefixes``, ``cache_session_prefixes``): the project set to the named one;
- rows whose primary key holds the project or scope: moved, merged into a row the named
  project already has with the same key (``learn_failures`` and ``tool_usage`` add their
  counts, ``learned_rules`` keep the larger evidence, ``learn_evidence`` and ``originals`` are
  the same fact twice: the project's row stays), and the named project's learning generation
  goes up by one (readers that remember its failures read them again);
- per-scope decisions (``tool_order``, ``tool_skeleton_sets``): moved when the named scope has
  none yet, else the named scope's stay.

Compression decisions are a cache keyed by scope: they are left to expire. Nothing of another
conversation is touched: a ``conversation:…`` project belongs to one conversation only.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, cast

from sqlalchemy import Table, and_, delete, select, update
from sqlalchemy.orm import Session, sessionmaker

from headroom_core.cache.models import CachePrefix, CacheSessionPrefix
from headroom_core.db.models import Original, RequestOutcome, ToolOrder, ToolSkeletonSet, ToolUsage
from headroom_core.db.upsert import upsert
from headroom_core.learn.models import LearnedRule, LearnEvidence, LearnFailure, LearnGeneration
from headroom_core.memory.models import Memory
from headroom_core.project import is_conversation
from headroom_core.ws_conversation import Adoption

Row = Mapping[Any, Any]
#: How a row of the old project is folded into the named project's row with the same key:
#: the values to set on the named project's row.
Merge = Callable[[Row, Row], dict[str, Any]]


def _failures(new: Row, old: Row) -> dict[str, Any]:
    same = old["last_session_key"] == new["last_session_key"]
    return {
        "count": new["count"] + old["count"],
        "sessions": new["sessions"] + old["sessions"] - (1 if same else 0),
        "first_seen_at": min(new["first_seen_at"], old["first_seen_at"]),
    }


def _usage(new: Row, old: Row) -> dict[str, Any]:
    # the old rows are the earlier ones: a call in the named project's period ends the count there
    since = new["offered_since_called"] if new["called"] else new["offered_since_called"] + old["offered_since_called"]
    return {
        "offered": new["offered"] + old["offered"],
        "called": new["called"] + old["called"],
        "offered_since_called": since,
    }


def _rules(new: Row, old: Row) -> dict[str, Any]:
    return {"evidence": max(new["evidence"], old["evidence"])}


def _keep(new: Row, old: Row) -> dict[str, Any]:
    return {}


def _table(model: type) -> Table:
    return cast(Table, model.__table__)  # type: ignore[attr-defined]


def _move_keyed(s: Session, table: Table, col: str, old: str, new: str, merge: Merge) -> int:
    """Move the rows of ``table`` whose ``col`` (part of the primary key) is ``old`` to ``new``,
    merging each into a row ``new`` already has with the same key; the number of rows moved."""
    keys = [c.name for c in table.primary_key.columns if c.name != col]
    moved = 0
    for r in s.execute(select(table).where(table.c[col] == old)).mappings().all():
        same = and_(*(table.c[k] == r[k] for k in keys))
        there = s.execute(select(table).where(same, table.c[col] == new)).mappings().first()
        if there is None:
            s.execute(update(table).where(same, table.c[col] == old).values({col: new}))
        else:
            values = merge(there, r)
            if values:
                s.execute(update(table).where(same, table.c[col] == new).values(values))
            s.execute(delete(table).where(same, table.c[col] == old))
        moved += 1
    return moved


def _move_whole(s: Session, table: Table, col: str, old: str, new: str) -> int:
    """Move every row of ``old`` to ``new`` when ``new`` has none, else drop ``old``'s (a set of
    decisions is kept whole, never mixed); the number of rows moved."""
    if s.execute(select(table.c[col]).where(table.c[col] == new).limit(1)).first() is not None:
        s.execute(delete(table).where(table.c[col] == old))
        return 0
    return s.execute(update(table).where(table.c[col] == old).values({col: new})).rowcount or 0  # type: ignore[attr-defined]


def move_conversation(sessions: sessionmaker[Session], move: Adoption) -> dict[str, int]:
    """Move what was kept under ``move.old_project`` / ``move.old_scope`` to the named project
    and scope (module docstring), in one transaction; per table, the rows moved. Raises
    ``ValueError`` when the old project is not a conversation's own or the new one is (a named
    project's rows never move), and SQLAlchemy's errors."""
    if not is_conversation(move.old_project) or is_conversation(move.new_project):
        raise ValueError(
            f"only a conversation's own project moves to a named one: {move.old_project!r} -> {move.new_project!r}"
        )
    old, new = move.old_project, move.new_project
    out: dict[str, int] = {}
    with sessions.begin() as s:
        for plain in (RequestOutcome, Memory, CachePrefix, CacheSessionPrefix):
            t = _table(plain)
            out[t.name] = s.execute(update(t).where(t.c.project == old).values(project=new)).rowcount or 0  # type: ignore[attr-defined]
        for keyed, merge in (
            (LearnFailure, _failures),
            (LearnEvidence, _keep),
            (LearnedRule, _rules),
            (ToolUsage, _usage),
        ):
            out[_table(keyed).name] = _move_keyed(s, _table(keyed), "project", old, new, merge)
        if move.old_scope != move.new_scope:
            out[_table(Original).name] = _move_keyed(
                s, _table(Original), "scope", move.old_scope, move.new_scope, _keep
            )
            for whole in (ToolOrder, ToolSkeletonSet):
                out[_table(whole).name] = _move_whole(s, _table(whole), "scope", move.old_scope, move.new_scope)
        gen = _table(LearnGeneration)
        s.execute(delete(gen).where(gen.c.project == old))
        if out["learn_failures"] or out["learned_rules"]:
            upsert(s, LearnGeneration, {"project": new, "generation": 1}, ["project"], update=(), add=("generation",))
    return out
