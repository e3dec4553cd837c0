"""Compress long plain text (prose, Markdown, reStructuredText) extractively and query-aware.

The text is cut into *passages* (:func:`segment`): headings, list items, table rows, code
blocks (fenced or indented) whole, and the sentences of paragraphs. Passages are kept verbatim
— numbers, identifiers and paths in them are never rewritten — and in their original order;
every run of dropped passages becomes one marker ``[headroom omitted 12 of 80 passages;
headroom_retrieve key=…]`` (a run not :data:`MARKER_WORTH` times longer than its marker stays).

**Always kept**: headings (the outline of the text), the first passage, and every passage
holding a word of the user's latest query (the query's lowercased words of 3+ characters minus
stopwords, matched at a word start; a word found in more than :data:`QUERY_MAX_SHARE` of the
passages does not discriminate and is ignored).

**Then, best first, until :data:`TARGET_RATIO` of the tokens (at least
:data:`MIN_KEEP_TOKENS`) are kept** (:func:`rank_passages`):

* the lexical score orders every passage: ``0.55·q + 0.45·c`` where ``q`` is the share of the
  query's words the passage holds and ``c`` the mean document frequency of its words,
  normalised to the highest (a passage about what the whole text is about); ``c`` alone
  without query words;
* with the embedding model (:mod:`headroom_core.compress.embeddings`, all-MiniLM-L6-v2), the
  :data:`MAX_EMBED_PASSAGES` best of that order are re-ordered, and come first, by
  ``0.55·cos(passage, query) + 0.45·cos(passage, centroid)`` (centroid: the normalised mean of
  their vectors; ``cos(passage, centroid)`` alone without query words). The centroid score is
  the centroid-based summariser of Radev et al. (2004); query similarity makes it
  query-focused. Without the model (package missing, or loading failed) the lexical order is
  used alone;

both plus :data:`INFO_BONUS` for each of: a number, a path, an identifier (``snake_case``,
``camelCase``, ``dotted.name``, ```code```) in the passage, and :data:`LEAD_BONUS` for the first
sentence of a paragraph. Scores are rounded to 4 decimals and ties go to the earlier passage,
so float noise cannot reorder them.

**Determinism.** The same ``(text, query)`` gives the same bytes. With the model installed
but not loaded yet, :func:`compress_prose` does not fall back to the lexical ranker (that would
give other bytes for the same input later): it starts loading in the background and returns
the text unchanged with reason ``"model loading"`` (``wait_for_model=True`` blocks instead).
All markers carry one key, :func:`~headroom_core.compress.markers.offload_key` of the whole text,
and the result holds one :class:`~headroom_core.compress.result.Offload` with the text byte
for byte.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from headroom_core.compress import embeddings
from headroom_core.compress.gain import precheck
from headroom_core.compress.json_select import STOPWORDS, query_words
from headroom_core.compress.markers import make_marker, offload_key
from headroom_core.compress.query_match import passages_with_any
from headroom_core.compress.result import CompressResult, Offload
from headroom_core.compress.tokens import TokenCounter

KIND = "text"
TARGET_RATIO = 0.25
MIN_KEEP_TOKENS = 200
QUERY_WEIGHT = 0.55
# A run of dropped passages becomes a marker only when its text is this many times longer than
# the marker: hiding one short sentence behind a marker of nearly its length saves nothing.
MARKER_WORTH = 2.0
# A query word found in more than this share of the passages does not single any out (the
# name of the tool or package the text is about): it neither forces passages in nor scores.
QUERY_MAX_SHARE = 0.2
INFO_BONUS = 0.03
LEAD_BONUS = 0.03
# Encoding costs about 21 MFLOP per word piece (2 x the 10.6 M non-embedding weights of
# MiniLM-L6-H384), about 1 ms per word piece on one busy CPU core: the model re-ranks at most
# MAX_EMBED_PASSAGES passages, each cut to its first EMBED_MAX_CHARS characters (about 40 word
# pieces; a passage's opening says what it is about), so at most ~2,500 word pieces per text.
EMBED_MAX_CHARS = 160
MAX_EMBED_PASSAGES = 64
QUERY_MAX_CHARS = 2000

_FENCE_RE = re.compile(r"^\s{0,3}(```|~~~)")
_ATX_RE = re.compile(r"^\s{0,3}#{1,6}(\s|$)")
_UNDERLINE_RE = re.compile(r"^\s*([=\-~^\"'`#*+])\1{2,}\s*$")
_ITEM_RE = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)]|[a-zA-Z][.)])\s+\S")
_ROW_RE = re.compile(r"^\s*\|")
_INDENTED_RE = re.compile(r"^(?: {4}|\t)")
_BOUNDARY_RE = re.compile(r"[.!?][\"')\]]*(\s+)(?=[\"'(\[`*_]?[A-Z0-9])")
_ABBREV = frozenset(
    "e.g i.e etc vs cf al fig figs eq no nos mr mrs ms dr prof st jr sr inc ltd co corp approx "
    "ca resp viz ed eds vol pp p sec ch".split()
)

NUMBER_RE = re.compile(r"(?<![\w.])[-+]?\d+(?:[.,:]\d+)*%?(?![\w])")
PATH_RE = re.compile(
    r"(?:~|\.{1,2})?/[\w.@+-]+(?:/[\w.@+-]*)*"
    r"|\b[\w.-]+/[\w.@+-]+(?:/[\w.@+-]*)+"
    r"|\b[\w-]+(?:\.[\w-]+)*\.(?:py|pyi|js|mjs|ts|tsx|jsx|json|md|rst|toml|ya?ml|txt|ini|cfg|rs|go|java|kt|c|h|cc|cpp|hpp|sh|html|css|sql|lock|log)\b"
)
IDENT_RE = re.compile(
    r"`[^`\n]+`"
    r"|\b[A-Za-z_][A-Za-z0-9]*_[A-Za-z0-9_]+\b"
    r"|\b[a-z]+[A-Z][A-Za-z0-9]*\b"
    r"|\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?:\(\))?"
)
_WORD_RE = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)


@dataclass(frozen=True)
class Passage:
    """A span ``text[start:end]`` (no surrounding whitespace) and what it is: ``"heading"``,
    ``"sentence"``, ``"item"`` (list item), ``"row"`` (table row), ``"code"``; ``lead`` is True
    for the first sentence of a paragraph."""

    start: int
    end: int
    kind: str
    lead: bool = False


def _lines(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of every line, without its newline."""
    out = []
    pos = 0
    for line in text.split("\n"):
        out.append((pos, pos + len(line)))
        pos += len(line) + 1
    return out


def _trim(text: str, a: int, b: int) -> tuple[int, int]:
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return a, b


def _sentences(text: str, a: int, b: int) -> list[Passage]:
    """The sentences of the paragraph ``text[a:b]``."""
    out: list[Passage] = []
    start = a
    for m in _BOUNDARY_RE.finditer(text, a, b):
        end = m.start(1)
        # The word before the period: an abbreviation or an initial does not end a sentence.
        before = text[start:end].rstrip("\"')]").rstrip(".!?")
        last = before.rsplit(None, 1)[-1].lower() if before.split() else ""
        last = last.lstrip("(\"'")
        if last in _ABBREV or (len(last) == 1 and last.isalpha()) or end - start < 3:
            continue
        s, e = _trim(text, start, end)
        if s < e:
            out.append(Passage(s, e, "sentence", lead=not out))
        start = m.end(1)
    s, e = _trim(text, start, b)
    if s < e:
        out.append(Passage(s, e, "sentence", lead=not out))
    return out


def segment(text: str) -> list[Passage]:
    """Cut ``text`` into passages, in order, covering every non-blank character exactly once."""
    lines = _lines(text)
    n = len(lines)
    out: list[Passage] = []

    def line(i: int) -> str:
        return text[lines[i][0] : lines[i][1]]

    def blank(i: int) -> bool:
        return not line(i).strip()

    i = 0
    prev_blank = True
    while i < n:
        s = line(i)
        if not s.strip():
            i += 1
            prev_blank = True
            continue
        if fm := _FENCE_RE.match(s):
            fence = fm.group(1)
            j = i + 1
            while j < n and not line(j).lstrip().startswith(fence):
                j += 1
            j = min(j, n - 1)
            out.append(Passage(*_trim(text, lines[i][0], lines[j][1]), "code"))
            i = j + 1
        elif _ATX_RE.match(s) or _UNDERLINE_RE.match(s):
            out.append(Passage(*_trim(text, *lines[i]), "heading"))
            i += 1
        elif i + 1 < n and _UNDERLINE_RE.match(line(i + 1)) and len(s.strip()) <= 120:
            out.append(Passage(*_trim(text, lines[i][0], lines[i + 1][1]), "heading"))
            i += 2
        elif _ROW_RE.match(s):
            out.append(Passage(*_trim(text, *lines[i]), "row"))
            i += 1
        elif _ITEM_RE.match(s):
            indent = len(s) - len(s.lstrip())
            j = i + 1
            while j < n and not blank(j):
                t = line(j)
                if _ITEM_RE.match(t) or _FENCE_RE.match(t) or _ATX_RE.match(t):
                    break
                if len(t) - len(t.lstrip()) <= indent and not t.startswith(" " * (indent + 1)):
                    break
                j += 1
            out.append(Passage(*_trim(text, lines[i][0], lines[j - 1][1]), "item"))
            i = j
        elif prev_blank and _INDENTED_RE.match(s):
            j = i + 1
            while j < n and (blank(j) or _INDENTED_RE.match(line(j))):
                j += 1
            while blank(j - 1):
                j -= 1
            out.append(Passage(*_trim(text, lines[i][0], lines[j - 1][1]), "code"))
            i = j
        else:
            j = i + 1
            while j < n and not blank(j):
                t = line(j)
                if _FENCE_RE.match(t) or _ATX_RE.match(t) or _ITEM_RE.match(t) or _ROW_RE.match(t):
                    break
                if j + 1 < n and _UNDERLINE_RE.match(line(j + 1)):
                    break
                j += 1
            out.extend(_sentences(text, lines[i][0], lines[j - 1][1]))
            i = j
        prev_blank = False
    return out


def info_kinds(passage: str) -> int:
    """How many of (number, path, identifier) ``passage`` holds: 0–3."""
    return sum(1 for rx in (NUMBER_RE, PATH_RE, IDENT_RE) if rx.search(passage))


def _words(s: str) -> set[str]:
    return {w for w in _WORD_RE.findall(s.lower()) if len(w) >= 3 and w not in STOPWORDS}


def _bonus(text: str, lead: bool) -> float:
    return INFO_BONUS * info_kinds(text) + (LEAD_BONUS if lead else 0.0)


def lexical_scores(texts: list[str], query: str, leads: list[bool]) -> list[float]:
    """Model-free score per passage (module docstring), rounded to 4 decimals: the share of the
    query's words it holds, the mean document frequency of its words (normalised to the
    highest), and the bonuses."""
    n = len(texts)
    qs = set(query_words(query))
    bags = [_words(t) for t in texts]
    df: dict[str, int] = {}
    for b in bags:
        for w in b:
            df[w] = df.get(w, 0) + 1
    central = [(sum(df[w] for w in b) / len(b) / n) if b else 0.0 for b in bags]
    top = max(central, default=0.0) or 1.0
    central = [c / top for c in central]
    if qs:
        base = [QUERY_WEIGHT * len(b & qs) / len(qs) + (1 - QUERY_WEIGHT) * c for b, c in zip(bags, central)]
    else:
        base = central
    return [round(x + _bonus(t, lead), 4) for x, t, lead in zip(base, texts, leads)]


def embedding_scores(texts: list[str], query: str, leads: list[bool]) -> list[float]:
    """Embedding score per passage (module docstring), rounded to 4 decimals. Blocks until the
    model is loaded; raises :class:`~headroom_core.compress.embeddings.EmbeddingModelUnavailable`."""
    vecs = embeddings.embed([t[:EMBED_MAX_CHARS] for t in texts])
    centroid = vecs.mean(axis=0)
    central = vecs @ (centroid / (float(np.linalg.norm(centroid)) or 1.0))
    if query_words(query):
        q = embeddings.embed([query[-QUERY_MAX_CHARS:]])[0]
        base = QUERY_WEIGHT * (vecs @ q) + (1 - QUERY_WEIGHT) * central
    else:
        base = central
    return [round(float(x) + _bonus(t, lead), 4) for x, t, lead in zip(base, texts, leads)]


def rank_passages(texts: list[str], query: str, leads: list[bool], skip: set[int], *, use_model: bool) -> list[int]:
    """Indices of the passages not in ``skip``, best first (ties: earlier first).

    Lexical ranking orders them all; with ``use_model`` the embedding score re-orders the
    :data:`MAX_EMBED_PASSAGES` best of that order, which then come first (encoding is costly,
    see :data:`EMBED_MAX_CHARS`, so a long text is not encoded whole).
    """
    idx = [i for i in range(len(texts)) if i not in skip]
    lex = lexical_scores(texts, query, leads)
    order = sorted(idx, key=lambda i: (-lex[i], i))
    if not use_model or not order:
        return order
    cands = sorted(order[:MAX_EMBED_PASSAGES])
    emb = embedding_scores([texts[i] for i in cands], query, [leads[i] for i in cands])
    by = dict(zip(cands, emb))
    return sorted(cands, key=lambda i: (-by[i], i)) + order[MAX_EMBED_PASSAGES:]


@dataclass(frozen=True)
class ProseSelection:
    """Passages of a text and the indices kept, each with its reason (``heading``, ``first``,
    ``query``, ``score``); ``ranker`` is ``"embedding"`` or ``"lexical"``."""

    passages: tuple[Passage, ...]
    reasons: dict[int, str]
    ranker: str


def select_passages(text: str, query: str, counter: TokenCounter, *, use_model: bool) -> ProseSelection:
    """The passages of ``text`` to keep for ``query`` (see the module docstring)."""
    passages = segment(text)
    texts = [text[p.start : p.end] for p in passages]
    reasons: dict[int, str] = {}
    if not passages:
        return ProseSelection((), reasons, "none")
    for i, p in enumerate(passages):
        if p.kind == "heading":
            reasons[i] = "heading"
    reasons.setdefault(0, "first")
    # a query word found in at most QUERY_MAX_SHARE of the passages picks them
    for i in sorted(
        passages_with_any(query_words(query), texts, most=math.floor(QUERY_MAX_SHARE * len(texts)), ignore_case=True)
    ):
        reasons.setdefault(i, "query")
    tokens = [counter.count(t) for t in texts]
    total = sum(tokens)
    target = max(MIN_KEEP_TOKENS, TARGET_RATIO * total)
    kept = sum(tokens[i] for i in reasons)
    if kept < target:
        leads = [p.lead for p in passages]
        for i in rank_passages(texts, query, leads, set(reasons), use_model=use_model):
            if kept >= target:
                break
            reasons[i] = "score"
            kept += tokens[i]
    return ProseSelection(tuple(passages), reasons, "embedding" if use_model else "lexical")


def render(text: str, passages: tuple[Passage, ...], keep: set[int], key: str) -> tuple[str, int, int]:
    """``text`` with each run of passages not in ``keep`` replaced by one marker.

    Returns the new text, the number of passages shown and of passages hidden. Whitespace
    between passages is kept as it was; a run whose text is not :data:`MARKER_WORTH` times
    longer than its marker stays.
    """
    n = len(passages)
    out: list[str] = [text[: passages[0].start]] if passages else [text]
    shown = 0
    i = 0
    while i < n:
        if i in keep:
            nxt = passages[i + 1].start if i + 1 < n else len(text)
            out.append(text[passages[i].start : nxt])
            shown += 1
            i += 1
            continue
        j = i
        while j < n and j not in keep:
            j += 1
        nxt = passages[j].start if j < n else len(text)
        marker = make_marker(f"{j - i} of {n} passages", key)
        if passages[j - 1].end - passages[i].start > MARKER_WORTH * len(marker):
            out.append(marker + text[passages[j - 1].end : nxt])
        else:
            out.append(text[passages[i].start : nxt])
            shown += j - i
        i = j
    return "".join(out), shown, n - shown


def _ranker(wait_for_model: bool) -> str:
    """``"embedding"``, ``"lexical"`` (model not installed or failed) or ``"loading"``."""
    if not embeddings.available():
        return "lexical"
    if embeddings.is_loaded():
        return "embedding"
    if wait_for_model:
        return "embedding" if embeddings.embedder("").wait() else "lexical"
    embeddings.start_loading()
    return "loading"


@dataclass(frozen=True)
class Extract:
    """An extractive rendering: the new ``text``, the ``ranker`` used, passages ``shown`` of
    ``total``, and a short ``reason``."""

    text: str
    ranker: str
    shown: int
    total: int
    reason: str


def extract(text: str, query: str, counter: TokenCounter, key: str, *, wait_for_model: bool = False) -> Extract | None:
    """The extractive form of ``text`` with markers under ``key``; None while the model is
    loading (see the module docstring). Shared with the HTML compressor, whose markers name
    the whole HTML page."""
    ranker = _ranker(wait_for_model)
    if ranker == "loading":
        return None
    sel = select_passages(text, query, counter, use_model=ranker == "embedding")
    out, shown, _hidden = render(text, sel.passages, set(sel.reasons), key)
    counts: dict[str, int] = {}
    for r in sel.reasons.values():
        counts[r] = counts.get(r, 0) + 1
    parts = ", ".join(f"{c} {r}" for r, c in counts.items())
    total = len(sel.passages)
    return Extract(out, ranker, shown, total, f"kept {shown} of {total} passages ({parts}; {ranker} ranking)")


def compress_prose(
    text: str,
    query: str,
    counter: TokenCounter,
    *,
    min_tokens: int = 250,
    min_saving_ratio: float = 0.10,
    wait_for_model: bool = False,
) -> CompressResult:
    """Compress the plain-text tool output ``text`` for the latest user query ``query``.

    Returns kept passages verbatim with markers (strategy ``"extract"``, one offload holding
    ``text`` byte for byte), or the unchanged text with the reason: ``"not text"``,
    ``"small"`` (under ``min_tokens`` tokens), ``"model loading"`` (see the
    module docstring), ``"nothing to drop"``, ``"no gain"`` (not ``min_saving_ratio`` fewer
    tokens). Never raises on bad input.
    """
    declined, original = precheck(text, KIND, counter, min_tokens)
    if declined is not None:
        return declined
    key = offload_key(text)
    got = extract(text, query or "", counter, key, wait_for_model=wait_for_model)
    if got is None:
        return CompressResult.unchanged(text, KIND, "model loading")
    if got.text == text:
        return CompressResult.unchanged(text, KIND, "nothing to drop")
    tokens = counter.count(got.text)
    if tokens > original * (1.0 - min_saving_ratio):
        return CompressResult.unchanged(text, KIND, "no gain")
    return CompressResult(
        text=got.text,
        changed=True,
        kind=KIND,
        strategy="extract",
        reason=f"{got.reason} ({original}->{tokens} tokens)",
        offloads=(Offload(key=key, original=text, what=f"{got.total - got.shown} of {got.total} passages"),),
    )
