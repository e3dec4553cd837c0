"""Steps 1-7 of a request's walk (docs/architecture.md): decide what the proxy does with one request.

:func:`plan_request` takes plain method, path, headers and body bytes and returns a frozen
:class:`RequestPlan`; it never raises (an internal error yields a plan that replays what was
sent before and compresses nothing new, or the client's bytes: fail open). Only the size limits
fail closed.

The dialect comes in detected once (a :class:`~headroom_core.wire.dialects.Route`, from the
addon or from ``method`` and ``path`` here); the body is read through one
:class:`~headroom_core.wire.request_view.RequestView`, never by a dialect's field names. The
steps (:func:`_plan` calls them in order), each a small function with a typed result:

1. :func:`_classify` (early exits: not LLM, bypass, size limit) and :func:`_parse_step` (one
   parse, the dialect's shape): a finished :class:`RequestPlan`, or on to
2. :func:`_identify_step`: the request's scope (project and client identity) and session
   (:mod:`headroom_core.cache.session`): a ``_Request``;
3. :func:`_replay_step`: the prompt-cache rule for messages (earlier messages replayed byte
   for byte, the client's ``cache_control`` carried onto them, :mod:`headroom_core.cache.frozen`): ``_Replayed``;
4. :func:`_tools_step`: the prompt-cache rule for ``tools`` (session order, minified once, the
   session's proxy tools fixed at its first request, :mod:`headroom_core.tools`): ``ToolsStep``;
5. :func:`_content_step`: tool outputs of the live zone compressed (lossless only when the model
   cannot call ``headroom_retrieve``), images resized: ``_Compressed``;
6. :func:`_inject_step`: context appended to the latest user message;
7. :func:`_splice_step`: every edit spliced into the original text (untouched bytes stay the
   client's) and verified: ``_Splice``; :func:`_remember_step`: the session's state for the next
   turn (or the ``persist`` job); :func:`_what`: the reason in words.

Observers (live learning, memory capture) run after forwarding: :func:`run_observers`; the
diagnostic ones (the prefix log) after them: :func:`run_diagnostics`.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Callable, Mapping

from sqlalchemy.exc import SQLAlchemyError

from headroom_core import gc_tuning, originals_first
from headroom_core.cache.breakpoints import BreakpointError, marker_count
from headroom_core.cache.carry import carry, norm_hash
from headroom_core.cache.frozen import FrozenEntry, LiveZone, live_zone
from headroom_core.cache.late import TIME_SHARE, LateCompression, compress_late
from headroom_core.cache.recent import RecentRequest
from headroom_core.cache.session import SESSION_HEADER, session_key
from headroom_core.cache.session_store import SessionRecord, SessionTools
from headroom_core.cache.turn_prefix import TurnPrefix, compare_turn, system_digest
from headroom_core.ccr.retrieve import TOOL_NAME as RETRIEVE
from headroom_core.clients import client_name
from headroom_core.compress.images_step import IMAGE_KIND, ImagesOutcome, plan_images
from headroom_core.compress.markers import offload_key
from headroom_core.compress.pipeline import (
    MAX_OUTPUT_CHARS,
    PipelineResult,
    compress_outputs,
    decision_key,
    excluded,
    hint_for_call,
)
from headroom_core.compress.reads import verbatim_call_ids
from headroom_core.compress.result import DEFERRED, CompressResult
from headroom_core.compress.router import classify, compress_text, hint_for, with_text_path
from headroom_core.compress.worker import WORKER_MIN_CHARS, CompressTimeout, Job
from headroom_core.db import lock_wait
from headroom_core.db.engine import DatabaseError
from headroom_core.extensions import RequestContext
from headroom_core.inject import tail_text_edits
from headroom_core.plan_codes import Action, Code
from headroom_core.project import PROJECT_HEADER
from headroom_core.readiness import READY_WAIT_SECONDS
from headroom_core.runtime import Runtime
from headroom_core.scope import Conversation, Scope, credential, request_conversation
from headroom_core.too_large import too_large_message
from headroom_core.tools import ToolsFigures, ToolsRequest, plan_step
from headroom_core.tools import ToolsStep as _ToolsStep
from headroom_core.wire import jsonedit
from headroom_core.wire.detect import Dialect
from headroom_core.wire.dialects import Route, WireDialect, route
from headroom_core.wire.dialects import dialect as route_dialect
from headroom_core.wire.envelope import Envelope, EnvelopeError, open_envelope
from headroom_core.wire.request_view import RequestView, view_of
from headroom_core.wire.view import ARRAYS, BodyView, ViewError, parse_view

log = logging.getLogger("headroom")

BYPASS_HEADER = "x-headroom-bypass"
#: The reason of a plan that gave up on a database lock (its code is ``DB_BUSY``).
DB_BUSY_WORDS = f"the database was locked by another process for over {lock_wait.REQUEST_WAIT_SECONDS:g} s"
#: The note of a plan that replayed this proxy's copy of the session's state unverified.
STATE_UNVERIFIED = (
    "the session's state as this proxy last knew it (the database did not say whether another proxy changed it)"
)
#: Share of ``compress_timeout_seconds`` that compressing new tool outputs may take; past it the
#: walk goes on with the decisions made by then and earlier ones (:func:`plan_request_async`).
WORK_SHARE = 0.8
#: Least time a plan has to finish on decisions already made, however small the budget (seconds):
#: with a budget of a few milliseconds the session's earlier messages and tools still replay.
REPLAY_MIN_SECONDS = 2.0


@dataclass(frozen=True)
class RequestPlan:
    """What to do with a request.

    ``action`` (:class:`Action`) and ``code`` (:class:`Code`) with ``reason`` in words;
    ``REWRITE`` sends ``body``, ``REJECT`` answers ``status`` with ``error_body``.
    ``hidden_tools`` are the proxy's own tools offered in the forwarded body (their calls are
    answered by the proxy). ``client_body`` is the client's parsed JSON (inside its dialect's
    ``root``, as every body the plan hands on: :mod:`headroom_core.wire.envelope`); :attr:`forwarded` the
    parsed JSON of what goes upstream; ``context`` what extensions saw (for answering proxy tools and for the
    observers). ``dry_run``: a token-counting request (planned like the request it measures;
    nothing stored, learned or recorded). ``persist``: with ``defer``, what must be stored for
    the session (originals, the bytes sent), to run once the request is on its way and before
    its response is answered; None when it was stored already or there is nothing to store.
    ``internal_error``: the walk raised (a bug, logged) and this is the fallback's plan.
    ``project`` and ``session_key`` name the request's conversation, ``scope`` its whole
    :class:`~headroom_core.scope.Conversation` (None for a plan that never identified it).
    """

    action: Action
    reason: str
    dialect: Dialect | None = None
    body: bytes | None = None
    status: int = 0
    error_body: bytes | None = None
    session_key: str = ""
    hidden_tools: frozenset[str] = frozenset()
    client_body: dict[str, Any] | None = None
    pipeline: PipelineResult | None = None
    tools: ToolsFigures | None = None
    project: str = ""
    context: RequestContext | None = None
    live: LiveZone | None = None
    images: ImagesOutcome | None = None
    bytes_before: int = 0
    bytes_after: int = 0
    notes: tuple[str, ...] = field(default=())
    code: Code = Code.PLANNED
    dry_run: bool = False
    internal_error: bool = False
    persist: Callable[[], None] | None = field(default=None, compare=False, repr=False)
    conversation: Conversation | None = None
    #: the model the request names (its dialect's ``model_of``: body or path); "" when unknown
    model: str = ""
    #: the prefix sent compared with the session's previous turn (None: not planned that far)
    prefix: TurnPrefix | None = None
    #: earlier tool outputs that went whole for want of time, decided again in this request
    #: (:mod:`headroom_core.cache.late`); None: there were none
    late: LateCompression | None = None

    @cached_property
    def forwarded(self) -> dict[str, Any] | None:
        """The parsed JSON of what goes upstream (parsed when first asked, off the request's
        path: the ledger, follow-ups); None for a request that is not an LLM call."""
        if self.body is not None and self.action is Action.REWRITE:
            whole = json.loads(self.body)
            return route_dialect(self.dialect).inner(whole) if self.dialect is not None else whole
        return self.client_body


def _too_large(d: WireDialect, size: int, limit: int) -> bytes:
    return json.dumps(d.error_body(too_large_message(size, limit), too_large=True)).encode()


class PlanAbandoned(Exception):
    """Raised inside :func:`plan_request` when its ``commit`` gate says the caller stopped
    waiting (a compression timeout): the plan then remembers nothing for the session."""


#: Largest body whose model a plan that failed reads for its ledger row (bytes; a parse of this
#: size takes a few milliseconds in the worker thread).
MODEL_HINT_MAX_BYTES = 1 << 20


def _model_hint(r: Route, path: str, body: bytes) -> str:
    """The model a request names, for the ledger row of a plan that failed (its dialect's
    ``model_of``); "" for a body over :data:`MODEL_HINT_MAX_BYTES` or one that is not JSON."""
    if r.dialect is None or len(body) > MODEL_HINT_MAX_BYTES:
        return ""
    try:
        whole = json.loads(body)
        return r.wire.model_of(whole, path) if isinstance(whole, dict) else ""
    except Exception:  # noqa: BLE001 - a hint only
        return ""


def _not_compressed(
    rt: Runtime, r: Route, body: bytes, why: str, error: bool = False, code: Code = Code.NOT_COMPRESSED, model: str = ""
) -> RequestPlan:
    """The plan when compressing failed or timed out (``why``): small bodies go on unchanged
    (fail open, as without the proxy); only when ``fail_open_max_bytes`` is set (not 0, the
    default), bodies over it are refused with 413 instead (for teams that would rather stop an
    uncompressed huge request than pay for it). ``error``: the failure was an internal error
    (the plan's ``internal_error``); ``code``: why, for a request that goes on (``DB_BUSY``: a
    database lock; ``DB_UNAVAILABLE``: a database that cannot be opened), with the request's
    dialect and ``model`` for its ledger row."""
    n = len(body)
    d, counting = r.dialect, r.counting
    limit = rt.settings.fail_open_max_bytes
    if d is None or not limit or n <= limit or counting:
        known = code is not Code.NOT_COMPRESSED  # as before: no dialect (the addons then leave the response alone)
        return RequestPlan(
            Action.PASSTHROUGH,
            why[:300],
            d if known else None,
            bytes_before=n,
            bytes_after=n,
            code=code,
            dry_run=counting,
            internal_error=error,
            model=model if known else "",
        )
    msg = (
        f"headroom proxy: this {n}-byte request could not be compressed ({why[:120]}), and requests over "
        f"{limit} bytes (headroom fail_open_max_bytes) are not sent uncompressed. Compact the conversation "
        "(for example /compact) or drop large tool outputs, then retry."
    )
    return RequestPlan(
        Action.REJECT, why[:300], d, status=413, error_body=json.dumps(r.wire.error_body(msg, too_large=True)).encode(),
        bytes_before=n, code=Code.NOT_COMPRESSED_TOO_LARGE, internal_error=error,
    )  # fmt: skip


def plan_request(
    rt: Runtime,
    method: str,
    path: str,
    headers: Mapping[str, str],
    body: bytes,
    commit: Callable[[], bool] | None = None,
    defer: bool = False,
    route_: Route | None = None,
    continues: Conversation | None = None,
) -> RequestPlan:
    """Decide the fate of one request (see module docstring). ``headers`` keys are lowercase.

    ``commit``, when given, is called once right before the plan stores anything for the
    session; if it returns False the plan is abandoned and the request passes unchanged (used by
    :func:`plan_request_async` on timeout). ``defer``: store nothing now; the plan's
    ``persist`` does it (the caller runs it after forwarding, off the request's path).
    ``route_``: the request's :class:`~headroom_core.wire.dialects.Route` when the caller
    detected it already (detected here from ``method`` and ``path`` otherwise). ``continues``:
    the conversation the request continues, whose project and session key it takes
    (:func:`_identify_step`; a WebSocket frame with incremental input).
    """
    r = route_ if route_ is not None else route(method, path)
    try:
        # a database locked by another process: fail open, not wait; a huge body: no collections
        with lock_wait.bounded(), gc_tuning.paused(len(body) >= gc_tuning.PAUSE_MIN_BYTES):
            return _plan(rt, r, path, headers, body, commit, defer=defer, continues=continues)
    except PlanAbandoned:
        return RequestPlan(
            Action.PASSTHROUGH,
            "abandoned: compression timed out",
            bytes_before=len(body),
            bytes_after=len(body),
            code=Code.ABANDONED,
        )
    except CompressTimeout as e:  # the content step goes on without one (compress_outputs); any other step's
        log.warning("headroom: %s; sending what was sent before, nothing new compressed", e)
        return replay_only(rt, method, path, headers, body, str(e)[:200], defer, r, continues=continues, commit=commit)
    except DatabaseError as e:  # cannot be opened (a server not up yet): no walk can run without it
        log.warning("headroom: %s; the request goes on as the client sent it", e)
        return _not_compressed(rt, r, body, str(e), code=Code.DB_UNAVAILABLE, model=_model_hint(r, path, body))
    except Exception as e:  # noqa: BLE001 - fail open, loudly
        if lock_wait.is_lock_wait(e):
            log.warning("headroom: %s; sending what was sent before, nothing new compressed", DB_BUSY_WORDS)
            return replay_only(
                rt, method, path, headers, body, DB_BUSY_WORDS, defer, r, continues=continues, busy=True, commit=commit
            )
        log.exception("headroom: compression failed; sending what was sent before, nothing new compressed")
        return replay_only(
            rt,
            method,
            path,
            headers,
            body,
            f"internal error: {type(e).__name__}: {e}",
            defer,
            r,
            error=True,
            continues=continues,
            commit=commit,
        )


def replay_only(
    rt: Runtime,
    method: str,
    path: str,
    headers: Mapping[str, str],
    body: bytes,
    why: str,
    defer: bool = False,
    route_: Route | None = None,
    error: bool = False,
    continues: Conversation | None = None,
    busy: bool = False,
    commit: Callable[[], bool] | None = None,
) -> RequestPlan:
    """The fallback when compressing failed or timed out (``why``): the session's earlier
    messages are still replayed byte for byte and ``tools`` still sent as before (so the
    provider's cached prefix does not flip), reusing earlier decisions only; nothing new is
    compressed, counted or injected. A body over ``fail_open_max_bytes`` (when set) is refused (413) as the
    fallback cannot shrink it. If even the fallback fails: :func:`_not_compressed`. ``error``:
    the failure was an internal error (kept as the plan's ``internal_error``). ``continues``: as
    for :func:`plan_request`. ``busy``: the failure was a database lock held past the request's
    lock-wait budget (:mod:`headroom_core.db.lock_wait`): the plan's code is ``DB_BUSY``; the
    fallback shares what is left of that budget (a write it needs fails at once). ``commit``: as
    for :func:`plan_request` (the fallback of a plan the caller may stop waiting for)."""
    r = route_ if route_ is not None else route(method, path)
    try:
        with lock_wait.bounded(), gc_tuning.paused(len(body) >= gc_tuning.PAUSE_MIN_BYTES):
            plan = _plan(rt, r, path, headers, body, commit, fast=True, defer=defer, continues=continues)
        if (
            plan.action != Action.REJECT
            and plan.dialect is not None
            and not plan.dry_run
            and 0 < rt.settings.fail_open_max_bytes < plan.bytes_after
        ):
            return _not_compressed(rt, r, body, why, error)  # too large to send uncompressed
        return replace(
            plan,
            reason=f"{why[:150]}; fallback: {plan.reason}"[:300],
            code=Code.DB_BUSY if busy else Code.FALLBACK,
            internal_error=error,
        )
    except PlanAbandoned:  # the caller stopped waiting: what it sends instead stands
        return RequestPlan(
            Action.PASSTHROUGH,
            "abandoned: compression timed out",
            bytes_before=len(body),
            bytes_after=len(body),
            code=Code.ABANDONED,
        )
    except Exception as e:  # noqa: BLE001
        busy = busy or lock_wait.is_lock_wait(e)
        if busy:
            log.warning(
                "headroom: the fallback found the database locked too; the request goes on as the client sent it"
            )
        else:
            log.exception("headroom: the fallback failed too")
        if busy:
            return _not_compressed(
                rt,
                r,
                body,
                f"{why[:150]}; fallback failed: {type(e).__name__}: {e}",
                error,
                Code.DB_BUSY,
                _model_hint(r, path, body),
            )
        return _not_compressed(rt, r, body, f"{why[:150]}; fallback failed: {type(e).__name__}: {e}", error)


class _CommitGate:
    """Decides once, under a lock, whether a plan may store its memory or was abandoned."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state = ""

    @property
    def abandoned(self) -> bool:
        """Whether the caller stopped waiting (the plan may stop where it is)."""
        return self._state == "abandoned"

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


async def plan_request_async(
    rt: Runtime,
    method: str,
    path: str,
    headers: Mapping[str, str],
    body: bytes,
    timeout_s: float,
    defer: bool = False,
    route_: Route | None = None,
    continues: Conversation | None = None,
) -> RequestPlan:
    """:func:`plan_request` in a worker thread, the time it adds bounded by ``timeout_s`` seconds
    (``compress_timeout_seconds``; 0: unbounded), whatever the body's shape.

    Compressing new tool outputs stops at :data:`WORK_SHARE` of ``timeout_s`` (the compression
    worker is stopped there, nothing new is started after it): the walk goes on with the
    decisions made by then and the session's earlier ones (its earlier messages and tools
    replayed), and the plan says so (code ``FALLBACK``, its reason "compression timed out …",
    logged once). A plan not done at ``timeout_s`` (at least :data:`REPLAY_MIN_SECONDS`) is
    abandoned before it stores anything for the session, and the request goes upstream as the
    client sent it (code ``ABANDONED``, the same reason; refused with 413 instead when it is
    over a set ``fail_open_max_bytes``). A plan that already committed by then (its decisions
    made, only splicing and storing them left, the latter within the database's lock-wait
    budget) is awaited instead: its session memory must match what is sent. ``defer``,
    ``route_`` and ``continues``: as for :func:`plan_request`. Never raises.

    A request arriving while the proxy still warms up waits for it first, up to
    :data:`~headroom_core.readiness.READY_WAIT_SECONDS` (not counted in ``timeout_s``); past
    that it goes on untouched (:func:`_not_compressed`).
    """
    r = route_ if route_ is not None else route(method, path)
    if not await rt.ready.wait(READY_WAIT_SECONDS):
        return _not_compressed(rt, r, body, f"the proxy was not ready within {READY_WAIT_SECONDS:.0f} s of the request")
    gate = _CommitGate()
    ctx = contextvars.copy_context()  # as asyncio.to_thread: the worker sees the caller's context
    if timeout_s > 0:
        ctx.run(_DEADLINE.set, time.monotonic() + WORK_SHARE * timeout_s)  # in the worker's context only
    ctx.run(_GATE.set, gate)
    # submitted now and awaited as one future (no task around a to_thread coroutine, no shield or
    # wait_for): the plan's result reaches the hook in two steps of the event loop, not six
    loop = asyncio.get_running_loop()
    task = loop.run_in_executor(
        None, ctx.run, plan_request, rt, method, path, headers, body, gate.commit, defer, r, continues
    )
    if timeout_s <= 0:
        return await task
    limit = max(timeout_s, REPLAY_MIN_SECONDS)
    done, _ = await asyncio.wait((task,), timeout=limit)  # never cancels the plan
    if done:
        return task.result()
    if not gate.abandon():  # committed: what is left is splicing and storing what it decided
        return await task
    why = f"compression timed out after {timeout_s:g} s (the request's plan took over {limit:g} s)"
    log.warning("headroom: %s; the %d-byte request goes upstream as the client sent it", why, len(body))
    return _not_compressed(rt, r, body, why, code=Code.ABANDONED, model=_model_hint(r, path, body))


# ---------------------------------------------------------------------------------------------
# step 1: what kind of request


@dataclass(frozen=True)
class _Request:
    """A request the walk works on: its neutral ``request`` view (dialect, conversation, tool
    outputs, …, over the one parse with its spans), who sent it, and ``prev``, the same client's
    previous request of this conversation (for reuse), if any."""

    request: RequestView
    headers: Mapping[str, str]
    dry_run: bool
    scope: Scope
    session_key: str
    credential: str
    prev: RecentRequest | None = None
    #: the key of the session's stored state (earlier messages, tools) when it is not
    #: ``session_key`` (a request that continues another conversation: :func:`_identify_step`)
    store_key: str = ""
    #: the whole body around the dialect's inner body (its ``root``; None: the body is the request's)
    envelope: Envelope | None = None

    @property
    def whole(self) -> dict[str, Any]:
        """The whole parsed body (with the envelope's members, for ``model_of``)."""
        return self.envelope.whole(self.parsed) if self.envelope is not None else self.parsed

    @property
    def dialect(self) -> Dialect:
        return self.request.id

    @property
    def wire(self) -> WireDialect:
        return self.request.dialect

    @property
    def view(self) -> BodyView:
        assert self.request.source is not None
        return self.request.source

    @property
    def parsed(self) -> dict[str, Any]:
        return self.view.parsed

    @property
    def text(self) -> str:
        return self.view.text

    @property
    def ckey(self) -> str:
        return self.request.conversation_key


def _same_start(view: BodyView, prev: RecentRequest, ckey: str, system_keys: tuple[str, ...]) -> bool:
    """Whether ``view`` shows the same system prompt and first messages as ``prev`` (so the same
    project and session): every member but the conversation reused or absent in both, and the
    conversation's first three elements reused."""
    seq = view.parsed.get(ckey)
    n = min(3, len(seq)) if isinstance(seq, list) else 0
    if not isinstance(seq, list) or view.reused_elements < n or n == 0:
        return False
    for key in system_keys:
        if (key in view.members or key in prev.view.members) and key not in view.reused_members:
            return False
    return True


def _classify(
    rt: Runtime, r: Route, path: str, headers: Mapping[str, str], body: bytes, continues: Conversation | None = None
) -> RequestPlan | _Request:
    """Steps 1-2: the early exits (a finished :class:`RequestPlan`), or the request to plan."""
    s = rt.settings
    n = len(body)
    d, counting = r.dialect, r.counting
    if d is None:
        return RequestPlan(Action.PASSTHROUGH, "not an LLM API call", bytes_before=n, bytes_after=n, code=Code.NOT_LLM)
    if headers.get(BYPASS_HEADER, "").strip().lower() in ("1", "true", "yes"):
        return RequestPlan(
            Action.PASSTHROUGH, "bypass header", d, bytes_before=n, bytes_after=n, code=Code.BYPASS, dry_run=counting
        )
    if n > s.max_body_bytes:
        if counting:  # nothing is sent to a model: the provider answers what it answers
            return RequestPlan(
                Action.PASSTHROUGH,
                "token count over max_body_bytes",
                d,
                bytes_before=n,
                bytes_after=n,
                code=Code.TOO_LARGE,
                dry_run=True,
            )
        return RequestPlan(
            Action.REJECT,
            "body over max_body_bytes",
            d,
            status=413,
            error_body=_too_large(r.wire, n, s.max_body_bytes),
            bytes_before=n,
            code=Code.TOO_LARGE,
        )
    parsed = _parse_step(rt, r, path, headers, body)
    if isinstance(parsed, RequestPlan):
        return parsed
    view, prev, env = parsed
    if not s.compress:
        conv = continues or request_conversation(headers, view.parsed, path, rt.sealer, d.value)  # for the ledger
        return RequestPlan(
            Action.PASSTHROUGH,
            "compression off",
            d,
            bytes_before=n,
            bytes_after=n,
            code=Code.COMPRESS_OFF,
            dry_run=counting,
            session_key=conv.session_key,
            project=conv.scope.project,
            conversation=conv,
        )
    return replace(_identify_step(rt, r, path, headers, view, prev, continues), envelope=env)


def _parse_step(
    rt: Runtime, r: Route, path: str, headers: Mapping[str, str], body: bytes
) -> RequestPlan | tuple[BodyView, RecentRequest | None, Envelope | None]:
    """Step 1: the body parsed once (reusing the same client's previous request where the bytes
    are the same) and checked for the dialect's shape; a pass-through plan when it is not UTF-8
    JSON of that shape. Also the previous request found, for the next step. A dialect with a
    ``root`` (:mod:`headroom_core.wire.envelope`) is parsed inside it: the view is of the inner
    body, the :class:`~headroom_core.wire.envelope.Envelope` keeps the bytes around it."""
    n, counting = len(body), r.counting
    try:
        text = body.decode("utf-8")  # JSON on the wire is UTF-8 (RFC 8259 §8.1)
    except UnicodeDecodeError:
        return RequestPlan(
            Action.PASSTHROUGH,
            "body is not UTF-8",
            bytes_before=n,
            bytes_after=n,
            code=Code.NOT_PARSED,
            dry_run=counting,
        )
    w = r.wire
    env: Envelope | None = None
    try:
        if w.root:
            env = open_envelope(text, w.root)
            text = env.body
        prev = rt.recent.find(credential(headers, path), headers.get(PROJECT_HEADER, ""), text)
        view = parse_view(
            text,
            prev.view if prev is not None else None,
            tuple(dict.fromkeys((*ARRAYS, w.conversation_key, w.tools_key))),
        )
    except (ViewError, EnvelopeError, RecursionError):
        return RequestPlan(
            Action.PASSTHROUGH,
            "body is not a JSON object (or nested too deeply)",
            bytes_before=n,
            bytes_after=n,
            code=Code.NOT_PARSED,
            dry_run=counting,
        )
    why = r.wire.shape_error(env.whole(view.parsed) if env is not None else view.parsed)
    if why:
        return RequestPlan(
            Action.PASSTHROUGH, why, bytes_before=n, bytes_after=n, code=Code.NOT_PARSED, dry_run=counting
        )
    return view, prev, env


def _identify_step(
    rt: Runtime,
    r: Route,
    path: str,
    headers: Mapping[str, str],
    view: BodyView,
    prev: RecentRequest | None,
    continues: Conversation | None = None,
) -> _Request:
    """Step 2: the request's scope (project and client identity) and session
    (:func:`~headroom_core.scope.request_conversation`); the previous request is kept only when
    it is of the same conversation.

    ``continues``: the conversation this request continues (a WebSocket's, for a frame that
    does not name one of its own): its scope and session key are the request's, while the
    session's stored state (messages sent before, tools) stays keyed by the request's own
    content within that scope, as a frame with incremental input shares no messages with the
    conversation's first frame (replaying against it would reset that state)."""
    req_view = view_of(r.wire, view.parsed, view)
    dialect = req_view.id.value
    if continues is not None:
        scope, skey = continues.scope, continues.session_key
        own = session_key(dialect, view.parsed, headers.get(SESSION_HEADER), scope.id)
        return _Request(req_view, headers, r.counting, scope, skey, credential(headers, path), None, own)
    if (
        prev is not None
        and not headers.get(SESSION_HEADER)
        and _same_start(view, prev, req_view.conversation_key, r.wire.system_keys)
    ):
        scope, skey = prev.scope, prev.session_key
    else:
        prev = prev if prev is not None and view.reused_elements else None
        conv = request_conversation(headers, view.parsed, path, rt.sealer, dialect)
        scope, skey = conv.scope, conv.session_key
    if prev is not None and prev.session_key != skey:
        prev = None  # another conversation that starts alike: nothing of its own to reuse
    return _Request(req_view, headers, r.counting, scope, skey, credential(headers, path), prev)


# ---------------------------------------------------------------------------------------------
# step 3: messages sent before are replayed


def _replay_messages(
    rt: Runtime, req: _Request, rec: SessionRecord
) -> tuple[LiveZone, list[tuple[int, int]], list[str]]:
    """The live zone (earlier messages frozen, their replay texts with the client's current
    breakpoints carried), the client's message spans and their keyed hashes (a message the
    previous request of this conversation had in the same bytes keeps its hash)."""
    seq = req.parsed.get(req.ckey)
    if not isinstance(seq, list):
        return LiveZone(0, ()), [], []
    spans = list(req.view.elements.get(req.ckey, ()))
    digest = rt.sealer.digest
    known = req.prev.hashes[: req.view.reused_elements] if req.prev is not None else ()
    hashes = list(known) + [digest("m", req.text[a:b]) for a, b in spans[len(known) :]]

    def norm_of(i: int) -> str:
        a, b = spans[i]
        return digest("n", norm_hash(req.text[a:b]))

    def carry_onto(i: int, e: FrozenEntry) -> str | None:
        moved = carry(e.sent_text, seq[i])
        if moved is None and not e.modified:  # e.g. a string the client now sends as a marked block:
            a, b = spans[i]  # its own bytes render the same prompt and carry its marker
            return req.text[a:b]
        return moved

    zone = live_zone(hashes, list(rec.messages), norm_of, carry_onto)
    return zone, spans, hashes


# ---------------------------------------------------------------------------------------------
# step 4: tools


def _tools_step(rt: Runtime, req: _Request, rec: SessionRecord, proxy_tools: tuple[str, ...], fast: bool) -> _ToolsStep:
    """Step 4: ``tools`` as the session sends them (:func:`headroom_core.tools.plan_step`)."""
    prev = req.prev.tools if req.prev is not None else None
    at = ToolsRequest(
        req.wire,
        req.view,
        client_name(req.headers.get("user-agent", "")),
        req.scope.project,
        req.scope.id,
        req.dry_run,
        prev,
    )
    return plan_step(rt, at, rec.tools, rec.known, proxy_tools, fast)


def _decide_proxy_tools(rt: Runtime, req: _Request, ctx: RequestContext) -> tuple[str, ...]:
    """The proxy's tools for a session, decided at its first request and kept for all of it:
    each registered tool that says it is offered (:class:`~headroom_core.ccr.retrieve.RetrieveTool`
    only to an agent's session, the memory tools whenever memory is on)."""
    return tuple(t.name for t in rt.extensions.tools if _safe(t.offered, rt, ctx))


# ---------------------------------------------------------------------------------------------
# step 5: compress the live zone


class _ReadOnlyDecisions:
    """A decision cache that reads but never writes (token counts must not store anything)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def key(self, scope: str, kind_hint: str, text: str) -> str:
        return self._inner.key(scope, kind_hint, text)

    def get(self, h: str, original: str) -> tuple[CompressResult, int, int] | None:
        return self._inner.get(h, original)

    def put(self, h: str, result: CompressResult, tokens_before: int, tokens_after: int) -> None:
        return None


def _compress_step(
    rt: Runtime, req: _Request, live_from: int, lossless: bool, fast: bool, decisions: Any
) -> tuple[PipelineResult, list, str]:
    """Compress every tool output of the live zone, deciding through ``decisions``; returns the
    result, the outputs and the query."""
    s = rt.settings
    outputs = req.request.tool_outputs
    query = req.request.latest_user_text
    live = [o for o in outputs if o.message_index >= live_from]
    started = {} if fast else _start_worker_jobs(rt, req, live, query, lossless, decisions)
    result = compress_outputs(
        live,
        query,
        lambda t, q, h=None: _compress_one(rt, t, q, h, lossless, started=started),
        rt.counter,
        decisions,
        min_tokens=s.min_tokens,
        exclude_tools=s.exclude_tools,
        calls=req.request.tool_calls,
        cache_only=fast,
        scope=req.scope.id,
        lossless=lossless,
    )
    return result, outputs, query


#: When compressing new tool outputs must stop (``time.monotonic()``): the compression worker's
#: budget, and no new output is compressed after it; set by :func:`plan_request_async` (threads it
#: starts see it), unset for a plain :func:`plan_request`.
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("headroom_plan_deadline", default=None)
#: The commit gate of the plan :func:`plan_request_async` runs (None: no caller stops waiting).
_GATE: contextvars.ContextVar[_CommitGate | None] = contextvars.ContextVar("headroom_plan_gate", default=None)


def _out_of_time() -> bool:
    """Whether the plan's time for compressing new tool outputs ran out (:data:`_DEADLINE`)."""
    deadline = _DEADLINE.get()
    return deadline is not None and time.monotonic() >= deadline


def _go_on() -> None:
    """Raise :class:`PlanAbandoned` when the caller stopped waiting for this plan (it sent the
    client's bytes instead): the rest of the walk would be work for nobody."""
    gate = _GATE.get()
    if gate is not None and gate.abandoned:
        raise PlanAbandoned()


def _compress_one(
    rt: Runtime,
    text: str,
    query: str,
    hint: Any,
    lossless: bool,
    share: float = 1.0,
    started: Mapping[int, tuple[str, Future]] | None = None,
) -> CompressResult:
    """One tool output through the content router: a large one that is not prose in the
    compression worker (:mod:`headroom_core.compress.worker`: a timeout stops it, after
    ``share`` of the plan's remaining time), the rest here. Raises
    :class:`~headroom_core.compress.worker.CompressTimeout` past that. ``started``: the worker's
    jobs :func:`_start_worker_jobs` started for this request's outputs (by the text's identity):
    one for ``text`` is awaited instead of being started now."""
    s = rt.settings
    if _out_of_time():
        raise CompressTimeout("the request's time for compression ran out")
    job = started.get(id(text)) if started else None
    if job is not None and job[0] is text:
        return job[1].result()
    if _to_worker(text, hint):
        return rt.compress_worker.run(
            Job(text, query, s.min_tokens, s.min_saving_ratio, hint, lossless), _worker_budget(rt, share)
        )
    return compress_text(
        text,
        query,
        rt.counter,
        min_tokens=s.min_tokens,
        min_saving_ratio=s.min_saving_ratio,
        hint=hint,
        lossless=lossless,
    )


def _to_worker(text: str, hint: Any) -> bool:
    """Whether a tool output is compressed in the worker process: 256 KiB or more, not prose."""
    return len(text) >= WORKER_MIN_CHARS and classify(text, with_text_path(text, hint_for("", hint))).name not in (
        "text",
        "html",
    )


def _worker_budget(rt: Runtime, share: float = 1.0) -> float:
    """Seconds a worker job may take from now: ``share`` of the plan's time left (seconds)."""
    deadline = _DEADLINE.get()
    return max(
        0.0,
        share
        * (deadline - time.monotonic() if deadline is not None else (rt.settings.compress_timeout_seconds or 600.0)),
    )


#: Threads that wait for the compression worker's jobs started ahead of the pipeline (the
#: worker runs one job at a time; the waiting holds no GIL).
_WORKER_WAITS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="headroom-worker-job")


def _start_worker_jobs(
    rt: Runtime, req: _Request, live: list, query: str, lossless: bool, decisions: Any
) -> dict[int, tuple[str, Future]]:
    """Start now, in the compression worker, the jobs of the live zone's outputs the pipeline
    will send there (:func:`_to_worker`; the pipeline's own checks first: not excluded, not an
    error, not a latest view of a file, not over ``MAX_OUTPUT_CHARS``, not decided before), so
    the worker compresses them while this thread compresses the others (a 658 KB request with a
    286 KB log among three new outputs: the two add up otherwise). By the text's identity."""
    s = rt.settings
    calls = req.request.tool_calls
    verbatim = verbatim_call_ids(calls) if calls is not None else frozenset()
    out: dict[int, tuple[str, Future]] = {}
    for o in live:
        if (
            len(o.text) < WORKER_MIN_CHARS
            or len(o.text) > MAX_OUTPUT_CHARS
            or o.is_error
            or o.call_id in verbatim
            or excluded(o.tool_name, s.exclude_tools)
        ):
            continue
        hint = hint_for_call(o.tool_name, calls.get(o.call_id)) if calls is not None else None
        if not _to_worker(o.text, hint):
            continue
        hit = decisions.get(decision_key(decisions, req.scope.id, o.text, lossless), o.text)
        if hit is not None and not hit[0].is_deferred:
            continue
        job = Job(o.text, query, s.min_tokens, s.min_saving_ratio, hint, lossless)
        out[id(o.text)] = (o.text, _WORKER_WAITS.submit(rt.compress_worker.run, job, _worker_budget(rt)))
    return out


def _lossless(req: _Request, proxy_tools: tuple[str, ...]) -> bool:
    """Only lossless transforms when the model cannot redeem a marker in this request: the
    session has no ``headroom_retrieve``, or ``tool_choice`` forbids calling it. (A token count
    measures the request it names, which carries the session's tools.)"""
    if RETRIEVE not in proxy_tools and not req.dry_run:
        return True
    return not req.request.tool_choice_allows(RETRIEVE)


# ---------------------------------------------------------------------------------------------
# the walk


@dataclass(frozen=True)
class _Replayed:
    """Step 3's result: the live ``zone``, the client's conversation element ``spans`` and their
    keyed ``hashes``, and the edits that replay the frozen messages."""

    zone: LiveZone
    spans: list[tuple[int, int]]
    hashes: list[str]
    edits: tuple[jsonedit.Edit, ...]
    #: what :func:`_late_step` decided again (None: nothing)
    late: LateCompression | None = None


def _replay_step(rt: Runtime, req: _Request, rec: SessionRecord) -> _Replayed:
    """Step 3: messages sent before are replayed (:func:`_replay_messages`)."""
    zone, spans, hashes = _replay_messages(rt, req, rec)
    return _Replayed(zone, spans, hashes, tuple(jsonedit.ReplaceRaw((req.ckey, i), t) for i, t in zone.replay))


def _late_step(
    rt: Runtime,
    req: _Request,
    rec: SessionRecord,
    replayed: _Replayed,
    proxy_tools: tuple[str, ...],
    model: str,
    fast: bool,
) -> _Replayed:
    """Step 4b: earlier tool outputs the session sent whole for want of time, decided again once
    (:mod:`headroom_core.cache.late`: compressed where that pays for its cache write, a recorded
    change of the cached prefix); not in a fallback nor for a token count. A database that does
    not answer, or a failure, leaves them for the next turn (logged)."""
    if fast or req.dry_run or not any(e.deferred for e in replayed.zone.entries):
        return replayed
    deadline = _DEADLINE.get()
    if deadline is not None and time.monotonic() >= deadline:  # being abandoned: its fallback decides nothing again
        return replayed
    lossless = _lossless(req, proxy_tools)
    try:
        zone, late = compress_late(
            rt, replayed.zone, req.request.tool_outputs, scope=req.scope.id, lossless=lossless, query=req.request.latest_user_text,
            calls=req.request.tool_calls, model=model, stores=rec.revision, project=req.scope.project,
            compress=lambda t, q, h=None: _compress_one(rt, t, q, h, lossless, TIME_SHARE),
        )  # fmt: skip
    except Exception as e:  # noqa: BLE001 - the request goes on as the session sent it before
        if not lock_wait.is_lock_wait(e):
            log.exception("headroom: deciding earlier tool outputs again failed; they stay as sent")
        return replayed
    if late is None:
        return replayed
    return _Replayed(
        zone,
        replayed.spans,
        replayed.hashes,
        tuple(jsonedit.ReplaceRaw((req.ckey, i), t) for i, t in zone.replay),
        late,
    )


def _context(req: _Request, live_from: int, size: int) -> RequestContext:
    """What extensions see of the request before compression (query and outputs come later)."""
    return RequestContext(
        dialect=req.dialect,
        body=req.parsed,
        headers=req.headers,
        project=req.scope.project,
        session_key=req.session_key,
        query="",
        client=client_name(req.headers.get("user-agent", "")),
        tool_outputs=(),
        live_from=live_from,
        scope=req.scope.id,
        dry_run=req.dry_run,
        size=size,
    )


@dataclass(frozen=True)
class _Compressed:
    """Step 5's result: the pipeline's ``result`` over the live zone's tool outputs, every
    ``outputs`` of the request, the ``query`` (latest user text), the ``images`` step's outcome,
    whether only lossless transforms were allowed, and the decisions made, not yet written."""

    result: PipelineResult
    outputs: list
    query: str
    images: ImagesOutcome
    lossless: bool
    pending: tuple[originals_first.Pending, ...] = ()

    @property
    def edits(self) -> list[jsonedit.Edit]:
        out: list[jsonedit.Edit] = [jsonedit.Replace(p, t) for p, t in self.result.replacements]
        return out + list(self.images.edits)


def _content_step(rt: Runtime, req: _Request, live_from: int, proxy_tools: tuple[str, ...], fast: bool) -> _Compressed:
    """Step 5: tool outputs of the live zone compressed; 5b: images of the live zone resized to
    what the provider uses anyway, reduced further (opt-in, original retrievable) only when the
    model can call ``headroom_retrieve``."""
    lossless = _lossless(req, proxy_tools)
    decisions = _ReadOnlyDecisions(rt.decisions) if req.dry_run else originals_first.DeferredDecisions(rt.decisions)
    result, outputs, query = _compress_step(rt, req, live_from, lossless, fast, decisions)
    s = rt.settings
    images = (
        plan_images(
            req.dialect, req.parsed, live_from, 0 if lossless else s.image_max_tokens, s.exclude_tools, req.request
        )
        if s.images and not fast
        else ImagesOutcome()
    )
    pending = decisions.pending if isinstance(decisions, originals_first.DeferredDecisions) else ()
    return _Compressed(result, outputs, query, images, lossless, pending)


def _originals_step(
    rt: Runtime, req: _Request, live_from: int, content: _Compressed, fast: bool
) -> tuple[_Compressed, originals_first.Unstored | None]:
    """Step 5c, before anything goes upstream: the originals of what step 5 shortens stored, with
    its new decisions, in one transaction (:mod:`headroom_core.originals_first`). When that
    fails, those outputs go whole or losslessly compressed, images only resized, and what was
    sent is kept for later turns; the second value says why (None: stored)."""
    if req.dry_run:
        return content, None
    originals = [(o.key, o.original, "tool_output") for o in content.result.offloads] + [
        (o.key, o.original, IMAGE_KIND) for o in content.images.offloads
    ]
    try:
        originals_first.store_before_forwarding(rt.store, rt.decisions, req.scope.id, originals, content.pending)
        return content, None
    except (SQLAlchemyError, DatabaseError) as e:
        busy = lock_wait.is_lock_wait(e)
        cause = DB_BUSY_WORDS if busy else f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:160]
    if not originals:  # decisions only, none naming an original: applied as made, kept in memory
        originals_first.hold(rt.decisions, req.scope.id, [], content.result, content.pending)
        log.warning("headroom: a request's compression decisions could not be stored (%s); kept in memory", cause)
        return replace(content, pending=()), None
    lossy = originals_first.unstorable(content.result)
    outputs = [o for o in content.outputs if o.path in lossy]
    instead = originals_first.DeferredDecisions(
        rt.decisions, reads_may_fail=True
    )  # nothing written; a failing read is a miss
    alt = compress_outputs(
        outputs, content.query, lambda t, q, h=None: _compress_one(rt, t, q, h, True), rt.counter, instead,
        min_tokens=rt.settings.min_tokens, calls=req.request.tool_calls, cache_only=fast, scope=req.scope.id, lossless=True,
    ) if outputs else PipelineResult((), ())  # fmt: skip
    result = originals_first.demoted(content.result, alt)
    originals_first.hold(rt.decisions, req.scope.id, outputs, result, content.pending + instead.pending)
    s = rt.settings
    images = (
        plan_images(req.dialect, req.parsed, live_from, 0, s.exclude_tools, req.request)
        if content.images.offloads
        else content.images
    )
    what = [f"{len(lossy)} tool outputs sent whole or losslessly compressed"] if lossy else []
    what += [f"{len(content.images.offloads)} images only resized"] if content.images.offloads else []
    words = f"{' and '.join(what)}: their originals could not be stored ({cause})"
    log.warning("headroom: %s", words)
    return replace(content, result=result, images=images, pending=()), originals_first.Unstored(
        Code.DB_BUSY if busy else Code.ORIGINALS_UNSTORED, words
    )


def _inject_step(
    rt: Runtime, req: _Request, ctx: RequestContext, replayed: _Replayed, fast: bool
) -> tuple[list[str], list[jsonedit.Edit]]:
    """Step 6: what the injectors contribute, and the edits appending it to the latest user
    message (none for a fallback, a token count, or when the latest message is frozen)."""
    injected = [] if fast or req.dry_run else [t for t in (_safe(inj, rt, ctx) for inj in rt.extensions.injectors) if t]
    if injected and replayed.spans and replayed.zone.start < len(replayed.spans):
        return injected, tail_text_edits(req.request, req.parsed, "\n\n".join(injected))
    return injected, []


@dataclass(frozen=True)
class _Splice:
    """Step 7's text: the forwarded ``text`` and the conversation's element spans in it."""

    text: str
    spans: list[tuple[int, int]]


def _splice_step(req: _Request, replayed: _Replayed, edits: list[jsonedit.Edit]) -> _Splice:
    """Step 7: every edit spliced into the client's text (untouched bytes stay the client's),
    then verified (:func:`_check_messages`, :func:`_check_markers`; they raise)."""
    spliced = jsonedit.apply_spliced(req.text, edits, _locator(req)) if edits else jsonedit.Spliced(req.text, ())
    new_spans = [(spliced.map(a), spliced.map(b)) for a, b in replayed.spans]
    if edits:
        _check_messages(req, replayed.zone, replayed.spans, new_spans, spliced.text)
        _check_markers(req.text, spliced, req.wire.cache_marker)
    return _Splice(spliced.text, new_spans)


def _remember_step(
    rt: Runtime, req: _Request, rec: SessionRecord, replayed: _Replayed, out: _Splice, content: _Compressed, tools: _ToolsStep,
    proxy_tools: tuple[str, ...], fast: bool, commit: Callable[[], bool] | None, defer: bool,
) -> Callable[[], None] | None:  # fmt: skip
    """Step 7: remember the session's state for the next turn (now, or as the returned job when
    ``defer``). Nothing for a token count. Raises :class:`PlanAbandoned` when ``commit`` says the
    caller stopped waiting."""
    if req.dry_run:
        return None
    if commit is not None and not commit():
        raise PlanAbandoned()
    recent = RecentRequest(
        req.view, req.scope, req.session_key, tuple(replayed.hashes), ((rec.tools, proxy_tools, fast), tools)
    )

    def store() -> None:
        if tools.figures is not None:  # counted from now on, the request on its way (tools_figures)
            tools.figures.start()
        try:
            # the answer waits for it: never for another writer's lock; a huge body: no collections
            with lock_wait.bounded(), gc_tuning.paused(len(req.text) >= gc_tuning.PAUSE_MIN_BYTES):
                _remember(
                    rt,
                    req,
                    rec,
                    replayed.zone,
                    replayed.spans,
                    replayed.hashes,
                    out.text,
                    out.spans,
                    content.result,
                    content.images,
                    tools.state,
                )
        except Exception as e:
            if not defer or not lock_wait.is_lock_wait(e):
                raise  # undeferred: the plan falls back (db_busy) and sends nothing it could not store
            log.warning(
                "headroom: %s; the session's state of this turn is not stored (its next turn starts anew)",
                DB_BUSY_WORDS,
            )
        if not req.store_key:  # a continuation is no base for another request's identity
            rt.recent.remember(req.credential, req.headers.get(PROJECT_HEADER, ""), recent)

    if defer:
        return store
    store()
    return None


def _what(replayed: _Replayed, tools: _ToolsStep, content: _Compressed, injected: list[str]) -> str:
    """The plan's reason in words for a rewritten request."""
    result, images = content.result, content.images
    what = [f"{len(result.replacements)} tool outputs compressed"] if result.replacements else []
    if tools.edits:
        what.append("tools sent as the session sends them")
    if images.changed:
        what.append(f"{images.changed} images resized")
    if replayed.zone.replay:
        what.append(f"{len(replayed.zone.replay)} earlier messages replayed")
    if replayed.late is not None:
        what.append(replayed.late.words())
    if injected:
        what.append("context injected")
    if content.lossless and result.replacements:
        what.append("lossless only")
    return ", ".join(what)


def _plan(
    rt: Runtime,
    r: Route,
    path: str,
    headers: Mapping[str, str],
    body: bytes,
    commit: Callable[[], bool] | None = None,
    fast: bool = False,
    defer: bool = False,
    continues: Conversation | None = None,
) -> RequestPlan:
    """The walk (module docstring): each step a function with a typed result."""
    got = _classify(rt, r, path, headers, body, continues)  # 1-2
    if isinstance(got, RequestPlan):
        return got
    req = got
    rec = rt.session_store.load(req.store_key or req.session_key)
    replayed = _replay_step(rt, req, rec)  # 3
    _go_on()
    ctx = _context(req, replayed.zone.start, len(body))
    proxy_tools = rec.tools.proxy_tools if rec.known else _decide_proxy_tools(rt, req, ctx)
    tools = _tools_step(rt, req, rec, proxy_tools, fast)  # 4
    proxy_tools = tools.state.proxy_tools  # the tools step may add headroom_tool_docs
    model = req.wire.model_of(req.whole, path)
    replayed = _late_step(rt, req, rec, replayed, proxy_tools, model, fast)  # 4b
    _go_on()
    content = _content_step(rt, req, replayed.zone.start, proxy_tools, fast or _out_of_time())  # 5
    timed_out = None if fast else _timed_out(rt, content)
    if commit is not None and not req.dry_run and not commit():  # past its time: the fallback's decisions stand
        raise PlanAbandoned()
    if timed_out is not None:  # said once, by the plan that goes upstream (an abandoned one says nothing)
        log.warning("headroom: %s; a %d-byte request goes on with the decisions made before", timed_out, len(req.text))
    content, unstored = _originals_step(
        rt, req, replayed.zone.start, content, fast
    )  # 5c: before anything goes upstream
    ctx = replace(
        ctx,
        query=content.query,
        tool_outputs=tuple(content.outputs),
        offloaded=bool(content.result.offloads or content.images.offloads),
    )
    injected, inject_edits = _inject_step(rt, req, ctx, replayed, fast or timed_out is not None or _out_of_time())  # 6
    edits = [*replayed.edits, *tools.edits, *content.edits, *inject_edits]
    out = _splice_step(req, replayed, edits)  # 7
    if timed_out is not None and not req.dry_run and _over_fail_open(rt, req, out):
        return _not_compressed(rt, r, body, timed_out)  # refused (413) before anything is stored for the session
    job = _remember_step(rt, req, rec, replayed, out, content, tools, proxy_tools, fast, commit, defer)
    hidden = frozenset(proxy_tools) if isinstance(req.wire.tools_of(req.parsed), list) or tools.edits else frozenset()
    n = len(body)
    plan = RequestPlan(
        Action.PASSTHROUGH,
        "nothing to compress",
        req.dialect,
        session_key=req.session_key,
        hidden_tools=hidden,
        client_body=req.parsed,
        pipeline=content.result,
        tools=tools.figures,
        project=req.scope.project,
        context=ctx,
        live=replayed.zone,
        images=content.images,
        bytes_before=n,
        bytes_after=n,
        dry_run=req.dry_run,
        persist=job,
        conversation=Conversation(req.scope, req.session_key),
        model=model,
        prefix=_turn_prefix(rt, req, rec, out, tools.state),
        late=replayed.late,
        notes=() if rec.verified else (STATE_UNVERIFIED,),
    )
    if unstored is not None:
        plan = replace(plan, code=unstored.code, reason=unstored.words[:300])
    if not edits:
        return _in_time(plan, timed_out)
    new_body = (req.envelope.wrap(out.text) if req.envelope is not None else out.text).encode("utf-8", "surrogatepass")
    what = _what(replayed, tools, content, injected) + (f"; {unstored.words}" if unstored is not None else "")
    return _in_time(
        replace(plan, action=Action.REWRITE, reason=what[:300], body=new_body, bytes_after=len(new_body)), timed_out
    )


def _timed_out(rt: Runtime, content: _Compressed) -> str | None:
    """Why the content step stopped compressing for want of time, in words (None: it did not):
    how many tool outputs it sent whole instead of deciding them."""
    whole = sum(1 for b in content.result.blocks if b.strategy == DEFERRED and not b.cached)
    if not whole:
        return None
    t = rt.settings.compress_timeout_seconds
    return f"compression timed out after {WORK_SHARE * t:g} s ({WORK_SHARE:.0%} of compress_timeout_seconds {t:g} s): {whole} new tool outputs sent whole"


def _over_fail_open(rt: Runtime, req: _Request, out: _Splice) -> bool:
    """Whether what a plan that ran out of time would send is over a set ``fail_open_max_bytes``
    (such a request is refused rather than sent without its new compression)."""
    limit = rt.settings.fail_open_max_bytes
    if not limit or len(out.text) > 4 * limit:  # four UTF-8 bytes a character at most
        return bool(limit)
    return (
        len((req.envelope.wrap(out.text) if req.envelope is not None else out.text).encode("utf-8", "surrogatepass"))
        > limit
    )


def _in_time(plan: RequestPlan, timed_out: str | None) -> RequestPlan:
    """``plan``, said to be a fallback for want of time when ``timed_out`` (its words)."""
    if timed_out is None or plan.code is not Code.PLANNED:
        return plan
    return replace(plan, code=Code.FALLBACK, reason=f"{timed_out}; {plan.reason}"[:300])


def _turn_prefix(
    rt: Runtime, req: _Request, rec: SessionRecord, out: _Splice, tools: SessionTools
) -> TurnPrefix | None:
    """This request's prefix against its session's previous turn (:mod:`headroom_core.cache.turn_prefix`);
    None if it cannot be told (a report only: never fails the plan)."""
    try:
        members = req.view.members
        system = [req.text[a:b] for a, b in (members[k] for k in req.wire.system_keys if k in members)]
    except Exception:  # noqa: BLE001 - a report only
        return None
    return compare_turn(
        rec.known,
        [e.sent_text for e in rec.messages],
        rec.tools.text,
        out.spans,
        out.text,
        tools.text,
        system_digest(rt.sealer.digest, system),
        _same_but_markers,
    )


def _same_but_markers(before: str, now: str) -> bool:
    """Whether two message texts differ only in ``cache_control`` markers (or string vs one text block)."""
    try:
        return norm_hash(before) == norm_hash(now)
    except (ValueError, RecursionError):
        return False


def _remember(
    rt: Runtime,
    req: _Request,
    rec: SessionRecord,
    zone: LiveZone,
    spans: list[tuple[int, int]],
    hashes: list[str],
    new_text: str,
    new_spans: list[tuple[int, int]],
    result: PipelineResult,
    images: ImagesOutcome,
    tools: SessionTools,
) -> None:
    """Store what this request sent, for the next turn: the session (its tools and every
    message), the replayed messages' originals kept alive; then the originals store evicted when
    this request stored originals (before it was forwarded: :func:`_originals_step`)."""
    _keep_originals(rt, req, zone)
    entries = list(zone.entries)
    if spans:
        weight: dict[int, list[int]] = {}
        keys: dict[int, list[tuple[str, tuple]]] = {}
        kinds: dict[int, list[tuple[str, str, int, int]]] = {}
        deferred: dict[int, list[tuple]] = {}  # outputs sent whole for want of time: decided again later
        for blk in result.blocks:
            if blk.strategy == DEFERRED and len(blk.path) > 1 and isinstance(blk.path[1], int):
                deferred.setdefault(blk.path[1], []).append(tuple(blk.path[2:]))
            if blk.changed and len(blk.path) > 1 and isinstance(blk.path[1], int):
                w = weight.setdefault(blk.path[1], [0, 0])
                w[0] += blk.tokens_before
                w[1] += blk.tokens_after
                keys.setdefault(blk.path[1], []).extend((k, tuple(blk.path[2:])) for k in blk.offload_keys)
                kinds.setdefault(blk.path[1], []).append((blk.kind, blk.tool_name, blk.tokens_before, blk.tokens_after))
        for i in range(zone.start, len(spans)):
            (a, b), (na, nb) = spans[i], new_spans[i]
            own = req.text[a:b]
            fwd = new_text[na:nb]
            before, after = weight.get(i, (0, 0))
            entries.append(
                FrozenEntry(
                    i,
                    hashes[i],
                    rt.sealer.digest("n", norm_hash(own)),
                    fwd,
                    fwd != own,
                    before,
                    after,
                    tuple(keys.get(i, ())),
                    tuple(kinds.get(i, ())),
                    tuple(deferred.get(i, ())),
                )  # fmt: skip
            )
    rt.session_store.save(rec, req.dialect.value, tools, tuple(entries))
    if result.offloads or images.offloads:
        try:
            rt.store.evict()
        except Exception as e:  # noqa: BLE001 - the next request's eviction catches up
            log.warning(
                "headroom: the originals store was not evicted after a request (%s: %s)",
                type(e).__name__,
                str(e).splitlines()[0] if str(e) else "",
            )


def _locator(req: _Request) -> jsonedit.Locator:
    """A :class:`~headroom_core.wire.jsonedit.Locator` of the request text that already knows
    the spans its parse found (top-level members, conversation and tools elements)."""
    v = req.view
    known: dict[tuple, dict[Any, tuple[int, int]]] = {(): dict(v.members)}
    for key, els in v.elements.items():
        known[(key,)] = dict(enumerate(els))
    return jsonedit.Locator(v.text, known)


def _check_messages(
    req: _Request, zone: LiveZone, spans: list[tuple[int, int]], new_spans: list[tuple[int, int]], new_text: str
) -> None:
    """Raise ``AssertionError`` when an edit changed the conversation's shape: its length, or
    the role, type or tool call ids of a message the proxy changed in this request (replayed
    messages were checked when they were first sent)."""
    seq = req.parsed.get(req.ckey)
    if not isinstance(seq, list):
        return
    if len(new_spans) != len(spans):
        raise AssertionError("an edit changed the number of messages")
    replayed = {i for i, _ in zone.replay}
    for i in range(zone.start, len(spans)):
        if i in replayed:
            continue
        (a, b), (na, nb) = spans[i], new_spans[i]
        if nb - na == b - a and new_text[na:nb] == req.text[a:b]:
            continue
        if req.wire.element_shape(json.loads(new_text[na:nb])) != req.wire.element_shape(seq[i]):
            raise AssertionError(f"an edit changed message {i}'s role, type or call ids")


def _check_markers(text: str, spliced: jsonedit.Spliced, marker: str = "cache_control") -> None:
    """Raise :class:`~headroom_core.cache.breakpoints.BreakpointError` when the edits added or
    dropped a ``cache_control`` breakpoint (counted in each edited span, old against new)."""
    old = new = 0
    for a, b, n in spliced.splices:
        na = spliced.map(a)
        old += marker_count(text, a, b, marker)
        new += marker_count(spliced.text, na, na + n, marker)
    if old != new:
        raise BreakpointError(f"cache_control breakpoints changed in the edited parts: {old} -> {new}")


def _keep_originals(rt: Runtime, req: _Request, zone: LiveZone) -> None:
    """Keep alive the originals that replayed messages name: the client re-sends each one at
    the same place, so an original that expired is stored again from there."""
    seq = req.parsed.get(req.ckey)
    if not isinstance(seq, list):
        return
    for e in zone.entries:
        for key, rel in e.offloads:
            v = jsonedit.value_at(seq, (e.position,) + tuple(rel))
            if isinstance(v, str) and offload_key(v) == key:
                rt.store.keep(key, v, req.scope.id)


def run_observers(rt: Runtime, plan: RequestPlan) -> None:
    """Run the observers (live learning, memory capture) on a planned request, after it was
    forwarded; failures are logged. Nothing runs for token counts or fallbacks. The answer and
    the client's next request wait for them: their statements share a lock-wait budget
    (:mod:`headroom_core.db.lock_wait`). A huge request's are run with the cyclic collector
    paused (:func:`~headroom_core.gc_tuning.paused`: a long session's learning allocates a step per
    tool call of its whole history the first time it is seen)."""
    with lock_wait.bounded(), gc_tuning.paused(plan.bytes_before >= gc_tuning.PAUSE_MIN_BYTES):
        _observe(rt, plan, rt.extensions.observers)


def run_diagnostics(rt: Runtime, plan: RequestPlan) -> None:
    """Run the diagnostic observers (the prefix log) on a planned request, after its observers;
    as :func:`run_observers`, but nothing a client sees waits for them."""
    _observe(rt, plan, rt.extensions.diagnostics)


def _observe(rt: Runtime, plan: RequestPlan, observers: list) -> None:
    ctx = plan.context
    if ctx is None or plan.dry_run or plan.code not in (Code.PLANNED, Code.ORIGINALS_UNSTORED):
        return  # a fallback's context is not the request's whole
    for obs in observers:
        _safe(obs, rt, ctx)


def _safe(fn, rt: Runtime, ctx: RequestContext):
    """Run an extension; its failure is logged and never fails the request."""
    try:
        return fn(rt, ctx)
    except Exception:  # noqa: BLE001
        log.exception("headroom: extension %s failed", getattr(fn, "__qualname__", fn))
        return None
