"""The savings ledger: one funnel that records every LLM request's outcome, and its totals."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime, timezone

from sqlalchemy import String, case, cast, func, select
from sqlalchemy.orm import Session, sessionmaker

from headroom_core.clients import client_name
from headroom_core.db.models import RequestOutcome, ToolUsage
from headroom_core.request_plan import RequestPlan
from headroom_core.wire.blocks import Usage


def record(
    sessions: sessionmaker[Session],
    plan: RequestPlan,
    *,
    user_agent: str,
    model: str,
    status_code: int | None,
    usage: Usage,
    rounds: int,
    offered: list[str] = (),  # type: ignore[assignment]
    called: list[str] = (),  # type: ignore[assignment]
) -> None:
    """Write one :class:`RequestOutcome` row for ``plan`` and what the response said, and count
    the ``offered`` tool names and the ``called`` ones (the model's tool calls) per client and
    project."""
    p = plan.pipeline
    action = {"rewrite": "compressed", "reject": "rejected"}.get(plan.action, "unchanged")
    if plan.reason == "bypass header":
        action = "bypass"
    elif plan.reason.startswith("internal error"):
        action = "error"
    detail = [asdict(b) for b in p.blocks] if p else []
    t = plan.tools
    client = client_name(user_agent)
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    with sessions.begin() as s:
        _count_tools(s, client, plan.project, offered, called, now)
        s.add(
            RequestOutcome(
                created_at=now,
                dialect=plan.dialect.value if plan.dialect else "",
                client=client,
                project=plan.project[:512],
                model=(model or "")[:128],
                session_key=plan.session_key,
                action=action,
                reason=plan.reason[:300],
                body_bytes_before=plan.bytes_before,
                body_bytes_after=plan.bytes_after,
                tokens_before=p.tokens_before if p else 0,
                tokens_after=p.tokens_after if p else 0,
                blocks_compressed=sum(1 for b in p.blocks if b.changed) if p else 0,
                tools_tokens_before=t.tokens_before if t else 0,
                tools_tokens_after=t.tokens_after if t else 0,
                retrieve_rounds=rounds,
                status_code=status_code,
                usage_input_tokens=usage.input_tokens,
                usage_output_tokens=usage.output_tokens,
                usage_cache_read_tokens=usage.cache_read_tokens,
                usage_cache_write_tokens=usage.cache_write_tokens,
                detail=json.dumps(detail, default=str),
            )
        )


def _count_tools(s: Session, client: str, project: str, offered: list[str], called: list[str], now: datetime) -> None:
    counts: dict[str, list[int]] = {}
    for name in offered:
        counts.setdefault(name, [0, 0])[0] += 1
    for name in called:
        counts.setdefault(name, [0, 0])[1] += 1
    if not counts:
        return
    existing = {
        r.tool_name: r
        for r in s.scalars(select(ToolUsage).where(ToolUsage.client == client, ToolUsage.project == project[:512], ToolUsage.tool_name.in_(list(counts))))
    }
    for name, (o, c) in counts.items():
        row = existing.get(name)
        if row is None:
            s.add(ToolUsage(client=client, project=project[:512], tool_name=name[:256], offered=o, called=c, last_seen_at=now))
        else:
            row.offered += o
            row.called += c
            row.last_seen_at = now


def tool_usage(sessions: sessionmaker[Session], project: str | None = None) -> list[ToolUsage]:
    """Per-tool rows (offered and called counts per client and project), most called first."""
    stmt = select(ToolUsage).order_by(ToolUsage.called.desc(), ToolUsage.offered.desc(), ToolUsage.tool_name)
    if project is not None:
        stmt = stmt.where(ToolUsage.project == project)
    with sessions() as s:
        return list(s.scalars(stmt))


@dataclass(frozen=True)
class Totals:
    """Ledger totals: request counts, estimated tokens of considered blocks (before/after), body
    bytes, and the provider-reported usage sums (tokens)."""

    requests: int
    compressed: int
    tokens_before: int
    tokens_after: int
    tools_tokens_before: int
    tools_tokens_after: int
    bytes_before: int
    bytes_after: int
    usage_input_tokens: int
    usage_cache_read_tokens: int
    usage_cache_write_tokens: int
    retrieve_rounds: int

    @property
    def tokens_saved(self) -> int:
        """Estimated tokens saved, tool outputs and tool definitions together."""
        return self.tokens_before - self.tokens_after + self.tools_tokens_before - self.tools_tokens_after


def totals(sessions: sessionmaker[Session], group_by: str | None = None) -> list[tuple[str, Totals]]:
    """Totals over all requests, or per ``group_by`` column (``client``, ``dialect``, ``model``,
    ``action``, ``day``). Returns ``[(group, Totals)]``, largest saving first."""
    R = RequestOutcome
    key = {
        None: None,
        "client": R.client,
        "project": R.project,
        "dialect": R.dialect,
        "model": R.model,
        "action": R.action,
        "day": func.substr(cast(R.created_at, String), 1, 10),
    }[group_by]
    cols = [
        func.count(R.id),
        func.coalesce(func.sum(case((R.action == "compressed", 1), else_=0)), 0),
        func.coalesce(func.sum(R.tokens_before), 0),
        func.coalesce(func.sum(R.tokens_after), 0),
        func.coalesce(func.sum(R.tools_tokens_before), 0),
        func.coalesce(func.sum(R.tools_tokens_after), 0),
        func.coalesce(func.sum(R.body_bytes_before), 0),
        func.coalesce(func.sum(R.body_bytes_after), 0),
        func.coalesce(func.sum(R.usage_input_tokens), 0),
        func.coalesce(func.sum(R.usage_cache_read_tokens), 0),
        func.coalesce(func.sum(R.usage_cache_write_tokens), 0),
        func.coalesce(func.sum(R.retrieve_rounds), 0),
    ]
    stmt = select(*(([key] if key is not None else []) + cols))
    if key is not None:
        stmt = stmt.group_by(key)
    out: list[tuple[str, Totals]] = []
    with sessions() as s:
        for row in s.execute(stmt):
            vals = list(row)
            g = str(vals.pop(0)) if key is not None else "all"
            out.append((g, Totals(*[int(v or 0) for v in vals])))
    out.sort(key=lambda t: (-t[1].tokens_saved, t[0]))
    return out
