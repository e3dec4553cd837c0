"""The Headroom MCP server (stdio), built on the official ``mcp`` Python SDK (``FastMCP``).

Tools (the same stores the proxy uses, so a key or a memory written by one is seen by the other):

- ``headroom_retrieve(key)``: the original behind a ``[headroom omitted …; headroom_retrieve
  key=…]`` marker, byte for byte (an image original comes back as an MCP image content).
- ``memory_search(query, limit)`` / ``memory_save(text, kind)``: the project's memories.
- ``compress(text, query, kind)``: the proxy's content router on any text; what it drops is
  kept in the originals store, so ``headroom_retrieve`` gets it back.

The project is the directory the agent starts the server in (Claude Code and Codex start stdio
servers in their working directory), the same string the proxy reads from the agent's
environment block; ``--project`` overrides it. Memory works here whatever the proxy's
``memory`` setting: registering this server is the opt-in. Nothing is written to standard
output but the protocol (logs go to standard error).
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.types import ImageContent, TextContent

from headroom_core import __version__
from headroom_core.ccr import retrieve
from headroom_core.memory.models import KINDS as MEMORY_KINDS
from headroom_core.settings import Settings
from headroom_core.wire.blocks import ErrorAnswer, ImageAnswer, ToolCall

if TYPE_CHECKING:  # imported when first used: the server must answer the client's handshake fast
    from headroom_core.memory.store import MemoryStore
    from headroom_core.runtime import Runtime

log = logging.getLogger("headroom")

SERVER_NAME = "headroom"
#: Seconds the first memory call waits for the embedding model before falling back to text search.
MODEL_WAIT_SECONDS = 30.0

INSTRUCTIONS = (
    "Headroom keeps what was shortened and what this project learned. Call headroom_retrieve with the key "
    "of a [headroom omitted ...; headroom_retrieve key=...] marker to get the original back; memory_search "
    "before you re-discover how this project works, memory_save for what will matter again; compress a large "
    "text before you keep it in context (what it drops stays retrievable)."
)

MEMORY_SAVE_DESCRIPTION = (
    "Save one durable memory about this project for future sessions; other coding agents on the same project "
    "(through this server or the Headroom proxy) see it too. Save what will matter again: commands that work, "
    "rules the user set, preferences, pitfalls and their fixes. One self-contained statement per call; never "
    "secrets (they are redacted). A near-duplicate of an existing memory updates it."
)

COMPRESS_DESCRIPTION = (
    "Shorten a large text the way the Headroom proxy shortens tool outputs: JSON, source code, logs, test and "
    "build output, search results, diffs, HTML and prose, each by its kind. What is dropped is replaced by "
    "[headroom omitted ...; headroom_retrieve key=...] markers and kept: call headroom_retrieve with the key "
    "to get the original back. Returns the shortened text, then a line with the kind and the token counts. "
    "kind (optional) skips detection: json, code, log, test, search, diff, html or text."
)


class HeadroomTools:
    """The tools' logic, apart from the MCP wiring (so it is testable and reusable).

    ``settings``: the proxy's settings (database, thresholds); ``project``: the memory project.
    Every method returns what the agent reads and never raises for bad input or a failing store
    (the text says what went wrong).
    """

    def __init__(self, settings: Settings, project: str) -> None:
        self.settings = settings
        self.project = project
        self._rt: Runtime | None = None
        self._memory: MemoryStore | None = None
        self._lock = threading.Lock()

    @property
    def rt(self) -> "Runtime":
        """The proxy's runtime on these settings (originals store, token counter), made on first use."""
        if self._rt is None:
            from headroom_core.runtime import Runtime

            self._rt = Runtime(self.settings)
        return self._rt

    # -- retrieve -----------------------------------------------------------------------------

    def retrieve(self, key: str) -> list[TextContent | ImageContent]:
        """The original under ``key``: text, or a text line and the image for an image original.

        Raises :class:`~mcp.server.fastmcp.exceptions.ToolError` (the client sees ``isError:
        true`` and the text) for a malformed or unknown key and an unavailable store."""
        try:
            ans = retrieve.answer(ToolCall("mcp", retrieve.TOOL_NAME, {"key": key}), self.rt.store)
        except Exception as e:  # noqa: BLE001 - the database may be unavailable
            raise ToolError(
                f"headroom_retrieve error: the originals store is unavailable ({type(e).__name__}: {e})"
            ) from e
        if isinstance(ans, ErrorAnswer):
            raise ToolError(str(ans))
        if isinstance(ans, ImageAnswer):
            return [
                TextContent(type="text", text=str(ans)),
                ImageContent(type="image", data=ans.data, mimeType=ans.media_type),
            ]
        return [TextContent(type="text", text=str(ans))]

    # -- memory -------------------------------------------------------------------------------

    def memory(self) -> MemoryStore:
        """The memory store (opened on first use; the embedding model loads then, waited for at
        most :data:`MODEL_WAIT_SECONDS`). Raises what opening the database raises."""
        with self._lock:
            if self._memory is None:
                from headroom_core.compress.embeddings import embedder
                from headroom_core.db.engine import open_database
                from headroom_core.memory.store import MemoryStore

                s = self.settings
                emb = embedder(s.memory_model_path).start()
                sessions = open_database(s.memory_db_url or s.database_url)
                emb.wait(MODEL_WAIT_SECONDS)
                self._memory = MemoryStore(
                    sessions,
                    emb,
                    dedup_similarity=s.memory_dedup_similarity,
                    half_life_days=s.memory_half_life_days,
                    archive_below=s.memory_archive_below,
                    archive_min_age_days=s.memory_archive_min_age_days,
                )
            return self._memory

    def memory_search(self, query: str, limit: int = 5) -> str:
        """The project's best matches for ``query`` (at most ``limit``, 1..20), best first."""
        from headroom_core.memory import render
        from headroom_core.memory.store import MemoryInputError
        from headroom_core.memory.tools import SEARCH_FLOOR, SEARCH_MAX

        if not isinstance(query, str) or not query.strip():
            return 'memory_search error: the call needs a non-empty "query".'
        try:
            store = self.memory()
            n = max(1, min(SEARCH_MAX, int(limit)))
            res = store.search(self.project, query, limit=n, min_similarity=SEARCH_FLOOR if store.vector_mode else 0.0)
            if not res.hits:
                return f"No memory of this project matches {query[:100]!r}."
            store.touch([h.memory.id for h in res.hits])
        except (MemoryInputError, ValueError, TypeError) as e:
            return f"memory_search error: {e}."
        except Exception as e:  # noqa: BLE001 - database trouble: say so, keep serving
            return f"memory_search error: the memory store is unavailable right now ({type(e).__name__}); nothing was done."
        head = f"{len(res.hits)} memories of project {self.project} ({res.mode} search), best first:"
        return "\n".join([head] + [f"{render.line(h.memory)}  (similarity {h.similarity:.2f})" for h in res.hits])

    def memory_save(self, text: str, kind: str = "fact") -> str:
        """Save ``text`` as a memory of the project (secrets redacted, near-duplicates merged)."""
        from headroom_core.memory.store import MemoryInputError

        try:
            out = self.memory().save(self.project, text, kind or "fact", source="mcp")
        except MemoryInputError as e:
            return f"memory_save error: {e}."
        except Exception as e:  # noqa: BLE001
            return (
                f"memory_save error: the memory store is unavailable right now ({type(e).__name__}); nothing was saved."
            )
        m = out.memory
        red = (
            f" ({len(out.redacted)} secret(s) redacted: {', '.join(sorted(set(out.redacted)))})" if out.redacted else ""
        )
        if out.action == "merged":
            return f"Updated existing memory {m.id} instead of adding a copy (similarity {out.similarity:.2f}; seen {m.evidence} times){red}: {m.text}"
        return f"Saved memory {m.id} ({m.kind}) for project {self.project}{red}: {m.text}"

    # -- compress -----------------------------------------------------------------------------

    def compress(self, text: str, query: str = "", kind: str = "") -> list[TextContent]:
        """``text`` through the proxy's router (``kind`` skips detection; ``query`` ranks what is
        kept); offloaded originals stored. Returns the text and a summary line."""
        from headroom_core.compress.router import KINDS, Hint, compress_text

        if kind and kind not in KINDS:
            return [
                TextContent(
                    type="text", text=f"compress error: unknown kind {kind!r}; choose one of {', '.join(KINDS)}."
                )
            ]
        s = self.settings
        try:
            counter = self.rt.counter
            res = compress_text(
                text,
                query,
                counter,
                min_tokens=s.min_tokens,
                min_saving_ratio=s.min_saving_ratio,
                hint=Hint(kind=kind) if kind else None,
            )
            for off in res.offloads:
                self.rt.store.put(off.key, off.original, "tool_output")
            before = counter.count(text)
            after = counter.count(res.text) if res.changed else before
        except Exception as e:  # noqa: BLE001
            return [TextContent(type="text", text=f"compress error: {type(e).__name__}: {e}")]
        note = f"[headroom compress: kind={res.kind} tokens {before} -> {after}; {res.strategy}: {res.reason}]"
        return [TextContent(type="text", text=res.text), TextContent(type="text", text=note)]


def build_server(settings: Settings, project: str) -> FastMCP:
    """The FastMCP server with the four tools for ``project`` (module docstring)."""
    tools = HeadroomTools(settings, project)
    server = FastMCP(SERVER_NAME, instructions=INSTRUCTIONS)
    # FastMCP takes no version; without one the handshake reports the mcp library's own version.
    server._mcp_server.version = __version__

    @server.tool(name=retrieve.TOOL_NAME, description=retrieve.TOOL_DESCRIPTION, structured_output=False)
    def headroom_retrieve(key: str) -> list[TextContent | ImageContent]:
        return tools.retrieve(key)

    @server.tool(
        name="memory_search",
        description=f"Search the memories of this project ({project}) by meaning; best matches first, with ids.",
        structured_output=False,
    )
    def memory_search(query: str, limit: int = 5) -> str:
        return tools.memory_search(query, limit)

    kinds = ", ".join(MEMORY_KINDS)

    @server.tool(
        name="memory_save",
        description=MEMORY_SAVE_DESCRIPTION + f" kind: one of {kinds} (default fact).",
        structured_output=False,
    )
    def memory_save(text: str, kind: str = "fact") -> str:
        return tools.memory_save(text, kind)

    @server.tool(name="compress", description=COMPRESS_DESCRIPTION, structured_output=False)
    def compress(text: str, query: str = "", kind: str = "") -> list[TextContent]:
        return tools.compress(text, query, kind)

    server._headroom_tools = tools  # type: ignore[attr-defined]  # for tests and callers
    return server


def serve(settings: Settings, project: str) -> None:
    """Run the server on standard input/output until the client closes it."""
    logging.basicConfig(level=logging.WARNING, format="headroom mcp: %(message)s")  # stderr
    build_server(settings, project).run("stdio")


def tool_names() -> list[str]:
    """The names of the server's tools, in order."""
    return [retrieve.TOOL_NAME, "memory_search", "memory_save", "compress"]


__all__: list[Any] = ["HeadroomTools", "build_server", "serve", "tool_names", "SERVER_NAME"]
