"""Memory's registration in the request walk (``headroom_core.extensions``):

- the five memory tools (offered to every session that starts while memory is on, for the
  whole session: decided at its first request, so the cached ``tools`` prefix never changes);
- an injector: the memories of the request's project most relevant to the latest user message,
  within the token and entry budgets and above the similarity floor, not already injected earlier
  in the session;
- an observer: explicit "remember: …" instructions in the live zone's user messages are saved.

Bypassed requests never reach extensions. Any failure is logged and the request goes on.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from sqlalchemy.exc import SQLAlchemyError

from headroom_core.extensions import Extensions, RequestContext
from headroom_core.memory import capture, render
from headroom_core.memory.service import service
from headroom_core.memory.store import MemoryInputError
from headroom_core.memory.tools import ALL_TOOLS

if TYPE_CHECKING:
    from headroom_core.runtime import Runtime

log = logging.getLogger("headroom")

TEXT_MIN_SIMILARITY = 0.15  # floor for text search (cosine of word-prefix sets), before the model loads


def inject_memories(rt: "Runtime", ctx: RequestContext) -> str | None:
    """The memory block for this request, or None (memory off, nothing relevant, no user turn)."""
    svc = service(rt)
    if not svc.enabled:
        return None
    query = capture.latest_user_turn(ctx.dialect, ctx.body, ctx.live_from)
    if not query:
        return None
    store = svc.store()
    if store is None:
        return None
    s = rt.settings
    try:
        seen = capture.injected_ids(
            e.sent_text for e in rt.session_store.load(ctx.session_key).messages[: ctx.live_from] if e.modified
        )
        svc.note_search_mode(store)
        floor = s.memory_min_similarity if store.vector_mode else TEXT_MIN_SIMILARITY
        res = store.search(ctx.project, query, limit=s.memory_inject_max_entries + len(seen), min_similarity=floor)
    except SQLAlchemyError as e:
        svc.store_failed("memory search", e)
        return None
    hits = [h for h in res.hits if h.memory.id not in seen]
    text, ids = render.inject_block(hits, s.memory_inject_max_entries, s.memory_inject_max_tokens, rt.counter.count)
    if ids:
        svc.touch_later(store, ids)
        log.info("headroom memory: %d memories injected (%s search, project %s)", len(ids), res.mode, ctx.project)
    return text


def save_explicit(rt: "Runtime", ctx: RequestContext) -> None:
    """Save what the user explicitly asked to remember in this turn's user messages."""
    svc = service(rt)
    if not svc.enabled:
        return
    wanted = [
        t
        for text in capture.live_user_texts(ctx.dialect, ctx.body, ctx.live_from)
        for t in capture.explicit_instructions(text)
    ]
    if not wanted:
        return
    store = svc.store()
    if store is None:
        return
    for t in wanted:
        try:
            out = store.save(ctx.project, t, capture.guess_kind(t), source=ctx.client or "user")
            log.info(
                "headroom memory: user instruction %s as memory %s (project %s)", out.action, out.memory.id, ctx.project
            )
        except MemoryInputError as e:
            log.warning("headroom memory: user instruction not saved: %s", e)
        except SQLAlchemyError as e:
            svc.store_failed("saving a user instruction", e)
            return


def register(ext: "Extensions[Runtime]") -> None:
    """Add the memory tools (before the retrieve tool), the injector and the observer."""
    ext.tools[0:0] = [cls() for cls in ALL_TOOLS]
    ext.injectors.append(inject_memories)
    ext.observers.append(save_explicit)
