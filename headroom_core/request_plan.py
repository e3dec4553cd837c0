"""Steps 1-6 of a request's walk (DESIGN.md): decide what the proxy does with one request.

:func:`plan_request` takes plain method, path, headers and body bytes and returns a frozen
:class:`RequestPlan`; it never raises (an internal error yields a passthrough plan that names the
error, so the request goes upstream byte-identical: fail open). Only the size limit fails closed.

The order inside: detect the dialect; find the live zone (messages sent before are replayed with
the exact bytes the proxy sent then); compress tool outputs in the live zone; minify ``tools``;
add the proxy's own tools; append injected context to the latest user message; splice every edit
into the original text so untouched bytes stay as the client sent them; remember the session's
forwarded messages for the next turn.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

from headroom_core.cache.frozen import FrozenEntry, LiveZone, live_zone, message_hash
from headroom_core.cache.breakpoints import verify as verify_breakpoints
from headroom_core.cache.session import session_key
from headroom_core.compress.images_step import IMAGE_KIND, ImagesOutcome, plan_images
from headroom_core.compress.pipeline import PipelineResult, compress_outputs
from headroom_core.compress.router import compress_text
from headroom_core.compress.tools_step import ToolsOutcome
from headroom_core.extensions import RequestContext
from headroom_core.inject import tail_text_edit
from headroom_core.clients import client_name
from headroom_core.project import GLOBAL, resolve_project
from headroom_core.runtime import Runtime
from headroom_core.wire import jsonedit
from headroom_core.wire.detect import Dialect, detect, dialect_for_path
from headroom_core.wire.calls import tool_calls_in_request
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
    ``forwarded`` is the parsed JSON of what goes upstream (for follow-up requests); ``context``
    what extensions saw (for answering proxy tools).
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
    context: RequestContext | None = None
    live: LiveZone | None = None
    images: ImagesOutcome | None = None
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


class PlanAbandoned(Exception):
    """Raised inside :func:`plan_request` when its ``commit`` gate says the caller stopped
    waiting (a compression timeout): the plan then remembers nothing for the session."""


def _not_compressed(rt: Runtime, method: str, path: str, body: bytes, why: str) -> RequestPlan:
    """The plan when compressing failed or timed out (``why``): small bodies go on unchanged
    (fail open); bodies over ``fail_open_max_bytes`` are refused with 413 (fail closed: an
    uncompressed huge request would cost the agent its context or budget without warning)."""
    n = len(body)
    d = dialect_for_path(method, path)
    limit = rt.settings.fail_open_max_bytes
    if d is None or n <= limit:
        return RequestPlan("passthrough", why[:300], bytes_before=n, bytes_after=n)
    msg = (
        f"headroom proxy: this {n}-byte request could not be compressed ({why[:120]}), and requests over "
        f"{limit} bytes (headroom fail_open_max_bytes) are not sent uncompressed. Compact the conversation "
        "(for example /compact) or drop large tool outputs, then retry."
    )
    return RequestPlan("reject", why[:300], d, status=413, error_body=json.dumps(module_for(d).error_body(msg, too_large=True)).encode(), bytes_before=n)


def plan_request(rt: Runtime, method: str, path: str, headers: Mapping[str, str], body: bytes, commit: Callable[[], bool] | None = None) -> RequestPlan:
    """Decide the fate of one request (see module docstring). ``headers`` keys are lowercase.

    ``commit``, when given, is called once right before the plan stores anything for the
    session (the live zone's frozen bytes); if it returns False the plan is abandoned and the
    request passes unchanged (used by :func:`plan_request_async` on timeout).
    """
    try:
        return _plan(rt, method, path, headers, body, commit)
    except PlanAbandoned:
        return RequestPlan("passthrough", "abandoned: compression timed out", bytes_before=len(body), bytes_after=len(body))
    except Exception as e:  # noqa: BLE001 - fail open (small bodies), loudly
        log.exception("headroom: compression failed; sending what was sent before, nothing new compressed")
        return replay_only(rt, method, path, headers, body, f"internal error: {type(e).__name__}: {e}")


def replay_only(rt: Runtime, method: str, path: str, headers: Mapping[str, str], body: bytes, why: str) -> RequestPlan:
    """The fallback when compressing failed or timed out (``why``): the session's earlier
    messages are still replayed byte for byte and ``tools`` still minified (so the provider's
    cached prefix does not flip), reusing earlier decisions only; nothing new is compressed,
    counted or injected. A body over ``fail_open_max_bytes`` is refused (413) as the fallback
    cannot shrink it. If even the fallback fails: :func:`_not_compressed`."""
    try:
        plan = _plan(rt, method, path, headers, body, None, fast=True)
        if plan.action != "reject" and plan.dialect is not None and plan.bytes_after > rt.settings.fail_open_max_bytes:
            return _not_compressed(rt, method, path, body, why)  # too large to send uncompressed
        return replace(plan, reason=f"{why[:150]}; fallback: {plan.reason}"[:300])
    except Exception as e:  # noqa: BLE001
        log.exception("headroom: the fallback failed too")
        return _not_compressed(rt, method, path, body, f"{why[:150]}; fallback failed: {type(e).__name__}: {e}")


class _CommitGate:
    """Decides once, under a lock, whether a plan may store its memory or was abandoned."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state = ""

    def commit(self) -> bool:
        with self._lock:
            if self._state == "abandoned":
                return False
            self._state = "committed"
            return True

    def abandon(self) -> bool:
        with self._lock:
            if self._state == "committed":
                return False
            self._state = "abandoned"
            return True


async def plan_request_async(rt: Runtime, method: str, path: str, headers: Mapping[str, str], body: bytes, timeout_s: float) -> RequestPlan:
    """:func:`plan_request` in a worker thread, bounded by ``timeout_s`` seconds (0: unbounded).

    On timeout the plan is abandoned before it stores anything for the session, and the request
    is treated like a failed compression: unchanged when at most ``fail_open_max_bytes``, else
    refused with 413. A plan that already committed when the timeout fires is awaited instead
    (its session memory must match what is sent). Never raises.
    """
    gate = _CommitGate()
    task = asyncio.ensure_future(asyncio.to_thread(plan_request, rt, method, path, headers, body, gate.commit))
    if timeout_s <= 0:
        return await task
    try:
        return await asyncio.wait_for(asyncio.shield(task), timeout_s)
    except asyncio.TimeoutError:
        if not gate.abandon():
            return await task
        log.warning("headroom: compressing a %d-byte request took over %s s; sending what was sent before, nothing new compressed", len(body), timeout_s)
        why = f"compression timed out after {timeout_s} s"
        fallback = asyncio.ensure_future(asyncio.to_thread(replay_only, rt, method, path, headers, body, why))
        try:
            # the fallback only replays and looks up: it gets at least 5 s whatever the timeout
            return await asyncio.wait_for(asyncio.shield(fallback), max(timeout_s, 5.0))
        except asyncio.TimeoutError:
            return _not_compressed(rt, method, path, body, why + "; fallback timed out too")


def conversation_key(d: Dialect) -> str:
    """The key of the conversation list in a body of dialect ``d``."""
    return "input" if d is Dialect.OPENAI_RESPONSES else "messages"


def _plan(
    rt: Runtime, method: str, path: str, headers: Mapping[str, str], body: bytes, commit: Callable[[], bool] | None = None, fast: bool = False
) -> RequestPlan:
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
    text = body.decode("utf-8")
    skey = session_key(d.value, parsed, headers.get(SESSION_HEADER))
    ckey = conversation_key(d)

    # 1. live zone: replay what was sent before, byte for byte
    spans = jsonedit.element_spans(text, (ckey,)) if isinstance(parsed.get(ckey), list) else []
    hashes = [message_hash(text[a:b]) for a, b in spans]
    frozen = rt.frozen.load(skey)
    zone = live_zone(hashes, frozen)
    edits: list[jsonedit.Replace | jsonedit.Append | jsonedit.ReplaceRaw] = [jsonedit.ReplaceRaw((ckey, i), t) for i, t in zone.replay]

    # 2. compress tool outputs of the live zone
    outputs = mod.tool_outputs(parsed)
    query = mod.latest_user_text(parsed)
    result = compress_outputs(
        [o for o in outputs if o.message_index >= zone.start],
        query,
        lambda t, q, h=None: compress_text(t, q, rt.counter, min_tokens=s.min_tokens, min_saving_ratio=s.min_saving_ratio, hint=h),
        rt.counter,
        rt.decisions,
        min_tokens=s.min_tokens,
        exclude_tools=s.exclude_tools,
        calls=tool_calls_in_request(parsed, d),
        cache_only=fast,
    )
    edits += [jsonedit.Replace(p, t) for p, t in result.replacements]
    for off in result.offloads:
        rt.store.put(off.key, off.original, "tool_output")

    # 2b. images of the live zone (compress/images_step.py): resized, originals of reduced ones kept
    images = plan_images(d, parsed, zone.start, s.image_max_tokens, s.exclude_tools) if s.images and not fast else ImagesOutcome()
    edits += images.edits
    for off in images.offloads:
        rt.store.put(off.key, off.original, IMAGE_KIND)

    # 3. tool definitions
    tools_out = None
    if s.tools_minify and isinstance(parsed.get("tools"), list) and parsed["tools"]:
        a, b = jsonedit.span(text, ("tools",))
        tools_out = rt.tools_minifier.run(text[a:b], parsed["tools"], count=not fast)
        edits += [jsonedit.Replace(("tools", i), new) for i, new in tools_out.replacements]

    # 4. extensions: the proxy's own tools, injected context, observers
    ctx = RequestContext(
        dialect=d,
        body=parsed,
        headers=headers,
        project=resolve_project(headers, parsed),
        session_key=skey,
        query=query,
        client=client_name(headers.get("user-agent", "")),
        tool_outputs=tuple(outputs),
        live_from=zone.start,
        offloaded=bool(result.offloads or images.offloads),
    )
    ext = rt.extensions
    hidden: list[str] = []
    present = set(mod.tool_names(parsed))
    for tool in ext.tools:
        if tool.offered(rt, ctx):
            hidden.append(tool.name)
            if tool.name not in present:
                edits.append(jsonedit.Append(("tools",), mod.function_tool(tool.name, tool.description, tool.schema)))
    injected = [] if fast else [t for t in (_safe(inj, rt, ctx) for inj in ext.injectors) if t]
    if injected and spans and zone.start < len(spans):
        edit = tail_text_edit(d, parsed, "\n\n".join(injected))
        if edit is not None:
            edits.append(edit)
    for obs in () if fast else ext.observers:
        _safe(obs, rt, ctx)

    # 5. splice, verify, remember
    new_text = jsonedit.apply(text, edits) if edits else text
    forwarded = json.loads(new_text) if edits else parsed
    if edits:
        _check_same_conversation(ckey, parsed, forwarded)
        verify_breakpoints(parsed, forwarded)
    if commit is not None and not commit():
        raise PlanAbandoned()
    if spans:
        new_spans = jsonedit.element_spans(new_text, (ckey,)) if edits else spans
        weight: dict[int, list[int]] = {}
        for blk in result.blocks:
            if blk.changed and len(blk.path) > 1 and isinstance(blk.path[1], int):
                w = weight.setdefault(blk.path[1], [0, 0])
                w[0] += blk.tokens_before
                w[1] += blk.tokens_after
        entries = [
            frozen[i]
            if i < zone.start
            else FrozenEntry(i, hashes[i], None if new_text[na:nb] == text[a:b] else new_text[na:nb], *weight.get(i, (0, 0)))
            for i, ((a, b), (na, nb)) in enumerate(zip(spans, new_spans))
        ]
        if zone.start < len(entries) or zone.history_edited:
            rt.frozen.save(skey, entries, zone.start)
    plan = RequestPlan(
        "passthrough",
        "nothing to compress",
        d,
        session_key=skey,
        hidden_tools=frozenset(hidden),
        forwarded=forwarded,
        pipeline=result,
        tools=tools_out,
        project=ctx.project,
        context=ctx,
        live=zone,
        images=images,
        bytes_before=n,
        bytes_after=n,
    )
    if not edits:
        return plan
    new_body = new_text.encode("utf-8")
    what = [f"{len(result.replacements)} tool outputs compressed"] if result.replacements else []
    if tools_out and tools_out.replacements:
        what.append(f"{len(tools_out.replacements)} tool definitions minified")
    if images.changed:
        what.append(f"{images.changed} images resized")
    if zone.replay:
        what.append(f"{len(zone.replay)} earlier messages replayed")
    if injected:
        what.append("context injected")
    return replace(plan, action="rewrite", reason=", ".join(what) or "proxy tools kept", body=new_body, bytes_after=len(new_body))


def _safe(fn, rt: Runtime, ctx: RequestContext):
    """Run an extension; its failure is logged and never fails the request."""
    try:
        return fn(rt, ctx)
    except Exception:  # noqa: BLE001
        log.exception("headroom: extension %s failed", getattr(fn, "__qualname__", fn))
        return None


def _check_same_conversation(key: str, before: dict[str, Any], after: dict[str, Any]) -> None:
    """Raise ``AssertionError`` if an edit changed roles, message count or tool call ids."""

    def shape(body: dict[str, Any]) -> list[Any]:
        seq = body.get(key)
        if not isinstance(seq, list):
            return [seq]
        return [(m.get("role"), m.get("type"), m.get("tool_call_id"), m.get("call_id")) if isinstance(m, dict) else None for m in seq]

    if shape(before) != shape(after):
        raise AssertionError("an edit changed the conversation's shape")
