"""``cache_control`` breakpoints: where a request marks the ends of its cacheable prefixes.

Anthropic allows at most :data:`MAX_BREAKPOINTS` blocks with ``cache_control`` per request
("You can define up to 4 cache breakpoints", docs.anthropic.com, Prompt caching) and answers
HTTP 400 beyond that. The proxy never adds a breakpoint and never drops or moves one the client
set; a client that already sends more than four is left as it is (its request, its error).
:func:`verify` checks a planned edit against these rules; the request plan fails open (sends the
client's bytes) when it raises.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

#: Anthropic's limit of ``cache_control`` breakpoints per request.
MAX_BREAKPOINTS = 4
#: The parts of a request body that hold breakpoints, in the provider's cache order.
PARTS = ("tools", "system", "messages", "input")

PathT = tuple[Any, ...]


class BreakpointError(ValueError):
    """A planned edit added, dropped, moved or changed a ``cache_control`` breakpoint."""


def breakpoints(body: Mapping[str, Any]) -> dict[PathT, Any]:
    """``{path of the object holding cache_control: its value}`` over ``tools``, ``system``,
    ``messages`` and ``input`` of a parsed body (paths as keys and indexes from the root)."""
    out: dict[PathT, Any] = {}

    def walk(v: Any, path: PathT) -> None:
        if isinstance(v, dict):
            if "cache_control" in v:
                out[path] = v["cache_control"]
            for k, x in v.items():
                if isinstance(x, (dict, list)) and k != "cache_control":
                    walk(x, path + (k,))
        elif isinstance(v, list):
            for i, x in enumerate(v):
                if isinstance(x, (dict, list)):
                    walk(x, path + (i,))

    for part in PARTS:
        if part in body:
            walk(body[part], (part,))
    return out


def count(body: Mapping[str, Any]) -> int:
    """How many ``cache_control`` breakpoints a parsed body has."""
    return len(breakpoints(body))


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


def check(client: Mapping[str, Any], forwarded: Mapping[str, Any]) -> BreakpointCheck:
    """Compare the breakpoints of a client body and the planned forwarded body."""
    a, b = breakpoints(client), breakpoints(forwarded)
    added = tuple(p for p in b if p not in a)
    lost = tuple(p for p, v in a.items() if p not in b or b[p] != v)
    return BreakpointCheck(len(a), len(b), added, lost)


def verify(client: Mapping[str, Any], forwarded: Mapping[str, Any]) -> BreakpointCheck:
    """:func:`check`, raising :class:`BreakpointError` (naming the paths) unless it is ok."""
    c = check(client, forwarded)
    if not c.ok:
        raise BreakpointError(
            f"cache_control breakpoints changed: added {list(c.added)[:4]}, lost {list(c.lost)[:4]}, "
            f"{c.client} -> {c.forwarded} (limit {MAX_BREAKPOINTS})"
        )
    return c
