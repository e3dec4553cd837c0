"""Late compression (issue 33): a tool output that went upstream whole for want of time is
compressed once, in a later turn, where the cost model says it pays.

A compression timeout's fallback sends new tool outputs whole and records that as their decision
(:meth:`~headroom_core.compress.result.CompressResult.deferred`), so every proxy of a team sends
the same bytes; the session's frozen message names the output (``FrozenEntry.deferred``). Later
turns replay those bytes, and the provider caches them. Keeping them whole for the rest of the
session would make one slow moment cost it that compression for its whole life; compressing
them changes the cached prefix from the output on, which costs a cache write of everything the
prompt holds after it. So the next turn that has time (a full plan: not a fallback, not a
token count) decides each such output once:

1. its decision is read: when another proxy or session decided it since, that stands (a
   compressed one is applied, its bytes being what the team sends; an unchanged one closes the
   question);
2. else it is compressed now, with at most :data:`TIME_SHARE` of the plan's remaining time,
   and priced (:class:`~headroom_core.cache.cost_model.LateCost`): the tokens before and after,
   the tokens the previous turn's prompt held after it (the tail, estimated at
   :data:`CHARS_PER_TOKEN` characters a token), the requests the session is expected to make
   still (:func:`~headroom_core.cache.cost_model.expected_remaining` of its stores so far) and
   the model's cache prices (:class:`~headroom_core.pricing.PriceTable` with the user's
   entries; an unknown model at Anthropic's, the dearest write premium);
3. when it pays, the compressed form replaces the deferred decision once, whoever comes first
   (:meth:`~headroom_core.cache.decisions.DecisionCache.settle`, its originals stored before),
   and the message goes upstream with it from this turn on: a deliberate change of the cached
   prefix, recorded (:class:`LateCompression`: the plan's reason, the ledger's
   ``facts["late"]``, ``headroom stats``);
4. when it does not pay it stays whole for the rest of the session. Either way the output
   leaves the entry's ``deferred``: the question is not asked again in this session, so an
   output never flips back.

A compression that runs out of its time keeps the question for the next turn. Pure decisions
(:func:`candidates`, :func:`with_output`, :func:`price`) and one function with the I/O
(:func:`compress_late`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from headroom_core.cache.cost_model import ANTHROPIC_READ_RATIO, ANTHROPIC_WRITE_RATIO, LateCost, expected_remaining
from headroom_core.cache.frozen import FrozenEntry, LiveZone
from headroom_core.compress.pipeline import hint_for_call
from headroom_core.compress.result import CompressResult
from headroom_core.compress.worker import CompressTimeout
from headroom_core.pricing import PriceTable
from headroom_core.wire import jsonedit
from headroom_core.wire.blocks import ToolCall, ToolOutput

if TYPE_CHECKING:
    from headroom_core.runtime import Runtime

log = logging.getLogger("headroom")

#: Share of the plan's remaining time one late compression may take (the rest is for the
#: request's new outputs).
TIME_SHARE = 0.5
#: Characters per token for the tail's estimate (cl100k_base averages about 4 on English and
#: code; OpenAI, "What are tokens and how to count them"): the tail is weighed, not billed.
CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class LateCompression:
    """What one request compressed late: ``outputs`` compressed, their tokens ``before`` and
    ``after`` (estimates), ``tail_tokens`` the previous prompt held after them (written to the
    cache again this turn), the session's ``remaining`` expected requests, and in base-input
    token equivalents what this turn pays more (``extra_now``) and every later turn less
    (``saved_per_turn``); ``kept``: outputs decided again and kept whole (it did not pay)."""

    outputs: int
    before: int
    after: int
    tail_tokens: int
    remaining: int
    extra_now: float
    saved_per_turn: float
    kept: int = 0

    @property
    def turns_to_pay(self) -> float | None:
        """Later turns until the saving has paid for this turn's extra write (None: never)."""
        return self.extra_now / self.saved_per_turn if self.saved_per_turn > 0 else None

    def words(self) -> str:
        """The plan's reason for it, e.g. ``1 earlier tool outputs compressed late (60,000 -> 6,000
        tokens; its cache write pays back in 0.8 turns)``."""
        if not self.outputs:
            return f"{self.kept} earlier tool outputs kept whole (compressing them late would not pay)"
        pays = self.turns_to_pay
        back = "" if pays is None else "; cheaper from this turn on" if pays <= 0 else f"; its cache write pays back in {pays:.1f} turns"
        return f"{self.outputs} earlier tool outputs compressed late ({self.before:,} -> {self.after:,} tokens{back})"

    def facts(self) -> dict[str, float | int]:
        """The ledger's ``facts["late"]``."""
        return dict(outputs=self.outputs, kept=self.kept, tokens_before=self.before, tokens_after=self.after, tail_tokens=self.tail_tokens,
                    remaining=self.remaining, extra_now=round(self.extra_now, 1), saved_per_turn=round(self.saved_per_turn, 1))  # fmt: skip


def candidates(zone: LiveZone, outputs: Sequence[ToolOutput]) -> list[tuple[int, tuple, ToolOutput]]:
    """The outputs of the frozen prefix (``zone.entries``) that went whole for want of time:
    ``(message position, path inside the message, the output as the client sends it now)``."""
    found = []
    for o in outputs:
        i = o.message_index
        if i >= len(zone.entries) or len(o.path) < 2 or o.path[1] != i:
            continue
        rel = tuple(o.path[2:])
        if rel in zone.entries[i].deferred:
            found.append((i, rel, o))
    return found


def with_output(entry: FrozenEntry, rel: tuple, result: CompressResult | None, before: int, after: int, tool: str) -> FrozenEntry:
    """``entry`` once its output at ``rel`` is decided: no longer deferred, and with ``result``
    (a changed one) in place of the whole output in the text it goes upstream as, counted and
    naming its originals as a compression in its own turn would. Raises
    :class:`~headroom_core.wire.jsonedit.JSONPathError` when ``rel`` is not in the text."""
    left = tuple(p for p in entry.deferred if p != rel)
    if result is None or not result.changed:
        return replace(entry, deferred=left)
    text = jsonedit.apply(entry.sent_text, [jsonedit.Replace(rel, result.text)])
    return replace(
        entry,
        sent_text=text,
        modified=True,
        tokens_before=entry.tokens_before + before,
        tokens_after=entry.tokens_after + after,
        offloads=entry.offloads + tuple((o.key, rel) for o in result.offloads),
        blocks=entry.blocks + ((result.kind, tool, before, after),),
        deferred=left,
    )


def cache_ratios(prices: PriceTable, model: str) -> tuple[float, float]:
    """``(write, read)`` of ``model``'s prompt cache as multiples of its input price, from the
    price table; Anthropic's (1.25, 0.1) for a model the table does not know."""
    p = prices.price(model)
    if p is None or p.input <= 0:
        return ANTHROPIC_WRITE_RATIO, ANTHROPIC_READ_RATIO
    return p.cache_write / p.input, p.cache_read / p.input


def price(before: int, after: int, tail_chars: int, stores: int, ratios: tuple[float, float]) -> LateCost:
    """The :class:`~headroom_core.cache.cost_model.LateCost` of compressing an output late:
    ``tail_chars`` characters the previous prompt held after it, ``stores`` the session's stores
    so far (its requests), ``ratios`` from :func:`cache_ratios`."""
    return LateCost(before, after, tail_chars // CHARS_PER_TOKEN, expected_remaining(stores), *ratios)


def compress_late(
    rt: Runtime,
    zone: LiveZone,
    outputs: Sequence[ToolOutput],
    *,
    scope: str,
    lossless: bool,
    query: str,
    calls: Mapping[str, ToolCall] | None,
    model: str,
    stores: int,
    compress: Callable[..., CompressResult],
) -> tuple[LiveZone, LateCompression | None]:
    """Decide each output of the frozen prefix that went whole for want of time (module
    docstring): the zone with the changed entries replayed as they go now, and what was done
    (None: nothing to decide). ``compress(text, query, hint)`` is the content router within the
    time it may take (raises :class:`~headroom_core.compress.worker.CompressTimeout`);
    ``stores``: the session's revision. Raises SQLAlchemy's errors (storing originals and the
    decision)."""
    found = candidates(zone, outputs)
    if not found:
        return zone, None
    s = rt.settings
    entries = list(zone.entries)
    ratios = cache_ratios(PriceTable(user=s.prices), model)
    done = kept = before_all = after_all = tail_all = 0
    extra = saved = 0.0
    for i, rel, out in found:
        key = rt.decisions.key(scope, "tool_output:lossless" if lossless else "tool_output", out.text)
        hit = rt.decisions.get(key, out.text)
        if hit is not None and not hit[0].is_deferred:  # decided since, elsewhere: that stands
            res, before, after = hit
            entries[i] = with_output(entries[i], rel, res, before, after, out.tool_name)
            done += res.changed
            kept += not res.changed
            before_all, after_all = before_all + (before if res.changed else 0), after_all + (after if res.changed else 0)
            continue
        before = rt.counter.count(out.text)
        try:
            got = compress(out.text, query, hint_for_call(out.tool_name, (calls or {}).get(out.call_id))) if before >= s.min_tokens else None
        except CompressTimeout:
            log.info("headroom: compressing an earlier tool output late ran out of time; decided again next turn")
            continue
        if got is not None and lossless and got.offloads:
            got = CompressResult.unchanged(out.text, got.kind, "lossless only: the model cannot call headroom_retrieve")
        after = rt.counter.count(got.text) if got is not None and got.changed else before
        tail = sum(len(e.sent_text) for e in entries[i + 1 :])
        cost = price(before, after, tail, stores, ratios)
        if got is None or not got.changed or not cost.pays:
            entries[i] = with_output(entries[i], rel, None, 0, 0, out.tool_name)  # kept whole for the session
            kept += 1
            continue
        # a marker never names a missing original: stored first (evicted later, off this path)
        rt.store.put_many([(off.key, off.original, "tool_output") for off in got.offloads], scope)
        res = got
        stands = rt.decisions.settle(key, got, before, after, out.text)
        if stands is not None:
            res, before, after = stands
        entries[i] = with_output(entries[i], rel, res, before, after, out.tool_name)
        if res.changed:
            done += 1
            before_all, after_all, tail_all = before_all + before, after_all + after, tail_all + cost.tail_tokens
            extra, saved = extra + cost.extra_now, saved + cost.saved_per_turn
        else:
            kept += 1
    if entries == list(zone.entries):
        return zone, None
    late = LateCompression(done, before_all, after_all, tail_all, expected_remaining(stores), extra, saved, kept)
    return _rezoned(zone, entries), late


def _rezoned(zone: LiveZone, entries: list[FrozenEntry]) -> LiveZone:
    """``zone`` with ``entries`` in place of its own: what is replayed and what that weighs."""
    replay = tuple((e.position, e.sent_text) for e in entries if e.modified)
    blocks = tuple(b for e in entries if e.modified for b in e.blocks)
    before = sum(e.tokens_before for e in entries if e.modified)
    after = sum(e.tokens_after for e in entries if e.modified)
    return replace(zone, replay=replay, entries=tuple(entries), tokens_before=before, tokens_after=after, blocks=blocks)
