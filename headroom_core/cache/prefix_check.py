"""The prompt-cache rule as a check: did the proxy change a part of the prompt earlier than
the client did?

The rule (docs/architecture.md, "The prompt-cache rule"): once a request of a session has gone upstream,
later requests keep byte for byte every part the client did not change; where the client does
change a part, the proxy's first difference comes no earlier than the client's. Parts, in the
provider's prompt order: ``tools`` (one part: a change anywhere in it rewrites every cached
prefix after it; the client's tools are compared as a set, since their order is the proxy's
business), each ``system`` block (or ``instructions``), each message (or Responses item).
Moving ``cache_control`` and writing a string content as one text block are no change
(:func:`headroom_core.cache.carry.norm_hash`).

:func:`first_change` finds the first changed part between two bodies; :func:`earlier_break`
compares the client's pair with the forwarded pair. Tests and benchmarks use these as the
oracle; the proxy enforces the rule in :mod:`headroom_core.request_plan`.
"""

from __future__ import annotations

import json
from typing import Any

from headroom_core.cache.carry import norm_hash
from headroom_core.wire.dialects import WireDialect, for_body

#: The position of the first changed part: (section, index); section 0 tools, 1 system,
#: 2 messages; None when the later body only appends to the earlier one.
Position = tuple[int, int]


def _h(v: Any) -> str:
    return norm_hash(json.dumps(v, ensure_ascii=False))


def _parts(body: dict[str, Any], tools_as_set: bool, d: WireDialect | None = None) -> list[tuple[Position, str]]:
    out: list[tuple[Position, str]] = []
    d = d or for_body(body)
    tools = d.tools_of(body)
    if isinstance(tools, list):
        hs = [_h(t) for t in tools]
        out.append(((0, 0), _h(sorted(hs) if tools_as_set else hs)))
    else:
        out.append(((0, 0), _h(tools)))
    system = d.system_member(body)
    if isinstance(system, list):
        out += [((1, i), _h(b)) for i, b in enumerate(system)]
    elif system is not None:
        out.append(((1, 0), _h(system)))
    seq = d.conversation_of(body)
    if isinstance(seq, list):
        out += [((2, i), _h(m)) for i, m in enumerate(seq)]
    elif seq is not None:
        out.append(((2, 0), _h(seq)))
    return out


def first_change(before: dict[str, Any], after: dict[str, Any], tools_as_set: bool = False) -> Position | None:
    """The first part of ``after`` that differs from ``before``'s part at the same place (a
    part ``before`` lacks counts only when ``before`` had more parts after it: appending new
    messages is no change); None when ``after`` keeps all of ``before``."""
    a, b = _parts(before, tools_as_set), _parts(after, tools_as_set)
    pa = dict(a)
    for pos, h in b:
        if pos in pa and pa[pos] != h:
            return pos
    missing = [pos for pos, _ in a if pos not in dict(b)]
    return min(missing) if missing else None


def earlier_break(client_before: dict, client_after: dict, sent_before: dict, sent_after: dict) -> Position | None:
    """The position where the forwarded bodies first differ when that is earlier than where
    the client's differ (a break of the rule), else None."""
    c = first_change(client_before, client_after, tools_as_set=True)
    p = first_change(sent_before, sent_after)
    if p is None:
        return None
    if c is None or p < c:
        return p
    return None
