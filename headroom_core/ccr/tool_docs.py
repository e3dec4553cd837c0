"""Tool definitions on demand: tools the model has not called for a while go upstream as
skeletons (:mod:`headroom_core.compress.tool_skeleton`), and ``headroom_tool_docs``, a tool
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

is a skeleton for the whole session; when there is any, the session also gets
``headroom_tool_docs`` (after its other proxy tools). The set is part of the session's tools
state (:class:`~headroom_core.cache.session_store.SessionTools`), so ``tools`` never changes
mid-session: tools the client adds later go in full, and a tool the client changes keeps its
place in the set (its skeleton follows the client's change). Nothing is decided for a session
whose first request is the fallback after a timeout, or whose ``tool_choice`` keeps the model
from calling ``headroom_tool_docs``.

The answer is the tool's definition as the client sent it in the request being answered (its
``tools`` are in the request's context): nothing is stored.
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from sqlalchemy import select

from headroom_core.cache import tools_order
from headroom_core.compress.tool_defs import _container
from headroom_core.compress.tool_skeleton import skeleton
from headroom_core.db.models import ToolUsage
from headroom_core.wire import jsonedit
from headroom_core.wire.blocks import ToolCall
from headroom_core.wire.calls import tool_calls_in_request
from headroom_core.wire.detect import Dialect
from headroom_core.wire.dialects import module_for

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
) -> tuple[str, ...]:
    """The names of the ``tools`` (a request's ``tools`` list) to send as skeletons, in list
    order. ``idle`` maps tool names to the requests that offered them since the model last
    called them (:func:`idle_counts`); ``keep`` names tools never shortened (the proxy's own,
    those called in the history, one ``tool_choice`` forces). A tool qualifies with at least
    ``idle_requests`` idle requests (a tool without evidence never does), a skeleton, no
    ``exclude`` glob match (``fnmatch``, case-sensitive), a name used once in the list, and a
    skeleton at least ``min_bytes`` bytes smaller (compact JSON). When the skeletons save less
    than twice the bytes of ``headroom_tool_docs``' own definition in all, none is chosen.
    Pure and deterministic."""
    keep = set(keep)
    ids = tools_order.unique_ids(tools)
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
        full = _strip(tool)
        shell = skeleton(full, NOTE)
        if shell is None:
            continue
        gain = len(jsonedit.dumps(full)) - len(jsonedit.dumps(shell))
        if gain < max(min_bytes, 1):
            continue
        out.append(name)
        saved += gain
    return tuple(out) if saved >= 2 * _DOCS_BYTES else ()


def idle_counts(rt: "Runtime", client: str, project: str) -> dict[str, int]:
    """Per tool name: the requests of ``client`` in ``project`` that offered the tool since the
    model last called it (the ledger's ``tool_usage.offered_since_called``). Raises SQLAlchemy
    errors."""
    with rt.sessions() as s:
        rows = s.execute(select(ToolUsage.tool_name, ToolUsage.offered_since_called).where(ToolUsage.client == client, ToolUsage.project == project[:512]))
        return {name: int(n or 0) for name, n in rows}


def _forced(body: Mapping[str, Any]) -> set[str]:
    """Tool names ``tool_choice`` names (any dialect's shape)."""
    tc = body.get("tool_choice")
    out: set[str] = set()
    if isinstance(tc, dict):
        for holder in (tc, tc.get("function")):
            if isinstance(holder, dict) and isinstance(holder.get("name"), str):
                out.add(holder["name"])
    return out


@dataclass(frozen=True)
class OnDemand:
    """A session's tools on demand: ``skeletons`` (names of the client's tools sent as
    skeletons) and its ``proxy_tools`` (``headroom_tool_docs`` among them when there are any)."""

    skeletons: tuple[str, ...]
    proxy_tools: tuple[str, ...]


def for_session(
    rt: "Runtime", dialect: Dialect, body: dict[str, Any], client: str, project: str, state: "SessionTools", known: bool, proxy_tools: tuple[str, ...], fast: bool
) -> OnDemand:
    """The session's :class:`OnDemand`: a known session keeps what its first request decided
    (``state``); a new one decides now (see the module docstring), unless ``fast`` (the
    fallback decides nothing new) or the setting is off. ``proxy_tools`` are the proxy tools
    decided so far. Raises SQLAlchemy errors (reading the evidence)."""
    if known:
        return OnDemand(state.skeletons, proxy_tools)
    s = rt.settings
    tools = body.get("tools")
    if fast or not s.tools_on_demand or not isinstance(tools, list) or not tools:
        return OnDemand((), proxy_tools)
    if not module_for(dialect).tool_choice_allows(body, TOOL_NAME):
        return OnDemand((), proxy_tools)
    own = {t.name for t in rt.extensions.tools}
    called = {c.name for c in tool_calls_in_request(body, dialect).values()}
    chosen = choose(
        tools,
        idle_counts(rt, client, project),
        keep=own | called | _forced(body),
        idle_requests=s.tools_on_demand_idle_requests,
        min_bytes=s.tools_on_demand_min_bytes,
        exclude=s.tools_minify_exclude,
    )
    if not chosen:
        return OnDemand((), proxy_tools)
    return OnDemand(chosen, proxy_tools if TOOL_NAME in proxy_tools else proxy_tools + (TOOL_NAME,))


def skeletons_by_position(client: list[Any], order: list[int], names: tuple[str, ...]) -> dict[int, Any]:
    """The skeletons to send, by position in ``order`` (indexes of ``client``, the request's
    tools, in the order they go upstream): each tool whose id is in ``names`` and that has a
    skeleton (``cache_control`` left out: the caller carries the client's marker)."""
    if not names:
        return {}
    wanted = set(names)
    ids = tools_order.unique_ids(client)
    out: dict[int, Any] = {}
    for pos, n in enumerate(order):
        if ids[n] in wanted:
            shell = skeleton(_strip(client[n]), NOTE)
            if shell is not None:
                out[pos] = shell
    return out


def definition_text(tool: Any) -> str:
    """The full definition of a client tool as the answer's text: name, description and
    input schema (JSON, as the client sent it), with any other members (``strict``, …)."""
    found = _container(tool)
    if found is None:
        return jsonedit.dumps(_strip(tool))
    c, key = found
    parts = [f"Tool: {c['name']}", "Description:", str(c.get("description") or "(none)")]
    if key in c:
        parts += [f"Input schema (JSON Schema, {key}):", json.dumps(c[key], ensure_ascii=False, indent=1)]
    rest = {k: v for k, v in c.items() if k not in ("name", "description", key, "cache_control", "type")}
    if rest:
        parts += ["Other members:", json.dumps(rest, ensure_ascii=False)]
    return "\n".join(parts)


def answer(body: Mapping[str, Any] | None, call: ToolCall) -> str:
    """The tool result text for a ``headroom_tool_docs`` call: the full definition of the named
    tool from the ``tools`` of ``body`` (the client's request), or an error that says what was
    wrong (no ``name`` argument, no such tool)."""
    args = call.arguments
    name = args.get("name") if isinstance(args, dict) else None
    if not isinstance(name, str) or not name.strip():
        return f'{TOOL_NAME} error: the call needs a "name" argument (the name of a shortened tool).'
    tools = body.get("tools") if body is not None else None
    for tool in tools if isinstance(tools, list) else []:
        if tools_order.tool_id(tool) == name.strip():
            return definition_text(tool)
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
        return answer(ctx.body, call)
