"""The savings ledger: one funnel that records every LLM request's outcome, and its totals.

A row is built from the plan (:func:`prepare_turn`, off the event loop while the upstream
answers) and completed with the response's figures and queued (:func:`finish_turn`); the proxy
records every request through :meth:`headroom_core.turn.Turn.record`, which does both.
:func:`record` does both at once for callers outside the proxy (tests, benchmarks)."""

from __future__ import annotations

import json
from concurrent.futures import Future, InvalidStateError
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Iterable

from sqlalchemy import String, case, cast, func, select
from sqlalchemy.orm import Session, sessionmaker

from headroom_core.clients import client_name
from headroom_core.compress.result import DEFERRED_REASON
from headroom_core.db.models import RequestOutcome, ToolUsage
from headroom_core.ledger_entry import Entry
from headroom_core.ledger_writer import LedgerWriter, write_entries
from headroom_core.outcomes import LABELS as OUTCOME_LABELS
from headroom_core.outcomes import outcome_of
from headroom_core.plan_codes import Code
from headroom_core.pricing import PriceTable, RequestCost, request_cost
from headroom_core.project import CONVERSATION_PREFIX
from headroom_core.wire.blocks import Usage
from headroom_core.wire.dialects import SEPARATE_CACHE_DIALECTS
from headroom_core.wire.dialects import dialect as wire_dialect

if TYPE_CHECKING:  # the request walk is heavy to import; the ledger's readers do not need it
    from headroom_core.request_plan import RequestPlan
    from headroom_core.tools.figures import ToolsFigures


@dataclass(frozen=True)
class PreparedTurn:
    """A request's ledger row built before its response, from what the plan knows: ``entry``
    (its ``request_outcomes`` row without the response's figures; its tool counts without the
    ``called`` ones), ``offered`` (the tool names the client offered, the proxy's own left out),
    and the ``plan`` (its tools' token figures may still be being counted). :func:`finish_turn`
    adds the response and queues it. Building the row (the compression detail as JSON, the
    per-tool counts) costs ~0.3 ms for a long session's request: done this way it runs off the
    event loop while the upstream answers, not between the response's end and the client."""

    entry: Entry
    offered: tuple[str, ...]
    client: str
    plan: RequestPlan


def prepare_turn(
    plan: RequestPlan, *, user_agent: str, model: str | None = None, offered: Iterable[str] | None = None
) -> PreparedTurn:
    """The ledger row of ``plan`` but what its response says (see :class:`PreparedTurn`): the
    ``model`` and the ``offered`` tools are read from the client's body through the plan's
    dialect unless given. Raises nothing for a plan of any dialect (no dialect: no model, no
    tools)."""
    body = plan.client_body or {}
    if model is None:
        model = plan.model or str(body.get("model", ""))
    if offered is None:
        wire = wire_dialect(plan.dialect) if plan.dialect is not None else None
        offered = (n for n in wire.tool_names(body) if n not in plan.hidden_tools) if wire is not None else ()
    p = plan.pipeline
    action = {"rewrite": "compressed", "reject": "rejected"}.get(plan.action, "unchanged")
    if plan.code is Code.BYPASS:
        action = "bypass"
    elif plan.internal_error:
        action = "error"
    detail = [asdict(b) for b in p.blocks] if p else []
    client = client_name(user_agent)
    facts: dict[str, Any] = {}
    if plan.context is not None:
        facts["scope"] = plan.context.scope  # the originals' scope (a keyed hash; no credential)
    if plan.prefix is not None:
        facts["prefix"] = asdict(plan.prefix)
    if plan.late is not None:  # earlier outputs sent whole for want of time, decided again (cache/late.py)
        facts["late"] = plan.late.facts()
    if plan.notes:
        facts["notes"] = list(plan.notes)
    # replayed messages carry the savings decided in an earlier turn: they count again, each
    # block under its own kind (so the kinds add up to the totals)
    replayed: list[dict[str, Any]] = [
        {
            "kind": kind,
            "changed": True,
            "cached": True,
            "replayed": True,
            "tool_name": tool,
            "tokens_before": before,
            "tokens_after": after,
        }
        for kind, tool, before, after in (plan.live.blocks if plan.live else ())
    ]
    detail += replayed
    entry = Entry()  # one request's rows and counts
    entry.add(
        dict(
            dialect=plan.dialect.value if plan.dialect else "",
            client=client,
            project=plan.project[:512],
            model=(model or "")[:128],
            session_key=plan.session_key,
            action=action,
            reason=plan.reason[:300],
            body_bytes_before=plan.bytes_before,
            # a refused request (413) went nowhere: it saved nothing
            body_bytes_after=plan.bytes_before if plan.action == "reject" else plan.bytes_after,
            tokens_before=(p.tokens_before if p else 0) + sum(b["tokens_before"] for b in replayed),
            tokens_after=(p.tokens_after if p else 0) + sum(b["tokens_after"] for b in replayed),
            blocks_compressed=sum(1 for b in p.blocks if b.changed) if p else 0,
            tools_tokens_before=0,  # filled in once counted
            tools_tokens_after=0,
            detail=json.dumps(detail, default=str),
            outcome=outcome_of(
                plan.code, plan.reason, internal_error=plan.internal_error, rewritten=plan.action == "rewrite"
            ),
            proxy_tools_tokens=0,  # filled in once counted
            facts=json.dumps(facts) if facts else None,
            # the date, status, usage and rounds are the response's: added by finish_turn
        )
    )
    return PreparedTurn(entry, tuple(offered), client, plan)


def finish_turn(
    prepared: PreparedTurn,
    *,
    status_code: int | None,
    usage: Usage,
    rounds: int,
    called: list[str],
    writer: LedgerWriter | None,
    sessions: sessionmaker[Session] | None = None,
) -> Future | None:
    """Add the response's figures to ``prepared`` (its status, ``usage``, the follow-up
    ``rounds``, the ``called`` tool names) and queue its row for ``writer``'s thread: returns the
    future of its commit (:meth:`~headroom_core.ledger_writer.LedgerWriter.submit`; submitted
    once the plan's ``tools`` figures are counted, in the background). Without a writer the row
    is written through ``sessions`` before returning (None; raises SQLAlchemy's errors). Call
    once per prepared turn."""
    e, plan = prepared.entry, prepared.plan
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    e.rows[-1].update(
        created_at=now,
        retrieve_rounds=rounds,
        status_code=status_code,
        usage_input_tokens=usage.input_tokens,
        usage_output_tokens=usage.output_tokens,
        usage_cache_read_tokens=usage.cache_read_tokens,
        usage_cache_write_tokens=usage.cache_write_tokens,
    )
    _count_tools(e, prepared.client, plan.project, prepared.offered, called, now)
    t = plan.tools
    if t is not None and not t.counted and writer is not None:
        # the tools are still being counted (a list new to this process): the row is submitted
        # once they are, from the counting thread; the caller waits on this future
        return _submit_when_counted(writer, e, t)
    if t is not None:
        _tools_figures(e, t)  # without a writer: waits for the counting
    else:
        _settle(e.rows[-1])
    if writer is not None:
        return writer.submit(e)
    assert sessions is not None, "finish_turn needs a writer or sessions"
    write_entries(sessions, [e])
    return None


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
    writer: LedgerWriter | None = None,
) -> Future | None:
    """Write one :class:`RequestOutcome` row for ``plan`` and what the response said, and count
    the ``offered`` tool names and the ``called`` ones (the model's tool calls) per client and
    project (atomically: concurrent requests all count): :func:`prepare_turn` and
    :func:`finish_turn` at once, with ``model`` and ``offered`` as given.

    With a ``writer`` the row is queued for its background thread and this returns at once with
    the future of its commit; without one it is written before returning (None). Raises
    SQLAlchemy's errors only in the second case."""
    prepared = prepare_turn(plan, user_agent=user_agent, model=model, offered=offered)
    return finish_turn(
        prepared,
        status_code=status_code,
        usage=usage,
        rounds=rounds,
        called=list(called),
        writer=writer,
        sessions=sessions,
    )


def _tools_figures(entry: Entry, t: ToolsFigures) -> None:
    # the client's tools before and as forwarded; the proxy's own tools apart (not a growth of
    # the client's tools: issue 34, item 10)
    entry.rows[-1].update(
        tools_tokens_before=t.tokens_before, tools_tokens_after=t.tokens_client_after, proxy_tools_tokens=t.tokens_proxy
    )
    _settle(entry.rows[-1])


def settled_action(
    action: str,
    bytes_before: int,
    bytes_after: int,
    tokens_before: int,
    tokens_after: int,
    tools_before: int,
    tools_after: int,
) -> str:
    """The action of a row from its figures: a rewritten request (``action`` ``compressed``) is
    ``compressed`` only when something went smaller: the body (bytes), its tool outputs (this
    turn's and the replayed ones, in estimated tokens) or the client's tool definitions (the
    proxy's own tools are counted apart). One rewritten with nothing smaller and its body grown
    (only the proxy's tools added, an output kept whole, a memory injected) is ``unchanged``.
    Any other action stays as it is."""
    if (
        action == "compressed"
        and bytes_after >= bytes_before
        and tokens_after >= tokens_before
        and tools_after >= tools_before
    ):
        return "unchanged"
    return action


def _settle(row: dict[str, Any]) -> None:
    """The row's action and outcome from its figures, once they are all known (:func:`settled_action`)."""
    action = settled_action(row["action"], row["body_bytes_before"], row["body_bytes_after"], row["tokens_before"], row["tokens_after"],
                            row["tools_tokens_before"], row["tools_tokens_after"])  # fmt: skip
    if action != row["action"]:
        row["action"] = action
        if row.get("outcome") == "compressed":
            row["outcome"] = "unchanged"


def _submit_when_counted(writer: LedgerWriter, entry: Entry, t: ToolsFigures) -> Future:
    """Submit ``entry`` once ``t`` is counted (its figures filled in); the returned future
    resolves as :meth:`LedgerWriter.submit`'s does."""
    outer: Future = Future()

    def relay(inner: Future) -> None:
        try:
            outer.set_result(inner.result())
        except InvalidStateError:  # the waiter cancelled it
            pass

    def submit(_: Future) -> None:
        _tools_figures(entry, t)
        writer.submit(entry).add_done_callback(relay)

    t.future.add_done_callback(submit)
    return outer


def _count_tools(
    e: Entry, client: str, project: str, offered: Iterable[str], called: Iterable[str], now: datetime
) -> None:
    counts: dict[str, list[int]] = {}
    for name in offered:
        counts.setdefault(str(name)[:256], [0, 0])[0] += 1
    for name in called:
        counts.setdefault(str(name)[:256], [0, 0])[1] += 1
    e.client, e.project, e.tools, e.seen_at = client, project[:512], counts, now


def tool_usage(sessions: sessionmaker[Session], project: str | None = None) -> list[ToolUsage]:
    """Per-tool rows (offered and called counts per client and project), most called first."""
    stmt = select(ToolUsage).order_by(ToolUsage.called.desc(), ToolUsage.offered.desc(), ToolUsage.tool_name)
    if project is not None:
        stmt = stmt.where(ToolUsage.project == project)
    with sessions() as s:
        return list(s.scalars(stmt))


#: Grouping keys of :func:`totals` ("agent" is the client: the User-Agent's product name).
GROUPS = ("agent", "client", "project", "dialect", "model", "action", "day")
#: The ``project`` group of the conversations that named no project (each its own project,
#: :func:`~headroom_core.project.conversation_project`; one line of totals in reports).
NO_PROJECT = "(conversations without a project)"

# Dialects whose reported input tokens *exclude* cache reads and writes (Anthropic Messages:
# ``input_tokens`` + ``cache_read_input_tokens`` + ``cache_creation_input_tokens`` is the whole
# prompt). OpenAI's ``prompt_tokens`` / ``input_tokens`` already include ``cached_tokens``.
_SEPARATE_CACHE_DIALECTS = SEPARATE_CACHE_DIALECTS


@dataclass(frozen=True)
class Totals:
    """Ledger totals over a set of requests.

    Estimated (our token counts, cl100k_base unless configured): ``tokens_before``/``after`` of
    the tool outputs considered, ``tools_tokens_before``/``after`` of the tool definitions.
    Measured (the provider's ``usage``, summed over the requests that reported it,
    ``usage_requests``): ``usage_prompt_tokens`` is the whole prompt as billed (for Anthropic
    ``input + cache read + cache write``; for OpenAI the input figure, which includes cached
    tokens), ``usage_input_tokens`` the raw input figure, ``usage_cache_*`` the cache figures,
    ``usage_output_tokens`` the output. Bytes are request body sizes.

    Money (USD, :mod:`headroom_core.pricing`), over the ``priced_requests`` that reported usage
    for a model the price table knows: ``cost_prompt_usd`` the prompts as the provider's usage
    prices them (uncached input, cache reads and writes at their own prices),
    ``cost_output_usd`` the output, ``cost_saved_usd`` the estimated saving: each request's
    estimated tokens removed priced at that request's own average prompt rate.
    """

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
    usage_prompt_tokens: int = 0
    usage_output_tokens: int = 0
    usage_requests: int = 0
    priced_requests: int = 0
    cost_prompt_usd: float = 0.0
    cost_output_usd: float = 0.0
    cost_saved_usd: float = 0.0
    #: estimated tokens of the proxy's own tool definitions added (``headroom_retrieve``, the
    #: memory tools): not in ``tools_tokens_*`` nor in the saving
    proxy_tools_tokens: int = 0

    @property
    def tokens_saved(self) -> int:
        """Estimated tokens saved, tool outputs and tool definitions together (the proxy's own
        tools added are :attr:`proxy_tools_tokens`, apart)."""
        return self.tokens_before - self.tokens_after + self.tools_tokens_before - self.tools_tokens_after

    @property
    def saved_share(self) -> float | None:
        """Estimated saving as a share (0..1) of what was considered (tool outputs and tool
        definitions, before); None when nothing was considered."""
        considered = self.tokens_before + self.tools_tokens_before
        return self.tokens_saved / considered if considered else None

    @property
    def prompt_tokens_without_headroom(self) -> int:
        """Measured prompt tokens plus the estimated saving: what the prompts would have
        counted without the proxy (the provider never sees that version, so this adds our
        estimate to its measurement)."""
        return self.usage_prompt_tokens + self.tokens_saved if self.usage_requests else 0

    @property
    def saved_share_of_prompt(self) -> float | None:
        """The estimated saving as a share of the prompt without the proxy (measured + saved);
        None when no response reported usage."""
        whole = self.prompt_tokens_without_headroom
        return self.tokens_saved / whole if whole else None

    @property
    def cache_hit_rate(self) -> float | None:
        """Prompt-cache hit rate as the provider measured it: cache-read tokens over all prompt
        tokens (``cache_read / (input + cache_read + cache_write)`` for Anthropic; OpenAI's
        input already holds its cached tokens). None when no prompt tokens were reported."""
        return self.usage_cache_read_tokens / self.usage_prompt_tokens if self.usage_prompt_tokens else None

    @property
    def cost_usd(self) -> float:
        """What the priced requests cost (prompt and output), USD."""
        return self.cost_prompt_usd + self.cost_output_usd

    @property
    def cost_saved_share(self) -> float | None:
        """The estimated money saved as a share of the prompt cost without the proxy (paid +
        saved); None when nothing was priced."""
        whole = self.cost_prompt_usd + self.cost_saved_usd
        return self.cost_saved_usd / whole if self.priced_requests and whole else None

    def as_dict(self) -> dict[str, int | float | None]:
        """Every field and derived figure, JSON-ready (tokens and bytes as ints, shares 0..1,
        money in USD rounded to 1/10000 of a cent)."""
        d: dict[str, int | float | None] = dict(asdict(self))
        for k in ("cost_prompt_usd", "cost_output_usd", "cost_saved_usd"):
            d[k] = round(float(d[k] or 0.0), 6)
        d.update(
            tokens_saved=self.tokens_saved,
            saved_share=self.saved_share,
            prompt_tokens_without_headroom=self.prompt_tokens_without_headroom,
            saved_share_of_prompt=self.saved_share_of_prompt,
            cache_hit_rate=self.cache_hit_rate,
            cost_usd=round(self.cost_usd, 6),
            cost_saved_share=self.cost_saved_share,
        )
        return d


def _where(stmt, since: datetime | None):
    return stmt.where(RequestOutcome.created_at >= since) if since is not None else stmt


def _group_key(group_by: str | None):
    R = RequestOutcome
    return {
        None: None,
        "agent": R.client,
        "client": R.client,
        "project": case((R.project.startswith(CONVERSATION_PREFIX, autoescape=True), NO_PROJECT), else_=R.project),
        "dialect": R.dialect,
        "model": R.model,
        "action": R.action,
        "day": func.substr(cast(R.created_at, String), 1, 10),
    }[group_by]


def _row_cost(table: PriceTable, model: str, dialect: str, saved: int, inp, read, write, out) -> RequestCost | None:
    """The cost of one ledger row, or None when it reported no usage or its model has no price."""
    if inp is None and read is None:
        return None
    price = table.price(model)
    if price is None:
        return None
    return request_cost(
        price,
        separate_cache=dialect in _SEPARATE_CACHE_DIALECTS,
        input_tokens=int(inp or 0),
        cache_read=int(read or 0),
        cache_write=int(write or 0),
        output_tokens=int(out or 0),
        tokens_saved=saved,
    )


def _costs(
    sessions: sessionmaker[Session], key, since: datetime | None, table: PriceTable
) -> dict[str, tuple[int, float, float, float]]:
    """Per group: ``(priced requests, prompt USD, output USD, saved USD)``. Each request is
    priced on its own (its saving at its own average prompt rate), so this reads row by row."""
    R = RequestOutcome
    cols = [R.model, R.dialect, R.tokens_before, R.tokens_after, R.tools_tokens_before, R.tools_tokens_after,
            R.usage_input_tokens, R.usage_cache_read_tokens, R.usage_cache_write_tokens, R.usage_output_tokens]  # fmt: skip
    stmt = _where(select(*(([key] if key is not None else []) + cols)), since)
    acc: dict[str, list[float]] = {}
    with sessions() as s:
        for row in s.execute(stmt.execution_options(yield_per=1000)):
            vals = list(row)
            g = str(vals.pop(0)) if key is not None else "all"
            model, dialect, tb, ta, ttb, tta, inp, read, write, out = vals
            c = _row_cost(
                table,
                model or "",
                dialect or "",
                int(tb or 0) - int(ta or 0) + int(ttb or 0) - int(tta or 0),
                inp,
                read,
                write,
                out,
            )
            if c is None:
                continue
            a = acc.setdefault(g, [0, 0.0, 0.0, 0.0])
            a[0] += 1
            a[1] += c.prompt
            a[2] += c.output
            a[3] += c.saved
    return {g: (int(a[0]), a[1], a[2], a[3]) for g, a in acc.items()}


def totals(
    sessions: sessionmaker[Session],
    group_by: str | None = None,
    *,
    since: datetime | None = None,
    prices: PriceTable | None = None,
) -> list[tuple[str, Totals]]:
    """Totals over all requests (one group, ``"all"``), or per ``group_by`` (one of
    :data:`GROUPS`; ``day`` is the UTC date ``YYYY-MM-DD``). ``since`` (naive UTC) keeps only
    requests created at or after it; ``prices`` prices the money figures (default: the
    built-in table). Returns ``[(group, Totals)]``, largest saving first (``day``: oldest
    first). Raises :class:`KeyError` for an unknown ``group_by``."""
    R = RequestOutcome
    key = _group_key(group_by)
    separate = R.dialect.in_(_SEPARATE_CACHE_DIALECTS)
    prompt = case(
        (
            separate,
            func.coalesce(R.usage_input_tokens, 0)
            + func.coalesce(R.usage_cache_read_tokens, 0)
            + func.coalesce(R.usage_cache_write_tokens, 0),
        ),
        else_=func.coalesce(R.usage_input_tokens, 0),
    )
    reported = (R.usage_input_tokens.is_not(None)) | (R.usage_cache_read_tokens.is_not(None))
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
        func.coalesce(func.sum(case((reported, prompt), else_=0)), 0),
        func.coalesce(func.sum(R.usage_output_tokens), 0),
        func.coalesce(func.sum(case((reported, 1), else_=0)), 0),
        func.coalesce(func.sum(R.proxy_tools_tokens), 0),
    ]
    stmt = _where(select(*(([key] if key is not None else []) + cols)), since)
    if key is not None:
        stmt = stmt.group_by(key)
    money = _costs(sessions, key, since, prices or PriceTable())
    out: list[tuple[str, Totals]] = []
    with sessions() as s:
        for row in s.execute(stmt):
            vals = list(row)
            g = str(vals.pop(0)) if key is not None else "all"
            priced, prompt_usd, output_usd, saved_usd = money.get(g, (0, 0.0, 0.0, 0.0))
            proxy_tools = int(vals.pop() or 0)
            summed = Totals(*[int(v or 0) for v in vals])  # the columns of `cols`, in order
            out.append(
                (
                    g,
                    replace(
                        summed,
                        priced_requests=priced,
                        cost_prompt_usd=prompt_usd,
                        cost_output_usd=output_usd,
                        cost_saved_usd=saved_usd,
                        proxy_tools_tokens=proxy_tools,
                    ),
                )
            )
    if group_by == "day":
        out.sort(key=lambda t: t[0])
    else:
        out.sort(key=lambda t: (-t[1].tokens_saved, t[0]))
    return out


def _outcome_column():
    """The row's outcome class (:mod:`headroom_core.outcomes`); rows written before the column
    existed get theirs from ``action`` (their finer reasons are not told apart)."""
    R = RequestOutcome
    legacy = case(
        (R.action == "bypass", "bypass"), (R.action == "error", "internal_error"), (R.action == "rejected", "too_large"),
        (R.action == "compressed", "compressed"), else_="unchanged",
    )  # fmt: skip
    return func.coalesce(R.outcome, legacy)


def uncompressed(sessions: sessionmaker[Session], *, since: datetime | None = None) -> list[tuple[str, int]]:
    """How many requests went out uncompressed (or were refused, or never reached the upstream)
    and why: ``[(outcome class, requests)]`` for every class of
    :data:`headroom_core.outcomes.LABELS` with at least one request, in that order (timeout,
    fallback, internal error, not parsed, too large, bypass, compression off, signed, not
    ready, unreachable). Requests the proxy planned (compressed, or nothing worth compressing)
    are not counted. Raises SQLAlchemy's errors."""
    R = RequestOutcome
    col = _outcome_column()
    stmt = _where(select(col, func.count(R.id)), since).group_by(col)
    with sessions() as s:
        got = {str(k): int(n) for k, n in s.execute(stmt)}
    return [(k, got[k]) for k in OUTCOME_LABELS if got.get(k)]


def late_totals(sessions: sessionmaker[Session], *, since: datetime | None = None) -> dict[str, int]:
    """Late compressions (:mod:`headroom_core.cache.late`), from the rows' ``facts["late"]``:
    ``requests`` that decided earlier outputs again, ``outputs`` compressed late and ``kept``
    whole (it did not pay), their estimated ``tokens_before`` and ``tokens_after``. Raises
    SQLAlchemy's errors."""
    R = RequestOutcome
    out = dict(requests=0, outputs=0, kept=0, tokens_before=0, tokens_after=0)
    stmt = _where(select(R.facts).where(R.facts.like('%"late"%')), since)
    with sessions() as s:
        for (facts,) in s.execute(stmt):
            try:
                late = json.loads(facts).get("late")
            except (ValueError, AttributeError):
                continue
            if not isinstance(late, dict):
                continue
            out["requests"] += 1
            for k in ("outputs", "kept", "tokens_before", "tokens_after"):
                out[k] += int(late.get(k) or 0)
    return out


#: The pseudo-kind under which tool definitions (the ``tools`` list) are counted.
TOOL_DEFINITIONS = "tool definitions"
#: The kind label of tool outputs left alone because their tool is excluded.
EXCLUDED = "excluded"
#: Labels of tool outputs the proxy kept as they are before classifying them (no content kind),
#: by the pipeline's reason; any other such reason is :data:`KEPT_OTHER`.
KEPT_LABELS = {
    "tool excluded": EXCLUDED, "latest view of a file": "latest file read (kept)", "too large to compress in time": "too large (kept)",
    DEFERRED_REASON: "no time: sent whole (decided later)",
}  # fmt: skip
KEPT_OTHER = "kept as is"


def kind_label(block: dict) -> str:
    """The kind a ledger ``detail`` entry is counted under: its content kind, else a label for
    why the proxy kept it without classifying it (:data:`KEPT_LABELS`). Never "unknown"."""
    kind = str(block.get("kind") or "")
    return kind or KEPT_LABELS.get(str(block.get("reason") or ""), KEPT_OTHER)


@dataclass(frozen=True)
class KindTotals:
    """Per content kind (``json``, ``logs``, ``code``, … as the content router named it, plus
    :data:`TOOL_DEFINITIONS`): ``blocks`` considered, ``compressed`` of them changed,
    ``reused`` taken from the decision cache or replayed from an earlier turn, estimated tokens
    before/after (whole tokens), and ``cost_saved_usd``: their saving priced at each request's
    own average prompt rate (as :attr:`Totals.cost_saved_usd`)."""

    blocks: int
    compressed: int
    reused: int
    tokens_before: int
    tokens_after: int
    cost_saved_usd: float = 0.0

    @property
    def tokens_saved(self) -> int:
        return self.tokens_before - self.tokens_after

    @property
    def saved_share(self) -> float | None:
        return self.tokens_saved / self.tokens_before if self.tokens_before else None

    def as_dict(self) -> dict[str, int | float | None]:
        d: dict[str, int | float | None] = dict(asdict(self))
        d.update(
            tokens_saved=self.tokens_saved, saved_share=self.saved_share, cost_saved_usd=round(self.cost_saved_usd, 6)
        )
        return d


def kind_totals(
    sessions: sessionmaker[Session], *, since: datetime | None = None, prices: PriceTable | None = None
) -> list[tuple[str, KindTotals]]:
    """Totals per content kind, read from each request's ``detail`` JSON (one object per tool
    output considered: ``kind``, ``changed``, ``cached``, ``tokens_before``, ``tokens_after``;
    blocks of replayed messages carry ``replayed``), plus the tool definitions from the
    ``tools_tokens_*`` columns. Blocks with no content kind are labelled by :func:`kind_label`.
    Rows whose ``detail`` is not the expected JSON are skipped. Returns
    ``[(kind, KindTotals)]``, largest saving first."""
    R = RequestOutcome
    table = prices or PriceTable()
    acc: dict[str, list] = {}
    tools: list = [0, 0, 0, 0, 0, 0.0]
    stmt = _where(select(R.detail, R.tools_tokens_before, R.tools_tokens_after, R.model, R.dialect, R.tokens_before, R.tokens_after,
                         R.usage_input_tokens, R.usage_cache_read_tokens, R.usage_cache_write_tokens, R.usage_output_tokens), since)  # fmt: skip
    with sessions() as s:
        for detail, tb, ta, model, dialect, ob, oa, inp, read, write, out in s.execute(
            stmt.execution_options(yield_per=500)
        ):
            unit = _row_cost(table, model or "", dialect or "", 1, inp, read, write, out)  # one token saved
            rate = unit.saved if unit is not None else 0.0  # USD per token: the request's average prompt rate
            if tb or ta:  # tools the proxy added to a request without any count (negative saving)
                tools[0] += 1
                tools[1] += 1 if (ta or 0) < (tb or 0) else 0
                tools[3] += tb or 0
                tools[4] += ta or 0
                tools[5] += ((tb or 0) - (ta or 0)) * rate
            try:
                blocks = json.loads(detail) if detail else []
            except ValueError:
                continue
            if not isinstance(blocks, list):
                continue
            for b in blocks:
                if not isinstance(b, dict):
                    continue
                a = acc.setdefault(kind_label(b), [0, 0, 0, 0, 0, 0.0])
                before, after = int(b.get("tokens_before") or 0), int(b.get("tokens_after") or 0)
                a[0] += 1
                a[1] += 1 if b.get("changed") else 0
                a[2] += 1 if b.get("cached") else 0
                a[3] += before
                a[4] += after
                a[5] += (before - after) * rate
    if tools[0]:
        acc[TOOL_DEFINITIONS] = tools
    out_rows = [(k, KindTotals(*v)) for k, v in acc.items()]
    out_rows.sort(key=lambda t: (-t[1].tokens_saved, t[0]))
    return out_rows


def snapshot(
    sessions: sessionmaker[Session], *, since: datetime | None = None, prices: PriceTable | None = None
) -> dict:
    """The whole ledger as one JSON-ready dict (what ``/stats`` serves and ``headroom stats
    --json`` prints)::

        {"totals": {...Totals.as_dict()},
         "by": {"agent": [{"key": "claude-cli", ...Totals.as_dict()}, ...],
                "project": [...], "day": [...], "dialect": [...], "model": [...],
                "kind": [{"key": "json", ...KindTotals.as_dict()}, ...]},
         "uncompressed": [{"key": "timeout", "label": "compression timed out", "requests": 3}, ...],
         "notes": {...}}
    """
    table = prices or PriceTable()
    by: dict[str, list[dict]] = {}
    for g in ("agent", "project", "day", "dialect", "model"):
        by[g] = [{"key": k, **t.as_dict()} for k, t in totals(sessions, g, since=since, prices=table)]
    by["kind"] = [{"key": k, **t.as_dict()} for k, t in kind_totals(sessions, since=since, prices=table)]
    whole = totals(sessions, None, since=since, prices=table)
    return {
        "totals": whole[0][1].as_dict() if whole else None,
        "by": by,
        "uncompressed": [
            {"key": k, "label": OUTCOME_LABELS[k], "requests": n} for k, n in uncompressed(sessions, since=since)
        ],
        "late": late_totals(sessions, since=since),
        "notes": {
            "estimated": "tokens_before/after, tools_tokens_*, tokens_saved: our counts (cl100k_base unless configured) of what was considered",
            "measured": "usage_*: the provider's own figures from the responses; usage_prompt_tokens is the whole prompt as billed",
            "cache_hit_rate": "usage_cache_read_tokens / usage_prompt_tokens",
            "proxy_tools_tokens": "our count of the proxy's own tool definitions added to requests (headroom_retrieve, memory tools), "
            "for retrieval; not in tools_tokens_* nor in tokens_saved",
            "uncompressed": "requests that went out uncompressed (or were refused, or never reached the upstream), per reason",
            "late": "earlier tool outputs a compression timeout had sent whole, decided again in a later turn: compressed where "
            "the cost model said the saving pays for the cache write it costs (outputs), else kept whole for the session (kept)",
            "money": "USD from the price table (headroom_core/pricing.py, setting 'prices'): cost_* prices each request's usage "
            "(Anthropic cache write 1.25x, read 0.1x of input; OpenAI cached input at its model's price); cost_saved_usd is an "
            "estimate: each request's estimated tokens removed at that request's own average prompt rate; priced_requests "
            "counts the requests with usage and a known model",
        },
    }
