"""What counts as a change of a prompt part, and carrying the client's ``cache_control`` onto
bytes the proxy sent before.

A part (one tool definition, a system block, one message) is unchanged for the prompt cache when
only its ``cache_control`` markers moved, or when a string ``content`` became one text block
(or back): the provider renders the same prompt for both, and clients do both between turns
(Claude Code moves its breakpoints to the newest messages every turn). :func:`norm_hash` is the
identity of a part modulo those two; :func:`carry` puts the client's current breakpoints onto
the text the proxy forwarded for that part earlier, so the replayed bytes carry the client's
markers and nothing else changes.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from headroom_core.wire import jsonedit

CC = "cache_control"
#: Block types that are plain text: ``[{"type": T, "text": s}]`` is the same content as ``s``.
TEXT_TYPES = frozenset({"text", "input_text", "output_text"})
_NUM = "\0num"


def _num(s: str) -> dict[str, str]:
    return {_NUM: s}  # numbers by their exact text: 1e400 and 1.00000000000000000001 stay apart


def normal(v: Any) -> Any:
    """``v`` (parsed JSON) without ``cache_control`` members, a one-text-block ``content`` as
    its string: the form in which two equal prompt parts are equal."""
    if isinstance(v, dict):
        out = {k: (x if isinstance(x, str) else normal(x)) for k, x in v.items() if k != CC}
        c = out.get("content")
        if isinstance(c, list) and len(c) == 1 and isinstance(c[0], dict) and c[0].get("type") in TEXT_TYPES:
            if set(c[0]) <= {"type", "text"} and isinstance(c[0].get("text"), str):
                out["content"] = c[0]["text"]
        return out
    if isinstance(v, list):
        return [x if isinstance(x, str) else normal(x) for x in v]
    return v


#: Numbers parsed as their exact text (:func:`_num`): one decoder for every call.
_EXACT = json.JSONDecoder(parse_float=_num, parse_int=_num, parse_constant=_num)


def norm_hash(text: str) -> str:
    """SHA-256 hex of a part's JSON ``text`` modulo ``cache_control`` members (at any depth) and
    string-vs-one-text-block ``content``; object member order does not count. Raises
    ``ValueError`` when ``text`` is not JSON."""
    blob = json.dumps(normal(_EXACT.decode(text)), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


def breakpoints(value: Any, path: tuple = ()) -> list[tuple[tuple, Any]]:
    """``(path, cache_control value)`` of every object holding ``cache_control`` in ``value``
    (paths relative to ``value``, in document order)."""
    out: list[tuple[tuple, Any]] = []
    if isinstance(value, dict):
        if CC in value:
            out.append((path, value[CC]))
        for k, x in value.items():
            if k != CC and isinstance(x, (dict, list)):
                out.extend(breakpoints(x, path + (k,)))
    elif isinstance(value, list):
        for i, x in enumerate(value):
            if isinstance(x, (dict, list)):
                out.extend(breakpoints(x, path + (i,)))
    return out


def _get(value: Any, path: tuple) -> Any:
    for k in path:
        if isinstance(k, str) and isinstance(value, dict) and k in value:
            value = value[k]
        elif isinstance(k, int) and isinstance(value, list) and 0 <= k < len(value):
            value = value[k]
        else:
            return None
    return value


def target(client: Any, forwarded: Any, path: tuple) -> tuple | None:
    """Where a breakpoint the client set at ``path`` of a part goes in the proxy's version of
    that part: the same path when it leads to an object there; the last block when the client
    marked its last ``content`` block and the proxy appended blocks after it (its context
    block); else the nearest enclosing object on the path, a content block at the highest (a
    message-level marker is not valid). None when nothing fits."""
    if len(path) == 2 and path[0] == "content":
        cc, fc = _get(client, ("content",)), _get(forwarded, ("content",))
        if isinstance(cc, list) and isinstance(fc, list) and path[1] == len(cc) - 1 and len(fc) > len(cc):
            return ("content", len(fc) - 1)
    floor = 2 if len(path) >= 2 and path[0] == "content" else 0  # never onto the message itself
    for n in range(len(path), floor - 1, -1):
        if isinstance(_get(forwarded, path[:n]), dict):
            return path[:n]
    return None


def carry(forwarded_text: str, client_value: Any) -> str | None:
    """``forwarded_text`` (the proxy's JSON text of a part) with its ``cache_control`` members
    replaced by the client's current ones (``client_value``, the part as the client sends it
    now, parsed), mapped by :func:`target`. Bytes other than the markers stay as they were.
    None when a breakpoint has no place in the forwarded part (the caller must not replay)."""
    bare = jsonedit.strip_member(forwarded_text, CC)
    marks = breakpoints(client_value)
    if not marks:
        return bare
    fwd = json.loads(bare)
    out = bare
    placed: set[tuple] = set()
    for path, value in marks:
        where = target(client_value, fwd, path)
        if where is None or where in placed:
            return None
        placed.add(where)
        out = jsonedit.insert_member(out, where, CC, jsonedit.dumps(value))
    return out
