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
2. else it is weighed (:class:`~headroom_core.cache.cost_model.LateCost`): the tokens whole and
   compressed (compressed now, with at most :data:`TIME_SHARE` of the plan's remaining time,
   unless the placeholder already notes them), the tokens the previous turn's prompt held after
   it (the tail, estimated at :data:`CHARS_PER_TOKEN` characters a token), the requests the
   session is expected to make still (:func:`~headroom_core.cache.cost_model.expected_remaining`:
   the mean residual life of the project's recent sessions from the ledger, else the Lindy
   estimate from its stores so far) and the model's cache prices
   (:class:`~headroom_core.pricing.PriceTable` with the user's entries; an unknown model at
   Anthropic's, the dearest write premium);
3. when it pays, the compressed form replaces the deferred decision once, whoever comes first
   (:meth:`~headroom_core.cache.decisions.DecisionCache.settle`, its originals stored before),
   and the message goes upstream with it from this turn on: a deliberate change of the cached
   prefix, recorded (:class:`LateCompression`: the plan's reason, the ledger's
   ``facts["late"]``, ``headroom stats``); the output leaves the entry's ``deferred``;
4. when it does not pay yet, it stays whole and is weighed again next turn (the placeholder
   notes the tokens, :meth:`~headroom_core.cache.decisions.DecisionCache.note`, so no proxy
   compresses it again to weigh it); when compressing gains nothing, that is its decision and
   it stays whole for good. An output compressed late is never sent whole again: no flip back.

A compression that runs out of its time keeps the question for the next turn. Pure decisions
(:func:`candidates`, :func:`with_output`, :func:`price`) and one function with the I/O
(:func:`compress_late`).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from headroom_core.cache.cost_model import ANTHROPIC_READ_RATIO, ANTHROPIC_WRITE_RATIO, LateCost, expected_remaining
from headroom_core.cache.frozen import FrozenEntry, LiveZone
from headroom_core.compress.pipeline import hint_for_call
from headroom_core.compress.result import CompressResult
from headroom_core.compress.worker import CompressTimeout
from headroom_core.db.models import RequestOutcome
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
    (``saved_per_turn``); ``kept``: outputs decided whole for good (compressing them gains
    nothing); ``waiting``: outputs weighed for the first time that do not pay yet;
    ``messages``: the positions of the messages that go differently from this turn on."""

    outputs: int
    before: int
    after: int
    tail_tokens: int
    remaining: int
    extra_now: float
    saved_per_turn: float
    kept: int = 0
    waiting: int = 0
    messages: tuple[int, ...] = ()

    @property
    def turns_to_pay(self) -> float | None:
        """Later turns until the saving has paid for this turn's extra write (None: never)."""
        return self.extra_now / self.saved_per_turn if self.saved_per_turn > 0 else None

    def words(self) -> str:
        """The plan's reason for it, e.g. ``1 earlier tool outputs compressed late (60,000 ->
        6,000 tokens; its cache write pays back in 0.8 turns)``."""
        parts = []
        if self.outputs:
            pays = self.turns_to_pay
            back = (
                ""
                if pays is None
                else "; cheaper from this turn on"
                if pays <= 0
                else f"; its cache write pays back in {pays:.1f} turns"
            )
            parts.append(
                f"{self.outputs} earlier tool outputs compressed late ({self.before:,} -> {self.after:,} tokens{back})"
            )
        if self.kept:
            parts.append(f"{self.kept} earlier tool outputs kept whole (compressing them gains nothing)")
        if self.waiting:
            parts.append(f"{self.waiting} earlier tool outputs left whole until compressing them late pays")
        return ", ".join(parts)

    def facts(self) -> dict[str, float | int | list[int]]:
        """The ledger's ``facts["late"]``."""
        return dict(outputs=self.outputs, kept=self.kept, waiting=self.waiting, messages=list(self.messages), tokens_before=self.before, tokens_after=self.after,
                    tail_tokens=self.tail_tokens, remaining=self.remaining, extra_now=round(self.extra_now, 1),
                    saved_per_turn=round(self.saved_per_turn, 1))  # fmt: skip


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


def with_output(
    entry: FrozenEntry, rel: tuple, result: CompressResult | None, before: int, after: int, tool: str
) -> FrozenEntry:
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


def price(before: int, after: int, tail_chars: int, remaining: int, ratios: tuple[float, float]) -> LateCost:
    """The :class:`~headroom_core.cache.cost_model.LateCost` of compressing an output late:
    ``tail_chars`` characters the previous prompt held after it, ``remaining`` the session's
    expected requests still, ``ratios`` from :func:`cache_ratios`."""
    return LateCost(before, after, tail_chars // CHARS_PER_TOKEN, remaining, *ratios)


#: How far back the ledger's sessions of a project count for :func:`session_lengths` (days).
HISTORY_DAYS = 7
#: How long a project's session lengths are reused before they are read again (seconds).
HISTORY_TTL_SECONDS = 600.0
_lengths: dict[tuple[int, str], tuple[float, tuple[int, ...]]] = {}
_lengths_lock = threading.Lock()


def session_lengths(sessions: sessionmaker[Session], project: str) -> tuple[int, ...]:
    """The requests of each session of ``project`` in the ledger over the last
    :data:`HISTORY_DAYS` days (at most 500 sessions, the latest), read at most once per
    :data:`HISTORY_TTL_SECONDS` per database and project. Raises SQLAlchemy's errors."""
    key = (id(sessions), project)
    now = time.monotonic()
    with _lengths_lock:
        hit = _lengths.get(key)
    if hit is not None and now - hit[0] < HISTORY_TTL_SECONDS:
        return hit[1]
    R = RequestOutcome
    since = datetime.now(timezone.utc).replace(tzinfo=None) - timedelta(days=HISTORY_DAYS)
    stmt = (
        select(func.count()).where(R.created_at >= since, R.project == project, R.session_key != "")
        .group_by(R.session_key).order_by(func.max(R.created_at).desc()).limit(500)
    )  # fmt: skip
    with sessions() as s:
        got = tuple(int(n) for n in s.scalars(stmt))
    with _lengths_lock:
        _lengths[key] = (now, got)
        if len(_lengths) > 256:
            _lengths.pop(next(iter(_lengths)))
    return got


def compress_late(
    rt: Runtime,
    zone: LiveZone,
    outputs: Sequence[ToolOutput],
    *,
    scope: str,
    project: str,
    lossless: bool,
    query: str,
    calls: Mapping[str, ToolCall] | None,
    model: str,
    stores: int,
    compress: Callable[..., CompressResult],
) -> tuple[LiveZone, LateCompression | None]:
    """Decide each output of the frozen prefix that went whole for want of time (module
    docstring): the zone with the changed entries replayed as they go now, and what was done
    (None: nothing changed and nothing was weighed for the first time). ``compress(text, query,
    hint)`` is the content router within the time it may take (raises
    :class:`~headroom_core.compress.worker.CompressTimeout`); ``stores``: the session's revision
    (its requests so far). Raises SQLAlchemy's errors (the ledger's history, storing originals
    and decisions)."""
    found = candidates(zone, outputs)
    if not found:
        return zone, None
    s = rt.settings
    entries = list(zone.entries)
    ratios = cache_ratios(PriceTable(user=s.prices), model)
    remaining = expected_remaining(stores, session_lengths(rt.sessions, project))
    done = kept = waiting = before_all = after_all = tail_all = 0
    extra = saved = 0.0

    def compressed(text: str, tool: str, call_id: str) -> CompressResult | None:
        got = compress(text, query, hint_for_call(tool, (calls or {}).get(call_id)))
        if lossless and got.offloads:
            return None  # the model cannot call headroom_retrieve: nothing lossless to gain here
        return got if got.changed else None

    for i, rel, out in found:
        key = rt.decisions.key(scope, "tool_output:lossless" if lossless else "tool_output", out.text)
        hit = rt.decisions.get(key, out.text)
        if hit is not None and not hit[0].is_deferred:  # decided since, elsewhere: that stands
            res, before, after = hit
            entries[i] = with_output(entries[i], rel, res, before, after, out.tool_name)
            if res.changed:
                done, before_all, after_all = done + 1, before_all + before, after_all + after
            else:
                kept += 1
            continue
        noted = hit is not None and hit[1] > 0  # the placeholder knows what compressing gives
        got: CompressResult | None = None
        try:
            if noted:
                assert hit is not None
                before, after = hit[1], hit[2]
            else:
                before = rt.counter.count(out.text)
                got = compressed(out.text, out.tool_name, out.call_id) if before >= s.min_tokens else None
                after = rt.counter.count(got.text) if got is not None else before
                if got is None or after >= before:  # nothing to gain: that is its decision
                    rt.decisions.settle(
                        key,
                        CompressResult.unchanged(out.text, got.kind if got else "", "no gain"),
                        before,
                        before,
                        out.text,
                    )
                    entries[i] = with_output(entries[i], rel, None, 0, 0, out.tool_name)
                    kept += 1
                    continue
            cost = price(before, after, sum(len(e.sent_text) for e in entries[i + 1 :]), remaining, ratios)
            if not cost.pays:
                if not noted:
                    rt.decisions.note(key, before, after)  # weighed again next turn, without compressing
                    waiting += 1
                continue
            if got is None:
                got = compressed(out.text, out.tool_name, out.call_id)
                if got is None:
                    continue
                after = rt.counter.count(got.text)
        except CompressTimeout:
            log.info("headroom: compressing an earlier tool output late ran out of time; decided again next turn")
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
    if entries == list(zone.entries) and not waiting:
        return zone, None
    moved = tuple(i for i, (e, was) in enumerate(zip(entries, zone.entries)) if e.sent_text != was.sent_text)
    late = LateCompression(done, before_all, after_all, tail_all, remaining, extra, saved, kept, waiting, moved)
    return _rezoned(zone, entries), late


def _rezoned(zone: LiveZone, entries: list[FrozenEntry]) -> LiveZone:
    """``zone`` with ``entries`` in place of its own: what is replayed and what that weighs."""
    replay = tuple((e.position, e.sent_text) for e in entries if e.modified)
    blocks = tuple(b for e in entries if e.modified for b in e.blocks)
    before = sum(e.tokens_before for e in entries if e.modified)
    after = sum(e.tokens_after for e in entries if e.modified)
    return replace(zone, replay=replay, entries=tuple(entries), tokens_before=before, tokens_after=after, blocks=blocks)
