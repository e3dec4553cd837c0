"""Originals stored before their request goes upstream (issue 36, item 1; docs/architecture.md,
step 5).

A tool output the proxy shortens names its original with a marker, and the model's
``headroom_retrieve`` gets the original back from the originals store (:mod:`headroom_core.ccr.store`).
Before, the original was written after the request had been forwarded: with the database full,
read-only, locked by another process or gone, the shortened output went upstream all the same and
``headroom_retrieve`` answered "no original is stored … work with the shortened output", every
turn while the fault lasted. Now an output goes shortened only once its original is durably
stored: the plan writes the originals of everything it shortens, with the request's new
compression decisions, in ONE transaction before the request is forwarded (bounded by the
request's lock-wait budget, :mod:`headroom_core.db.lock_wait`; :func:`store_before_forwarding`).

When that transaction fails, nothing of it is stored, and the outputs it would have shortened go
upstream whole, or compressed losslessly where a compressor can without dropping anything (a
result without offloads: JSON re-encoded as a table, for one); images are only resized to what
the provider uses anyway. The plan says so (:class:`Unstored`: code ``originals_unstored``, or
``db_busy`` for a lock) and ``headroom stats`` counts it among the reasons requests went out
uncompressed.

What such a request sent is what later turns send (the prompt-cache rule): the decisions it
applied are kept in the process's decision cache (:meth:`~headroom_core.cache.decisions.DecisionCache.remember`,
:func:`hold`), so the same output, should a later turn find it in its live zone (the session's
state could not be stored either), goes with the same bytes, also once the database works again;
a session whose state was stored replays it from there. Memory only: a decision for bytes that
were sent whole is not worth a write to a failing database, and a restart forgets it.

:class:`DeferredDecisions` (the pipeline's decision cache with its writes held back),
:func:`unstorable` and :func:`demoted` are pure; :func:`store_before_forwarding` and :func:`hold`
are the I/O (the database, the process's memory).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Sequence

from sqlalchemy.exc import SQLAlchemyError

from headroom_core.compress.pipeline import BlockOutcome, PipelineResult, decision_key
from headroom_core.compress.result import CompressResult
from headroom_core.plan_codes import Code

if TYPE_CHECKING:
    from headroom_core.cache.decisions import DecisionCache
    from headroom_core.ccr.store import OriginalsStore
    from headroom_core.wire.blocks import ToolOutput

#: What a block's reason says of an output that went whole or lossless for want of a stored original.
UNSTORED = "its original could not be stored"


@dataclass(frozen=True)
class Pending:
    """A decision the pipeline made in this request, not yet written: under ``key``, ``result``
    for ``tokens_before`` -> ``tokens_after`` tokens (estimates)."""

    key: str
    result: CompressResult
    tokens_before: int
    tokens_after: int


class DeferredDecisions:
    """The pipeline's decision cache (:class:`~headroom_core.compress.pipeline.Decisions`) over
    ``inner``: reads go through (this request's own new decisions first), writes are held back as
    :attr:`pending`, for :func:`store_before_forwarding` to commit with the originals they name.
    ``reads_may_fail``: a read the database fails is a miss (deciding again after a failed
    write, which must not fail the request for a read)."""

    def __init__(self, inner: DecisionCache, reads_may_fail: bool = False) -> None:
        self._inner = inner
        self._pending: dict[str, Pending] = {}
        self._reads_may_fail = reads_may_fail

    def key(self, scope: str, kind_hint: str, text: str) -> str:
        return self._inner.key(scope, kind_hint, text)

    def get(self, h: str, original: str) -> tuple[CompressResult, int, int] | None:
        p = self._pending.get(h)
        if p is not None:
            return p.result, p.tokens_before, p.tokens_after
        try:
            return self._inner.get(h, original)
        except SQLAlchemyError:
            if not self._reads_may_fail:
                raise
            return None

    def put(self, h: str, result: CompressResult, tokens_before: int, tokens_after: int) -> None:
        self._pending.setdefault(h, Pending(h, result, tokens_before, tokens_after))

    @property
    def pending(self) -> tuple[Pending, ...]:
        """The decisions made in this request, in the order they were made."""
        return tuple(self._pending.values())


def store_before_forwarding(
    store: OriginalsStore,
    decisions: DecisionCache,
    scope: str,
    originals: Sequence[tuple[str, str, str]],
    pending: Sequence[Pending],
) -> None:
    """Write ``originals`` (``(key, text, kind)``) in ``scope`` and the ``pending`` decisions in
    one transaction, then keep the decisions in memory. No transaction when there is nothing to
    write. Raises SQLAlchemy's errors (a lock wait past the budget, a read-only or full database,
    a lost connection): then nothing of it is stored nor kept."""
    rows = decisions.rows([(p.key, p.result, p.tokens_before, p.tokens_after) for p in pending])
    if originals or rows:
        store.put_many(originals, scope, also=(lambda s: decisions.write(s, rows)) if rows else None)
    for p in pending:
        decisions.remember(p.key, p.result, p.tokens_before, p.tokens_after)


def unstorable(result: PipelineResult) -> frozenset[tuple]:
    """The paths of the outputs ``result`` shortens with an offload (a marker naming an original)."""
    return frozenset(b.path for b in result.blocks if b.changed and b.offload_keys)


def demoted(result: PipelineResult, instead: PipelineResult) -> PipelineResult:
    """``result`` with each output of :func:`unstorable` as ``instead`` (the same outputs
    compressed losslessly) has it, or whole where ``instead`` has no block for it; no offloads.
    Each such block's reason ends with :data:`UNSTORED`."""
    lossy = unstorable(result)
    alt = {b.path: b for b in instead.blocks if b.path in lossy}
    alt_text = {p: t for p, t in instead.replacements if p in lossy}
    blocks: list[BlockOutcome] = []
    for b in result.blocks:
        if b.path not in lossy:
            blocks.append(b)
            continue
        a = alt.get(b.path)
        if a is None:  # not decided again (a fallback decides nothing new): whole
            a = BlockOutcome(
                b.path, b.tool_name, b.kind, "unchanged", "", False, b.tokens_before, b.tokens_before, False
            )
        blocks.append(replace(a, reason=f"{a.reason}; {UNSTORED}" if a.reason else UNSTORED, offload_keys=()))
    replacements = tuple(
        (p, alt_text[p] if p in lossy else t) for p, t in result.replacements if p not in lossy or p in alt_text
    )
    return PipelineResult(replacements, (), tuple(blocks))  # every offload was a shortened output's


def hold(
    decisions: DecisionCache,
    scope: str,
    outputs: Sequence[ToolOutput],
    result: PipelineResult,
    pending: Sequence[Pending],
) -> None:
    """After a failed :func:`store_before_forwarding`: keep in memory what this request sends, so
    later turns send the same bytes. For each of ``outputs`` that ``result`` (:func:`demoted`)
    sends whole or lossless, that result under the key its shortened form had; and each of
    ``pending`` that names no original, as it was decided (it needs nothing stored)."""
    for p in pending:
        if not p.result.offloads:
            decisions.remember(p.key, p.result, p.tokens_before, p.tokens_after)
    blocks = {b.path: b for b in result.blocks}
    texts = dict(result.replacements)
    for out in outputs:
        b = blocks.get(out.path)
        if b is None:
            continue
        sent = CompressResult(texts.get(out.path, out.text), out.path in texts, b.kind, b.strategy, b.reason)
        decisions.remember(
            decision_key(decisions, scope, out.text, False),
            sent,
            b.tokens_before,
            b.tokens_after if sent.changed else b.tokens_before,
        )


@dataclass(frozen=True)
class Unstored:
    """Why a plan sent outputs whole or lossless: ``code`` (``DB_BUSY`` for a database locked past
    the lock-wait budget, else ``ORIGINALS_UNSTORED``) and ``words`` for its reason."""

    code: Code
    words: str
