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

    def run(self, tools_text: str, tools: list) -> ToolsOutcome:
        """``tools_text`` is the exact JSON text of ``tools`` in the request (the cache key)."""
        key = hashlib.blake2b(tools_text.encode("utf-8", "surrogatepass"), digest_size=20).digest()
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        res = minify_tools(tools, exclude=self._exclude)
        before = self._counter.count(jsonedit.dumps(tools))
        if res.changed:
            after = self._counter.count(jsonedit.dumps(res.tools))
            repl = tuple((i, new) for i, (old, new) in enumerate(zip(tools, res.tools)) if new is not old)
            out = ToolsOutcome(repl, before, after, res.reason) if after < before else ToolsOutcome((), before, before, "no gain")
        else:
            out = ToolsOutcome((), before, before, res.reason)
        with self._lock:
            self._cache[key] = out
            while len(self._cache) > self._entries:
                self._cache.popitem(last=False)
        return out
