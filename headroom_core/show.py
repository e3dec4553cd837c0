"""What the proxy did to one recorded request, from what is stored: ``headroom show`` and the
page's ``/request`` view (issue 34).

Read, never written: the ledger row (its per-block ``detail`` JSON and ``facts``), the
session's forwarded messages (:class:`~headroom_core.cache.session_store.SessionStore`: the text
each compressed tool output went upstream as), the originals store (the text before, for an
output whose original was offloaded; :class:`~headroom_core.ccr.store.OriginalsStore`) and the
previous request of the same session (the system prompt's hash). A request is named by its
ledger row id, a prefix of its entry id (hex), or a prefix of its session key (that session's
latest request); by default the latest request.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from headroom_core.db.models import RequestOutcome
from headroom_core.db.sealed import Sealer
from headroom_core.ledger import kind_label
from headroom_core.outcomes import label as outcome_label
from headroom_core.wire import jsonedit

#: Characters of a before/after text kept in a report (a text longer is cut, and says so).
TEXT_LIMIT = 200_000


def find(sessions: sessionmaker[Session], ref: str | None = None) -> RequestOutcome | None:
    """The ledger row ``ref`` names (see the module docstring), or None. Raises SQLAlchemy's
    errors."""
    R = RequestOutcome
    latest = select(R).order_by(R.id.desc()).limit(1)
    with sessions() as s:
        if not ref:
            return s.scalars(latest).first()
        ref = ref.strip().lower()
        if ref.isdigit():
            row = s.get(R, int(ref))
            if row is not None:
                return row
        if all(c in "0123456789abcdef" for c in ref):
            row = s.scalars(latest.where(R.entry_id.startswith(ref, autoescape=True))).first()
            if row is None:
                row = s.scalars(latest.where(R.session_key.startswith(ref, autoescape=True))).first()
            return row
    return None


def _cut(text: str | None) -> tuple[str | None, bool]:
    if text is None or len(text) <= TEXT_LIMIT:
        return text, False
    return text[:TEXT_LIMIT], True


def _blocks(detail: str) -> list[dict[str, Any]]:
    try:
        got = json.loads(detail) if detail else []
    except ValueError:
        return []
    return [b for b in got if isinstance(b, dict)] if isinstance(got, list) else []


def _decision(b: dict[str, Any]) -> str:
    if b.get("replayed"):
        return "replayed"
    if b.get("changed"):
        return "compressed"
    return "kept"


def _after_texts(
    row: RequestOutcome, blocks: list[dict[str, Any]], sealer: Sealer | None, sessions: sessionmaker[Session]
) -> dict[int, str]:
    """Per block index: the text it went upstream as, read from the session's stored messages
    (only where the stored message still holds that block: same kind, tool and token figures)."""
    if sealer is None:
        return {}
    from headroom_core.cache.session_store import SessionStore

    wanted = [
        (i, b)
        for i, b in enumerate(blocks)
        if b.get("changed") and not b.get("replayed") and isinstance(b.get("path"), list) and len(b["path"]) > 2
    ]
    if not wanted:
        return {}
    rec = SessionStore(sessions, sealer).load(row.session_key)
    by_pos = {e.position: e for e in rec.messages}
    out: dict[int, str] = {}
    for i, b in wanted:
        pos = b["path"][1]
        e = by_pos.get(pos) if isinstance(pos, int) else None
        if e is None or (
            b.get("kind", ""),
            b.get("tool_name", ""),
            b.get("tokens_before"),
            b.get("tokens_after"),
        ) not in [(k, t, x, y) for k, t, x, y in e.blocks]:
            continue  # the session moved on (its history was edited): this message is another now
        try:
            v = jsonedit.value_at(json.loads(e.sent_text), b["path"][2:])
        except ValueError:
            continue
        if isinstance(v, str):
            out[i] = v
    return out


def report(
    sessions: sessionmaker[Session], row: RequestOutcome, sealer: Sealer | None = None, originals: Any = None
) -> dict[str, Any]:
    """The report of ``row`` as a JSON-ready dict::

        {"id", "entry_id", "at", "agent", "model", "dialect", "project", "session", "status",
         "action", "outcome", "outcome_label", "reason", "bytes": {"before", "after"},
         "tokens": {"before", "after"}, "tools": {"before", "after", "proxy"},
         "usage": {"input", "output", "cache_read", "cache_write"},
         "blocks": [{"message", "path", "tool", "kind", "decision", "reason", "strategy",
                     "tokens_before", "tokens_after", "cached", "keys", "before", "after",
                     "before_cut", "after_cut"}, ...],
         "replayed": {"blocks", "tokens_before", "tokens_after"},
         "prefix": {...TurnPrefix fields, "system_same", "previous_id"} or None}

    ``before`` is the output's original when it was offloaded and is still stored (else None:
    a lossless change stores none), ``after`` the text sent, read from the session's stored
    messages (None once the session's history moved on); ``sealer`` opens both (None: sizes
    only). ``originals`` is an :class:`~headroom_core.ccr.store.OriginalsStore` (reading one
    refreshes its time to live, as a retrieval does)."""
    R = RequestOutcome
    blocks = _blocks(row.detail)
    facts: dict[str, Any] = {}
    try:
        facts = json.loads(row.facts) if row.facts else {}
    except ValueError:
        facts = {}
    after = _after_texts(row, blocks, sealer, sessions)
    scope = str(facts.get("scope") or "")
    shown: list[dict[str, Any]] = []
    replayed = {"blocks": 0, "tokens_before": 0, "tokens_after": 0}
    for i, b in enumerate(blocks):
        if b.get("replayed"):
            replayed["blocks"] += 1
            replayed["tokens_before"] += int(b.get("tokens_before") or 0)
            replayed["tokens_after"] += int(b.get("tokens_after") or 0)
        keys = [str(k) for k in b.get("offload_keys") or []]
        before = None
        if keys and originals is not None and sealer is not None and b.get("changed"):
            before = originals.get(keys[0], scope).text
        got_path = b.get("path")
        path: list[Any] = got_path if isinstance(got_path, list) else []
        b_text, b_cut = _cut(before)
        a_text, a_cut = _cut(after.get(i))
        shown.append(
            dict(
                message=path[1] if len(path) > 1 and isinstance(path[1], int) else None,
                path="/".join(str(p) for p in path),
                tool=str(b.get("tool_name") or ""),
                kind=kind_label(b),
                decision=_decision(b),
                reason=str(b.get("reason") or ("replayed from an earlier turn" if b.get("replayed") else "")),
                strategy=str(b.get("strategy") or ""),
                tokens_before=int(b.get("tokens_before") or 0),
                tokens_after=int(b.get("tokens_after") or 0),
                cached=bool(b.get("cached")),
                keys=keys,
                before=b_text,
                after=a_text,
                before_cut=b_cut,
                after_cut=a_cut,
            )
        )
    prefix = facts.get("prefix") if isinstance(facts.get("prefix"), dict) else None
    if prefix is not None:
        with sessions() as s:
            prev = s.scalars(
                select(R).where(R.session_key == row.session_key, R.id < row.id).order_by(R.id.desc()).limit(1)
            ).first()
        prev_facts: dict[str, Any] = {}
        if prev is not None and prev.facts:
            try:
                prev_facts = json.loads(prev.facts)
            except ValueError:
                prev_facts = {}
        prev_prefix = prev_facts.get("prefix") if isinstance(prev_facts.get("prefix"), dict) else None
        prefix = dict(prefix, previous_id=prev.id if prev is not None else None,
                      system_same=None if prev_prefix is None or not prefix.get("known") else prev_prefix.get("system_hash") == prefix.get("system_hash"))  # fmt: skip
    return {
        "id": row.id,
        "entry_id": row.entry_id,
        "at": row.created_at.isoformat(sep=" ", timespec="seconds") if row.created_at else None,
        "agent": row.client,
        "model": row.model,
        "dialect": row.dialect,
        "project": row.project,
        "session": row.session_key,
        "status": row.status_code,
        "action": row.action,
        "outcome": row.outcome,
        "outcome_label": outcome_label(row.outcome) if row.outcome else None,
        "reason": row.reason,
        "bytes": {"before": row.body_bytes_before, "after": row.body_bytes_after},
        "tokens": {"before": row.tokens_before, "after": row.tokens_after},
        "tools": {
            "before": row.tools_tokens_before,
            "after": row.tools_tokens_after,
            "proxy": row.proxy_tools_tokens or 0,
        },
        "usage": {
            "input": row.usage_input_tokens,
            "output": row.usage_output_tokens,
            "cache_read": row.usage_cache_read_tokens,
            "cache_write": row.usage_cache_write_tokens,
        },
        "blocks": shown,
        "replayed": replayed,
        "prefix": prefix,
    }


def request_report(
    sessions: sessionmaker[Session], ref: str | None = None, sealer: Sealer | None = None, originals: Any = None
) -> dict[str, Any] | None:
    """:func:`report` of the request ``ref`` names (:func:`find`), or None when none does."""
    row = find(sessions, ref)
    return None if row is None else report(sessions, row, sealer, originals)
