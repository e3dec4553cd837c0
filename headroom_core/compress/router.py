"""The content router: picks the compressor for a piece of text by what it holds.

Wrong guesses are harmless: a compressor that cannot handle its input returns it unchanged.
"""

from __future__ import annotations

from headroom_core.compress.json_crush import compress_json
from headroom_core.compress.result import CompressResult
from headroom_core.compress.tokens import TokenCounter


def classify(text: str) -> str:
    """The content kind of ``text``: ``"json"`` or ``"text"`` (more kinds come with the
    content-aware compressors)."""
    s = text.lstrip()
    if s[:1] in ("{", "["):
        return "json"
    return "text"


def compress_text(text: str, query: str, counter: TokenCounter, *, min_tokens: int, min_saving_ratio: float) -> CompressResult:
    """Route ``text`` to the compressor of its kind; ``query`` is the latest user message."""
    kind = classify(text)
    if kind == "json":
        return compress_json(text, query, counter, min_tokens=min_tokens, min_saving_ratio=min_saving_ratio)
    return CompressResult.unchanged(text, kind, f"no compressor for {kind}")
