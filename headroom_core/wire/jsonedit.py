"""Byte-faithful edits of a JSON document.

An edited request keeps every byte the proxy did not change: values are located in the original
text by a walk that skips siblings with the C scanner of the standard ``json`` module, and only
the located spans are replaced. So everything before the first changed value serialises to the
exact bytes the client sent (the prompt cache sees the same prefix).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any, Iterable

from headroom_core.errors import DataProblem
from headroom_core.surrogates import escape_in_json
from headroom_core.wire.rawjson import scanstring

_WS = re.compile(r"[ \t\n\r]*")
_decoder = json.JSONDecoder()
PathT = tuple[Any, ...]


class JSONPathError(LookupError, DataProblem):
    """The path does not lead to a value in the document; the message names the path."""


class RawJSON(str):
    """JSON text that :func:`dumps` (and so :class:`Replace`) writes exactly as it is: a value the
    proxy has already serialised byte-faithfully (e.g. a minified tool definition whose numbers
    keep the client's text). The text must be one valid JSON value."""

    __slots__ = ()


def dumps(value: Any, ascii: bool = False) -> str:
    """Compact JSON for a value the proxy writes (UTF-8 kept, no spaces; lone surrogates, which
    have no UTF-8 form, as ``\\uXXXX`` escapes). ``ascii``: every character past U+007F as a
    ``\\uXXXX`` escape too (RFC 8259 §7; astral ones as surrogate pairs), for a document the
    client wrote in ASCII. A :class:`RawJSON` value is written as it is."""
    if isinstance(value, RawJSON):
        return str(value)
    if ascii:
        return json.dumps(value, ensure_ascii=True, separators=(",", ":"))
    return escape_in_json(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def _ws(s: str, i: int) -> int:
    m = _WS.match(s, i)  # matches the empty string too: never None
    return m.end() if m else i


def _skip_value(s: str, i: int) -> int:
    _, end = _decoder.raw_decode(s, i)
    return end


def _child(s: str, i: int, key: Any, path: PathT) -> int:
    """Start index of member ``key`` (str) or element ``key`` (int) of the container at ``i``."""
    c = s[i]
    if isinstance(key, str):
        if c != "{":
            raise JSONPathError(f"{path}: not an object")
        j = _ws(s, i + 1)
        found = -1
        while s[j] != "}":
            name, j = scanstring(s, j + 1)
            j = _ws(s, j)
            j = _ws(s, j + 1)  # past ':'
            if name == key:
                found = j  # last duplicate wins, as json.loads does
            j = _ws(s, _skip_value(s, j))
            if s[j] == ",":
                j = _ws(s, j + 1)
        if found < 0:
            raise JSONPathError(f"{path}: no key {key!r}")
        return found
    if c != "[":
        raise JSONPathError(f"{path}: not an array")
    j = _ws(s, i + 1)
    n = 0
    while s[j] != "]":
        if n == key:
            return j
        j = _ws(s, _skip_value(s, j))
        if s[j] == ",":
            j = _ws(s, j + 1)
        n += 1
    raise JSONPathError(f"{path}: no index {key}")


def value_at(value: Any, path: Iterable[Any]) -> Any:
    """The parsed value at ``path`` (object keys and array indexes) inside the parsed ``value``,
    or None when a step does not exist (a missing key, an index out of range, a step into a
    scalar). The parsed-value counterpart of :func:`span`."""
    for k in path:
        if isinstance(value, dict) and isinstance(k, str):
            value = value.get(k)
        elif isinstance(value, list) and isinstance(k, int) and 0 <= k < len(value):
            value = value[k]
        else:
            return None
    return value


def span(s: str, path: PathT) -> tuple[int, int]:
    """``(start, end)`` character offsets of the value at ``path`` (keys and indexes) in ``s``.

    Raises :class:`JSONPathError` if the path does not exist.
    """
    i = _ws(s, 0)
    for depth, key in enumerate(path):
        i = _child(s, i, key, path[: depth + 1])
    return i, _skip_value(s, i)


class Locator:
    """Finds value spans in one JSON text, scanning each container at most once.

    ``span(path)`` is what the module-level :func:`span` gives, but many paths under the same
    containers (a hundred ``tools`` entries, every message) cost one pass per container, not one
    walk from the root per path.
    """

    def __init__(self, s: str, known: dict[PathT, dict[Any, tuple[int, int]]] | None = None) -> None:
        """``known``: spans already found by a parse (container path -> member or element ->
        span), e.g. from :class:`headroom_core.wire.view.BodyView`; they are not scanned again."""
        self.s = s
        self._children: dict[PathT, dict[Any, tuple[int, int]]] = dict(known or {})
        # a valid document's root value ends at its last non-blank character
        self._root = (_ws(s, 0), len(s.rstrip(" \t\n\r")))

    def _members(self, path: PathT) -> dict[Any, tuple[int, int]]:
        hit = self._children.get(path)
        if hit is not None:
            return hit
        a, _ = self.span(path)
        s = self.s
        out: dict[Any, tuple[int, int]] = {}
        if s[a] == "{":
            j = _ws(s, a + 1)
            while s[j] != "}":
                name, j = scanstring(s, j + 1)
                j = _ws(s, _ws(s, j) + 1)
                end = _skip_value(s, j)
                out[name] = (j, end)  # last duplicate wins, as json.loads does
                j = _ws(s, end)
                if s[j] == ",":
                    j = _ws(s, j + 1)
        elif s[a] == "[":
            j = _ws(s, a + 1)
            n = 0
            while s[j] != "]":
                end = _skip_value(s, j)
                out[n] = (j, end)
                n += 1
                j = _ws(s, end)
                if s[j] == ",":
                    j = _ws(s, j + 1)
        self._children[path] = out
        return out

    def span(self, path: PathT) -> tuple[int, int]:
        """``(start, end)`` of the value at ``path``; raises :class:`JSONPathError`."""
        if not path:
            return self._root
        parent, key = path[:-1], path[-1]
        members = self._members(parent)
        a, _ = self.span(parent)
        if isinstance(key, str) and self.s[a] != "{":
            raise JSONPathError(f"{path}: not an object")
        if isinstance(key, int) and self.s[a] != "[":
            raise JSONPathError(f"{path}: not an array")
        if key not in members:
            raise JSONPathError(f"{path}: not found")
        return members[key]


@dataclass(frozen=True)
class Replace:
    """Replace the value at ``path`` with ``value``."""

    path: PathT
    value: Any


@dataclass(frozen=True)
class Append:
    """Append ``value`` to the array at ``path``; if the path's last keys are missing, they
    are created at the end of the deepest object that is there (``(key,)`` on a top-level
    object without it: ``key: [value]`` at its end)."""

    path: PathT
    value: Any


def apply(s: str, edits: Iterable["Edit"], locator: "Locator | None" = None) -> str:
    """Apply edits to the JSON text ``s``; bytes outside the edited spans stay as they were.

    Edits must not overlap. Raises :class:`JSONPathError` for a path that is not there.
    ``locator``: a :class:`Locator` of ``s`` that already knows some spans.
    """
    return apply_spliced(s, edits, locator).text


def _missing_members(s: str, path: PathT, span: Any) -> tuple[int, PathT]:
    """Where an :class:`Append` to a missing ``path`` (object keys only) creates it: the
    offset of the closing brace of its deepest existing object, and the keys missing below it.
    Raises :class:`JSONPathError` when an index is missing or a value on the way is no object."""
    for k in range(len(path) - 1, -1, -1):
        try:
            a, b = span(path[:k])
        except JSONPathError:
            continue
        if s[a] != "{" or not all(isinstance(x, str) for x in path[k:]):
            raise JSONPathError(f"{path}: cannot be created")
        return (s.rstrip().rfind("}") if k == 0 else b - 1), path[k:]
    raise JSONPathError(f"{path}: cannot be created")


def _nested(keys: PathT, values: str, asc: bool) -> str:
    """``"k0":{"k1":[values]}`` for ``keys`` (k0, k1) and the array's element text."""
    out = f"[{values}]"
    for k in reversed(keys[1:]):
        out = "{" + f"{dumps(k, asc)}:{out}" + "}"
    return f"{dumps(keys[0], asc)}:{out}"


@dataclass(frozen=True)
class Spliced:
    """The text after edits, and where things moved: ``splices`` are ``(start, end, new
    length)`` of each replaced span of the old text, in order."""

    text: str
    splices: tuple[tuple[int, int, int], ...]

    def map(self, x: int) -> int:
        """Where offset ``x`` of the old text is in the new one (``x`` outside every splice, or at
        a splice's start or end)."""
        shift = 0
        for a, b, n in self.splices:
            if b > x or (a == b == x):
                break
            shift += n - (b - a)
        return x + shift


def apply_spliced(s: str, edits: Iterable["Edit"], locator: "Locator | None" = None) -> Spliced:
    """:func:`apply`, also saying where every unedited offset went (:class:`Spliced`)."""
    splices: list[tuple[int, int, str]] = []
    loc = locator or Locator(s)
    span = loc.span  # noqa: F811 - one locator for all edits of this document
    created: dict[Any, tuple[int, list[str]]] = {}
    appended: set[int] = set()
    # a client that escaped every non-ASCII character gets the proxy's values written the same
    # way: its text stays ASCII (1 byte a character in memory; encoding it is a copy)
    asc = s.isascii()
    for e in edits:
        if isinstance(e, Replace):
            a, b = span(e.path)
            splices.append((a, b, dumps(e.value, asc)))
            continue
        if isinstance(e, ReplaceRaw):
            a, b = span(e.path)
            splices.append((a, b, e.text))
            continue
        if isinstance(e, RemoveMember):
            a, _ = span(e.path)
            for name, ks, _vs, ve in member_ranges(s, a):
                if name == e.name:
                    splices.append(_removal(s, ks, ve))
            continue
        try:
            a, b = span(e.path)
        except JSONPathError:
            end, missing = _missing_members(s, e.path, span)
            inner = s[:end].rstrip()
            sep = "" if inner.endswith("{") else ","
            if e.path in created:  # a later Append to the array an earlier one created
                i, values = created[e.path]
                values.append(dumps(e.value, asc))
                splices[i] = (end, end, sep + _nested(missing, ",".join(values), asc))
                continue
            created[e.path] = (len(splices), [dumps(e.value, asc)])
            splices.append((end, end, sep + _nested(missing, dumps(e.value, asc), asc)))
            continue
        if s[a] != "[":
            raise JSONPathError(f"{e.path}: not an array")
        close = b - 1
        empty = s[a + 1 : close].strip() == "" and close not in appended  # a second Append needs its comma
        appended.add(close)
        splices.append((close, close, ("" if empty else ",") + dumps(e.value, asc)))
    splices.sort(key=lambda t: (t[0], t[1]))
    pieces: list[str] = []
    pos = 0
    for a, b, text in splices:
        if a < pos:
            raise ValueError(f"overlapping edits at character {a}")
        pieces.append(s[pos:a])
        pieces.append(text)
        pos = b
    pieces.append(s[pos:])
    return Spliced("".join(pieces), tuple((a, b, len(t)) for a, b, t in splices))


@dataclass(frozen=True)
class RemoveMember:
    """Remove member ``name`` of the object at ``path`` (no-op when it has none)."""

    path: PathT
    name: str


@dataclass(frozen=True)
class ReplaceRaw:
    """Replace the value at ``path`` with ``text``, already JSON (spliced as it is, so bytes the
    proxy sent before can be sent again exactly)."""

    path: PathT
    text: str


def element_spans(s: str, path: PathT) -> list[tuple[int, int]]:
    """``(start, end)`` of every element of the array at ``path``, in one pass.

    Raises :class:`JSONPathError` if ``path`` is not an array.
    """
    loc = Locator(s)
    a, _ = loc.span(path)
    if s[a] != "[":
        raise JSONPathError(f"{path}: not an array")
    members = loc._members(path)
    return [members[i] for i in range(len(members))]


Edit = Replace | Append | ReplaceRaw | RemoveMember


def member_ranges(s: str, a: int) -> list[tuple[str, int, int, int]]:
    """``(name, key_start, value_start, value_end)`` of every member of the object starting at
    character ``a`` of ``s`` (duplicates included, in order); ``[]`` when it is not an object."""
    if s[a] != "{":
        return []
    out: list[tuple[str, int, int, int]] = []
    j = _ws(s, a + 1)
    while s[j] != "}":
        ks = j
        name, j = scanstring(s, j + 1)
        j = _ws(s, _ws(s, j) + 1)
        end = _skip_value(s, j)
        out.append((name, ks, j, end))
        j = _ws(s, end)
        if s[j] == ",":
            j = _ws(s, j + 1)
    return out


def _removal(s: str, ks: int, ve: int) -> tuple[int, int, str]:
    """The splice that removes the member spanning ``[ks, ve)`` with one adjoining comma."""
    k = ks - 1
    while s[k] in " \t\n\r":
        k -= 1
    if s[k] == ",":
        return (k, ve, "")
    j = _ws(s, ve)
    if s[j] == ",":
        return (ks, _ws(s, j + 1), "")
    return (ks, ve, "")


@functools.lru_cache(maxsize=64)
def _quoted(name: str) -> str:
    return json.dumps(name)


def strip_member(s: str, name: str) -> str:
    """``s`` (a JSON text) without any member called ``name``, at any depth; every other byte
    stays as it was. Containers whose text does not mention ``name`` are not walked."""
    needle = _quoted(name)
    if needle not in s:
        return s
    splices: list[tuple[int, int, str]] = []

    def walk(a: int, b: int) -> None:
        if s.find(needle, a, b) < 0:
            return
        if s[a] == "{":
            for n, ks, vs, ve in member_ranges(s, a):
                if n == name:
                    splices.append(_removal(s, ks, ve))
                elif s[vs] in "[{":
                    walk(vs, ve)
        elif s[a] == "[":
            j = _ws(s, a + 1)
            while s[j] != "]":
                end = _skip_value(s, j)
                if s[j] in "[{":
                    walk(j, end)
                j = _ws(s, end)
                if s[j] == ",":
                    j = _ws(s, j + 1)

    root = _ws(s, 0)
    walk(root, _skip_value(s, root))
    if not splices:
        return s
    splices.sort()
    pieces: list[str] = []
    pos = 0
    for a, b, text in splices:
        pieces.append(s[pos:a])
        pieces.append(text)
        pos = b
    pieces.append(s[pos:])
    return "".join(pieces)


def insert_member(s: str, path: PathT, name: str, raw: str) -> str:
    """``s`` with member ``name`` (value ``raw``, already JSON) added at the end of the object
    at ``path``. Raises :class:`JSONPathError` when ``path`` is not an object."""
    a, b = span(s, path)
    if s[a] != "{":
        raise JSONPathError(f"{path}: not an object")
    close = b - 1
    sep = "" if s[a + 1 : close].strip() == "" else ","
    return f"{s[:close]}{sep}{dumps(name)}:{raw}{s[close:]}"


# A JSON string literal (unrolled loop: fast on long strings) or a run of insignificant whitespace.
_STRING_OR_WS = re.compile(r'("[^"\\]*(?:\\.[^"\\]*)*")|[ \t\n\r]+')


def compact(text: str) -> str:
    """``text`` (one JSON value) without whitespace between tokens; every string and number
    keeps its exact characters (escapes, exponent, digits)."""
    if not any(c in text for c in " \t\n\r"):
        return text
    return _STRING_OR_WS.sub(lambda m: m.group(1) or "", text)


def reserialize(text: str, old: Any, new: Any) -> str:
    """Compact JSON text of ``new``, an edited copy of ``old`` whose exact JSON text is ``text``.

    Every value of ``new`` that is ``old``'s own (the same object, or an equal scalar) is copied
    from ``text`` character for character (so ``1e400``, a 25-digit decimal or an escaped
    ``"\\u00e9"`` stays as the client wrote it; only whitespace between tokens goes); objects
    and arrays are walked member by member, members absent from ``new`` are left out (every
    duplicate of the key), and only values that differ are written by :func:`dumps`. Object
    members keep the order of ``text``; keys new in ``new`` follow, in ``new``'s order.

    Raises ``ValueError`` if ``text`` is not JSON.
    """
    start = _ws(text, 0)
    out: list[str] = []
    _reserialize(text, start, old, new, out, text.isascii())
    return "".join(out)


def _reserialize(s: str, i: int, old: Any, new: Any, out: list[str], asc: bool) -> int:
    """Append the text for ``new`` to ``out``; ``s[i:]`` starts with ``old``'s text. Returns the
    end of ``old``'s text. ``asc``: values written with ASCII escapes only (``s`` is ASCII)."""
    if new is old:
        end = _skip_value(s, i)
        out.append(compact(s[i:end]))
        return end
    c = s[i]
    if isinstance(new, dict) and isinstance(old, dict) and c == "{":
        members: list[tuple[int, int, str, int, int]] = []  # key start/end, key, value start/end
        j = _ws(s, i + 1)
        while s[j] != "}":
            k0 = j
            name, j = scanstring(s, j + 1)
            k1 = j
            j = _ws(s, _ws(s, j) + 1)
            v1 = _skip_value(s, j)
            members.append((k0, k1, name, j, v1))
            j = _ws(s, v1)
            if s[j] == ",":
                j = _ws(s, j + 1)
        last = {name: n for n, (_a, _b, name, _c, _d) in enumerate(members)}
        out.append("{")
        first = True
        for n, (k0, k1, name, v0, v1) in enumerate(members):
            if name not in new:
                continue
            out.append("" if first else ",")
            first = False
            out.append(s[k0:k1] + ":")
            if last[name] == n and name in old:
                _reserialize(s, v0, old[name], new[name], out, asc)
            else:
                out.append(compact(s[v0:v1]))
        for name, value in new.items():
            if name not in last:
                out.append(("" if first else ",") + dumps(name, asc) + ":" + dumps(value, asc))
                first = False
        out.append("}")
        return j + 1
    if isinstance(new, list) and isinstance(old, list) and c == "[" and len(new) == len(old):
        out.append("[")
        j = _ws(s, i + 1)
        n = 0
        while s[j] != "]":
            if n:
                out.append(",")
            j = _ws(s, _reserialize(s, j, old[n], new[n], out, asc))
            if s[j] == ",":
                j = _ws(s, j + 1)
            n += 1
        out.append("]")
        return j + 1
    end = _skip_value(s, i)
    same = new is old or (type(new) is type(old) and not isinstance(new, (dict, list)) and new == old)
    out.append(compact(s[i:end]) if same else dumps(new, asc))
    return end
