"""Compression decisions cached by content, per scope, in memory and in the database.

A tool output compressed in turn N must reach the upstream with the same bytes in turns N+1,
N+2, … — even though the latest user message (the query that ranked what to keep) has changed,
and even after a restart. So the first decision for a given content is kept and reused, within
the scope (project and client identity) that made it: a decision carries what its scope's query
chose, so scopes never share one. Results are sealed at rest; lookup keys are keyed hashes.
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any, Mapping, Sequence, cast

from sqlalchemy import Table, bindparam, update
from sqlalchemy.orm import Session, sessionmaker

from headroom_core.compress.result import DEFERRED, CompressResult, Offload
from headroom_core.db.models import CompressionDecision
from headroom_core.db.sealed import SECRET_BYTES, Sealer
from headroom_core.db.upsert import upsert_many

#: A placeholder (a deferred decision) gives way to the first real decision for its key.
#: (Core statements on the table: no ORM layer, which refuses an executemany UPDATE with a WHERE.)
_T = cast(Table, CompressionDecision.__table__)
_REPLACE_DEFERRED = (
    update(_T)
    .where(_T.c.decision_hash == bindparam("p_decision_hash"), _T.c.strategy == DEFERRED)
    .values(
        {
            c: bindparam(f"p_{c}")
            for c in ("changed", "result", "kind", "strategy", "reason", "offload_key", "tokens_before", "tokens_after")
        }
    )
)
_NOTE = (
    update(_T)
    .where(_T.c.decision_hash == bindparam("h"), _T.c.strategy == DEFERRED)
    .values(tokens_before=bindparam("b"), tokens_after=bindparam("a"))
)

# Bump when a compressor's output for the same input changes, so old decisions are not reused.
COMPRESSOR_VERSION = "3"


class DecisionCache:
    """Get and put :class:`CompressResult` decisions by :meth:`key`.

    ``get`` returns the cached result (with its offload rebuilt from the text the caller still
    has, so the original can be stored again) or None. Memory holds ``memory_entries`` recent
    decisions without a copy of their originals (the caller has the text: an unchanged result
    and an offload are rebuilt from it), so its size is that of the compressed texts; the
    database holds them all (``compression_decisions``). ``sessions`` None: memory only (tests,
    benchmarks); ``sealer`` None: a key of this process only.
    """

    def __init__(
        self, sessions: sessionmaker[Session] | None, sealer: Sealer | None = None, memory_entries: int = 4096
    ) -> None:
        self._sessions = sessions
        self._sealer = sealer or Sealer(secrets.token_bytes(SECRET_BYTES))
        self._mem: OrderedDict[str, tuple[CompressResult, int, int]] = OrderedDict()
        self._max = memory_entries
        self._lock = threading.Lock()

    def key(self, scope: str, kind_hint: str, text: str) -> str:
        """The lookup key (64 hex digits, keyed hash) of ``text`` compressed as ``kind_hint`` in
        ``scope``, for the current :data:`COMPRESSOR_VERSION`."""
        return self._sealer.digest("decision", COMPRESSOR_VERSION, scope, kind_hint, text)

    def get(self, h: str, original: str) -> tuple[CompressResult, int, int] | None:
        """``(result, tokens_before, tokens_after)`` decided earlier under key ``h``."""
        with self._lock:
            hit = self._mem.get(h)
            if hit is not None:
                self._mem.move_to_end(h)
                return _with_original(hit[0], original), hit[1], hit[2]
        if self._sessions is None:
            return None
        with self._sessions() as s:
            row = s.get(CompressionDecision, h)
            if row is None:
                return None
            text = original
            if row.changed:
                opened = self._sealer.open(row.result, f"decision:{h}")
                if opened is None:
                    return None  # sealed under another key: decide again
                text = opened
            offloads = (Offload(row.offload_key, original, "original"),) if row.offload_key else ()
            res = CompressResult(
                text=text,
                changed=row.changed,
                kind=row.kind,
                strategy=row.strategy,
                reason=row.reason,
                offloads=offloads,
            )
            entry = (res, row.tokens_before, row.tokens_after)
        self._remember(h, entry)
        return entry

    def put(self, h: str, result: CompressResult, tokens_before: int, tokens_after: int) -> None:
        """Record the decision for ``h`` (first writer wins across threads and processes): in
        the database, then in memory. A write that fails (a database locked by another process
        past the request's lock-wait budget) raises SQLAlchemy's error and leaves nothing in
        memory either: a fallback must not apply a decision that was never stored."""
        if self._sessions is None:
            self.remember(h, result, tokens_before, tokens_after)
            return
        rows = self.rows([(h, result, tokens_before, tokens_after)])
        with self._sessions.begin() as s:
            self.write(s, rows)
        self.remember(h, result, tokens_before, tokens_after)

    def rows(self, decisions: Sequence[tuple[str, CompressResult, int, int]]) -> list[dict[str, Any]]:
        """The ``compression_decisions`` rows of ``(key, result, tokens_before, tokens_after)``
        decisions, sealed (work to do before a transaction begins, not inside it); none when
        this cache keeps memory only."""
        if self._sessions is None:
            return []
        now = datetime.now(timezone.utc).replace(tzinfo=None)
        return [
            dict(
                decision_hash=h,
                changed=result.changed,
                result=self._sealer.seal(result.text, f"decision:{h}") if result.changed else b"",
                kind=result.kind,
                strategy=result.strategy,
                reason=result.reason[:300],
                offload_key=result.offloads[0].key if result.offloads else None,
                tokens_before=before,
                tokens_after=after,
                created_at=now,
            )
            for h, result, before, after in decisions
        ]

    @staticmethod
    def write(s: Session, rows: Sequence[Mapping[str, Any]]) -> None:
        """Insert :meth:`rows` in the caller's transaction ``s``, one statement; a key already
        there keeps its row (first writer wins), but for a :data:`~headroom_core.compress.result.DEFERRED`
        one (an output sent whole for want of time: a placeholder), which the first real decision
        replaces (a second statement, only while it is still the placeholder). Raises
        SQLAlchemy's errors."""
        upsert_many(s, CompressionDecision, rows, ["decision_hash"], update=[])
        real = [{f"p_{k}": v for k, v in r.items()} for r in rows if r["strategy"] != DEFERRED]
        if real:
            s.execute(_REPLACE_DEFERRED, real)

    def remember(self, h: str, result: CompressResult, tokens_before: int, tokens_after: int) -> None:
        """Keep the decision for ``h`` in memory only, in place of any decision memory had for
        it: what :meth:`get` answers in this process from now on (until it leaves the
        ``memory_entries`` most recent). For a decision the database stored (:meth:`put`, or
        :meth:`write` committed), and for what a request sent when it could not store its
        decisions: its bytes are the ones later turns must replay."""
        self._remember(h, (result, tokens_before, tokens_after))

    def settle(
        self, h: str, result: CompressResult, tokens_before: int, tokens_after: int, original: str
    ) -> tuple[CompressResult, int, int] | None:
        """Decide again, with ``result``, the output ``original`` (key ``h``) whose decision is
        :data:`~headroom_core.compress.result.DEFERRED` (it went whole for want of time): stored
        as :meth:`put` does, so it replaces the placeholder once; when another proxy or thread
        decided it first, theirs stands. Returns the decision that stands, read back from the
        database ``(result, tokens_before, tokens_after)`` (None: none is stored). Raises
        SQLAlchemy's errors."""
        self.put(h, result, tokens_before, tokens_after)
        if self._sessions is None:
            return result, tokens_before, tokens_after
        with self._lock:
            self._mem.pop(h, None)
        return self.get(h, original)

    def note(self, h: str, tokens_before: int, tokens_after: int) -> None:
        """Record on the placeholder ``h`` (a :data:`~headroom_core.compress.result.DEFERRED`
        decision) what compressing its output would give, in tokens, while it waits for that to
        pay (:mod:`headroom_core.cache.late`): any proxy then weighs it again without
        compressing it again. Nothing when it is no longer the placeholder. Raises SQLAlchemy's
        errors."""
        if self._sessions is None:
            return
        with self._sessions.begin() as s:
            s.execute(_NOTE, {"h": h, "b": tokens_before, "a": tokens_after})

    def _remember(self, h: str, entry: tuple[CompressResult, int, int]) -> None:
        if entry[0].is_deferred:  # decided again later, maybe by another proxy: read from the database
            with self._lock:
                self._mem.pop(h, None)
            return
        entry = (_without_original(entry[0]), entry[1], entry[2])
        with self._lock:
            self._mem[h] = entry
            self._mem.move_to_end(h)
            while len(self._mem) > self._max:
                self._mem.popitem(last=False)


def _without_original(res: CompressResult) -> CompressResult:
    """``res`` as memory keeps it: no copy of the original (unchanged text, whole-text offload)."""
    original = res.text if not res.changed else (res.offloads[0].original if res.offloads else None)
    return replace(
        res,
        text=res.text if res.changed else "",
        offloads=tuple(replace(o, original="") if o.original is original else o for o in res.offloads),
    )


def _with_original(res: CompressResult, original: str) -> CompressResult:
    """The inverse of :func:`_without_original`, given the original text."""
    return replace(
        res,
        text=res.text if res.changed else original,
        offloads=tuple(replace(o, original=original) if o.original == "" else o for o in res.offloads),
    )
