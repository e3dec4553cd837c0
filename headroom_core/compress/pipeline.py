"""The request-level pipeline: which tool outputs to compress, with what, and what it saved.

Pure decisions over the neutral blocks from ``wire``; storage is reached only through the
decision cache passed in. The caller applies the edits to the body bytes.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Callable, Mapping, Protocol

from headroom_core.compress.reads import command_of, verbatim_call_ids
from headroom_core.compress.result import CompressResult, Offload
from headroom_core.compress.router import Hint
from headroom_core.compress.tokens import TokenCounter
from headroom_core.compress.worker import CompressTimeout
from headroom_core.wire.blocks import ToolCall, ToolOutput


@dataclass(frozen=True)
class BlockOutcome:
    """What happened to one tool output: token counts are estimates (whole tokens);
    ``offload_keys`` the retrieval keys its markers name."""

    path: tuple
    tool_name: str
    kind: str
    strategy: str
    reason: str
    changed: bool
    tokens_before: int
    tokens_after: int
    cached: bool
    offload_keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class PipelineResult:
    """The replacements to make (``path`` → new text), the originals to store, per-block outcomes."""

    replacements: tuple[tuple[tuple, str], ...]
    offloads: tuple[Offload, ...]
    blocks: tuple[BlockOutcome, ...] = field(default=())

    @property
    def tokens_before(self) -> int:
        return sum(b.tokens_before for b in self.blocks)

    @property
    def tokens_after(self) -> int:
        return sum(b.tokens_after for b in self.blocks)


Compressor = Callable[..., CompressResult]  # (text, query) or, given calls, (text, query, hint)


class Decisions(Protocol):
    """Where decisions are kept (:class:`headroom_core.cache.decisions.DecisionCache`)."""

    def key(self, scope: str, kind_hint: str, text: str) -> str: ...

    def get(self, h: str, original: str) -> tuple[CompressResult, int, int] | None: ...

    def put(self, h: str, result: CompressResult, tokens_before: int, tokens_after: int) -> None: ...


def hint_for_call(tool_name: str, call: ToolCall | None) -> Hint:
    """The router :class:`Hint` for an output of ``call``: tool name, the file path its arguments
    name (``file_path``/``notebook_path``/``path``) and the shell command they hold."""
    a = call.arguments if call is not None and isinstance(call.arguments, dict) else {}
    path = a.get("file_path") or a.get("notebook_path") or a.get("path") or ""
    return Hint(tool_name=tool_name, path=path if isinstance(path, str) else "", command=command_of(a))


# Tool outputs longer than this many characters are left as they are: counting and compressing
# them would take seconds on the request path (about 1.4 MB/s for token counts alone).
MAX_OUTPUT_CHARS = 2_000_000

# A compressor that declines only because the embedding model is still loading says so with this
# reason; that answer is not cached (the frozen prefix keeps this turn's bytes anyway).
TRANSIENT_REASON = "model loading"


def decision_key(cache: Decisions, scope: str, text: str, lossless: bool) -> str:
    """The key under which ``cache`` keeps the decision for the tool output ``text`` in ``scope``
    (lossless decisions apart from the others)."""
    return cache.key(scope, "tool_output:lossless" if lossless else "tool_output", text)


def excluded(tool_name: str, patterns: tuple[str, ...]) -> bool:
    """True when ``tool_name`` matches one of the glob ``patterns`` (``fnmatch``, case-sensitive)."""
    return any(fnmatch.fnmatchcase(tool_name, p) for p in patterns)


def compress_outputs(
    outputs: list[ToolOutput],
    query: str,
    compressor: Compressor,
    counter: TokenCounter,
    cache: Decisions,
    *,
    min_tokens: int,
    exclude_tools: tuple[str, ...] = (),
    calls: Mapping[str, ToolCall] | None = None,
    cache_only: bool = False,
    scope: str = "",
    lossless: bool = False,
) -> PipelineResult:
    """Compress every eligible tool output, reusing earlier decisions for the same content.

    ``compressor(text, query)`` is the content router. Outputs of excluded tools, error results
    and outputs under ``min_tokens`` tokens are left as they are.

    ``calls`` (call id -> the call, in conversation order; ``wire.calls.tool_calls_in_request``)
    turns on two things: the latest view of every file the agent read or wrote stays verbatim
    (:func:`~headroom_core.compress.reads.verbatim_call_ids`; older, superseded reads may be
    compressed), and the compressor is called as ``compressor(text, query, hint)`` with the
    :class:`~headroom_core.compress.router.Hint` of the output's call. The verbatim check comes
    before the decision cache, so a cached decision for equal text never applies to a latest read.

    ``cache_only`` (the fallback after a timeout or error) reuses earlier decisions and leaves
    every other output as it is, without counting or compressing anything new; that it went
    whole is recorded as its decision where the cache can take it
    (:meth:`~headroom_core.compress.result.CompressResult.deferred`: every proxy of a team then
    sends the same bytes while it has no time either). Without ``cache_only`` such a placeholder
    is no decision: the output is decided now, and that replaces it.

    Decisions are kept per ``scope`` (a :class:`~headroom_core.scope.Scope` id). ``lossless``
    (the model cannot call ``headroom_retrieve`` in this request): only results without
    offloads (nothing dropped, no marker) are used; such decisions are kept apart.

    A ``compressor`` that raises :class:`~headroom_core.compress.worker.CompressTimeout` (the
    request's time ran out) turns ``cache_only`` on from that output on, that output included:
    the request goes on with the decisions made in time instead of a second walk.
    """
    verbatim = verbatim_call_ids(calls) if calls is not None else frozenset()
    replacements: list[tuple[tuple, str]] = []
    offloads: list[Offload] = []
    blocks: list[BlockOutcome] = []
    for out in outputs:
        if excluded(out.tool_name, exclude_tools):
            blocks.append(BlockOutcome(out.path, out.tool_name, "", "unchanged", "tool excluded", False, 0, 0, False))
            continue
        if out.is_error:
            continue
        if out.call_id in verbatim:
            blocks.append(
                BlockOutcome(out.path, out.tool_name, "", "unchanged", "latest view of a file", False, 0, 0, False)
            )
            continue
        if len(out.text) < min_tokens:  # a token is at least one character: cheaply too small
            continue
        if len(out.text) > MAX_OUTPUT_CHARS:
            blocks.append(
                BlockOutcome(
                    out.path, out.tool_name, "", "unchanged", "too large to compress in time", False, 0, 0, False
                )
            )
            continue
        h = decision_key(cache, scope, out.text, lossless)
        hit = cache.get(h, out.text)
        if hit is not None and hit[0].is_deferred:
            # it went whole for want of time somewhere: decided now when there is time (the
            # decision replaces it), else whole again (the tokens it notes are a forecast)
            hit = None if not cache_only else (hit[0], 0, 0)
        cached = hit is not None
        if hit is None and cache_only:  # no time to decide: sent whole, and that is recorded
            res = CompressResult.deferred(out.text)
            try:
                cache.put(h, res, 0, 0)
            except Exception:  # noqa: BLE001 - a database that cannot take it must not cost the fallback its replay
                pass
            blocks.append(BlockOutcome(out.path, out.tool_name, "", res.strategy, res.reason, False, 0, 0, False))
            continue
        if hit is None:
            before = counter.count(out.text)
            if before < min_tokens:
                continue
            try:
                if calls is None:
                    res = compressor(out.text, query)
                else:
                    res = compressor(out.text, query, hint_for_call(out.tool_name, calls.get(out.call_id)))
            except CompressTimeout:  # the request's time ran out: this output and the rest as with cache_only
                cache_only = True
                res = CompressResult.deferred(out.text)
                try:
                    cache.put(h, res, 0, 0)
                except Exception:  # noqa: BLE001 - as above
                    pass
                blocks.append(BlockOutcome(out.path, out.tool_name, "", res.strategy, res.reason, False, 0, 0, False))
                continue
            if lossless and res.offloads:
                res = CompressResult.unchanged(
                    out.text, res.kind, "lossless only: the model cannot call headroom_retrieve"
                )
            after = counter.count(res.text) if res.changed else before
            if res.changed and after >= before:
                res = CompressResult.unchanged(out.text, res.kind, "no gain")
                after = before
            if res.changed or res.reason != TRANSIENT_REASON:
                cache.put(h, res, before, after)  # "model loading" is no decision: decide again later
        else:
            res, before, after = hit
        keys = tuple(o.key for o in res.offloads) if res.changed else ()
        blocks.append(
            BlockOutcome(
                out.path, out.tool_name, res.kind, res.strategy, res.reason, res.changed, before, after, cached, keys
            )
        )
        if res.changed:
            replacements.append((out.path, res.text))
            offloads.extend(res.offloads)
    return PipelineResult(tuple(replacements), tuple(offloads), tuple(blocks))
