"""Step 1-6 of a request's walk (DESIGN.md): decide what the proxy does with one request.

:func:`plan_request` takes plain method, path, headers and body bytes and returns a frozen
:class:`RequestPlan`; it never raises (an internal error yields a passthrough plan that names the
error, so the request goes upstream byte-identical: fail open). Only the size limit fails closed.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, Mapping

from headroom_core.cache.session import session_key
from headroom_core.ccr import retrieve
from headroom_core.ccr.session_tools import mark_retrieve_offered, retrieve_offered
from headroom_core.compress.pipeline import PipelineResult, compress_outputs
from headroom_core.compress.router import compress_text
from headroom_core.compress.tools_step import ToolsOutcome
from headroom_core.project import GLOBAL, resolve_project
from headroom_core.runtime import Runtime
from headroom_core.wire import jsonedit
from headroom_core.wire.detect import Dialect, detect, dialect_for_path
from headroom_core.wire.dialects import module_for

log = logging.getLogger("headroom")

BYPASS_HEADER = "x-headroom-bypass"
SESSION_HEADER = "x-headroom-session"


@dataclass(frozen=True)
class RequestPlan:
    """What to do with a request.

    ``action``: ``"passthrough"`` (send the original bytes), ``"rewrite"`` (send ``body``),
    ``"reject"`` (answer ``status`` with ``error_body``, contact nobody). ``hidden_tools`` are the
    proxy's own tools offered in the forwarded body (their calls are answered by the proxy).
    ``forwarded`` is the parsed JSON of what goes upstream (for follow-up requests).
    """

    action: str
    reason: str
    dialect: Dialect | None = None
    body: bytes | None = None
    status: int = 0
    error_body: bytes | None = None
    session_key: str = ""
    hidden_tools: frozenset[str] = frozenset()
    forwarded: dict[str, Any] | None = None
    pipeline: PipelineResult | None = None
    tools: ToolsOutcome | None = None
    project: str = GLOBAL
    bytes_before: int = 0
    bytes_after: int = 0
    notes: tuple[str, ...] = field(default=())


def _too_large(d: Dialect, size: int, limit: int) -> bytes:
    msg = (
        f"headroom proxy: the request body is {size} bytes, over the limit of {limit} bytes "
        "(headroom max_body_bytes), so it was not sent to the model. Compact the conversation "
        "(for example /compact) or drop large tool outputs, then retry; resending the same request "
        "will be refused again."
    )
    return json.dumps(module_for(d).error_body(msg, too_large=True)).encode()


def plan_request(rt: Runtime, method: str, path: str, headers: Mapping[str, str], body: bytes) -> RequestPlan:
    """Decide the fate of one request (see module docstring). ``headers`` keys are lowercase."""
    try:
        return _plan(rt, method, path, headers, body)
    except Exception as e:  # noqa: BLE001 - fail open, loudly
        log.exception("headroom: compression failed, request forwarded unchanged")
        return RequestPlan("passthrough", f"internal error: {type(e).__name__}: {e}"[:300], bytes_before=len(body), bytes_after=len(body))


def _plan(rt: Runtime, method: str, path: str, headers: Mapping[str, str], body: bytes) -> RequestPlan:
    s = rt.settings
    n = len(body)
    d = dialect_for_path(method, path)
    if d is None:
        return RequestPlan("passthrough", "not an LLM API call", bytes_before=n, bytes_after=n)
    if headers.get(BYPASS_HEADER, "").strip().lower() in ("1", "true", "yes"):
        return RequestPlan("passthrough", "bypass header", d, bytes_before=n, bytes_after=n)
    if n > s.max_body_bytes:
        return RequestPlan("reject", "body over max_body_bytes", d, status=413, error_body=_too_large(d, n, s.max_body_bytes), bytes_before=n)
    det = detect(method, path, body)
    if det.dialect is None or det.body is None:
        return RequestPlan("passthrough", det.reason, bytes_before=n, bytes_after=n)
    if not s.compress:
        return RequestPlan("passthrough", "compression off", d, bytes_before=n, bytes_after=n)
    parsed = det.body
    mod = module_for(d)
    skey = session_key(d.value, parsed, headers.get(SESSION_HEADER))
    result = compress_outputs(
        mod.tool_outputs(parsed),
        mod.latest_user_text(parsed),
        lambda text, q: compress_text(text, q, rt.counter, min_tokens=s.min_tokens, min_saving_ratio=s.min_saving_ratio),
        rt.counter,
        rt.decisions,
        min_tokens=s.min_tokens,
        exclude_tools=s.exclude_tools,
    )
    edits: list[jsonedit.Replace | jsonedit.Append] = [jsonedit.Replace(p, t) for p, t in result.replacements]
    text = body.decode("utf-8")
    tools_out = None
    if s.tools_minify and isinstance(parsed.get("tools"), list) and parsed["tools"]:
        a, b = jsonedit.span(text, ("tools",))
        tools_out = rt.tools_minifier.run(text[a:b], parsed["tools"])
        edits += [jsonedit.Replace(("tools", i), new) for i, new in tools_out.replacements]
    project = resolve_project(headers, parsed)
    for off in result.offloads:
        rt.store.put(off.key, off.original, "tool_output")
    hidden: frozenset[str] = frozenset()
    offered = bool(result.offloads) or retrieve_offered(rt.sessions, skey)
    if offered:
        hidden = frozenset({retrieve.TOOL_NAME})
        if retrieve.TOOL_NAME not in mod.tool_names(parsed):
            edits.append(jsonedit.Append(("tools",), mod.function_tool(retrieve.TOOL_NAME, retrieve.TOOL_DESCRIPTION, retrieve.TOOL_SCHEMA)))
        if result.offloads:
            mark_retrieve_offered(rt.sessions, skey, d.value)
    if not edits:
        return RequestPlan(
            "passthrough", "nothing to compress", d, session_key=skey, forwarded=parsed, pipeline=result, tools=tools_out, project=project, bytes_before=n, bytes_after=n
        )
    new_text = jsonedit.apply(text, edits)
    forwarded = json.loads(new_text)
    _check_same_conversation(d, parsed, forwarded)
    new_body = new_text.encode("utf-8")
    what = [f"{len(result.replacements)} tool outputs compressed"] if result.replacements else []
    if tools_out and tools_out.replacements:
        what.append(f"{len(tools_out.replacements)} tool definitions minified")
    return RequestPlan(
        "rewrite",
        ", ".join(what) or "retrieve tool kept",
        d,
        body=new_body,
        session_key=skey,
        hidden_tools=hidden,
        forwarded=forwarded,
        pipeline=result,
        tools=tools_out,
        project=project,
        bytes_before=n,
        bytes_after=len(new_body),
    )


def _check_same_conversation(d: Dialect, before: dict[str, Any], after: dict[str, Any]) -> None:
    """Raise ``AssertionError`` if an edit changed roles, message count or tool call ids."""
    key = "input" if d is Dialect.OPENAI_RESPONSES else "messages"

    def shape(body: dict[str, Any]) -> list[Any]:
        seq = body.get(key)
        if not isinstance(seq, list):
            return [seq]
        return [(m.get("role"), m.get("type"), m.get("tool_call_id"), m.get("call_id")) if isinstance(m, dict) else None for m in seq]

    if shape(before) != shape(after):
        raise AssertionError("an edit changed the conversation's shape")
