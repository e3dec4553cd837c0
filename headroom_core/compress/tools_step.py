"""The request pipeline's step for the ``tools`` array: minify (cached by content hash) and
count what it saved."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass

from headroom_core.compress.tokens import TokenCounter
from headroom_core.compress.tool_defs import minify_tools
from headroom_core.wire import jsonedit


@dataclass(frozen=True)
class ToolsOutcome:
    """Replacements for changed ``tools`` entries (index → new entry) and token estimates of the
    whole ``tools`` array before and after (compact JSON, whole tokens)."""

    replacements: tuple[tuple[int, object], ...]
    tokens_before: int
    tokens_after: int
    reason: str


class ToolsMinifier:
    """Minifies a request's ``tools`` once per distinct ``tools`` text (LRU of ``entries``).

    A client resends the same tools on every turn, so after the first turn the result (and its
    token counts, the expensive part: about 0.25 s for 229 tools) comes from memory.
    """

    def __init__(self, counter: TokenCounter, exclude: tuple[str, ...], entries: int = 64) -> None:
        self._counter = counter
        self._exclude = exclude
        self._cache: OrderedDict[bytes, ToolsOutcome] = OrderedDict()
        self._entries = entries
        self._lock = threading.Lock()

    def run(self, tools_text: str, tools: list, count: bool = True) -> ToolsOutcome:
        """``tools_text`` is the exact JSON text of ``tools`` in the request (the cache key).

        ``count=False`` (the fallback after a timeout or error) skips the token counts on a cache
        miss: the same replacements, token figures 0, nothing cached.
        """
        key = hashlib.blake2b(tools_text.encode("utf-8", "surrogatepass"), digest_size=20).digest()
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        res = minify_tools(tools, exclude=self._exclude)
        # decided on bytes, not tokens, so the fallback (no counting) decides the same way
        smaller = res.changed and len(jsonedit.dumps(res.tools)) < len(jsonedit.dumps(tools))
        repl = tuple((i, new) for i, (old, new) in enumerate(zip(tools, res.tools)) if new is not old) if smaller else ()
        if not count:
            return ToolsOutcome(repl, 0, 0, res.reason if smaller else "no gain")
        before = self._counter.count(jsonedit.dumps(tools))
        after = self._counter.count(jsonedit.dumps(res.tools)) if repl else before
        out = ToolsOutcome(repl, before, after, res.reason if smaller else "no gain")
        with self._lock:
            self._cache[key] = out
            while len(self._cache) > self._entries:
                self._cache.popitem(last=False)
        return out
