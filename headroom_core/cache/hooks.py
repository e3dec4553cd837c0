"""Registration of the prompt-cache feature in the request walk: an observer that records each
session's prefix (system prompt and tools) so the parts that change between requests, and so
break the provider's cache, can be reported (``headroom cache report``)."""

from __future__ import annotations

import hashlib
import threading
import weakref
from typing import TYPE_CHECKING

from headroom_core.cache.prefix_log import PrefixLog
from headroom_core.cache.volatile import prefix_of, system_text
from headroom_core.extensions import Extensions, RequestContext

if TYPE_CHECKING:
    from headroom_core.runtime import Runtime

_logs: "weakref.WeakKeyDictionary[Runtime, PrefixLog]" = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def prefix_log(rt: "Runtime") -> PrefixLog:
    """The :class:`PrefixLog` of runtime ``rt`` (one per runtime, created on first use)."""
    with _lock:
        log = _logs.get(rt)
        if log is None:
            log = _logs[rt] = PrefixLog(rt.sessions)
        return log


def observe_prefix(rt: "Runtime", ctx: RequestContext) -> None:
    """Observer: record the request's prefix for its session (a database write only when the
    prefix is new for the session). When the tools step saw this request's ``tools`` text, the
    system text and that text's digest tell an unchanged prefix at once; the canonical
    :class:`~headroom_core.cache.volatile.Prefix` (every tool serialised with sorted keys) is
    built only for a session's first request or a change."""
    log = prefix_log(rt)
    tools = ctx.body.get("tools")
    digest = rt.tools_minifier.text_digest(tools) if isinstance(tools, list) and tools else b"-"
    quick = None
    if digest is not None:
        quick = hashlib.blake2b(system_text(ctx.body).encode("utf-8", "surrogatepass") + b"\0" + digest, digest_size=20).digest()
        if log.seen_quick(ctx.session_key, quick):
            return
    log.observe(ctx.session_key, ctx.project, ctx.dialect.value, ctx.client, prefix_of(ctx.body), quick=quick)


def register(ext: Extensions) -> None:
    """Add the prefix observer to the request walk."""
    ext.observers.append(observe_prefix)
