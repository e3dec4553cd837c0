"""The last step every line-based compressor shares: is the shorter text worth sending?"""

from __future__ import annotations

from headroom_core.compress.markers import offload_key
from headroom_core.compress.result import CompressResult, Offload
from headroom_core.compress.tokens import TokenCounter


def too_small(text: str, counter: TokenCounter, min_tokens: int) -> bool:
    """True when ``text`` has fewer than ``min_tokens`` tokens (a character count below it
    answers without tokenising: a token is at least one character)."""
    return len(text) < min_tokens or counter.count(text) < min_tokens


def precheck(text: object, kind: str, counter: TokenCounter, min_tokens: int) -> tuple[CompressResult | None, int]:
    """The guard every text compressor starts with: ``(unchanged result, 0)`` when ``text`` is
    not a non-blank string (``"not text"``) or is under ``min_tokens`` tokens (``"small"``); else
    ``(None, its token count)``. Any ``str`` is text, lone surrogates included (valid JSON)."""
    if not isinstance(text, str) or not text.strip():
        return CompressResult.unchanged(text, kind, "not text"), 0  # type: ignore[arg-type]
    n = counter.count(text)
    if n < min_tokens:
        return CompressResult.unchanged(text, kind, "small"), n
    return None, n


def finish(
    original: str,
    new_text: str,
    counter: TokenCounter,
    *,
    kind: str,
    strategy: str,
    reason: str,
    what: str,
    min_saving_ratio: float,
) -> CompressResult:
    """``new_text`` as the result when it saves at least ``min_saving_ratio`` of ``original``'s
    tokens, with one :class:`Offload` holding ``original`` byte for byte under
    ``offload_key(original)`` (the key every marker in ``new_text`` names); else the unchanged
    original with reason ``"no gain"``."""
    if new_text == original:
        return CompressResult.unchanged(original, kind, "nothing to drop")
    before, after = counter.count(original), counter.count(new_text)
    if after > before * (1.0 - min_saving_ratio):
        return CompressResult.unchanged(original, kind, f"no gain ({before} -> {after} tokens)")
    return CompressResult(
        text=new_text,
        changed=True,
        kind=kind,
        strategy=strategy,
        reason=reason,
        offloads=(Offload(offload_key(original), original, what),),
    )
