"""JSON the provider sent, kept as sent: values carried as their exact text, and a serialiser
that never fails on a value it parsed.

Python's ``json`` loses information a proxy must keep: ``1e400`` parses to ``inf`` and is written
back as ``Infinity`` (not JSON); a lone surrogate escape such as ``"\\ud83d"`` (valid JSON, e.g. a
model or tool that cut an emoji in half) parses to a str that ``json.dumps(ensure_ascii=False)``
writes as a raw surrogate, which UTF-8 cannot encode. So what the proxy builds from a provider's
JSON (a merged response, a follow-up request, an event with a new index) is assembled from
:class:`Raw` fragments, the exact text of each value it does not change, and :func:`dumps`
writes everything else (RFC 8259; surrogates in strings are written as ``\\uXXXX`` escapes, which
is what they were on the wire).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, Iterator

_WS = re.compile(r"[ \t\n\r]*")
_SURROGATE = re.compile("[\ud800-\udfff]")
_decoder = json.JSONDecoder()
#: ``json.decoder.scanstring`` (C where available): ``scanstring(text, end)`` decodes the JSON
#: string whose opening quote is at ``end - 1``; returns (the string, the index after its closing
#: quote); raises ``json.JSONDecodeError``. The stdlib's stubs leave it out, hence the ignore.
scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Raw:
    """A JSON value as its exact text (``text``: one complete JSON value, no surrounding blanks
    needed). :attr:`value` is its parsed form (for decisions, never for writing back)."""

    text: str

    @cached_property
    def value(self) -> Any:
        """``json.loads(text)``; raises ``ValueError`` when ``text`` is not JSON."""
        return json.loads(self.text)


def _escape_surrogates(s: str) -> str:
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", s)


def dumps(value: Any) -> str:
    """Compact JSON text of ``value``: dicts, lists, tuples, str, int, float, bool, None and
    :class:`Raw` (spliced verbatim). UTF-8 characters are kept; lone surrogates are written as
    ``\\uXXXX`` escapes. Raises ``ValueError`` for NaN or infinite floats (they have no JSON form:
    keep such numbers as :class:`Raw`) and ``TypeError`` for other types."""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, RawObject):
        return value.text()
    if isinstance(value, dict):
        return "{" + ",".join(f"{_str(k)}:{dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(dumps(v) for v in value) + "]"
    if isinstance(value, str):
        return _str(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{value!r} has no JSON form")
    if value is None or isinstance(value, (bool, int, float)):
        return json.dumps(value)
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def _str(s: Any) -> str:
    if not isinstance(s, str):
        raise TypeError(f"JSON object keys are strings, not {type(s).__name__}")
    return _escape_surrogates(json.dumps(s, ensure_ascii=False))


def encode(value: Any) -> bytes:
    """:func:`dumps` as UTF-8 bytes (never raises ``UnicodeEncodeError``)."""
    return dumps(value).encode("utf-8")


def _ws(s: str, i: int) -> int:
    return _WS.match(s, i).end()  # type: ignore[union-attr]


def members(text: str) -> dict[str, Raw]:
    """The members of the JSON object ``text`` in order, each value as :class:`Raw` (a repeated
    key keeps its last value, as ``json.loads`` does). Raises ``ValueError`` when ``text`` is not
    one JSON object."""
    i = _ws(text, 0)
    if text[i : i + 1] != "{":
        raise ValueError("not a JSON object")
    out: dict[str, Raw] = {}
    j = _ws(text, i + 1)
    if text[j : j + 1] == "}":
        end = j + 1
    else:
        while True:
            if text[j : j + 1] != '"':
                raise ValueError(f"expected a member name at {j}")
            name, j = scanstring(text, j + 1)
            j = _ws(text, j)
            if text[j : j + 1] != ":":
                raise ValueError(f"expected ':' at {j}")
            j = _ws(text, j + 1)
            _, k = _decoder.raw_decode(text, j)
            out.pop(name, None)
            out[name] = Raw(text[j:k])
            j = _ws(text, k)
            c = text[j : j + 1]
            if c == ",":
                j = _ws(text, j + 1)
                continue
            if c == "}":
                end = j + 1
                break
            raise ValueError(f"expected ',' or '}}' at {j}")
    if _ws(text, end) != len(text):
        raise ValueError("text after the JSON object")
    return out


def elements(text: str) -> list[Raw]:
    """The elements of the JSON array ``text``, each as :class:`Raw`. Raises ``ValueError`` when
    ``text`` is not one JSON array."""
    i = _ws(text, 0)
    if text[i : i + 1] != "[":
        raise ValueError("not a JSON array")
    out: list[Raw] = []
    j = _ws(text, i + 1)
    if text[j : j + 1] == "]":
        end = j + 1
    else:
        while True:
            _, k = _decoder.raw_decode(text, j)
            out.append(Raw(text[j:k]))
            j = _ws(text, k)
            c = text[j : j + 1]
            if c == ",":
                j = _ws(text, j + 1)
                continue
            if c == "]":
                end = j + 1
                break
            raise ValueError(f"expected ',' or ']' at {j}")
    if _ws(text, end) != len(text):
        raise ValueError("text after the JSON array")
    return out


class RawObject:
    """A JSON object being edited: members in order, values :class:`Raw` (as sent) or Python
    values (written by :func:`dumps`). ``str(obj)`` is its JSON text; unchanged values keep their
    exact text. Build with :meth:`parse` or from a dict of values."""

    def __init__(self, items: dict[str, Any] | None = None) -> None:
        self.items: dict[str, Any] = dict(items or {})

    @classmethod
    def parse(cls, text: str) -> "RawObject":
        """The object ``text`` (raises ``ValueError`` when it is not one JSON object)."""
        return cls(members(text))

    def __contains__(self, key: str) -> bool:
        return key in self.items

    def __iter__(self) -> Iterator[str]:
        return iter(self.items)

    def get(self, key: str, default: Any = None) -> Any:
        """The parsed value of ``key`` (``default`` when absent)."""
        if key not in self.items:
            return default
        v = self.items[key]
        return v.value if isinstance(v, Raw) else v

    def raw(self, key: str) -> Raw | None:
        """The value of ``key`` as JSON text (None when absent)."""
        if key not in self.items:
            return None
        v = self.items[key]
        return v if isinstance(v, Raw) else Raw(dumps(v))

    def object(self, key: str) -> "RawObject":
        """The member ``key`` as a :class:`RawObject` (empty when absent or not an object)."""
        v = self.items.get(key)
        if isinstance(v, RawObject):
            return v
        if isinstance(v, Raw):
            try:
                return RawObject.parse(v.text)
            except ValueError:
                return RawObject()
        return RawObject(v) if isinstance(v, dict) else RawObject()

    def __setitem__(self, key: str, value: Any) -> None:
        self.items[key] = value

    def pop(self, key: str, default: Any = None) -> Any:
        """Remove ``key``; returns its stored value (Raw or Python) or ``default``."""
        return self.items.pop(key, default)

    def text(self) -> str:
        """The object's JSON text."""
        return "{" + ",".join(f"{_str(k)}:{dumps(v)}" for k, v in self.items.items()) + "}"

    __str__ = text

    def value(self) -> dict[str, Any]:
        """The parsed object."""
        obj: dict[str, Any] = json.loads(self.text())  # text() writes one JSON object
        return obj


def as_raw(value: Any) -> Raw:
    """``value`` (a :class:`Raw`, :class:`RawObject`, list of those, or a plain value) as
    :class:`Raw`."""
    if isinstance(value, Raw):
        return value
    return Raw(dumps(value))


def with_member(text: str, name: str, value: Any) -> str:
    """The JSON object ``text`` with member ``name`` set to ``value`` (a :class:`Raw` or a
    Python value); every other member keeps its text and place. Raises ``ValueError`` when
    ``text`` is not one JSON object."""
    obj = RawObject.parse(text)
    obj[name] = value
    return obj.text()


def append_to_array(text: str, name: str, values: list[Any]) -> str:
    """The JSON object ``text`` with ``values`` (each :class:`Raw` or a Python value) appended to
    its top-level array member ``name``; the text before the array's closing bracket is kept
    byte for byte (a request's prefix stays what was sent). Raises ``ValueError`` when ``text``
    is not an object with such an array."""
    from headroom_core.wire import jsonedit

    try:
        a, b = jsonedit.span(text, (name,))
    except (jsonedit.JSONPathError, IndexError, ValueError) as e:
        raise ValueError(f"no array {name!r}: {e}") from e
    if text[a] != "[":
        raise ValueError(f"{name!r} is not an array")
    close = b - 1
    empty = text[a + 1 : close].strip() == ""
    added = ",".join(dumps(v) for v in values)
    if not added:
        return text
    return text[:close] + ("" if empty else ",") + added + text[close:]
