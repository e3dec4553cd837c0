"""Compress a JSON tool output: lossless re-encoding first, then reversible crushing.

Shapes handled: any JSON document whose root is an object or an array (a bare scalar, or text
that is not JSON, is left alone). Sizes are in tokens of the caller's :class:`TokenCounter`.

**Lossless** (strategy ``"minify"`` or ``"table"``, no offload):

* *minify*: compact re-serialisation (``separators=(",", ":")``, ``ensure_ascii=False``, key
  order kept). Pretty-printed JSON spends a large share of its tokens on indentation.
* *table*: every array of two or more objects that all have the same keys in the same order is
  replaced by ::

      {"headroom_table": {"same": {<key>: <value shared by every item>, ...},
                          "columns": [<other keys>, ...],
                          "rows": [[<values of one item, in column order>], ...]}}

  ``same`` is omitted when no field is shared. Field names are written once instead of once
  per item, and fields that never change (a repository URL, the same ``user`` object) once
  instead of n times. Nested arrays inside cells are encoded the same way. :func:`decode_table`
  turns such an object back into the list of objects (equal as JSON values; within an item the
  ``same`` fields come first). Table encoding is skipped when the text itself contains the
  string ``headroom_table`` (it could not be told apart), and used only where it is shorter.

The lossless form wins when it saves at least ``min_saving_ratio`` of the tokens and is no
larger than :data:`LOSSLESS_BUDGET_TOKENS` (beyond that a model is better served by a crushed
view plus retrieval than by thousands of rows).

**Crush** (strategy ``"crush"``, reversible): every array of at least
:data:`~headroom_core.compress.json_select.MIN_ITEMS` similar items (all objects, all scalars
or all arrays), at the root or nested anywhere (``{"items": [...]}``,
``{"data": {"results": [...]}}``), keeps the items :func:`~headroom_core.compress.json_select.select_items`
picks (first and last items, errors, query matches, numeric outliers, rare categorical values)
and replaces each run of dropped items by one marker string element
``"[headroom omitted 12 of 40 items; headroom_retrieve key=…]"``, so the output stays valid
JSON. A run is only replaced when it is longer than its marker. The kept items are
table-encoded too where that is shorter (a marker then stands as a row of its own; ``same``
then lists only fields shared by *all* items of the original array, not just the kept ones).
All markers carry one key, :func:`~headroom_core.compress.markers.offload_key` of the whole
original text, and the result holds one :class:`Offload` with that text byte for byte.

Inflation guard: a result that is not at least ``min_saving_ratio`` smaller than the input is
not used (``"no gain"``). Output is deterministic: the same ``(text, query)`` gives the same
bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import cast

from headroom_core.compress.json_select import MIN_ITEMS, REASONS, Selection, query_words, select_items
from headroom_core.compress.markers import make_marker, offload_key
from headroom_core.compress.result import CompressResult, Offload
from headroom_core.compress.tokens import TokenCounter
from headroom_core.surrogates import escape_in_json

TABLE_KEY = "headroom_table"
# Above this many tokens a lossless re-encoding is not enough: crush if there is anything to
# crush. About 8 KB of compact JSON, the size of a long tool output an agent reads in full.
LOSSLESS_BUDGET_TOKENS = 2000

KIND = "json"


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _output(value: object) -> str:
    """Compact text to send; a lone surrogate (no UTF-8 form) written as its ``\\u`` escape, as
    a client's JSON writer does (the same value, and text every provider reads)."""
    return escape_in_json(_dumps(value))


_PLAIN = frozenset((str, int, bool, type(None)))


def _same_text(a: object, b: object) -> bool:
    """Whether ``_dumps(a) == _dumps(b)``, without writing either when both are strings,
    integers, booleans or null (their texts are equal exactly when type and value are)."""
    ta, tb = type(a), type(b)
    if ta in _PLAIN and tb in _PLAIN:
        return ta is tb and a == b
    return _dumps(a) == _dumps(b)


class _Unfaithful(ValueError):
    """The text cannot be re-serialised without changing its meaning."""


def _pairs_hook(pairs: list[tuple[str, object]]) -> dict:
    d = dict(pairs)
    if len(d) != len(pairs):
        raise _Unfaithful("duplicate keys")
    return d


def _parse_float(s: str) -> float:
    f = float(s)
    try:
        if Decimal(repr(f)) != Decimal(s):
            raise _Unfaithful("number not representable")
    except InvalidOperation as exc:  # inf from an out-of-range literal
        raise _Unfaithful("number not representable") from exc
    return f


def _parse(text: str) -> tuple[object | None, str]:
    """The parsed document, or None and why it cannot be used."""
    try:
        value = json.loads(text, object_pairs_hook=_pairs_hook, parse_float=_parse_float)
    except _Unfaithful as exc:
        return None, str(exc)
    except (ValueError, RecursionError, TypeError):
        return None, "not json"
    if not isinstance(value, (dict, list)):
        return None, "scalar"
    return value, ""


@dataclass
class _Stats:
    arrays: int = 0
    total: int = 0
    shown: int = 0
    reasons: dict[str, int] = field(default_factory=lambda: {r: 0 for r in REASONS})

    def add(self, n: int, shown: list[int], sel: Selection) -> None:
        self.arrays += 1
        self.total += n
        self.shown += len(shown)
        for i in shown:
            # An item without a reason sat in a dropped run too short to be worth a marker.
            r = sel.reasons.get(i, "context")
            self.reasons[r] = self.reasons.get(r, 0) + 1

    def describe(self) -> str:
        where = "" if self.arrays == 1 else f" in {self.arrays} arrays"
        parts = [f"{c} {r}" for r, c in self.reasons.items() if c]
        return f"kept {self.shown} of {self.total} items{where}: " + ", ".join(parts)


def _similar(items: list[object]) -> bool:
    if all(isinstance(x, dict) for x in items) or all(isinstance(x, list) for x in items):
        return True
    return all(not isinstance(x, (dict, list)) for x in items)


class _Encoder:
    """One pass over the document: crush (optional) and table-encode (optional)."""

    def __init__(
        self,
        *,
        crush: bool,
        table: bool,
        words: tuple[str, ...],
        key: str,
        selections: dict[int, Selection] | None = None,
    ) -> None:
        self.crush = crush
        self.table = table
        self.words = words
        self.key = key
        self.stats = _Stats()
        # Selections by id() of the array, shared between passes over the same parsed document.
        self.selections = {} if selections is None else selections

    def encode(self, node: object) -> object:
        if isinstance(node, dict):  # scalars are their own encoding: no call for them
            return {k: self.encode(v) if isinstance(v, (dict, list)) else v for k, v in node.items()}
        if isinstance(node, list):
            return self._array(node)
        return node

    def _slots(self, items: list[object]) -> list[int | str]:
        """Item indices to show, with marker strings in place of dropped runs."""
        n = len(items)
        if not (self.crush and n >= MIN_ITEMS and _similar(items)):
            return list(range(n))
        sel = self.selections.get(id(items))
        if sel is None:
            sel = self.selections[id(items)] = select_items(items, self.words)
        if len(sel.keep) == n:
            return list(range(n))
        slots: list[int | str] = []
        run: list[int] = []

        def flush() -> None:
            if not run:
                return
            marker = make_marker(f"{len(run)} of {n} items", self.key)
            if len(_dumps(items[run[0] : run[-1] + 1])) > len(marker) + 2:
                slots.append(marker)
            else:  # the marker would cost more than the items it hides
                slots.extend(run)
            run.clear()

        keep = set(sel.keep)
        for i in range(n):
            if i in keep:
                flush()
                slots.append(i)
            else:
                run.append(i)
        flush()
        shown = [s for s in slots if isinstance(s, int)]
        if len(shown) < n:
            self.stats.add(n, shown, sel)
        return slots

    def _array(self, items: list[object]) -> object:
        if (not self.crush or len(items) < MIN_ITEMS) and not any(isinstance(x, (dict, list)) for x in items):
            return list(items)  # scalars kept whole (a record's labels): what the walk below gives
        slots = self._slots(items)
        keys = self._table_keys(items)
        enc = self.encode
        if keys is None:
            return [
                s if isinstance(s, str) else enc(x) if isinstance(x := items[s], (dict, list)) else x for s in slots
            ]
        rows = cast("list[dict[str, object]]", items)  # a table: every item a dict with ``keys``
        n = len(rows)
        same_keys = [k for k in keys if all(_same_text(rows[i][k], rows[0][k]) for i in range(1, n))]
        same = {k: self.encode(rows[0][k]) for k in same_keys}
        columns = [k for k in keys if k not in same]
        cells = {
            s: [enc(v) if isinstance(v := rows[s][c], (dict, list)) else v for c in columns]
            for s in slots
            if isinstance(s, int)
        }
        plain = [s if isinstance(s, str) else self._item(keys, same, columns, cells[s]) for s in slots]
        body: dict[str, object] = {}
        if same:
            body["same"] = same
        body["columns"] = columns
        body["rows"] = [s if isinstance(s, str) else cells[s] for s in slots]
        table = {TABLE_KEY: body}
        return table if len(_dumps(table)) < len(_dumps(plain)) else plain

    @staticmethod
    def _item(keys: list[str], same: dict, columns: list[str], row: list[object]) -> dict:
        """One item back in its own key order, from the shared values and its row."""
        varying = dict(zip(columns, row))
        return {k: same[k] if k in same else varying[k] for k in keys}

    def _table_keys(self, items: list[object]) -> list[str] | None:
        """The shared key list if ``items`` can be a table, else None."""
        if not self.table or len(items) < 2 or not isinstance(items[0], dict) or not items[0]:
            return None
        keys = list(items[0])
        for it in items[1:]:
            if not isinstance(it, dict) or list(it) != keys:
                return None
        return keys


def encode_tables(value: object) -> object:
    """``value`` (a parsed JSON value) with every eligible array table-encoded, nothing dropped.

    The lossless half of :func:`compress_json`; :func:`decode_table` inverts it.
    """
    return _Encoder(crush=False, table=True, words=(), key="0" * 24).encode(value)


def decode_table(value: object) -> object:
    """Undo the table encoding anywhere in ``value`` (a parsed JSON value).

    Each ``{"headroom_table": {"same"?, "columns", "rows"}}`` becomes the list of objects it
    encodes; a row that is a string (a marker standing for dropped items) stays a string.
    """
    if isinstance(value, list):
        return [decode_table(v) if isinstance(v, (dict, list)) else v for v in value]
    if not isinstance(value, dict):
        return value
    body = value.get(TABLE_KEY) if len(value) == 1 else None
    if isinstance(body, dict) and isinstance(body.get("columns"), list) and isinstance(body.get("rows"), list):
        same = {k: decode_table(v) for k, v in (body.get("same") or {}).items()}
        columns = body["columns"]
        out: list[object] = []
        for row in body["rows"]:
            if isinstance(row, list):
                item = dict(same)
                item.update(zip(columns, (decode_table(c) if isinstance(c, (dict, list)) else c for c in row)))
                out.append(item)
            else:
                out.append(row)
        return out
    return {k: decode_table(v) if isinstance(v, (dict, list)) else v for k, v in value.items()}


def compress_json(
    text: str,
    query: str,
    counter: TokenCounter,
    *,
    min_tokens: int = 250,
    min_saving_ratio: float = 0.10,
    lossless: bool = False,
) -> CompressResult:
    """Compress the JSON tool output ``text`` for a request whose latest user query is ``query``.

    ``lossless``: only the lossless forms (``minify``, ``table``) are considered.

    ``text`` is the tool output as the agent saw it; ``query`` the user's latest request (its
    words pick items to keep); ``counter`` measures tokens. Returns the unchanged text (``changed=False``) with the reason when the text is not a JSON
    object or array (``"not json"``, ``"scalar"``, ``"duplicate keys"``, ``"number not
    representable"``), shorter than ``min_tokens`` tokens (``"small"``), or when no form saves at
    least ``min_saving_ratio`` of its tokens (``"no gain"``). Otherwise the ``"minify"``/
    ``"table"`` form (lossless, no offload) or the ``"crush"`` form (one offload holding ``text``
    byte for byte) — see the module docstring for which and why. Never raises on bad input.
    """
    if not isinstance(text, str) or not text.strip():
        return CompressResult.unchanged(text, KIND, "not json")
    try:
        return _compress(text, query or "", counter, min_tokens, min_saving_ratio, lossless)
    except RecursionError:
        return CompressResult.unchanged(text, KIND, "too deeply nested")


def _compress(
    text: str, query: str, counter: TokenCounter, min_tokens: int, min_saving_ratio: float, lossless: bool = False
) -> CompressResult:
    doc, why = _parse(text)
    if doc is None:
        return CompressResult.unchanged(text, KIND, why)
    original = counter.count(text)
    if original < min_tokens:
        return CompressResult.unchanged(text, KIND, "small")
    target = original * (1.0 - min_saving_ratio)
    key = offload_key(text)
    table_ok = TABLE_KEY not in text

    # Lossless candidates. Counting costs about 1 s per 1.4 MB, so when even the shortest
    # candidate is, by the original's tokens-per-character, far over the lossless budget, it is
    # chosen by length and counted only if it is returned.
    candidates = [("minify", _output(doc))]
    tabled = _output(encode_tables(doc)) if table_ok else ""
    if tabled == candidates[0][1]:
        tabled = ""
    per_char = original / len(text)

    def far_over(chars: int) -> bool:
        return chars * per_char > 4 * LOSSLESS_BUDGET_TOKENS

    # The table form must decode back to the document (a parse and a walk, ~0.07 s a MB). When
    # it is the shorter form and far over the budget even so, that check is made only if the
    # crushed form is not taken whichever lossless form is the best (below).
    unchecked = bool(tabled) and len(tabled) < len(candidates[0][1]) and far_over(len(tabled))
    if tabled and not unchecked and decode_table(json.loads(tabled)) == doc:
        candidates.append(("table", tabled))
    far = unchecked or far_over(min(len(t) for _, t in candidates))
    if far:
        strategy, best_text = min(candidates, key=lambda c: len(c[1]))
        best_tokens = len(best_text) * per_char  # estimate; exact count below if used
        exact = False
    else:
        best_tokens, strategy, best_text = min(
            ((counter.count(t), s, t) for s, t in candidates), key=lambda c: (c[0], c[1] == "table")
        )
        exact = True
    best_ok = best_tokens <= target and best_text != text

    if exact and best_ok and (best_tokens <= LOSSLESS_BUDGET_TOKENS or lossless):
        return _lossless_result(strategy, best_text, original, int(best_tokens))

    words = query_words(query)
    selections: dict[int, Selection] = {}
    crushed: tuple[int, str, _Stats] | None = None
    for use_table in () if lossless else (True, False) if table_ok else (False,):
        enc = _Encoder(crush=True, table=use_table, words=words, key=key, selections=selections)
        out = _output(enc.encode(doc))
        if enc.stats.arrays == 0:
            break  # nothing to drop
        cand = (counter.count(out), out, enc.stats)
        if crushed is None or cand[0] < crushed[0]:
            crushed = cand

    def beats(tokens: float, ok: bool) -> bool:
        # Crushing must beat the lossless form clearly, not only the original.
        return (
            crushed is not None and crushed[0] <= target and (not ok or crushed[0] <= tokens * (1.0 - min_saving_ratio))
        )

    as_table = len(tabled) * per_char
    if unchecked and not (beats(best_tokens, best_ok) and beats(as_table, as_table <= target and tabled != text)):
        if decode_table(json.loads(tabled)) == doc:  # the table form is the best lossless one
            strategy, best_text, best_tokens = "table", tabled, as_table
            best_ok = best_tokens <= target and best_text != text
    if crushed is not None and beats(best_tokens, best_ok):
        tokens, out, stats = crushed
        what = f"{stats.total - stats.shown} of {stats.total} items"
        return CompressResult(
            text=out,
            changed=True,
            kind=KIND,
            strategy="crush",
            reason=f"{stats.describe()} ({original}->{tokens} tokens)",
            offloads=(Offload(key=key, original=text, what=what),),
        )
    if not exact:
        best_tokens = counter.count(best_text)
        best_ok = best_tokens <= target and best_text != text
    if best_ok:
        return _lossless_result(strategy, best_text, original, int(best_tokens))
    return CompressResult.unchanged(text, KIND, "no gain")


def _lossless_result(strategy: str, out: str, original: int, tokens: int) -> CompressResult:
    return CompressResult(
        text=out,
        changed=True,
        kind=KIND,
        strategy=strategy,
        reason=f"lossless {strategy} ({original}->{tokens} tokens)",
    )
