"""Step 4 of a request's walk (docs/architecture.md): the prompt-cache rule for ``tools``.

:func:`plan_step` is the one entry the plan calls (``request_plan._tools_step``). It writes the
``tools`` array as the session sends it: the client's tools in the scope's order
(:mod:`headroom_core.tools.order`), each minified (:mod:`headroom_core.tools.minifier`) or, for
the tools the session's first request chose to send on demand, as a skeleton
(:mod:`headroom_core.tools.on_demand`, :mod:`headroom_core.tools.skeleton`), then the session's
proxy tools; and the figures the ledger counts (:mod:`headroom_core.tools.figures`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from headroom_core.cache.session_store import SessionTools
from headroom_core.tools import on_demand
from headroom_core.tools import order as tools_order
from headroom_core.tools.figures import ToolsFigures
from headroom_core.tools.units import Unit, units
from headroom_core.wire import jsonedit
from headroom_core.wire.protocol import WireDialect
from headroom_core.wire.view import BodyView, array_at

if TYPE_CHECKING:
    from headroom_core.runtime import Runtime


@dataclass(frozen=True)
class ToolsRequest:
    """What the tools step reads of a request: its dialect (``wire``), its one parse (``view``:
    the body's text and parsed value, with the spans of its members), the ``client``'s name
    (:func:`~headroom_core.clients.client_name`), its ``project`` and ``scope`` (the scope id:
    project and client identity), ``dry_run`` (a token count: nothing learned or written) and
    ``prev``, what this step returned for the same client's previous request of the
    conversation (``((state, proxy_tools, fast), ToolsStep)``, kept by
    :class:`~headroom_core.cache.recent.RecentRequest`), or None."""

    wire: WireDialect
    view: BodyView
    client: str
    project: str
    scope: str
    dry_run: bool
    prev: Any = None


@dataclass(frozen=True)
class ToolsStep:
    """The ``tools`` edits, the session's tools after this request, the figures for the ledger."""

    edits: tuple[jsonedit.Edit, ...]
    state: SessionTools
    figures: ToolsFigures | None


def _proxy_tool_defs(rt: "Runtime", d: WireDialect, names: tuple[str, ...]) -> list[dict[str, Any]]:
    by_name = {t.name: t for t in rt.extensions.tools}
    return [d.function_tool(n, by_name[n].description, by_name[n].schema) for n in names if n in by_name]


def plan_step(
    rt: "Runtime", req: ToolsRequest, state: SessionTools, known: bool, proxy_tools: tuple[str, ...], fast: bool
) -> ToolsStep:
    """``tools`` as the session sends them: the client's tools in the scope's order (see
    :mod:`headroom_core.tools.order`), each minified (deterministic) or, for the tools
    the session's first request chose to send on demand, as a skeleton
    (:mod:`headroom_core.tools.on_demand`), then the session's proxy tools; the same text as
    last time when the client's tools did not change (markers moved or order changed only),
    with the client's ``cache_control`` carried by position. In the client's own order every
    byte the proxy does not change stays the client's; a new order keeps the client's
    separators. Tools are read through the dialect (:mod:`headroom_core.tools.units`): one per
    element, or several inside one (Gemini's ``functionDeclarations``).

    ``state`` is the session's tools state before this request, ``known`` whether the session
    has sent a request before, ``proxy_tools`` the session's proxy tools (decided at its first
    request), ``fast`` the fallback after a timeout (nothing new decided, no figures). Raises
    SQLAlchemy errors (the scope's tool order, tools on demand)."""
    wire, view = req.wire, req.view
    tools = wire.tools_of(view.parsed)
    if tools is not None and not isinstance(tools, list):
        return ToolsStep((), replace(state, proxy_tools=proxy_tools), None)
    client = tools or []
    # tools on demand: skeletons (and headroom_tool_docs) decided at the session's first request
    docs = on_demand.for_session(
        rt, wire.id, view.parsed, req.client, req.project, req.scope, state, known, proxy_tools, fast, req.dry_run
    )
    proxy_tools = docs.proxy_tools
    if not client and not proxy_tools:
        return ToolsStep((), replace(state, proxy_tools=proxy_tools), None)
    prev = req.prev
    if prev is not None and wire.tools_key in view.reused_members and prev[0] == (state, proxy_tools, fast):
        return prev[1]  # the same tools text, the same session state: the same step
    raw, spans = _client_array(view, wire.tools_path) if tools is not None else ("", [])
    order = rt.tool_order.order(req.scope, tools_order.unique_ids(client), learn=not req.dry_run)
    bare = [jsonedit.strip_member(raw[x:y], "cache_control") for x, y in (spans[n] for n in order)]
    us = units(wire, client)
    thash = _tools_hash(rt, proxy_tools, docs.skeletons, [u.id for u in us], bare)
    marks = [(k, t["cache_control"]) for k, t in enumerate(client) if isinstance(t, dict) and "cache_control" in t]
    proxy_defs = [] if tools is None and req.dry_run else _proxy_tool_defs(rt, wire, proxy_tools)
    known_text = state.text if state.tools_hash == thash else rt.session_store.tools_text(thash)
    if known_text is not None:
        forwarded, reason = _with_marks(known_text, marks), "replayed"
    else:
        repl, reason = _replacements(rt, wire, us, order, bare, docs.skeletons)
        forwarded = compose(raw or "[]", spans, order, repl, proxy_defs, marks)
    edits: list[jsonedit.Edit] = []
    if tools is None:
        edits = [jsonedit.Append(wire.tools_path, t) for t in proxy_defs]
    elif forwarded != raw:
        edits = [jsonedit.ReplaceRaw(wire.tools_path, forwarded)]
    sent = (
        jsonedit.strip_member(forwarded, "cache_control")
        if tools is not None
        else "[" + ",".join(jsonedit.dumps(t) for t in proxy_defs) + "]"
    )
    own = ",".join(jsonedit.dumps(t) for t in proxy_defs) if edits else ""  # the proxy's tools, counted apart
    figures = None if fast else ToolsFigures(raw, sent if edits else raw, reason, rt.counter, own)
    return ToolsStep(tuple(edits), SessionTools(proxy_tools, thash, sent, docs.skeletons, docs.seen), figures)


def _client_array(view: BodyView, where: tuple[str, ...]) -> tuple[str, list[tuple[int, int]]]:
    """The client's tools array text and its elements' spans (offsets into that text)."""
    (a, b), els = array_at(view, where)
    return view.text[a:b], [(x - a, y - a) for x, y in els]


def _tools_hash(
    rt: "Runtime", proxy_tools: tuple[str, ...], skeletons: tuple[str, ...], ids: list[str], bare: list[str]
) -> str:
    """The keyed hash of the tools text to send: the proxy's tools, the client's tools sent as
    skeletons (another session's text for the same tools is reused only when it sent the same
    ones; none: the hash is the one without them) and the client's elements in order, without
    ``cache_control``."""
    shelled = sorted(set(skeletons) & set(ids)) if skeletons else []
    return rt.sealer.digest(
        "tools", json.dumps(list(proxy_tools)), *(["skeletons:" + json.dumps(shelled)] if shelled else []), *bare
    )


def _with_marks(text: str, marks: list[tuple[int, Any]]) -> str:
    """``text`` (a tools array sent before, without ``cache_control``) with the client's
    breakpoints by position."""
    for k, value in marks:
        text = jsonedit.insert_member(text, (k,), "cache_control", jsonedit.dumps(value))
    return text


def _replacements(
    rt: "Runtime", wire: WireDialect, us: list[Unit], order: list[int], bare: list[str], names: tuple[str, ...]
) -> tuple[dict[int, Any], str]:
    """The elements to replace, by position in ``order`` (a value, or the JSON text to splice
    as it is), and the reason: the tools named in ``names`` as skeletons, every tool minified
    (setting ``tools_minify``). ``us`` are the client's tools (:func:`~headroom_core.tools.units.units`),
    ``bare`` the client's elements' texts in ``order`` without ``cache_control``."""
    at_pos = {n: i for i, n in enumerate(order)}
    flat = sorted(us, key=lambda u: at_pos[u.element])  # stable: an element's tools stay in its order
    shells = on_demand.skeletons(wire, flat, names)
    repl: dict[int, Any] = dict(shells)
    reason = "ordered"
    if rt.settings.tools_minify and bare:
        values = [shells[f] if f in shells else _strip(u.value) for f, u in enumerate(flat)]
        texts = [
            jsonedit.dumps(shells[f]) if f in shells else _unit_text(bare[at_pos[u.element]], u)
            for f, u in enumerate(flat)
        ]
        out = rt.tools_minifier.run(
            "[" + ",".join(texts) + "]", values, count=False, shape_of=wire.tool_shape, kind=wire.id.value, texts=texts
        )
        repl.update(out.replacements)
        reason = out.reason
    if shells:
        reason += f"; {len(shells)} tools as skeletons"
    return _by_element(flat, at_pos, bare, repl), reason


def _strip(tool: Any) -> Any:
    return {k: v for k, v in tool.items() if k != "cache_control"} if isinstance(tool, dict) else tool


def _unit_text(element: str, u: Unit) -> str:
    """A tool's JSON text inside its element's text (the element's, for one element one tool)."""
    if not u.at:
        return element
    a, b = jsonedit.span(element, u.at)
    return element[a:b]


def _by_element(flat: list[Unit], at_pos: dict[int, int], bare: list[str], repl: dict[int, Any]) -> dict[int, Any]:
    """Replacements of tools (by index in ``flat``) as replacements of elements (by position
    in the order sent): a tool that is its element replaces it; tools inside an element are
    spliced into the element's text (without ``cache_control``: :func:`compose` carries it)."""
    out: dict[int, Any] = {}
    inner: dict[int, list[jsonedit.Edit]] = {}
    for f, value in repl.items():
        u = flat[f]
        pos = at_pos[u.element]
        if not u.at:
            out[pos] = value
        else:
            inner.setdefault(pos, []).append(jsonedit.Replace(u.at, value))
    for pos, edits in inner.items():
        out[pos] = jsonedit.RawJSON(jsonedit.apply(bare[pos], edits))
    return out


def compose(
    raw: str,
    spans: list[tuple[int, int]],
    order: list[int],
    repl: dict[int, Any],
    extra: list[Any],
    marks: list[tuple[int, Any]],
) -> str:
    """The ``tools`` array text: the client's elements (``raw[span]``) in ``order``, those in
    ``repl`` (by position in ``order``) replaced, ``extra`` appended. In the client's order the
    client's bytes are edited in place; in another order the client's separators are kept and
    its ``cache_control`` markers go by position (``marks``)."""
    if order == list(range(len(order))):
        edits: list[jsonedit.Edit] = [jsonedit.Replace((i,), v) for i, v in repl.items()]
        edits += [jsonedit.Append((), t) for t in extra]
        out = jsonedit.apply(raw, edits) if edits else raw
        for k, value in marks:
            if k in repl:  # a minified element carries its marker again
                out = jsonedit.insert_member(out, (k,), "cache_control", jsonedit.dumps(value))
        return out
    head, tail = raw[: spans[0][0]], raw[spans[-1][1] :]
    sep = raw[spans[0][1] : spans[1][0]] if len(spans) > 1 else ","
    asc = raw.isascii()  # written as the client writes (as jsonedit.apply does in the branch above)
    items = [
        jsonedit.dumps(repl[i], asc)
        if i in repl
        else jsonedit.strip_member(raw[spans[n][0] : spans[n][1]], "cache_control")
        for i, n in enumerate(order)
    ]
    out = head + sep.join(items + [jsonedit.dumps(t, asc) for t in extra]) + tail
    for k, value in marks:
        out = jsonedit.insert_member(out, (k,), "cache_control", jsonedit.dumps(value))
    return out
