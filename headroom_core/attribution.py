"""Which content kind the savings of replayed messages belong to, for the savings ledger.

A message the proxy changed in an earlier turn is sent again, byte for byte, in every later
turn of the session (the frozen prefix), and its saving counts again in each request. The plan
knows how many tokens the replayed messages weigh, not what kind of content they hold; the
decision that changed each of their tool outputs does (``compression_decisions``, by content
hash). This module finds those decisions, so the ledger counts a reused block under its own
kind and the per-kind figures add up to the totals.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from headroom_core.cache.decisions import content_hash
from headroom_core.db.models import CompressionDecision
from headroom_core.wire.blocks import ToolOutput
from headroom_core.wire.jsonedit import dumps

#: Most content hashes looked up in one ``IN`` query (SQLite's default variable limit is 32766).
_CHUNK = 500


def replayed_blocks(s: Session, outputs: Iterable[ToolOutput], replay: Sequence[tuple[int, str]]) -> list[dict[str, Any]]:
    """Ledger ``detail`` entries for the tool outputs inside replayed messages.

    ``outputs`` are the tool outputs of the client's request (``RequestContext.tool_outputs``),
    ``replay`` the ``(message index, forwarded JSON text)`` pairs the plan sent again
    (``LiveZone.replay``). An output counts when a decision that changed its exact text exists
    and the replayed text holds that decision's result (so an output forwarded unchanged in
    its turn is not counted, whatever was decided for equal text elsewhere). Each entry:
    ``{"kind", "changed": True, "cached": True, "replayed": True, "tool_name",
    "tokens_before", "tokens_after"}`` (estimated tokens from the decision).
    """
    sent = dict(replay)
    wanted: dict[str, list[ToolOutput]] = {}
    for o in outputs:
        if o.message_index in sent:
            wanted.setdefault(content_hash("tool_output", o.text), []).append(o)
    if not wanted:
        return []
    found: dict[str, CompressionDecision] = {}
    keys = list(wanted)
    for i in range(0, len(keys), _CHUNK):
        stmt = select(CompressionDecision).where(CompressionDecision.content_hash.in_(keys[i : i + _CHUNK]), CompressionDecision.changed.is_(True))
        found.update((d.content_hash, d) for d in s.scalars(stmt))
    out: list[dict[str, Any]] = []
    for h, outs in wanted.items():
        d = found.get(h)
        if d is None:
            continue
        encoded = dumps(d.result_text)
        for o in outs:
            if encoded in sent[o.message_index]:
                out.append(
                    {
                        "kind": d.kind,
                        "changed": True,
                        "cached": True,
                        "replayed": True,
                        "tool_name": o.tool_name,
                        "tokens_before": d.tokens_before,
                        "tokens_after": d.tokens_after,
                    }
                )
    return out
