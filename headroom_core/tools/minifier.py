"""Minify a request's ``tools`` array once per distinct list (cached by content hash) and count
what it saved; the tools step (:mod:`headroom_core.tools.step`) uses it.

What goes upstream for a changed tool is written from the client's own JSON text
(:func:`~headroom_core.wire.jsonedit.reserialize`): numbers, escapes and every value the
minifier did not mean to change keep their exact characters (``1e400`` is not turned into
``Infinity``, a 25-digit decimal is not rounded).
"""

from __future__ import annotations

import hashlib
import json
import marshal
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Generic, TypeVar

from headroom_core.compress.tokens import TokenCounter
from headroom_core.tools.minify import ShapeOf, minify_container, minify_tools
from headroom_core.wire import jsonedit
from headroom_core.wire.canonical import reserialize_canonical
from headroom_core.wire.tool_defs import tool_shape

#: Tools whose own minification and written text are kept (a tool is ~1-3 KB of JSON), and the
#: characters (bytes) each of the per-tool caches holds at most (MCP servers may define very large tools).
TOOL_ENTRIES = 2048
TOOL_CHARS = 8 * 1024 * 1024


@dataclass(frozen=True)
class ToolsOutcome:
    """Replacements for changed ``tools`` entries (index → the entry's new JSON text, a
    :class:`~headroom_core.wire.jsonedit.RawJSON` that ``jsonedit.Replace`` splices as it is)
    and token estimates of the whole ``tools`` array before and after (its JSON text as sent,
    whole tokens)."""

    replacements: tuple[tuple[int, jsonedit.RawJSON], ...]
    tokens_before: int
    tokens_after: int
    reason: str


V = TypeVar("V", str, bytes)


class _Lru(Generic[V]):
    """A small thread-safe LRU map of ``bytes`` keys to texts (or bytes), bounded by entries and
    by the characters (bytes) of its values (a value over the bound is not kept)."""

    def __init__(self, entries: int, chars: int) -> None:
        self._d: OrderedDict[bytes, V] = OrderedDict()
        self._n = entries
        self._max_chars = chars
        self._chars = 0
        self._lock = threading.Lock()

    def get(self, key: bytes) -> V | None:
        with self._lock:
            hit = self._d.get(key)
            if hit is not None:
                self._d.move_to_end(key)
            return hit

    def put(self, key: bytes, value: V) -> None:
        if len(value) > self._max_chars:
            return
        with self._lock:
            old = self._d.pop(key, None)
            if old is not None:
                self._chars -= len(old)
            self._d[key] = value
            self._chars += len(value)
            while len(self._d) > self._n or self._chars > self._max_chars:
                _k, v = self._d.popitem(last=False)
                self._chars -= len(v)


def _key(*parts: str) -> bytes:
    h = hashlib.blake2b(digest_size=20)
    for p in parts:
        b = p.encode("utf-8", "surrogatepass")
        h.update(len(b).to_bytes(8, "big"))
        h.update(b)
    return h.digest()


class ToolsMinifier:
    """Minifies a request's ``tools`` once per distinct ``tools`` text (LRU of ``entries``).

    A client resends the same tools on every turn, so after the first turn the result (and its
    token counts, the expensive part: about 0.25 s for 229 tools) comes from memory. A list not
    seen before (a tool added, an MCP server connected, a new session whose tools differ in a
    description) pays only for its tools not seen before: each tool's own minification and its
    written text are kept by the tool's exact JSON text (:data:`TOOL_ENTRIES`); the dedupe
    across tools runs on the whole list every time (it depends on the order and the others).
    """

    def __init__(self, counter: TokenCounter, exclude: tuple[str, ...], entries: int = 64) -> None:
        self._counter = counter
        self._exclude = exclude
        self._cache: OrderedDict[bytes, ToolsOutcome] = OrderedDict()
        self._entries = entries
        self._lock = threading.Lock()
        self._own: _Lru[bytes] = _Lru(TOOL_ENTRIES, TOOL_CHARS)  # tool text -> its own minified container (marshal)
        self._written: _Lru[str] = _Lru(TOOL_ENTRIES, TOOL_CHARS)  # (tool text, new value) -> the text written for it
        self._final: _Lru[str] = _Lru(
            TOOL_ENTRIES, TOOL_CHARS
        )  # tool text -> the text written for its own minification

    def run(
        self,
        tools_text: str,
        tools: list,
        count: bool = True,
        shape_of: ShapeOf = tool_shape,
        kind: str = "",
        texts: list[str] | None = None,
    ) -> ToolsOutcome:
        """``tools_text`` is the exact JSON text of ``tools`` in the request (the cache key, and
        the source of every byte that is not changed); ``tools`` its parsed value, one tool per
        entry; ``shape_of`` the dialect's :meth:`~headroom_core.wire.protocol.WireDialect.tool_shape`
        and ``kind`` a name for it in the cache keys (tools of the same text read in another
        dialect's shape are cached apart; ``""``: the default shapes).

        ``count=False`` (the fallback after a timeout or error) skips the token counts on a cache
        miss: the same replacements, token figures 0, nothing cached. ``texts``: the elements'
        texts when the caller has them (``tools_text`` is then ``"[" + ",".join(texts) + "]"``,
        not scanned for them again: ~1 ms for 229 tools). Raises ``ValueError`` if
        ``tools_text`` is not the JSON text of ``tools``.
        """
        key = (
            _key(kind, tools_text)
            if kind
            else hashlib.blake2b(tools_text.encode("utf-8", "surrogatepass"), digest_size=20).digest()
        )
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        if texts is None:
            texts = (
                [tools_text[a:b] for a, b in jsonedit.element_spans(tools_text, ())] if isinstance(tools, list) else []
            )
        if isinstance(tools, list) and len(texts) != len(tools):
            raise ValueError("tools_text is not the JSON text of tools")

        own_keys: dict[int, bytes] = {}

        def own(i: int, container: dict, schema: tuple[str, ...]) -> dict:
            # kept as marshal bytes (version 2: no shared references, exact types; dumped and
            # loaded in a fifth of JSON's time): the dedupe edits the dict it gets, so each use
            # loads a new one (one just minified is handed out as it is: its schema nodes are
            # new dicts, and it equals a loaded copy unless it holds a NaN, which equals no copy
            # of itself: a double whose bytes may be a NaN's gets the loaded copy)
            k = own_keys[i] = _key(".".join(schema), texts[i], *([kind] if kind else []))
            hit = self._own.get(k)
            if hit is None:
                fresh = minify_container(container, schema)
                hit = marshal.dumps(fresh, 2)
                self._own.put(k, hit)
                if b"\xf8\x7f" not in hit and b"\xf8\xff" not in hit:
                    return fresh
            return marshal.loads(hit)

        res = minify_tools(tools, exclude=self._exclude, minify_one=own, shape_of=shape_of)
        repl: list[tuple[int, jsonedit.RawJSON]] = []
        saved = 0
        if res.changed:
            for i, (old, new) in enumerate(zip(tools, res.tools)):
                if new is old:
                    continue
                # a tool the dedupe left alone is its own minification, a function of its text
                # (and of the shape and the exclusions, fixed per key and minifier): its
                # written text is kept by the same key as that minification
                fk = own_keys.get(i) if i not in res.deduped else None
                text = self._final.get(fk) if fk is not None else None
                if text is None:
                    text = texts[i] if new == old else self._written_text(texts[i], old, new)
                    if fk is not None:
                        self._final.put(fk, text)
                if text != texts[i]:
                    repl.append((i, jsonedit.RawJSON(text)))
                    saved += len(texts[i]) - len(text)
        # decided on characters, not tokens, so the fallback (no counting) decides the same way
        if saved <= 0:
            repl = []
        reason = res.reason if repl else "no gain"
        if not count:
            return ToolsOutcome(tuple(repl), 0, 0, reason)
        before = self._counter.count(tools_text)
        after = before
        if repl:
            after = self._counter.count(_splice(tools_text, repl))
        out = ToolsOutcome(tuple(repl), before, after, reason)
        with self._lock:
            self._cache[key] = out
            while len(self._cache) > self._entries:
                self._cache.popitem(last=False)
        return out

    def _written_text(self, text: str, old: object, new: object) -> str:
        """The text written for a tool whose JSON text is ``text`` (parsed: ``old``) that
        changed to ``new``: as ``dumps`` writes it when the client wrote it so (as cheap as a
        cache key), else the character walk, cached by ``text`` and ``new``.

        ``new`` is the minifier's copy of ``old``: ``old``'s keys in ``old``'s order (some left
        out, none added), each value ``old``'s own, a new description, or, from the cache of
        minifications, the equal value parsed back from its own JSON (same type, same text).
        So where :func:`~headroom_core.wire.canonical.reserialize_canonical` answers (the
        client's text is ``dumps(old)``, whitespace between tokens aside), its merge of ``old``
        and ``new`` is ``new`` itself (``copy=True``: no walk; about half of writing a new tool;
        tests: the walk's text for every tool of the corpus)."""
        out = reserialize_canonical(text, old, new, copy=True)
        if out is not None:
            return out
        k = _key(text, json.dumps(new))
        out = self._written.get(k)
        if out is None:
            out = jsonedit.reserialize(text, old, new)
            self._written.put(k, out)
        return out


def _splice(tools_text: str, repl: list[tuple[int, jsonedit.RawJSON]]) -> str:
    """``tools_text`` with the entries at the replaced indexes swapped for their new text."""
    return jsonedit.apply(tools_text, [jsonedit.ReplaceRaw((i,), str(t)) for i, t in repl])
