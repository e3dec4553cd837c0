"""The memory tools the proxy offers the model and answers itself (like ``headroom_retrieve``):
``memory_save``, ``memory_search``, ``memory_update``, ``memory_delete``, ``memory_list``.

Every call works on the request's own project. ``answer`` never raises: a malformed call gets a
tool result that says what was wrong, a store failure one that says the store is unavailable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy.exc import SQLAlchemyError

from headroom_core.extensions import RequestContext
from headroom_core.memory import render
from headroom_core.memory.models import KINDS
from headroom_core.memory.service import service
from headroom_core.memory.store import MemoryInputError, MemoryStore, normalize_id
from headroom_core.wire.blocks import ToolCall

if TYPE_CHECKING:
    from headroom_core.runtime import Runtime

_KIND = {
    "type": "string",
    "enum": list(KINDS),
    "description": "fact (how things are), rule (what must or must not be done), preference (how the user likes it), pitfall (what goes wrong and how to avoid it).",
}
_ID = {"type": "string", "description": "The memory's id: 12 hex digits, as shown in [memory <id>]."}

SEARCH_MAX = 20
SEARCH_FLOOR = 0.15  # cosine under which a search result is noise (all-MiniLM-L6-v2)
LIST_MAX = 50


class _Args(dict):
    """The call's arguments; ``bad`` says what is wrong with them, if anything."""

    bad: str | None = None


def _args(call: ToolCall) -> _Args:
    a = call.arguments
    if not isinstance(a, dict):
        out = _Args()
        out.bad = (
            f"the arguments must be a JSON object, got {call.raw_arguments[:200]!r}"
            if call.raw_arguments
            else "the arguments must be a JSON object"
        )
        return out
    return _Args(a)


def _int(a: dict[str, Any], key: str, default: int, lo: int, hi: int) -> int | str:
    v = a.get(key, default)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        return f'"{key}" must be a whole number from {lo} to {hi}'
    try:
        n = int(v)
    except ValueError:
        return f'"{key}" must be a whole number from {lo} to {hi}'
    return max(lo, min(hi, n))


class MemoryTool:
    """Common part of the five tools: offering and error handling. Subclasses define
    ``name``, ``description``, ``schema`` and ``run(store, ctx, args) -> str``."""

    name = ""
    description = ""
    schema: dict[str, Any] = {}

    def offered(self, rt: "Runtime", ctx: RequestContext) -> bool:
        return service(rt).offered()

    def answer(self, rt: "Runtime", ctx: RequestContext | None, call: ToolCall) -> str:
        if ctx is None:
            return f"{self.name} error: the proxy lost this request's context; try again in the next turn."
        args = _args(call)
        if args.bad:
            return f"{self.name} error: {args.bad}."
        svc = service(rt)
        store = svc.store()
        if store is None:
            return f"{self.name} error: the memory store is unavailable right now; nothing was done."
        try:
            return self.run(svc, store, ctx, args)
        except MemoryInputError as e:
            return f"{self.name} error: {e}."
        except SQLAlchemyError as e:
            svc.store_failed(self.name, e)
            return (
                f"{self.name} error: the memory store is unavailable right now ({type(e).__name__}); nothing was done."
            )

    def run(self, svc, store: MemoryStore, ctx: RequestContext, args: dict[str, Any]) -> str:  # pragma: no cover
        raise NotImplementedError


class MemorySave(MemoryTool):
    """``memory_save(text, kind?)``: save, or merge into a near-duplicate; secrets redacted."""

    name = "memory_save"
    description = (
        "Save one durable memory about this project for future sessions. Other coding agents on the same "
        "project (Claude Code, Codex, ...) will see it too. Save what will matter again: commands that work "
        "(e.g. 'Tests run with `make check`, not plain `pytest`'), rules the user set "
        "(e.g. 'Never edit files under generated/'), preferences, pitfalls and their fixes. One self-contained "
        "statement per call; never secrets (they are redacted). A near-duplicate of an existing memory updates it."
    )
    schema = {
        "type": "object",
        "properties": {
            "text": {"type": "string", "description": "The statement to remember, self-contained."},
            "kind": _KIND,
        },
        "required": ["text"],
    }

    def run(self, svc, store, ctx, args):
        out = store.save(ctx.project, args.get("text"), args.get("kind") or "fact", source=ctx.client or "unknown")
        m = out.memory
        red = (
            f" ({len(out.redacted)} secret(s) redacted: {', '.join(sorted(set(out.redacted)))})" if out.redacted else ""
        )
        if out.action == "merged":
            return f"Updated existing memory {m.id} instead of adding a copy (similarity {out.similarity:.2f}; seen {m.evidence} times){red}: {m.text}"
        return f"Saved memory {m.id} ({m.kind}){red}: {m.text}"


class MemorySearch(MemoryTool):
    """``memory_search(query, limit?)``: the best matches of the project, with ids and similarity."""

    name = "memory_search"
    description = "Search this project's memories by meaning. Returns the best matches with their ids."
    schema = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What you want to know."},
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": SEARCH_MAX,
                "description": "At most this many results (default 5).",
            },
        },
        "required": ["query"],
    }

    def run(self, svc, store, ctx, args):
        q = args.get("query")
        if not isinstance(q, str) or not q.strip():
            raise MemoryInputError('the call needs a non-empty "query"')
        limit = _int(args, "limit", 5, 1, SEARCH_MAX)
        if isinstance(limit, str):
            raise MemoryInputError(limit)
        svc.note_search_mode(store)
        res = store.search(ctx.project, q, limit=limit, min_similarity=SEARCH_FLOOR if store.vector_mode else 0.0)
        if not res.hits:
            return f"No memory of this project matches {q[:100]!r}."
        svc.touch_later(store, [h.memory.id for h in res.hits])
        head = f"{len(res.hits)} memories ({res.mode} search), best first:"
        return "\n".join([head] + [f"{render.line(h.memory)}  (similarity {h.similarity:.2f})" for h in res.hits])


class MemoryUpdate(MemoryTool):
    """``memory_update(id, text?, kind?)``: change a memory of the project."""

    name = "memory_update"
    description = "Change a memory of this project by id: give the corrected text and/or kind."
    schema = {
        "type": "object",
        "properties": {"id": _ID, "text": {"type": "string", "description": "The corrected statement."}, "kind": _KIND},
        "required": ["id"],
    }

    def run(self, svc, store, ctx, args):
        mid = normalize_id(args.get("id"))
        if mid is None:
            raise MemoryInputError(f'"id" must be a memory id (12 hex digits), got {str(args.get("id"))[:40]!r}')
        m = store.update(ctx.project, mid, args.get("text"), args.get("kind"))
        if m is None:
            return f"memory_update error: this project has no memory with id {mid}."
        return f"Updated memory {m.id} ({m.kind}): {m.text}"


class MemoryDelete(MemoryTool):
    """``memory_delete(id)``: delete a memory of the project."""

    name = "memory_delete"
    description = "Delete a memory of this project by id, when it is wrong or obsolete."
    schema = {"type": "object", "properties": {"id": _ID}, "required": ["id"]}

    def run(self, svc, store, ctx, args):
        mid = normalize_id(args.get("id"))
        if mid is None:
            raise MemoryInputError(f'"id" must be a memory id (12 hex digits), got {str(args.get("id"))[:40]!r}')
        if not store.delete(ctx.project, mid):
            return f"memory_delete error: this project has no memory with id {mid}."
        return f"Deleted memory {mid}."


class MemoryList(MemoryTool):
    """``memory_list(kind?, limit?)``: the project's memories, newest update first."""

    name = "memory_list"
    description = "List this project's memories, most recently updated first; optionally only one kind."
    schema = {
        "type": "object",
        "properties": {
            "kind": _KIND,
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": LIST_MAX,
                "description": "At most this many (default 20).",
            },
        },
    }

    def run(self, svc, store, ctx, args):
        kind = args.get("kind")
        if kind is not None and kind not in KINDS:
            raise MemoryInputError(f'"kind" must be one of {", ".join(KINDS)}; got {str(kind)[:40]!r}')
        limit = _int(args, "limit", 20, 1, LIST_MAX)
        if isinstance(limit, str):
            raise MemoryInputError(limit)
        rows = store.list(ctx.project, kind=kind, limit=limit)
        if not rows:
            return "This project has no memories" + (f" of kind {kind}." if kind else " yet.")
        return "\n".join([f"{len(rows)} memories of this project, newest first:"] + [render.line(m) for m in rows])


ALL_TOOLS = (MemorySave, MemorySearch, MemoryUpdate, MemoryDelete, MemoryList)
