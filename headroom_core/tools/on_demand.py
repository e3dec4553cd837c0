"""Tool definitions on demand: tools the model has not called for a while go upstream as
skeletons (:mod:`headroom_core.tools.skeleton`), and ``headroom_tool_docs``, a tool
the proxy answers itself, gives the full definition back when the model asks.

The evidence is the ledger's per-project tool usage (table ``tool_usage``, per client and
project): ``offered_since_called``, the requests that offered a tool since the model last
called it (all of them when it never did). At a session's first request (setting
``tools_on_demand``), each of the client's tools that

- has at least ``tools_on_demand_idle_requests`` such requests,
- has a skeleton (a function/custom tool: server and built-in tools have none),
- is not one of the proxy's own tools, not called in the request's history, not forced by
  ``tool_choice``, and matches no ``tools_minify_exclude`` glob,
- and whose skeleton is at least ``tools_on_demand_min_bytes`` smaller,

is sent as a skeleton, and the session also gets ``headroom_tool_docs`` (after its other proxy
tools) when there is any (and the skeletons save at least twice its own definition).

Each tool's status is fixed for the whole session (part of its tools state,
:class:`~headroom_core.cache.session_store.SessionTools`), so ``tools`` never changes
mid-session; a tool the client changes keeps its status (its skeleton follows the client's
change); tools the client adds later are decided when they first come (after every known tool
in the scope's order, so after the client's own first change), in a session that has
``headroom_tool_docs``.

Sessions of one working stretch share the cached ``tools`` prefix (the scope's tool order is
one for that reason), so the statuses are kept per scope too (table ``tool_skeleton_sets``):
while the scope's prompt cache may still be warm (its latest request within the provider's
cache lifetime, :func:`cache_lifetime_seconds`), a new session takes the statuses of the tools
the scope already decided, a skeleton the model has called since included (it calls the tool
from its skeleton or asks ``headroom_tool_docs``: a cache read and a short answer cost far less
than writing the whole cached prefix again); only a tool that ``tool_choice`` forces goes in
full. Tools newly idle join, and tools called lately go back to full, when the cache is cold.
Nothing is decided for a session whose first request is the fallback after a timeout, or whose
``tool_choice`` keeps the model from calling ``headroom_tool_docs``; a token count decides as
its request would and writes nothing.

A client that defers tools itself (Anthropic ``defer_loading`` with a tool-search tool, Codex's
``tool_search`` and deferred namespace tools; :mod:`headroom_core.wire.tool_deferral`) already
decides what the model sees of its tools: a new session of it gets no skeleton and no
``headroom_tool_docs``, and a known session decides no new tool while its client defers. A
deferred tool is never a skeleton (it has none), so it goes upstream as the client wrote it.

The answer is the tool's definition as the client sent it in the request being answered (its
``tools`` are in the request's context): nothing is stored.
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from sqlalchemy import select

from headroom_core.db.models import ToolSkeletonSet, ToolUsage
from headroom_core.db.upsert import upsert
from headroom_core.tools import order as tools_order
from headroom_core.tools.minify import ShapeOf, _container
from headroom_core.tools.skeleton import skeleton
from headroom_core.tools.units import Unit, units
from headroom_core.wire import jsonedit
from headroom_core.wire.blocks import ToolCall
from headroom_core.wire.detect import Dialect
from headroom_core.wire.dialects import dialect as wire_dialect
from headroom_core.wire.protocol import WireDialect
from headroom_core.wire.tool_deferral import client_defers, is_deferred
from headroom_core.wire.tool_defs import tool_shape

if TYPE_CHECKING:
    from headroom_core.cache.session_store import SessionTools
    from headroom_core.extensions import RequestContext
    from headroom_core.runtime import Runtime

TOOL_NAME = "headroom_tool_docs"
#: Appended to every skeleton's first sentence, so the model knows which tools were shortened.
NOTE = " [shortened: headroom_tool_docs]"
TOOL_DESCRIPTION = (
    "Get the full definition of a tool whose definition here was shortened (its description ends with "
    "[shortened: headroom_tool_docs]; only its first sentence and its parameters' names and types are shown). "
    "Call this with the tool's name before using such a tool whenever its usage details matter; the answer is "
    "the tool's complete description and input schema."
)
TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string", "description": "The name of the shortened tool."}},
    "required": ["name"],
}
#: Bytes of the ``headroom_tool_docs`` definition: skeletons that save less than twice this in
#: all are not worth offering it.
_DOCS_BYTES = len(jsonedit.dumps({"name": TOOL_NAME, "description": TOOL_DESCRIPTION, "input_schema": TOOL_SCHEMA}))


def _strip(tool: Any) -> Any:
    return {k: v for k, v in tool.items() if k != "cache_control"} if isinstance(tool, dict) else tool


def choose(
    tools: list[Any],
    idle: Mapping[str, int],
    *,
    keep: Iterable[str] = (),
    idle_requests: int,
    min_bytes: int,
    exclude: tuple[str, ...] = (),
    floor: bool = True,
    ids: list[str] | None = None,
    shape_of: ShapeOf = tool_shape,
) -> tuple[str, ...]:
    """The names of the ``tools`` (a request's tools, one per entry) to send as skeletons, in list
    order; ``ids`` their ids (:class:`~headroom_core.tools.units.Unit`; default
    :func:`~headroom_core.tools.order.unique_ids`), ``shape_of`` the dialect's
    :meth:`~headroom_core.wire.protocol.WireDialect.tool_shape`. ``idle`` maps tool names to the requests that offered them since the model last
    called them (:func:`evidence`); ``keep`` names tools never shortened (the proxy's own,
    those called in the history, one ``tool_choice`` forces). A tool qualifies with at least
    ``idle_requests`` idle requests (a tool without evidence never does), a skeleton, no
    ``exclude`` glob match (``fnmatch``, case-sensitive), a name used once in the list, and a
    skeleton at least ``min_bytes`` bytes smaller (compact JSON). With ``floor``, when the
    skeletons save less than twice the bytes of ``headroom_tool_docs``' own definition in all,
    none is chosen. Pure and deterministic."""
    keep = set(keep)
    ids = tools_order.unique_ids(tools) if ids is None else ids
    counted: dict[str, int] = {}
    for i in ids:
        counted[i.split("#", 1)[0]] = counted.get(i.split("#", 1)[0], 0) + 1
    out: list[str] = []
    saved = 0
    for tool, name in zip(tools, ids):
        if not name or "#" in name or counted.get(name, 0) > 1 or name in keep or name.startswith("type:"):
            continue
        if idle.get(name, -1) < max(idle_requests, 1) or any(fnmatch.fnmatchcase(name, p) for p in exclude):
            continue
        gain = _gain(tool, shape_of)
        if gain < max(min_bytes, 1):
            continue
        out.append(name)
        saved += gain
    return tuple(out) if saved >= 2 * _DOCS_BYTES or not floor else ()


def _gain(tool: Any, shape_of: ShapeOf = tool_shape) -> int:
    """Bytes (compact JSON) a tool's skeleton saves; 0 when it has none."""
    full = _strip(tool)
    shell = skeleton(full, NOTE, shape_of)
    return len(jsonedit.dumps(full)) - len(jsonedit.dumps(shell)) if shell is not None else 0


@dataclass(frozen=True)
class Evidence:
    """The ledger's evidence for one client and project: ``idle`` (tool name -> requests that
    offered it since the model last called it) and ``last_seen`` (naive UTC time of the latest
    request that offered any tool; None when there was none)."""

    idle: dict[str, int]
    last_seen: datetime | None


def evidence(rt: "Runtime", client: str, project: str) -> Evidence:
    """The :class:`Evidence` of ``client`` in ``project`` (table ``tool_usage``), the counts of
    every request answered so far included (the ledger writer commits them just after the rows
    the answers wait for: waited for here, at most a second). Raises SQLAlchemy errors."""
    if "ledger" in rt.__dict__:  # a proxy that has recorded requests (else nothing is pending)
        rt.ledger.flush(1.0)
    with rt.sessions() as s:
        rows = s.execute(
            select(ToolUsage.tool_name, ToolUsage.offered_since_called, ToolUsage.last_seen_at).where(
                ToolUsage.client == client, ToolUsage.project == project[:512]
            )
        ).all()
    return Evidence(
        {name: int(n or 0) for name, n, _ in rows}, max((t for _, _, t in rows if t is not None), default=None)
    )


def cache_lifetime_seconds(dialect: Dialect, body: Mapping[str, Any]) -> float:
    """How long the provider may keep a prompt-cache entry after its last use, in seconds.
    Anthropic ("Prompt caching", docs.anthropic.com/en/docs/build-with-claude/prompt-caching):
    5 minutes, or 1 hour for breakpoints marked ``"ttl": "1h"``. OpenAI ("Prompt caching",
    platform.openai.com/docs/guides/prompt-caching): cached prefixes stay active up to one hour
    of inactivity, 24 hours with ``prompt_cache_retention: "24h"``."""
    return wire_dialect(dialect).cache_lifetime_seconds(dict(body))


def _scope_set(rt: "Runtime", scope: str) -> tuple[set[str], set[str]] | None:
    with rt.sessions() as s:
        row = s.get(ToolSkeletonSet, scope)
        return None if row is None else (set(json.loads(row.skeletons or "[]")), set(json.loads(row.seen or "[]")))


def _merge_scope_set(rt: "Runtime", scope: str, decided: Iterable[str], skeletons: set[str]) -> None:
    """The scope's set with the statuses of the ``decided`` ids replaced by this decision
    (written only when it changes). Raises SQLAlchemy errors."""
    decided = set(decided)
    with rt.sessions.begin() as s:
        row = s.get(ToolSkeletonSet, scope, with_for_update=True)
        old_sk, old_seen = (
            (set(json.loads(row.skeletons or "[]")), set(json.loads(row.seen or "[]")))
            if row is not None
            else (set(), set())
        )
        sk, seen = (old_sk - decided) | (skeletons & decided), old_seen | decided
        if row is not None and (sk, seen) == (old_sk, old_seen):
            return
        now = datetime.now(timezone.utc).replace(tzinfo=None)
        upsert(
            s,
            ToolSkeletonSet,
            dict(scope=scope, skeletons=json.dumps(sorted(sk)), seen=json.dumps(sorted(seen)), updated_at=now),
            ["scope"],
        )


@dataclass(frozen=True)
class OnDemand:
    """A session's tools on demand: ``skeletons`` (ids of the client's tools sent as
    skeletons) among the ``seen`` ids decided so far, and its ``proxy_tools``
    (``headroom_tool_docs`` among them when the session sends skeletons)."""

    skeletons: tuple[str, ...]
    seen: tuple[str, ...]
    proxy_tools: tuple[str, ...]


@dataclass(frozen=True)
class _Request:
    wire: WireDialect
    body: Mapping[str, Any]
    client: str
    project: str
    scope: str
    write: bool


def _decide(rt: "Runtime", req: _Request, tools: list[Any], ids: list[str], keep: set[str], floor: bool) -> set[str]:
    """Which of ``ids`` (ids of ``tools``, the request's tools) go as skeletons: while the
    scope's prompt cache may be warm (its latest request within the provider's cache lifetime),
    the ids its set already decided keep their status, whatever the evidence says now (a
    skeleton the model has called since stays one; only a tool ``tool_choice`` forces goes in
    full), so the sessions of one working stretch send the same ``tools``; the others, and all
    of them when the cache is cold, are decided on the evidence, ``keep`` (:func:`_keep`) in
    full. The scope's set is updated (unless a dry run)."""
    s = rt.settings
    forced = req.wire.forced_tool_names(req.body)
    proxy_names = {t.name for t in rt.extensions.tools}
    ev = evidence(rt, req.client, req.project)
    prior = _scope_set(rt, req.scope)
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    warm = (
        prior is not None
        and ev.last_seen is not None
        and (now - ev.last_seen).total_seconds() <= req.wire.cache_lifetime_seconds(dict(req.body))
    )
    inherited = {i for i in ids if warm and prior is not None and i in prior[1]}
    # the scope's statuses stand while warm, a skeleton the model called since included (it can
    # call it from its skeleton, or ask headroom_tool_docs: far cheaper than writing the whole
    # cached prefix again); only a tool tool_choice forces goes in full
    never = {i for i in inherited if i in forced or i in proxy_names}
    kept = {i for i in inherited if prior is not None and i in prior[0] and i not in never}
    fresh = [(t, i) for t, i in zip(tools, ids) if i not in inherited]
    chosen = set(choose([t for t, _ in fresh], ev.idle, keep=keep, idle_requests=s.tools_on_demand_idle_requests,
                        min_bytes=s.tools_on_demand_min_bytes, exclude=s.tools_minify_exclude, floor=False,
                        ids=[i for _, i in fresh], shape_of=req.wire.tool_shape))  # fmt: skip
    out = kept | chosen
    if floor and sum(_gain(t, req.wire.tool_shape) for t, i in zip(tools, ids) if i in out) < 2 * _DOCS_BYTES:
        out = set()
    if req.write:
        _merge_scope_set(rt, req.scope, ids, out)
    return out


def for_session(
    rt: "Runtime", dialect: Dialect, body: dict[str, Any], client: str, project: str, scope: str, state: "SessionTools", known: bool,
    proxy_tools: tuple[str, ...], fast: bool, dry_run: bool,
) -> OnDemand:  # fmt: skip
    """The session's :class:`OnDemand` (setting ``tools_on_demand``; see the module docstring).

    A new session decides for its tools (:func:`_decide`: the scope's set while its cache may
    be warm, else the evidence) and gets ``headroom_tool_docs`` when any tool goes as a
    skeleton. A known session keeps every status it decided; tools it had not seen (the client
    added them) are decided the same way, if the session has ``headroom_tool_docs``. ``fast``
    (the fallback after a timeout) decides nothing new; ``dry_run`` (a token count) writes
    nothing. A client that defers tools itself (:func:`~headroom_core.wire.tool_deferral.client_defers`)
    gets nothing new decided, and a tool it defers is no skeleton. Raises SQLAlchemy errors
    (the evidence and the scope's set)."""
    wire = wire_dialect(dialect)
    tools = wire.tools_of(body)
    tools = tools if isinstance(tools, list) else []
    defers = client_defers(tools)
    # cheap exits first: most requests are known sessions whose tools did not change
    if known:
        if defers and state.skeletons:  # a tool the client defers now goes as it wrote it
            deferred = {u.id for u in units(wire, tools) if is_deferred(u.value)}
            state = replace(state, skeletons=tuple(i for i in state.skeletons if i not in deferred))
        if TOOL_NAME not in proxy_tools or fast or not state.seen or defers:
            return OnDemand(state.skeletons, state.seen, proxy_tools)
        seen = set(state.seen)
        new = [(u.value, u.id) for u in units(wire, tools) if u.id not in seen]
        if not new:
            return OnDemand(state.skeletons, state.seen, proxy_tools)
        req = _Request(wire, body, client, project, scope, not dry_run)
        add = _decide(rt, req, [t for t, _ in new], [i for _, i in new], _keep(rt, body, wire), floor=False)
        return OnDemand(
            state.skeletons + tuple(i for _, i in new if i in add), state.seen + tuple(i for _, i in new), proxy_tools
        )
    if fast or defers or not rt.settings.tools_on_demand or not tools or not wire.tool_choice_allows(body, TOOL_NAME):
        return OnDemand((), (), proxy_tools)
    us = units(wire, tools)
    ids = [u.id for u in us]
    req = _Request(wire, body, client, project, scope, not dry_run)
    chosen = _decide(rt, req, [u.value for u in us], ids, _keep(rt, body, wire), floor=TOOL_NAME not in proxy_tools)
    if not chosen:
        return OnDemand((), (), proxy_tools)
    return OnDemand(
        tuple(i for i in ids if i in chosen),
        tuple(ids),
        proxy_tools if TOOL_NAME in proxy_tools else proxy_tools + (TOOL_NAME,),
    )


def _keep(rt: "Runtime", body: Mapping[str, Any], wire: WireDialect) -> set[str]:
    """Tool names never sent as skeletons: the proxy's own tools, the tools called in the
    request's history, and a tool ``tool_choice`` forces."""
    return (
        {t.name for t in rt.extensions.tools}
        | {c.name for c in wire.tool_calls(dict(body)).values()}
        | wire.forced_tool_names(body)
    )


def skeletons(wire: WireDialect, tools: list[Unit], names: tuple[str, ...]) -> dict[int, Any]:
    """The skeletons to send, by position in ``tools`` (the request's tools, in the order they
    go upstream): each tool whose id is in ``names`` and that has a skeleton in the dialect's
    shape (``cache_control`` left out: the caller carries the client's marker)."""
    if not names:
        return {}
    wanted = set(names)
    out: dict[int, Any] = {}
    for pos, u in enumerate(tools):
        if u.id in wanted:
            shell = skeleton(_strip(u.value), NOTE, wire.tool_shape)
            if shell is not None:
                out[pos] = shell
    return out


def definition_text(tool: Any, shape_of: ShapeOf = tool_shape) -> str:
    """The full definition of a client tool as the answer's text: its name, its description
    verbatim, its input schema as compact JSON (the bytes a compact client such as Claude Code
    sent: ``JSON.stringify`` and :func:`~headroom_core.wire.jsonedit.dumps` agree; labelled with
    the keys it is under, ``input_schema``, ``parameters``, ``inputSchema.json``), and any other
    members (``strict``, …) the same way. ``shape_of``: the dialect's
    :meth:`~headroom_core.wire.protocol.WireDialect.tool_shape`."""
    found = _container(tool, shape_of)
    if found is None:
        return jsonedit.dumps(_strip(tool))
    c, shape = found
    parts = [f"Tool: {c['name']}", "Description:", str(c.get("description") or "(none)")]
    present, schema = shape.schema_of(c)
    if present:
        parts += [f"Input schema (JSON Schema, {shape.schema_label}):", jsonedit.dumps(schema)]
    key = shape.schema[0] if shape.schema else ""
    rest = {k: v for k, v in c.items() if k not in ("name", "description", key, "cache_control", "type")}
    if rest:
        parts += ["Other members:", jsonedit.dumps(rest)]
    return "\n".join(parts)


def answer(body: Mapping[str, Any] | None, call: ToolCall, dialect: Dialect = Dialect.ANTHROPIC_MESSAGES) -> str:
    """The tool result text for a ``headroom_tool_docs`` call: the full definition of the named
    tool from the tools of ``body`` (the client's request, in ``dialect``), or an error that says
    what was wrong (no ``name`` argument, no such tool)."""
    args = call.arguments
    name = args.get("name") if isinstance(args, dict) else None
    if not isinstance(name, str) or not name.strip():
        return f'{TOOL_NAME} error: the call needs a "name" argument (the name of a shortened tool).'
    wire = wire_dialect(dialect)
    for u in units(wire, wire.tools_of(body) if body is not None else None):
        if u.id == name.strip():
            return definition_text(u.value, wire.tool_shape)
    return f"{TOOL_NAME} error: this request has no tool named {name.strip()[:120]!r}."


class ToolDocsTool:
    """``headroom_tool_docs`` as a proxy tool. Never offered by itself (``offered`` is False):
    the tools step adds it to a session whose first request sends skeletons
    (:func:`for_session`), for the whole session. Answered from the request's own tools."""

    name = TOOL_NAME
    description = TOOL_DESCRIPTION
    schema = TOOL_SCHEMA

    def offered(self, rt: "Runtime", ctx: "RequestContext") -> bool:
        return False

    def answer(self, rt: "Runtime", ctx: "RequestContext | None", call: ToolCall) -> str:
        if ctx is None:
            return f"{self.name} error: the proxy lost this request's context; try again in the next turn."
        return answer(ctx.body, call, ctx.dialect)
