"""The Gemini dialects (:class:`~headroom_core.wire.protocol.WireDialect`): the Gemini API
(:class:`GeminiAPI`, ``…/models/{m}:generateContent``) and Vertex AI Gemini (:class:`VertexGemini`,
``…/publishers/google/models/{m}:generateContent``), one body: request side
:mod:`headroom_core.wire.gemini`, response side :mod:`headroom_core.wire.reply_gemini`.

Paths (any host, POST): ``:generateContent`` and ``:streamGenerateContent`` (``?alt=sse``: SSE;
without it one JSON array sent in chunks, read and rewritten through
:class:`~headroom_core.wire.json_array.JSONArrayReply`: :meth:`GeminiAPI.reply_for`) under a
``/models/`` path; token counts ``:countTokens`` (body ``{contents}``, planned like the request
it measures).

The prompt cache (ai.google.dev "Context caching"): implicit caching is by prefix, so earlier
contents, ``systemInstruction`` and ``tools`` keep their bytes (the plan's replay does that); a
request naming explicit ``cachedContent`` carries only what is not cached, and the proxy never
touches the cached part (it is not in the body).
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping

from headroom_core.wire import gemini, reply_gemini
from headroom_core.wire.blocks import ToolCall
from headroom_core.wire.detect import Dialect, path_only
from headroom_core.wire.image_refs import ImageRef, gemini_images
from headroom_core.wire.json_array import JSONArrayReply
from headroom_core.wire.protocol import DialectBase, ReplySide
from headroom_core.wire.tool_defs import Place, ToolShape

#: Method suffixes of a generation request and of a token count.
GENERATE = (":generateContent", ":streamGenerateContent")
STREAM = ":streamGenerateContent"
COUNT = (":countTokens",)


def array_stream(path: str) -> bool:
    """Whether a request to ``path`` (query included) is answered as one JSON array streamed in
    chunks: ``:streamGenerateContent`` without ``alt=sse`` (``alt=json`` or no ``alt``; Google's
    REST streaming, "Method: models.streamGenerateContent")."""
    if not path_only(path).endswith(STREAM):
        return False
    query = path.split("?", 1)[1].split("#", 1)[0] if "?" in path else ""
    alts = [v.lower() for k, _, v in (kv.partition("=") for kv in query.split("&")) if k == "alt"]
    return not alts or alts[-1] != "sse"


def _system_parts(body: Mapping[str, Any]) -> list[Any]:
    si = body.get(gemini.SYSTEM)
    if isinstance(si, str):  # the REST API accepts a bare string too
        return [{"text": si}]
    parts = si.get("parts") if isinstance(si, dict) else None
    return parts if isinstance(parts, list) else []


class GeminiAPI(DialectBase):
    """Gemini API (``generativelanguage.googleapis.com/v1beta/models/{m}:generateContent``)."""

    #: a path segment the dialect's paths must have (the model resource)
    _under = "/models/"

    def __init__(self, id_: Dialect = Dialect.GEMINI) -> None:
        super().__init__(
            id_, gemini, reply_gemini, gemini.CONVERSATION, "text", False,
            image_sizing="gemini", cache_parts=(), tools_key=gemini.TOOLS, system_keys=(gemini.SYSTEM,), content_key="parts",
        )  # fmt: skip

    def _mine(self, path: str) -> bool:
        p = path_only(path)
        return self._under in p and "/publishers/" not in p

    def serves(self, path: str) -> bool:
        return self._mine(path) and path_only(path).endswith(GENERATE)

    def counts(self, path: str) -> bool:
        return self._mine(path) and path_only(path).endswith(COUNT)

    def reply_for(self, path: str) -> ReplySide:
        """The JSON-array stream's reply side for ``:streamGenerateContent`` without ``alt=sse``
        (:func:`array_stream`), else :attr:`reply` (SSE streams, one JSON object)."""
        return JSONArrayReply(self.reply) if array_stream(path) else self.reply

    def shape_error(self, body: dict[str, Any]) -> str:
        return gemini.shape_error(body)

    def model_of(self, body: dict[str, Any], path: str) -> str:
        """The model of the path (``…/models/{m}:method``), else a ``model`` member."""
        p = path_only(path)
        at = p.rfind("/models/")
        if at >= 0:
            return p[at + len("/models/") :].split(":", 1)[0]
        return str(body.get("model", ""))

    def tool_calls(self, body: dict[str, Any]) -> dict[str, ToolCall]:
        return gemini.tool_calls(body)

    def forced_tool_names(self, body: Mapping[str, Any]) -> set[str]:
        return gemini.forced_tool_names(dict(body))

    def tool_places(self, tools: list[Any]) -> list[tuple[int, Place]]:
        """Each function declaration of a ``functionDeclarations`` group is one tool."""
        return gemini.tool_places(tools)

    def tool_shape(self, tool: Any) -> ToolShape | None:
        return gemini.tool_shape(tool)

    def user_texts(self, item: Any) -> Iterator[str]:
        return gemini.user_texts(item)

    def images(self, item: Any, at: tuple[Any, ...], i: int, names: dict[str, str]) -> Iterator[ImageRef]:
        return gemini_images(item, at, i, names)

    def cache_lifetime_seconds(self, body: dict[str, Any]) -> float:
        """Implicit caching keeps a prefix for minutes (not stated; 3-5 min observed, as
        Anthropic's default: 300 s); an explicit ``cachedContent`` lives for its TTL (default one
        hour, ai.google.dev "Context caching")."""
        return 3600.0 if body.get("cachedContent") else 300.0

    # -- body layout --------------------------------------------------------------------------

    def conversation_of(self, body: Mapping[str, Any]) -> Any:
        return body.get(gemini.CONVERSATION)

    def system_member(self, body: Mapping[str, Any]) -> Any:
        parts = _system_parts(body)
        return parts if parts or gemini.SYSTEM in body else None

    def system_value(self, body: Mapping[str, Any]) -> Any:
        return self.system_member(body)

    def system_text(self, body: Mapping[str, Any]) -> str:
        return "\n".join(
            p["text"] for p in _system_parts(body) if isinstance(p, dict) and isinstance(p.get("text"), str)
        )

    def first_user_content(self, body: Mapping[str, Any]) -> Any:
        for c in body.get(gemini.CONVERSATION) or []:
            if isinstance(c, dict) and c.get("role", "user") == "user":
                return c.get("parts")
        return None

    def opening(self, body: Mapping[str, Any], n: int) -> tuple[list[Any], list[Any]]:
        seq = body.get(gemini.CONVERSATION)
        return ([body[gemini.SYSTEM]] if body.get(gemini.SYSTEM) is not None else []), (
            list(seq[:n]) if isinstance(seq, list) else []
        )

    def environment(self, body: Mapping[str, Any], first: int, most: int) -> Iterator[Any]:
        """The system instruction's parts, then the parts of the first ``first`` user contents
        (Gemini CLI states its working directory in its first user content); function calls
        and responses never (their parts carry no ``text``)."""
        yield _system_parts(body)
        seq = body.get(gemini.CONVERSATION)
        for i, c in enumerate(seq[:first] if isinstance(seq, list) else []):
            if isinstance(c, dict) and c.get("role", "user") == "user":
                yield [p for p in c.get("parts") or [] if isinstance(p, dict) and "text" in p and not p.get("thought")]

    def element_shape(self, m: Any) -> Any:
        return gemini.element_shape(m)

    def prompt_parts(self, body: Mapping[str, Any]) -> list[tuple[Any, str]]:
        """``tools`` entries, system parts, then each content's parts (the first with its role)."""
        out: list[tuple[Any, str]] = [(t, "") for t in body.get(gemini.TOOLS) or []]
        out += [(p, "") for p in _system_parts(body)]
        for c in body.get(gemini.CONVERSATION) or []:
            role = str(c.get("role", "")) if isinstance(c, dict) else ""
            parts = c.get("parts") if isinstance(c, dict) else None
            if isinstance(parts, list):
                out += [(p, role if i == 0 else "") for i, p in enumerate(parts)]
            else:
                out.append((c, role))
        return out

    def text_block(self, text: str) -> dict[str, Any]:
        return {"text": text}


class VertexGemini(GeminiAPI):
    """Vertex AI Gemini (``…/v1/projects/{p}/locations/{l}/publishers/google/models/{m}:generateContent``):
    the Gemini body, other paths and OAuth."""

    _under = "/publishers/google/models/"

    def __init__(self) -> None:
        super().__init__(Dialect.VERTEX_GEMINI)

    def _mine(self, path: str) -> bool:
        return self._under in path_only(path)
