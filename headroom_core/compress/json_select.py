"""Which items of a long JSON array to keep when crushing it: pure, deterministic functions.

:func:`select_items` looks at the items of one array (objects, scalars or arrays alike) and
returns the indices to keep, each with the first reason that picked it:

``anchor``
    the first :data:`HEAD` and last :data:`TAIL` items (the shape of the list, where it starts
    and ends).
``error``
    an item that reports a failure: a key such as ``error``/``errors``/``exception``/
    ``traceback``/``stack``/``failed`` (or one ending in ``error``/``exception``) holding a
    non-empty value; a string value that *is* a failure word (``"error"``, ``"failed"``,
    ``"failure"``, ``"fatal"``, ``"timed_out"``, …); an HTTP status 400–599 in a status-like
    field (``status``, ``status_code``, ``code``, …). For arrays of plain strings (log lines,
    messages) a failure word anywhere in the string counts.
``query``
    an item whose strings (or numbers) contain a word of the user's query (lowercased words of
    3+ characters minus stopwords, matched at a word start). A word found in more than half of
    the items does not discriminate and is ignored for that array.
``outlier``
    a numeric field value outside median ± :data:`MAD_K` × 1.4826 × MAD (the robust z-score;
    1.4826 scales the MAD to a standard deviation for normal data). When the MAD is 0 (most
    values equal), a value that differs from the median in at most :data:`RARE_FRACTION` of the
    items. Identifier and timestamp fields (``id``, ``*_id``, ``*_at``, …) are not measured.
``rare``
    a value of a categorical field (≤ :data:`CATEGORICAL_MAX_DISTINCT` distinct values, fewer
    than half the items) that occurs in at most :data:`RARE_FRACTION` of the items (at least
    one). Missing fields, nulls and empty/non-empty lists count as values, so the one issue with
    a milestone or with labels stands out.

Fields are read up to :data:`FEATURE_DEPTH` levels deep (``user.login``). The thresholds are the
usual ones for this job (robust outlier fences, a 10 % rarity cut) and the caps keep crushing
worth its while: at most :data:`MAX_KEEP` items for anchors, errors, outliers and rare values
together (in that priority, rarest first), plus at most :data:`MAX_QUERY` query matches.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from statistics import median
from typing import TypeGuard

from headroom_core.compress.query_match import passages_with

MIN_ITEMS = 8
HEAD = 2
TAIL = 1
MAX_KEEP = 15
MAX_QUERY = 10
RARE_FRACTION = 0.10
CATEGORICAL_MAX_DISTINCT = 10
MAD_K = 3.0
FEATURE_DEPTH = 3
ERROR_WALK_DEPTH = 4

# Priority order; also the order reasons are reported in.
REASONS = ("anchor", "error", "query", "outlier", "rare")

STOPWORDS = frozenset(
    """the and for are but not you all any can had her was one our out has have this that
    with from they will would there their what when where which who why how into than then
    them these those been being does did doing just also only some such very about over
    under again more most other your yours its it's i'm let lets please show find get give
    tell list make need want use using used see look check file files""".split()
)

_ERROR_KEYS = frozenset(
    "error errors err exception exceptions failure failures failed stack stacktrace traceback "
    "fault panic errmsg".split()
)
_ERROR_KEY_SUFFIXES = ("error", "errors", "exception")
_ERROR_VALUES = frozenset(
    "error errors errored failed failure fatal exception crashed crash panic timedout timeout critical".split()
)
_STATUS_KEYS = frozenset(
    "status statuscode code httpstatus httpcode httpstatuscode responsecode responsestatus".split()
)
_ERROR_IN_TEXT = re.compile(r"\b(error|errors|exception|traceback|fatal|failed|failure|panic)\b", re.I)
_WORD = re.compile(r"[^\W_]+(?:[-_'][^\W_]+)*", re.UNICODE)
_MISSING = "\x00missing"


@dataclass(frozen=True)
class Selection:
    """Indices to keep (ascending) and, for each, the reason that picked it (see :data:`REASONS`)."""

    keep: tuple[int, ...]
    reasons: dict[int, str]

    def counts(self) -> dict[str, int]:
        """Kept items per reason, in :data:`REASONS` order (zero counts omitted)."""
        out = {r: 0 for r in REASONS}
        for i in self.keep:
            out[self.reasons[i]] += 1
        return {r: n for r, n in out.items() if n}


@functools.lru_cache(maxsize=8)
def query_words(query: str) -> tuple[str, ...]:
    """Distinct lowercased words of ``query`` with 3+ characters, minus stopwords, in order.
    Cached: one query (the latest user text, often tens of KB with a coding agent's reminders)
    is asked for by every compressor of every tool output until the user writes again."""
    out: dict[str, None] = {}  # insertion-ordered set: a long query is not quadratic
    for w in _WORD.findall((query or "").lower()):
        if len(w) >= 3 and w not in STOPWORDS:
            out[w] = None
    return tuple(out)


def _norm_key(key: str) -> str:
    return key.lower().replace("_", "").replace("-", "")


#: What a field name says about its value, by name (0: nothing, 1: an error key, 2: a status
#: key), cached: the items of one array repeat the same few names thousands of times.
_KEY_KINDS: dict[str, int] = {}


def _key_kind(key: str) -> int:
    kind = _KEY_KINDS.get(key)
    if kind is None:
        nk = _norm_key(key)
        kind = 1 if nk in _ERROR_KEYS or nk.endswith(_ERROR_KEY_SUFFIXES) else 2 if nk in _STATUS_KEYS else 0
        if len(_KEY_KINDS) < 65_536:  # bounded: keys of a keyed map are not a schema's names
            _KEY_KINDS[key] = kind
    return kind


def _truthy(v: object) -> bool:
    return v not in (None, False, "", 0) and v != [] and v != {}


def _status_error(v: object) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return 400 <= v <= 599
    if isinstance(v, str) and len(v) == 3 and v.isdigit():
        return 400 <= int(v) <= 599
    return False


def _is_error_value(v: object) -> bool:
    return isinstance(v, str) and _norm_key(v.strip()) in _ERROR_VALUES


def is_error_item(item: object, depth: int = 0) -> bool:
    """True if ``item`` reports a failure (see the module docstring for what counts)."""
    if depth == 0 and isinstance(item, str):
        return bool(_ERROR_IN_TEXT.search(item))
    if isinstance(item, dict):
        kinds = _KEY_KINDS
        for k, v in item.items():
            kind = kinds.get(k) if type(k) is str else None  # (the common case without a call)
            if kind is None:
                kind = _key_kind(k if type(k) is str else str(k))
            if kind == 1 and _truthy(v):
                return True
            if kind == 2 and _status_error(v):
                return True
            if type(v) is str:  # _is_error_value, inline: every string of every item
                if v.strip().lower().replace("_", "").replace("-", "") in _ERROR_VALUES:
                    return True
            elif isinstance(v, (dict, list)):
                if depth < ERROR_WALK_DEPTH and is_error_item(v, depth + 1):
                    return True
            elif _is_error_value(v):
                return True
        return False
    if isinstance(item, list):
        return depth < ERROR_WALK_DEPTH and any(
            _is_error_value(v) or (isinstance(v, (dict, list)) and is_error_item(v, depth + 1)) for v in item
        )
    return _is_error_value(item)


def _features(item: object, prefix: str = "", depth: int = 0) -> list[tuple[str, object]]:
    """(path, leaf) pairs of ``item``: scalars as they are, lists as ``"[]"``/``"[n]"``."""
    if isinstance(item, dict) and depth < FEATURE_DEPTH:
        out: list[tuple[str, object]] = []
        for k, v in item.items():
            path = f"{prefix}.{k}" if prefix else str(k)
            if isinstance(v, (dict, list)):
                out.extend(_features(v, path, depth + 1))
            else:  # a scalar leaf, as the call below would give it
                out.append((path, v))
        if not item:
            out.append((prefix, "{}"))
        return out
    if isinstance(item, list):
        return [(prefix, "[]" if not item else "[n]")]
    if isinstance(item, dict):
        return [(prefix, "{...}")]
    return [(prefix, item)]


_MISSING_KEY = ("missing",)


def _cat_key(v: object) -> object:
    """A key equal for two values exactly when their JSON texts are (and for two missing
    fields): a string is its own key, an integer, boolean or null its type and value (values of
    different types never have the same JSON text), anything else its JSON text (a float: 0.0
    and -0.0 differ there, NaN equals NaN). Cheaper than the JSON text of every value."""
    if v is _MISSING:
        return _MISSING_KEY
    t = type(v)
    if t is str:
        return v
    if t is int or t is bool or v is None:
        return (t, v)
    return ("json", json.dumps(v, ensure_ascii=False))


def _is_number(v: object) -> TypeGuard[int | float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v  # not NaN


def _id_like(path: str) -> bool:
    last = path.rsplit(".", 1)[-1]
    low = last.lower()
    return (
        low in ("id", "uid", "uuid", "pk", "key", "timestamp", "ts", "time", "date", "created", "updated")
        or low.endswith(("_id", "_ids", "_at", "_ts", "_time", "_date"))
        or last.endswith(("Id", "At"))
    )


def _columns(items: list[object]) -> dict[str, list[object]]:
    """Feature path → value per item (``_MISSING`` where an item lacks it), paths in first-seen order."""
    per_item = [dict(_features(it)) for it in items]
    paths: dict[str, None] = {}
    for f in per_item:
        for p in f:
            paths.setdefault(p, None)
    return {p: [f.get(p, _MISSING) for f in per_item] for p in paths}


def _rare_scores(cols: dict[str, list[object]], n: int) -> dict[int, int]:
    """Item index → count of its rarest categorical value (lower is rarer)."""
    limit = max(1, int(n * RARE_FRACTION))
    best: dict[int, int] = {}
    for values in cols.values():
        keys = [_cat_key(v) for v in values]
        counts: dict[object, int] = {}
        for k in keys:
            counts[k] = counts.get(k, 0) + 1
        if not (2 <= len(counts) <= CATEGORICAL_MAX_DISTINCT and len(counts) * 2 <= n):
            continue
        for i, k in enumerate(keys):
            c = counts[k]
            if c <= limit and c < best.get(i, n + 1):
                best[i] = c
    return best


def _outlier_scores(cols: dict[str, list[object]], n: int) -> dict[int, float]:
    """Item index → its largest robust deviation (in MAD-scaled units) beyond the fence."""
    limit = max(1, int(n * RARE_FRACTION))
    best: dict[int, float] = {}
    for path, values in cols.items():
        if _id_like(path):
            continue
        nums = [(i, float(v)) for i, v in enumerate(values) if _is_number(v)]
        if len(nums) < MIN_ITEMS:
            continue
        xs = [x for _, x in nums]
        med = median(xs)
        mad = median(abs(x - med) for x in xs)
        if mad > 0:
            scale = 1.4826 * mad
            for i, x in nums:
                z = abs(x - med) / scale
                if z > MAD_K and z > best.get(i, 0.0):
                    best[i] = z
        else:
            off = [(i, x) for i, x in nums if x != med]
            if 0 < len(off) <= limit:
                for i, x in off:
                    z = float("inf") if x != med else 0.0
                    if z > best.get(i, 0.0):
                        best[i] = z
    return best


def _strings(item: object, out: list[str], depth: int = 0) -> list[str]:
    if isinstance(item, str):
        out.append(item)
    elif isinstance(item, (int, float)) and not isinstance(item, bool):
        out.append(str(item))
    elif isinstance(item, (dict, list)) and depth < 8:
        for v in item.values() if isinstance(item, dict) else item:
            if type(v) is str:  # the common leaf, without a call
                out.append(v)
            else:
                _strings(v, out, depth + 1)
    return out


def _query_hits(items: list[object], words: tuple[str, ...]) -> dict[int, int]:
    """Item index → number of distinct discriminating query words it contains (a word in at
    most half of the items; :func:`~.query_match.passages_with` over each item's strings)."""
    if not words:
        return {}
    texts = ["\n".join(_strings(it, [])).lower() for it in items]
    hits: dict[int, int] = {}
    for matched in passages_with(words, texts, most=len(items) // 2, ignore_case=False).values():
        for i in matched:
            hits[i] = hits.get(i, 0) + 1
    return hits


def select_items(items: list[object], words: tuple[str, ...]) -> Selection:
    """Pick the items of ``items`` to keep when crushing (see the module docstring).

    ``words`` are :func:`query_words` of the query. Arrays shorter than :data:`MIN_ITEMS` keep
    everything. Deterministic: ties are broken by index.
    """
    n = len(items)
    if n < MIN_ITEMS:
        return Selection(tuple(range(n)), {i: "anchor" for i in range(n)})
    reasons: dict[int, str] = {}
    for i in list(range(min(HEAD, n))) + list(range(max(0, n - TAIL), n)):
        reasons.setdefault(i, "anchor")

    budget = MAX_KEEP - len(reasons)

    def take(candidates: list[int], reason: str, cap: int) -> int:
        taken = 0
        for i in candidates:
            if taken >= cap:
                break
            if i not in reasons:
                reasons[i] = reason
                taken += 1
        return taken

    errors = [i for i, it in enumerate(items) if is_error_item(it)]
    budget -= take(errors, "error", budget)

    hits = _query_hits(items, words)
    take(sorted(hits, key=lambda i: (-hits[i], i)), "query", MAX_QUERY)

    cols = _columns(items)
    if budget > 0:
        out = _outlier_scores(cols, n)
        budget -= take(sorted(out, key=lambda i: (-out[i], i)), "outlier", budget)
    if budget > 0:
        rare = _rare_scores(cols, n)
        budget -= take(sorted(rare, key=lambda i: (rare[i], i)), "rare", budget)

    keep = tuple(sorted(reasons))
    return Selection(keep, {i: reasons[i] for i in keep})
