"""Compression decisions cached by content hash, in memory and in the database.

A tool output compressed in turn N must reach the upstream with the same bytes in turns N+1,
N+2, … — even though the latest user message (the query that ranked what to keep) has changed,
and even after a restart. So the first decision for a given content is kept and reused.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import replace
from datetime import datetime, timezone

from sqlalchemy.orm import Session, sessionmaker

from headroom_core.compress.result import CompressResult, Offload
from headroom_core.db.models import CompressionDecision

# Bump when a compressor's output for the same input changes, so old decisions are not reused.
COMPRESSOR_VERSION = "2"


def content_hash(kind_hint: str, text: str) -> str:
    """SHA-256 hex of the compressor version, a kind hint (e.g. the tool name) and the text."""
    h = hashlib.sha256()
    for part in (COMPRESSOR_VERSION, kind_hint, text):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()


class DecisionCache:
    """Get and put :class:`CompressResult` decisions by content hash.

    ``get`` returns the cached result (with its offload rebuilt from the text the caller still
    has, so the original can be stored again) or None. Memory holds ``memory_entries`` recent
    decisions without a copy of their originals (the caller has the text: an unchanged result
    and an offload are rebuilt from it), so its size is that of the compressed texts; the
    database holds them all (``compression_decisions``).
    """

    def __init__(self, sessions: sessionmaker[Session] | None, memory_entries: int = 4096) -> None:
        self._sessions = sessions
        self._mem: OrderedDict[str, tuple[CompressResult, int, int]] = OrderedDict()
        self._max = memory_entries
        self._lock = threading.Lock()

    def get(self, h: str, original: str) -> tuple[CompressResult, int, int] | None:
        """``(result, tokens_before, tokens_after)`` decided earlier for content hash ``h``."""
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
            offloads = (Offload(row.offload_key, original, "original"),) if row.offload_key else ()
            res = CompressResult(
                text=row.result_text if row.changed else original,
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
        """Record the decision for ``h`` (first writer wins across processes)."""
        entry = (result, tokens_before, tokens_after)
        self._remember(h, entry)
        if self._sessions is None:
            return
        with self._sessions.begin() as s:
            if s.get(CompressionDecision, h) is not None:
                return
            s.add(
                CompressionDecision(
                    content_hash=h,
                    changed=result.changed,
                    result_text=result.text if result.changed else "",
                    kind=result.kind,
                    strategy=result.strategy,
                    reason=result.reason[:300],
                    offload_key=result.offloads[0].key if result.offloads else None,
                    tokens_before=tokens_before,
                    tokens_after=tokens_after,
                    created_at=datetime.now(timezone.utc).replace(tzinfo=None),
                )
            )

    def _remember(self, h: str, entry: tuple[CompressResult, int, int]) -> None:
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
