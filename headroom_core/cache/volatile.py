"""Volatile parts of the cached prefix: what changes in ``system`` and ``tools`` from one request
to the next, and what kind of content it is.

The provider's prompt cache is a prefix cache (Anthropic: ``tools``, then ``system``, then
``messages``; OpenAI: the request's leading tokens). One changed character in ``system`` makes
every token after it a cache miss, so a timestamp, a session UUID or a ``git status`` snapshot in
the system prompt costs a cache write of everything behind it whenever it changes. This module
compares two prefixes and names the changed spans; it is pure (no storage, no clock).

Line diffs come from difflib's :class:`~difflib.SequenceMatcher` (Ratcliff/Obershelp matching)
as ``cydifflib`` implements it: the standard library's algorithm in Cython, the same opcodes and
ratios about ten times faster (a new session's prefix, compared with the most similar of 16:
about 60 -> 10 ms, every line of its system prompt changed). A changed span is classified by regular expressions, first match wins:
``uuid`` (RFC 4122 text form), ``timestamp`` (ISO 8601 date-time, clock time, Unix epoch
seconds/milliseconds), ``date`` (ISO 8601 date, "Today's date"), ``git-status`` (``git status
--porcelain`` lines, abbreviated commit hashes, branch lines), ``model`` (model names and ids),
``cwd`` (working-directory lines), else ``other``. Two system prompts that share less than
:data:`REPLACED_BELOW` of their lines are a different prompt (``replaced``), not a variant.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from cydifflib import SequenceMatcher

from headroom_core.wire.dialects import WireDialect, for_body

#: Below this line similarity (difflib ratio, 0..1) the newer system prompt is another prompt.
REPLACED_BELOW = 0.5
#: At most this many changes are listed per comparison (the rest are counted in ``more``).
MAX_CHANGES = 20
#: Excerpts of changed text are cut to this many characters.
EXCERPT_CHARS = 160

_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I)
_TIMESTAMP = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}"  # ISO 8601 date-time
    r"|\b\d{1,2}:\d{2}(?::\d{2})?(?:\s?[AP]M)?\b"  # clock time
    r"|\b1[4-9]\d{8}(?:\d{3})?\b",  # Unix epoch seconds / milliseconds (2014..2033)
    re.I,
)
_DATE = re.compile(
    r"\b\d{4}-\d{2}-\d{2}\b|\b\d{4}/\d{2}/\d{2}\b|today'?s date|current date"
    r"|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.? \d{1,2},? \d{4}\b",
    re.I,
)
_GIT = re.compile(
    r"^\s*(?:[ MADRCUT?!]{2}|[MADRCUT?!]) \S+(?: -> \S+)?\s*$"  # git status --porcelain
    r"|^\s*[0-9a-f]{7,12} \S"  # git log --oneline
    r"|git ?status|current branch:|main branch|recent commits:",
    re.I | re.M,
)
_MODEL = re.compile(r"\b(?:claude|gpt|o[134]|gemini|llama|qwen|mistral|opus|sonnet|haiku)[\w.-]*|\bmodel\b", re.I)
_CWD = re.compile(r"working directory|\bcwd\b|<cwd>", re.I)
_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("uuid", _UUID),
    ("timestamp", _TIMESTAMP),
    ("date", _DATE),
    ("git-status", _GIT),
    ("model", _MODEL),
    ("cwd", _CWD),
)


@dataclass(frozen=True)
class Change:
    """One changed span of the prefix.

    ``part``: ``"system"`` or ``"tools"``. ``kind``: see the module docstring, or for tools
    ``tool-order`` (same tools, another order), ``tools-added``, ``tools-removed``,
    ``tool-definition`` (a tool of the same name defined differently). ``line``: 1-based line in
    the newer system text (0 for tools); ``offset``: character offset in the newer system text
    where the change starts (the cache misses from there on; 0 for tools). ``before``/``after``:
    excerpts of at most :data:`EXCERPT_CHARS` characters.
    """

    part: str
    kind: str
    line: int
    offset: int
    before: str
    after: str


@dataclass(frozen=True)
class Prefix:
    """The cache-relevant prefix of one request: the system text (blocks joined by newlines)
    and ``(name, sha256 hex of the definition)`` per tool, in request order."""

    system: str
    tools: tuple[tuple[str, str], ...]

    @property
    def fingerprint(self) -> str:
        """SHA-256 hex of system and tools together (equal prefixes, equal fingerprints)."""
        h = hashlib.sha256(self.system.encode("utf-8", "surrogatepass"))
        for name, digest in self.tools:
            h.update(b"\0" + name.encode("utf-8", "surrogatepass") + b"\0" + digest.encode())
        return h.hexdigest()


@dataclass(frozen=True)
class PrefixDiff:
    """The comparison of an older and a newer :class:`Prefix`.

    ``similarity``: difflib ratio of the system lines (1.0 identical). ``replaced``: the system
    prompts are different prompts (similarity below :data:`REPLACED_BELOW`), so ``changes``
    holds one ``replaced`` entry instead of line changes. ``more``: changes not listed.
    """

    changes: tuple[Change, ...]
    similarity: float
    replaced: bool
    more: int = 0

    @property
    def first_offset(self) -> int | None:
        """Character offset in the newer system text of the first change (None if unchanged)."""
        offs = [c.offset for c in self.changes if c.part == "system"]
        return min(offs) if offs else None

    @property
    def kinds(self) -> tuple[str, ...]:
        """The distinct kinds of change, in order of first appearance."""
        return tuple(dict.fromkeys(c.kind for c in self.changes))


def _without_cache_control(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_cache_control(v) for v in value]
    return value


def system_text(body: Mapping[str, Any], d: WireDialect | None = None) -> str:
    """The system prompt of a request body as one text, as dialect ``d`` reads it (``d``
    defaults to the dialect the body reads as). ``""`` when there is none."""
    return (d or for_body(body)).system_text(body)


#: The last few ``tools`` arrays hashed, by identity (a request whose ``tools`` text did not
#: change reuses the previous request's parsed array: :mod:`headroom_core.wire.view`).
_TOOLS_MEMO: "OrderedDict[int, tuple[list, tuple[tuple[str, str], ...]]]" = OrderedDict()
_TOOLS_MEMO_SIZE = 64
_memo_lock = threading.Lock()


def tool_entries(body: Mapping[str, Any], d: WireDialect | None = None) -> tuple[tuple[str, str], ...]:
    """``(name, sha256 hex)`` of each entry of ``tools`` (``cache_control`` left out, keys
    sorted), in request order; the name of an OpenAI Chat tool is ``function.name``. The same
    array object (parsed bodies are never changed in place) is hashed once."""
    tools = (d or for_body(body)).tools_of(body)
    if not isinstance(tools, list):
        return ()
    with _memo_lock:
        hit = _TOOLS_MEMO.get(id(tools))
        if hit is not None and hit[0] is tools:
            _TOOLS_MEMO.move_to_end(id(tools))
            return hit[1]
    done = _tool_entries(tools)
    with _memo_lock:
        _TOOLS_MEMO[id(tools)] = (tools, done)  # held: the id stays this array's while cached
        while len(_TOOLS_MEMO) > _TOOLS_MEMO_SIZE:
            _TOOLS_MEMO.popitem(last=False)
    return done


def _tool_entries(tools: list) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    for t in tools:
        if not isinstance(t, dict):
            continue
        name = t.get("name")
        if name is None and isinstance(t.get("function"), dict):
            name = t["function"].get("name")
        blob = json.dumps(t, sort_keys=True, ensure_ascii=False, default=str)
        if '"cache_control"' in blob:  # else there is none to leave out: no walk for a copy
            blob = json.dumps(_without_cache_control(t), sort_keys=True, ensure_ascii=False, default=str)
        out.append(
            (str(name or t.get("type") or "?"), hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest())
        )
    return tuple(out)


def prefix_of(body: Mapping[str, Any], d: WireDialect | None = None) -> Prefix:
    """The :class:`Prefix` of a parsed request body in dialect ``d`` (defaults to the dialect
    the body reads as)."""
    d = d or for_body(body)
    return Prefix(system_text(body, d), tool_entries(body, d))


def classify(text: str) -> str:
    """The kind of a changed piece of text (see the module docstring); ``"other"`` if no rule
    matches."""
    for kind, rx in _RULES:
        if rx.search(text):
            return kind
    return "other"


def _excerpt(s: str) -> str:
    s = s.strip("\n")
    return s if len(s) <= EXCERPT_CHARS else s[: EXCERPT_CHARS - 1] + "…"


def _changed_tokens(old: str, new: str) -> str:
    """The whitespace-delimited words of ``old`` and ``new`` that the character diff touches."""
    sm = SequenceMatcher(None, old, new, autojunk=False)
    words: list[str] = []
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            continue
        for s, a, b in ((old, i1, i2), (new, j1, j2)):
            lo = s.rfind(" ", 0, a) + 1
            hi = s.find(" ", b)
            words.append(s[lo : hi if hi >= 0 else len(s)])
    return " ".join(w for w in words if w)


def _classify_pair(old: str, new: str) -> str:
    kind = classify(_changed_tokens(old, new)) if old and new else "other"
    return kind if kind != "other" else classify(old + "\n" + new)


def diff_system(old: str, new: str) -> PrefixDiff:
    """Compare two system texts line by line (see :class:`PrefixDiff`)."""
    if old == new:
        return PrefixDiff((), 1.0, False)
    a, b = old.splitlines(), new.splitlines()
    sm = SequenceMatcher(None, a, b, autojunk=False)
    ratio = sm.ratio()
    starts = [0]
    for line in new.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    if ratio < REPLACED_BELOW:
        first = next((j1 for tag, _i1, _i2, j1, _j2 in sm.get_opcodes() if tag != "equal"), 0)
        change = Change(
            "system", "replaced", first + 1, starts[min(first, len(starts) - 1)], _excerpt(old), _excerpt(new)
        )
        return PrefixDiff((change,), ratio, True)
    changes: list[Change] = []
    more = 0  # changed lines past MAX_CHANGES: counted, not classified (a character diff each)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            continue
        olds, news = a[i1:i2], b[j1:j2]
        for k in range(max(len(olds), len(news))):
            if len(changes) >= MAX_CHANGES:
                more += 1
                continue
            o = olds[k] if k < len(olds) else ""
            n = news[k] if k < len(news) else ""
            lineno = min(j1 + k, len(b))
            off = starts[min(j1 + k, len(starts) - 1)]
            changes.append(Change("system", _classify_pair(o, n), lineno + 1, off, _excerpt(o), _excerpt(n)))
    return PrefixDiff(tuple(changes), ratio, False, more)


def diff_tools(old: Iterable[tuple[str, str]], new: Iterable[tuple[str, str]]) -> tuple[Change, ...]:
    """What changed in ``tools``: order, added or removed names, redefined tools."""
    old, new = tuple(old), tuple(new)
    if old == new:
        return ()
    on, nn = [n for n, _ in old], [n for n, _ in new]
    out: list[Change] = []
    added = [n for n in nn if n not in set(on)]
    removed = [n for n in on if n not in set(nn)]
    if added:
        where = "at the end" if nn[: len(on)] == on else "among the others"
        out.append(Change("tools", "tools-added", 0, 0, "", _excerpt(f"+{len(added)} {where}: {', '.join(added)}")))
    if removed:
        out.append(Change("tools", "tools-removed", 0, 0, _excerpt(f"-{len(removed)}: {', '.join(removed)}"), ""))
    common_old = [n for n in on if n in set(nn)]
    common_new = [n for n in nn if n in set(on)]
    if common_old != common_new:
        # a tool name may repeat (two tools of one name): the lists may then differ only in length
        k = next(
            (i for i, (x, y) in enumerate(zip(common_old, common_new)) if x != y), min(len(common_old), len(common_new))
        )
        out.append(
            Change(
                "tools",
                "tool-order",
                0,
                0,
                _excerpt(f"#{k}: {', '.join(common_old[k : k + 3])}"),
                _excerpt(f"#{k}: {', '.join(common_new[k : k + 3])}"),
            )
        )
    od, nd = dict(old), dict(new)
    redefined = [n for n in common_new if od[n] != nd[n]]
    if redefined:
        out.append(Change("tools", "tool-definition", 0, 0, "", _excerpt(f"{len(redefined)}: {', '.join(redefined)}")))
    return tuple(out)


def diff_prefix(old: Prefix, new: Prefix) -> PrefixDiff:
    """Compare two prefixes: tool changes first (``tools`` precede ``system`` in Anthropic's
    cache order), then the system lines."""
    sysdiff = diff_system(old.system, new.system)
    tools = diff_tools(old.tools, new.tools)
    return PrefixDiff(tools + sysdiff.changes, sysdiff.similarity, sysdiff.replaced, sysdiff.more)


def similarity(old: str, new: str) -> float:
    """Line similarity of two system texts (difflib ratio, 0..1); cheap upper bound first."""
    a, b = old.splitlines(), new.splitlines()
    sm = SequenceMatcher(None, a, b, autojunk=False)
    if sm.real_quick_ratio() < REPLACED_BELOW or sm.quick_ratio() < REPLACED_BELOW:
        return sm.quick_ratio()
    return sm.ratio()


def nearest(candidates: Iterable[tuple[str, Prefix]], new: Prefix) -> tuple[str, Prefix] | None:
    """Of ``(id, prefix)`` candidates (most recent first), the one whose system text is most
    similar to ``new``'s, if at least :data:`REPLACED_BELOW` similar (ties: the more recent)."""
    best: tuple[float, tuple[str, Prefix]] | None = None
    for cid, p in candidates:
        if p == new:
            continue
        s = similarity(p.system, new.system)
        if s >= REPLACED_BELOW and (best is None or s > best[0]):
            best = (s, (cid, p))
    return best[1] if best else None
