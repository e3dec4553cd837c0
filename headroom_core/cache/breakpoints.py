"""``cache_control`` breakpoints: where a request marks the ends of its cacheable prefixes.

Anthropic allows at most :data:`MAX_BREAKPOINTS` blocks with ``cache_control`` per request
("You can define up to 4 cache breakpoints", docs.anthropic.com, Prompt caching) and answers
HTTP 400 beyond that. The proxy never adds a breakpoint and never drops or moves one the client
set, except within one message: a breakpoint on a message's last block follows the proxy's context
block appended after it, and one on a replayed message goes where that message's block is in
the bytes sent before (:mod:`headroom_core.cache.carry`). A client that already sends more than
four is left as it is (its request, its error).
:func:`verify` checks a planned edit against these rules; the request plan fails open (sends the
client's bytes) when it raises.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from headroom_core.errors import InternalError
from headroom_core.wire.dialects import WireDialect, for_body

#: Anthropic's limit of ``cache_control`` breakpoints per request.
MAX_BREAKPOINTS = 4

PathT = tuple[Any, ...]


class BreakpointError(ValueError, InternalError):
    """A planned edit added, dropped, moved or changed a ``cache_control`` breakpoint."""


def breakpoints(body: Mapping[str, Any], d: WireDialect | None = None) -> dict[PathT, Any]:
    """``{path of the object holding cache_control: its value}`` over the parts of a parsed
    body that hold breakpoints (dialect ``d``'s ``cache_parts``; ``d`` defaults to the dialect
    the body reads as), paths as keys and indexes from the root."""
    out: dict[PathT, Any] = {}
    wd = d or for_body(body)
    marker = wd.cache_marker  # cache_control, or Bedrock Converse's cachePoint blocks

    def walk(v: Any, path: PathT) -> None:
        if isinstance(v, dict):
            if marker in v:
                out[path] = v[marker]
            for k, x in v.items():
                if isinstance(x, (dict, list)) and k != marker:
                    walk(x, path + (k,))
        elif isinstance(v, list):
            for i, x in enumerate(v):
                if isinstance(x, (dict, list)):
                    walk(x, path + (i,))

    for part in wd.cache_parts:
        if part in body:
            walk(body[part], (part,))
    return out


def count(body: Mapping[str, Any], d: WireDialect | None = None) -> int:
    """How many ``cache_control`` breakpoints a parsed body has (dialect ``d``, as :func:`breakpoints`)."""
    return len(breakpoints(body, d))


@dataclass(frozen=True)
class BreakpointCheck:
    """Breakpoints of the client's body and of the body the proxy would forward: ``added``
    (in the forwarded body only), ``lost`` (in the client's only, or with another value)."""

    client: int
    forwarded: int
    added: tuple[PathT, ...]
    lost: tuple[PathT, ...]

    @property
    def ok(self) -> bool:
        """Nothing added, nothing lost, and not over the limit unless the client was."""
        return not self.added and not self.lost and (self.forwarded <= MAX_BREAKPOINTS or self.forwarded <= self.client)


def _where(path: PathT, d: WireDialect) -> PathT:
    """The place a breakpoint must stay: its own path, or for messages the message."""
    return path[:2] if path and path[0] == d.conversation_key else path


def check(client: Mapping[str, Any], forwarded: Mapping[str, Any], d: WireDialect | None = None) -> BreakpointCheck:
    """Compare the breakpoints of a client body and the planned forwarded body, by place
    (:func:`_where`) and value (dialect ``d``; defaults to the dialect the client body reads as)."""
    import json
    from collections import Counter

    wd = d or for_body(client)

    def places(body: Mapping[str, Any]) -> tuple[Counter, dict]:
        c: Counter = Counter()
        first: dict = {}
        for p, v in breakpoints(body, wd).items():
            k = (_where(p, wd), json.dumps(v, sort_keys=True, default=str))
            c[k] += 1
            first.setdefault(k, p)
        return c, first

    (a, pa), (b, pb) = places(client), places(forwarded)
    added = tuple(pb[k] for k in b if b[k] > a.get(k, 0))
    lost = tuple(pa[k] for k in a if a[k] > b.get(k, 0))
    return BreakpointCheck(sum(a.values()), sum(b.values()), added, lost)


def marker_count(text: str, start: int = 0, end: int | None = None, marker: str = "cache_control") -> int:
    """How many ``cache_control`` members a JSON text holds (``text[start:end]``, counted in
    place: no copy of the slice), without parsing it (C-speed substring count): inside a string
    value the quotes are escaped, so text that merely mentions cache_control is not counted (a
    string value that is exactly "cache_control" is, on both sides of a comparison alike).
    ``marker``: the dialect's breakpoint member (``cache_marker``)."""
    return text.count(f'"{marker}"', start, len(text) if end is None else end)


def verify(client: Mapping[str, Any], forwarded: Mapping[str, Any], d: WireDialect | None = None) -> BreakpointCheck:
    """:func:`check`, raising :class:`BreakpointError` (naming the paths) unless it is ok."""
    c = check(client, forwarded, d)
    if not c.ok:
        raise BreakpointError(
            f"cache_control breakpoints changed: added {list(c.added)[:4]}, lost {list(c.lost)[:4]}, "
            f"{c.client} -> {c.forwarded} (limit {MAX_BREAKPOINTS})"
        )
    return c
