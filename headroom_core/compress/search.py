"""Compress search results: ``path:line:text`` hits (grep -rn, ripgrep, Claude Code ``Grep`` in
content mode) and plain path lists (``find``, ``Glob``, ``Grep`` in files mode).

**Hits** are grouped by file in ripgrep's ``--heading`` layout: the path once, with its number of
matches, then ``line:text`` (``line-text`` for context lines) under it. Which hits stay: blocks of
consecutive lines of one file are the unit (a match with its ``-A/-B/-C`` context); a block's
score is the number of the latest user query's words (:func:`~headroom_core.compress.json_select.query_words`)
in its text, plus half a point per word in its path. Every file keeps its best block (up to
:data:`MAX_FILES` files, best files first), then the best remaining blocks fill up to
:data:`MAX_HITS` matches, at most :data:`PER_FILE` blocks per file. Ties go to the earlier hit,
so the result is deterministic.

**Paths**: lists longer than :data:`MAX_PATHS` keep the first :data:`HEAD_PATHS` paths and every
path matching a query word (up to :data:`MAX_QUERY_PATHS`), in their order, then a count per
directory of the rest.

Lines that are neither (``Found 12 files``, ``... [560 lines truncated] ...``) stay as they are.
One marker at the end names what was dropped; its key retrieves the whole original.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from headroom_core.compress.gain import finish, too_small
from headroom_core.compress.json_select import query_words
from headroom_core.compress.markers import make_marker, offload_key
from headroom_core.compress.result import CompressResult
from headroom_core.compress.tokens import TokenCounter

KIND = "search"
MAX_HITS = 40
PER_FILE = 4
MAX_FILES = 60
MAX_PATHS = 40
HEAD_PATHS = 15
MAX_QUERY_PATHS = 25
MAX_DIR_LINES = 15

HIT_RX = re.compile(r"^(?P<path>[^\s:\[][^:\s]{0,400}?)(?P<a>[:-])(?P<line>\d+)(?P<b>[:-])(?P<text>.*)$")


def is_path(line: str) -> bool:
    """True when ``line`` (stripped) is one file path; lines over 1,000 characters are not
    (``PATH_RX`` backtracks quadratically on long ones)."""
    ln = line.strip()
    return len(ln) <= 1000 and PATH_RX.match(ln) is not None


PATH_RX = re.compile(
    r"^(?:[A-Za-z]:)?[^\s:*?\"<>|\[][^:*?\"<>|\n]*(?:/[^:*?\"<>|\n/]+)+/?$|^[\w@.+-]+\.[A-Za-z0-9]{1,8}$"
)


@dataclass(frozen=True)
class Hit:
    index: int  # line index in the input
    path: str
    line: int
    match: bool  # False for a context line (``path-12-text``)
    text: str


def parse_hit(line: str) -> Hit | None:
    """The hit on one output line: ``path:12:text`` (match) or ``path-12-text`` (context)."""
    m = HIT_RX.match(line)
    if not m or m.group("a") != m.group("b") or m.group("path").isdigit():
        return None
    if m.group("a") == "-" and "/" not in m.group("path") and "." not in m.group("path"):
        return None
    return Hit(-1, m.group("path"), int(m.group("line")), m.group("a") == ":", m.group("text"))


def looks_like_hits(lines: list[str]) -> bool:
    """True when at least 60 % of the non-blank lines (of the first 300) are ``path:line:`` hits."""
    sample = [ln for ln in lines[:300] if ln.strip()]
    if len(sample) < 3:
        return False
    return sum(1 for ln in sample if parse_hit(ln)) >= 0.6 * len(sample)


def looks_like_paths(lines: list[str]) -> bool:
    """True when at least 80 % of the non-blank lines (of the first 300) are file paths."""
    sample = [ln for ln in lines[:300] if ln.strip()]
    if len(sample) < 5:
        return False
    return sum(1 for ln in sample if is_path(ln)) >= 0.8 * len(sample)


def _score(text: str, words: tuple[str, ...]) -> int:
    low = text.lower()
    return sum(1 for w in words if w in low)


def compress_search(
    text: str,
    query: str,
    counter: TokenCounter,
    *,
    min_tokens: int = 250,
    min_saving_ratio: float = 0.10,
) -> CompressResult:
    """Compress search output ``text`` ranked by the user's ``query`` (see module docstring).

    Returns unchanged, with the reason, when the text is under ``min_tokens`` tokens, is neither
    hits nor a path list, has nothing to drop, or saves less than ``min_saving_ratio``.
    Otherwise strategy ``"group"`` (hits) or ``"paths"`` with one offload holding ``text``.
    """
    if too_small(text, counter, min_tokens):
        return CompressResult.unchanged(text, KIND, "small")
    lines = text.split("\n")
    words = query_words(query)
    if looks_like_hits(lines):
        return _hits(text, lines, words, counter, min_saving_ratio)
    if looks_like_paths(lines):
        return _paths(text, lines, words, counter, min_saving_ratio)
    return CompressResult.unchanged(text, KIND, "not search results")


def _hits(text: str, lines: list[str], words: tuple[str, ...], counter: TokenCounter, ratio: float) -> CompressResult:
    hits: list[Hit] = []
    head: list[str] = []
    tail: list[str] = []
    for i, ln in enumerate(lines):
        h = parse_hit(ln)
        if h is not None:
            hits.append(Hit(i, h.path, h.line, h.match, h.text))
        elif ln.strip() and ln.strip() != "--":
            (tail if hits else head).append(ln)
    files: dict[str, list[list[Hit]]] = {}
    for h in hits:  # blocks: consecutive lines of one file
        blocks = files.setdefault(h.path, [])
        if blocks and blocks[-1][-1].line + 1 == h.line and blocks[-1][-1].index + 1 == h.index:
            blocks[-1].append(h)
        else:
            blocks.append([h])

    def bscore(b: list[Hit]) -> float:
        return max(_score(h.text, words) for h in b) + 0.5 * _score(b[0].path, words)

    order = {p: i for i, p in enumerate(files)}
    ranked_files = sorted(files, key=lambda p: (-max(bscore(b) for b in files[p]), order[p]))
    shown_files = set(ranked_files[:MAX_FILES])
    keep: dict[str, list[int]] = {p: [] for p in files}
    nmatch = {p: sum(1 for b in files[p] for h in b if h.match) for p in files}
    used = 0
    cands = []
    for p in ranked_files:
        ranked = sorted(range(len(files[p])), key=lambda k: (-bscore(files[p][k]), files[p][k][0].index))
        if p in shown_files:
            keep[p].append(ranked[0])
            used += sum(1 for h in files[p][ranked[0]] if h.match)
            cands += [(-bscore(files[p][k]), files[p][k][0].index, p, k) for k in ranked[1:]]
    for _, _, p, k in sorted(cands):
        if used >= MAX_HITS:
            break
        if len(keep[p]) < PER_FILE:
            keep[p].append(k)
            used += sum(1 for h in files[p][k] if h.match)
    total = sum(nmatch.values())
    shown = sum(1 for p in files for k in keep[p] for h in files[p][k] if h.match)
    out = list(head)
    for p in files:
        if p not in shown_files:
            continue
        ks = sorted(keep[p])
        n_shown = sum(1 for k in ks for h in files[p][k] if h.match)
        out.append(
            f"{p} ({nmatch[p]} matches)" if n_shown == nmatch[p] else f"{p} ({nmatch[p]} matches, {n_shown} shown)"
        )
        for k in ks:
            out += [f"{h.line}{':' if h.match else '-'}{h.text}" for h in files[p][k]]
    out += tail
    hidden = [p for p in files if p not in shown_files]
    if hidden:
        out.append(f"{len(hidden)} more files with {sum(nmatch[p] for p in hidden)} matches not shown")
    if shown < total or hidden:
        out.append(make_marker(f"{total - shown} of {total} matches in {len(files)} files", offload_key(text)))
    reason = f"{len(files)} files, kept {shown} of {total} matches" + (" ranked by query" if words else "")
    return finish(text, "\n".join(out), counter, kind=KIND, strategy="group", reason=reason,
                  what=f"{total - shown} of {total} matches", min_saving_ratio=ratio)  # fmt: skip


def _dir_group(path: str, common: int) -> str:
    parts = path.strip().split("/")
    return "/".join(parts[: min(len(parts) - 1, common + 2)]) or "."


def _paths(text: str, lines: list[str], words: tuple[str, ...], counter: TokenCounter, ratio: float) -> CompressResult:
    idx = [i for i, ln in enumerate(lines) if ln.strip() and is_path(ln)]
    if len(idx) <= MAX_PATHS:
        return CompressResult.unchanged(text, KIND, f"{len(idx)} paths, few enough")
    keep = set(idx[:HEAD_PATHS])
    matched = [i for i in idx[HEAD_PATHS:] if words and _score(lines[i], words)]
    keep.update(sorted(matched, key=lambda i: (-_score(lines[i], words), i))[:MAX_QUERY_PATHS])
    split = [lines[i].strip().split("/") for i in idx]
    common = 0
    while all(len(s) > common + 1 and s[common] == split[0][common] for s in split):
        common += 1
    dropped = [i for i in idx if i not in keep]
    groups = Counter(_dir_group(lines[i], common) for i in dropped)
    out = [ln for i, ln in enumerate(lines) if i in keep or (i not in set(idx) and ln.strip())]
    out.append(f"{len(dropped)} more paths, by directory:")
    for g, n in sorted(groups.items(), key=lambda x: (-x[1], x[0]))[:MAX_DIR_LINES]:
        out.append(f"  {g}/ ({n})")
    if len(groups) > MAX_DIR_LINES:
        out.append(f"  … {len(groups) - MAX_DIR_LINES} more directories")
    out.append(make_marker(f"{len(dropped)} of {len(idx)} paths", offload_key(text)))
    reason = f"kept {len(keep)} of {len(idx)} paths" + (f", {len(matched)} matching the query" if words else "")
    return finish(text, "\n".join(out), counter, kind=KIND, strategy="paths", reason=reason,
                  what=f"{len(dropped)} of {len(idx)} paths", min_saving_ratio=ratio)  # fmt: skip
