"""A fast path of :func:`headroom_core.wire.jsonedit.reserialize` for JSON text written the
way :func:`~headroom_core.wire.jsonedit.dumps` writes it.

``reserialize(text, old, new)`` walks ``text`` character by character in Python so that every
value of ``new`` that is ``old``'s own keeps the client's exact characters. Most clients write
their JSON compact, with the escapes ``dumps`` uses (``JSON.stringify`` does: a tool list of
229 definitions is 200 KB of it), and then a value's characters in ``text`` are exactly
``dumps(value)``: the walk can be made on the parsed values and the result written by one
C-accelerated ``json.dumps``. Same bytes, about ten times faster (bench: the tools step of a
new conversation).

:func:`reserialize_canonical` answers only when that holds (``text`` after removing the
whitespace between tokens equals ``dumps(old)``); otherwise None, and the caller takes the
character walk.
"""

from __future__ import annotations

from typing import Any

from headroom_core.wire.jsonedit import RawJSON, compact, dumps

#: the types ``json.loads`` makes (and ``dumps`` writes as the walk does)
_PLAIN = (str, int, float, bool, type(None))


class _Unusual(Exception):
    """``new`` holds a value the fast path does not write the way the walk would."""


def reserialize_canonical(text: str, old: Any, new: Any, copy: bool = False) -> str | None:
    """``jsonedit.reserialize(text, old, new)``, or None when ``text`` is not written as
    :func:`~headroom_core.wire.jsonedit.dumps` writes ``old`` (whitespace between tokens
    aside) or ``new`` holds something other than plain JSON values with string keys.

    ``old``: the value parsed from ``text``; ``new``: an edited copy (untouched parts may be
    ``old``'s own objects). Object members keep ``old``'s order, members new in ``new`` follow
    in its order; a scalar equal to ``old``'s (same type) is written as ``old``'s (``0.0``
    stays ``0.0`` where ``new`` says ``-0.0``), as the walk copies the client's characters.

    ``copy``: the caller knows ``new`` to be such a copy already (plain JSON values; every
    object's keys in ``old``'s order, some left out, none added; every value not changed
    ``old``'s own or equal to it with the same type and JSON text, e.g. parsed back from its
    own JSON): the merge is ``new`` itself and is not walked (the tools minifier's copies)."""
    asc = text.isascii()
    want = dumps(old, asc)
    if want != text and want != compact(text):
        return None
    if copy:
        return dumps(new, asc)
    try:
        merged = _merge(old, new)
    except _Unusual:
        return None
    return dumps(merged, asc)


def _merge(old: Any, new: Any) -> Any:
    """The value whose ``dumps`` is the walk's output for ``old`` → ``new``."""
    if new is old:
        return old
    if isinstance(new, dict) and isinstance(old, dict):
        if type(new) is not dict or not all(type(k) is str for k in new):
            raise _Unusual()
        out = {k: _merge(v, new[k]) for k, v in old.items() if k in new}
        for k, v in new.items():
            if k not in out:
                out[k] = _plain(v)
        return out
    if isinstance(new, list) and isinstance(old, list) and len(new) == len(old):
        if type(new) is not list:
            raise _Unusual()
        return [_merge(a, b) for a, b in zip(old, new)]
    if type(new) is type(old) and not isinstance(new, (dict, list)) and new == old:
        return old
    return _plain(new)


def _plain(value: Any) -> Any:
    """``value`` itself when it holds only plain JSON values with string keys; else raises."""
    if type(value) is dict:
        for k, v in value.items():
            if type(k) is not str:
                raise _Unusual()
            _plain(v)
    elif type(value) is list:
        for v in value:
            _plain(v)
    elif type(value) not in _PLAIN or isinstance(value, RawJSON):
        raise _Unusual()
    return value
