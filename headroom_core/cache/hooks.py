"""Registration of the prompt-cache feature in the request walk: an observer that records each
session's prefix (system prompt and tools) so the parts that change between requests, and so
break the provider's cache, can be reported (``headroom cache report``)."""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING

from headroom_core.cache.prefix_log import PrefixLog
from headroom_core.cache.volatile import prefix_of
from headroom_core.extensions import Extensions, RequestContext
from headroom_core.wire.dialects import dialect as wire_dialect

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
    prefix is new for the session)."""
    prefix_log(rt).observe(
        ctx.session_key, ctx.project, ctx.dialect.value, ctx.client, prefix_of(ctx.body, wire_dialect(ctx.dialect))
    )


def register(ext: "Extensions[Runtime]") -> None:
    """Add the prefix observer to the request walk (a diagnostic: no answer waits for it)."""
    ext.diagnostics.append(observe_prefix)
