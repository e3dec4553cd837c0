"""One parse of a request body that knows where everything is.

:func:`parse_view` parses a JSON object once and records the exact character span of every
top-level member and of every element of its conversation and ``tools`` arrays, so the request
walk can read values and splice edits without scanning the text again.

Agents resend the whole conversation on every turn: with ``previous`` (the view of the same
client's previous request) the parse pays only for what is new. The longest common prefix and
suffix of the two texts are found by comparing slices (C speed); elements of the conversation
array that lie wholly inside the common prefix, and top-level members (``system``, ``tools``, …)
that lie wholly inside the common suffix, are taken from ``previous`` (same bytes, same values)
instead of being decoded again. The result is exactly what a fresh parse gives.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from headroom_core.errors import DataProblem
from headroom_core.wire import jsonedit
from headroom_core.wire.rawjson import scanstring as _scanstring

_decoder = json.JSONDecoder()
_WS = " \t\n\r"

#: Arrays whose elements get spans by default: the conversation (Anthropic/Chat ``messages``,
#: Responses ``input``) and the tool definitions (a dialect adds its own: :func:`parse_view`).
ARRAYS = ("messages", "input", "tools")
#: The member of the tool definitions (its elements never count as reused conversation).
TOOLS = "tools"


@dataclass(frozen=True)
class BodyView:
    """A parsed JSON object body: ``parsed`` (what ``json.loads`` gives), ``text``, and spans
    (start, end character offsets into ``text``): ``members`` of every top-level value (the last
    of duplicate keys, as ``json.loads``), ``keys`` where each member's key starts, ``elements``
    of each array named in :data:`ARRAYS`. ``reused``: how many conversation elements and which
    members were taken from a previous view (for the walk's own shortcuts)."""

    text: str
    parsed: dict[str, Any]
    members: dict[str, tuple[int, int]]
    keys: dict[str, int]
    elements: dict[str, tuple[tuple[int, int], ...]]
    reused_elements: int = 0
    reused_members: frozenset[str] = field(default=frozenset())

    def span_text(self, key: str) -> str:
        """The exact JSON text of top-level member ``key`` (``""`` when absent)."""
        s = self.members.get(key)
        return self.text[s[0] : s[1]] if s else ""

    def element_texts(self, key: str) -> list[str]:
        """The exact JSON text of each element of array member ``key``."""
        return [self.text[a:b] for a, b in self.elements.get(key, ())]


class ViewError(ValueError, DataProblem):
    """The text is not a JSON object (the message says where it broke)."""


def _ws(s: str, i: int) -> int:
    n = len(s)
    while i < n and s[i] in _WS:
        i += 1
    return i


_BLOCK = 1 << 14  # characters compared at a time (slices are copies: keep them small)


def common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of ``a`` and ``b`` (blocks compared at C speed, then
    a binary search inside the first block that differs)."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i : i + _BLOCK] == b[i : i + _BLOCK]:
        i += _BLOCK
    if i >= n:
        return n
    lo, hi = i, min(i + _BLOCK, n)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[i:mid] == b[i:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def common_suffix(a: str, b: str, limit: int) -> int:
    """Length of the longest common suffix of ``a`` and ``b``, at most ``limit``."""
    n = min(len(a), len(b), limit)
    la, lb = len(a), len(b)
    k = 0
    while k < n and a[la - min(k + _BLOCK, n) : la - k] == b[lb - min(k + _BLOCK, n) : lb - k]:
        k = min(k + _BLOCK, n)
    if k >= n:
        return n
    lo, hi = k, min(k + _BLOCK, n)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[la - mid : la - k] == b[lb - mid : lb - k]:
            lo = mid
        else:
            hi = mid - 1
    return lo


#: Characters of an element's start that index the previous request's elements by text (enough
#: to hold a message's tool call id or a tool's name).
_HEAD = 128
#: Elements with the same start tried at most, after the one following the last found.
_TRIES = 4


class _Known:
    """The previous request's elements of one array (after the first ``skip``) to find again by
    text, wherever they now are. Elements mostly keep their order, so the one after the last
    found is tried first; else at most :data:`_TRIES` with the same first :data:`_HEAD`
    characters. Each try compares one element's text: the work stays linear in the array."""

    def __init__(self, text: str, spans: tuple[tuple[int, int], ...], values: list[Any], skip: int) -> None:
        self.text = text
        self.spans = spans
        self.values = values
        self.next = skip
        self.by_head: dict[str, list[int]] = {}
        for k in range(skip, len(spans)):
            a, _b = spans[k]
            self.by_head.setdefault(text[a : a + _HEAD], []).append(k)

    def find(self, s: str, j: int) -> tuple[Any, int] | None:
        """The value and end of the element at ``s[j]`` if it is one of these, else None."""
        head = s[j : j + _HEAD]
        ks = self.by_head.get(head)
        if not ks:
            return None
        tries = (
            [self.next] if self.next < len(self.spans) and self.text.startswith(head, self.spans[self.next][0]) else []
        )
        tries += [k for k in ks[:_TRIES] if k != self.next]
        for k in tries:
            a, b = self.spans[k]
            end = j + (b - a)
            # a whole JSON value with the same text, and what follows it here ends a value: the same parse
            if end < len(s) and s[end] in _AFTER_ELEMENT and s.startswith(self.text[a:b], j):
                self.next = k + 1
                return self.values[k], end
        return None


def _known_elements(previous: BodyView | None, name: str, skip: int) -> _Known | None:
    """``previous``'s elements of array ``name`` after the first ``skip`` (None: none)."""
    if previous is None or name not in previous.elements:
        return None
    spans = previous.elements[name]
    values = previous.parsed.get(name)
    if not isinstance(values, list) or len(values) != len(spans) or skip >= len(spans):
        return None
    return _Known(previous.text, spans, values, skip)


def _element(s: str, j: int, known: _Known) -> tuple[Any, int]:
    """The JSON value at ``s[j]`` and its end: an element of the previous request with the same
    text keeps its value, else parsed."""
    found = known.find(s, j)
    return found if found is not None else _decoder.raw_decode(s, j)


#: What may follow an array element: whitespace, a comma or the array's end.
_AFTER_ELEMENT = frozenset(" \t\n\r,]")


def _array(
    s: str, i: int, reuse: list[tuple[tuple[int, int], Any]], known: _Known | None = None
) -> tuple[list[Any], list[tuple[int, int]], int, int]:
    """Parse the array starting at ``s[i]`` ("["): its values, element spans, end, and how many
    leading elements came from ``reuse`` (``(span, value)`` pairs known to be at the same place).
    Elements after those whose text is one of ``known``'s (:func:`_known_elements`) keep its
    value instead of being parsed again."""
    values: list[Any] = []
    spans: list[tuple[int, int]] = []
    j = _ws(s, i + 1)
    taken = 0
    if reuse and s[j] != "]":
        last_end = reuse[-1][0][1]
        for span, value in reuse:
            spans.append(span)
            values.append(value)
        taken = len(reuse)
        j = _ws(s, last_end)
        if s[j] == ",":
            j = _ws(s, j + 1)
        elif s[j] != "]":
            raise ViewError(f"expected ',' or ']' at {j}")
    while s[j] != "]":
        value, end = _element(s, j, known) if known is not None else _decoder.raw_decode(s, j)
        values.append(value)
        spans.append((j, end))
        j = _ws(s, end)
        if s[j] == ",":
            j = _ws(s, j + 1)
        elif s[j] != "]":
            raise ViewError(f"expected ',' or ']' at {j}")
    return values, spans, j + 1, taken


def parse_view(text: str, previous: BodyView | None = None, arrays: tuple[str, ...] = ARRAYS) -> BodyView:
    """The :class:`BodyView` of ``text``, reusing what ``previous`` already parsed where the
    bytes are the same (see the module docstring); ``arrays``: the top-level arrays whose
    elements get spans (a dialect's conversation and tools members). Raises
    :class:`ViewError` when ``text`` is not one JSON object (``RecursionError`` for absurd
    nesting, as ``json.loads``)."""
    s = text
    try:
        i = _ws(s, 0)
        if i >= len(s) or s[i] != "{":
            raise ViewError("not a JSON object")
        prefix = suffix = 0
        if previous is not None:
            prefix = common_prefix(previous.text, s)
            suffix = common_suffix(previous.text, s, len(s) - prefix)
        delta = len(s) - len(previous.text) if previous is not None else 0
        parsed: dict[str, Any] = {}
        members: dict[str, tuple[int, int]] = {}
        keys: dict[str, int] = {}
        elements: dict[str, tuple[tuple[int, int], ...]] = {}
        reused_members: set[str] = set()
        reused_elements = 0
        j = _ws(s, i + 1)
        if s[j] == "}":
            return BodyView(s, parsed, members, keys, elements)
        while True:
            if s[j] != '"':
                raise ViewError(f"expected a key at {j}")
            key_at = j
            name, j = _scanstring(s, j + 1)
            j = _ws(s, j)
            if s[j] != ":":
                raise ViewError(f"expected ':' at {j}")
            j = _ws(s, j + 1)
            old = _same_member(previous, name, key_at, delta, prefix, suffix, len(s))
            if old is not None:
                value, (start, end), els = old
                if els is not None:
                    elements[name] = els
                    if name != TOOLS and name in arrays:  # the whole conversation the same: every element reused
                        reused_elements = len(els)
                else:  # a duplicate key: the earlier member's element spans are not this value's
                    elements.pop(name, None)
                reused_members.add(name)
            elif name in arrays and s[j] == "[":
                reuse = _reusable_elements(previous, name, j, prefix)
                value, spans, end, taken = _array(s, j, reuse, _known_elements(previous, name, len(reuse)))
                start = j
                elements[name] = tuple(spans)
                if name != TOOLS:
                    reused_elements = taken
            else:
                value, end = _decoder.raw_decode(s, j)
                start = j
                elements.pop(name, None)
            parsed[name] = value
            members[name] = (start, end)
            keys[name] = key_at
            j = _ws(s, end)
            if s[j] == ",":
                j = _ws(s, j + 1)
                continue
            if s[j] == "}":
                break
            raise ViewError(f"expected ',' or '}}' at {j}")
        if _ws(s, j + 1) != len(s):
            raise ViewError("extra data after the object")
    except IndexError:
        raise ViewError("unexpected end of the text") from None
    except json.JSONDecodeError as e:
        raise ViewError(str(e)) from None
    return BodyView(s, parsed, members, keys, elements, reused_elements, frozenset(reused_members))


def _same_member(
    previous: BodyView | None, name: str, key_at: int, delta: int, prefix: int, suffix: int, n: int
) -> tuple[Any, tuple[int, int], tuple[tuple[int, int], ...] | None] | None:
    """``previous``'s member ``name`` (value, span, element spans, in this text's offsets) when
    its key and value are the same bytes here: wholly inside the common prefix at the same place,
    or inside the common suffix at the same distance from the end."""
    if previous is None or name not in previous.members:
        return None
    a, b = previous.members[name]
    old_key = previous.keys[name]
    if old_key == key_at and b <= prefix:
        shift = 0
    elif old_key + delta == key_at and old_key >= len(previous.text) - suffix:
        shift = delta
    else:
        return None
    els = previous.elements.get(name)
    moved = tuple((x + shift, y + shift) for x, y in els) if els is not None else None
    return previous.parsed[name], (a + shift, b + shift), moved


def _reusable_elements(
    previous: BodyView | None, name: str, start: int, prefix: int
) -> list[tuple[tuple[int, int], Any]]:
    """The leading elements of ``previous``'s array ``name`` that start at the same place and
    end inside the common prefix (same bytes, same value)."""
    if previous is None or name not in previous.elements or previous.members[name][0] != start:
        return []
    out = []
    values = previous.parsed[name]
    for k, (a, b) in enumerate(previous.elements[name]):
        if b > prefix:
            break
        out.append(((a, b), values[k]))
    return out


def array_at(view: BodyView, path: tuple[str, ...]) -> tuple[tuple[int, int], tuple[tuple[int, int], ...]]:
    """The span of the array at ``path`` (keys from the body; a dialect's ``tools_path``) in
    ``view.text`` and the spans of its elements. A top-level array named in the parse's
    ``arrays`` is read from the view; a deeper one (Bedrock Converse ``toolConfig.tools``) is
    found inside its top-level member, the other members not scanned again. Raises
    :class:`~headroom_core.wire.jsonedit.JSONPathError` when there is no array there."""
    if len(path) == 1 and path[0] in view.elements:
        return view.members[path[0]], view.elements[path[0]]
    loc = jsonedit.Locator(view.text, {(): dict(view.members)})
    a, b = loc.span(path)
    if view.text[a] != "[":
        raise jsonedit.JSONPathError(f"{path}: not an array")
    return (a, b), tuple((a + x, a + y) for x, y in jsonedit.element_spans(view.text[a:b], ()))
