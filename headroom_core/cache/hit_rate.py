"""Prompt-cache hit rate from the savings ledger (the provider's own usage figures).

hit rate = cache-read tokens / all prompt tokens. Anthropic reports ``input_tokens`` without
the cached parts, so its prompt total is ``input_tokens + cache_read_input_tokens +
cache_creation_input_tokens``; OpenAI's ``prompt_tokens`` / ``input_tokens`` already include
``cached_tokens`` (and there is no cache-write figure), so its total is the input figure itself.
Only requests whose response reported usage count.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import String, case, cast, func, select
from sqlalchemy.orm import Session, sessionmaker

from headroom_core.db.models import RequestOutcome
from headroom_core.wire.dialects import SEPARATE_CACHE_DIALECTS


@dataclass(frozen=True)
class CacheUsage:
    """Summed provider usage of a group of requests (all figures in tokens).

    ``requests``: rows in the group; ``reported``: rows with usage figures; ``prompt_tokens``:
    all prompt tokens (cached or not, see the module docstring); ``first_at``/``last_at``: the
    group's first and last request (UTC).
    """

    key: str
    requests: int
    reported: int
    input_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    prompt_tokens: int
    first_at: datetime | None
    last_at: datetime | None

    @property
    def rate(self) -> float | None:
        """cache read / prompt tokens (0..1), None when no request reported usage."""
        return self.cache_read_tokens / self.prompt_tokens if self.prompt_tokens else None


def cache_hit_rate(
    sessions: sessionmaker[Session],
    session_key: str | None = None,
    *,
    by: str | None = "session",
    project: str | None = None,
    limit: int | None = None,
) -> list[CacheUsage]:
    """Cache usage per group, most recent group first.

    ``by``: ``"session"`` (session key), ``"project"``, ``"client"``, ``"model"``,
    ``"dialect"``, ``"day"``, or None for one ``"all"`` row. ``session_key`` (a full key or its
    leading hex digits) and ``project`` filter the requests. Raises ``KeyError`` for another
    ``by``.
    """
    R = RequestOutcome
    key = {
        None: None,
        "session": R.session_key,
        "project": R.project,
        "client": R.client,
        "model": R.model,
        "dialect": R.dialect,
        "day": func.substr(cast(R.created_at, String), 1, 10),
    }[by]
    inp, read, write = (
        func.coalesce(c, 0) for c in (R.usage_input_tokens, R.usage_cache_read_tokens, R.usage_cache_write_tokens)
    )
    prompt = case((R.dialect.in_(SEPARATE_CACHE_DIALECTS), inp + read + write), else_=inp)
    reported = R.usage_input_tokens.is_not(None)
    cols = [
        func.count(R.id),
        func.coalesce(func.sum(case((reported, 1), else_=0)), 0),
        func.coalesce(func.sum(inp), 0),
        func.coalesce(func.sum(read), 0),
        func.coalesce(func.sum(write), 0),
        func.coalesce(func.sum(case((reported, prompt), else_=0)), 0),
        func.min(R.created_at),
        func.max(R.created_at),
    ]
    stmt = select(*(([key] if key is not None else []) + cols)).where(R.dialect != "")
    if session_key:
        stmt = stmt.where(R.session_key.startswith(session_key))
    if project is not None:
        stmt = stmt.where(R.project == project)
    if key is not None:
        stmt = stmt.group_by(key)
    stmt = stmt.order_by(func.max(R.created_at).desc())
    if limit:
        stmt = stmt.limit(limit)
    out: list[CacheUsage] = []
    with sessions() as s:
        for row in s.execute(stmt):
            vals = list(row)
            k = str(vals.pop(0)) if key is not None else "all"
            if vals[0] == 0:
                continue
            n = [int(v or 0) for v in vals[:6]]
            out.append(CacheUsage(k, n[0], n[1], n[2], n[3], n[4], n[5], vals[6], vals[7]))
    return out
