"""The protocol every dialect implements (:class:`WireDialect`), its response half
(:class:`ReplySide`, with :class:`ReplyStream` for one round of a stream), and
:class:`DialectBase`, the short way to implement it over a module of request functions
(``tool_outputs``, ``latest_user_text``, ``tool_names``, ``function_tool``,
``tool_choice_allows``, ``response_tool_calls``, ``usage``, ``error_body``) with the body layout
of :mod:`headroom_core.wire.layout`. The registry: :mod:`headroom_core.wire.dialects`.

Everything outside ``wire/`` reads a request through a dialect's methods (and
:class:`~headroom_core.wire.request_view.RequestView`), never through field names: where the
conversation, the system prompt and the tools live, which paths a dialect answers, what its
error body and its text part look like, how its prompt is cut for the cache cost model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Protocol, runtime_checkable

from headroom_core.wire import layout, tool_defs
from headroom_core.wire.blocks import ToolCall, ToolOutput, Usage
from headroom_core.wire.detect import Dialect, path_only
from headroom_core.wire.image_refs import ImageRef
from headroom_core.wire.provider_error import ProviderError
from headroom_core.wire.sse import SSE, SSEEvent
from headroom_core.wire.tool_defs import Place, ToolShape


class StreamParser(Protocol):
    """Cuts one response's stream into events as its bytes arrive."""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """The events ``chunk`` completed (``b""``: the end of the stream, flushing the rest)."""
        ...


class StreamFraming(Protocol):
    """How a dialect's streamed responses are framed (SSE: :data:`headroom_core.wire.sse.SSE`;
    a dialect framing them otherwise, NDJSON lines or AWS event-stream frames, brings its own).

    Every framing hands out :class:`~headroom_core.wire.sse.SSEEvent` values: ``raw`` the
    frame's exact bytes (what a pass-through sends on), ``data`` its JSON payload as text,
    ``event`` its type (or None)."""

    def streams(self, content_type: str) -> bool:
        """Whether a response with ``content_type`` (the header's value) is a stream in this
        framing (read through the retrieval loop) rather than one body."""
        ...

    def parser(self) -> StreamParser:
        """A new incremental parser for one response."""
        ...

    def terminated(self, events: list[SSEEvent]) -> list[SSEEvent]:
        """The events of a stream's end (the parser's last ``feed(b"")``) fit to be followed by
        more events: one cut short ended properly, or dropped when it cannot be."""
        ...


class ReplyStream(Protocol):
    """One round of a streamed response seen through a dialect (``wire/reply_*``
    ``StreamView``): upstream events in, the client's events out.

    ``failed``: why a follow-up round failed (an error event), None while it did not."""

    failed: str | None

    @property
    def complete(self) -> bool:
        """Whether the round's stream reached its end event."""
        ...

    def feed(self, ev: SSEEvent) -> list[SSEEvent]:
        """The events the client gets now for the upstream event ``ev``."""
        ...

    def close(self, notice: str | None, texts: list[str]) -> list[SSEEvent]:
        """The client's last events (``notice`` appended as text when given; usage summed over
        every round's response object in ``texts``)."""
        ...

    def failure(self, err: ProviderError | None, texts: list[str]) -> list[SSEEvent]:
        """The client's last events when the provider failed the response, in the dialect's own
        terms (issue 36, item 4): with ``err`` (a follow-up refused with a status the client may
        retry, or whose connection failed) the dialect's error event made from it (its error
        body, the wait in its message); with None this round's own error event, the one that set
        :attr:`failed`. Events still owed to the client come first (the text so far where the
        dialect carries it); the error event is the last. ``texts``: every round's response
        object so far (the failed round's last)."""
        ...

    def message_text(self) -> str:
        """The round's response object as the provider would have sent it unstreamed (JSON)."""
        ...


class ReplySide(Protocol):
    """The response half of a dialect (a module ``wire/reply_<name>.py`` satisfies it):

    ``ViewState()`` what the client has been sent so far, shared by the rounds of one response;
    ``StreamView(hidden, state, round_no)`` one round (:class:`ReplyStream`); ``merge`` one
    response for the client from every round's JSON text; ``followup`` the next request's JSON
    text after the proxy answered its tools; ``tool_calls``, ``usage``, ``completed`` read one
    (non-streamed) response object, ``truncated`` whether it stopped at a token limit (the
    dialect's own terms: Anthropic ``stop_reason`` ``max_tokens``, Chat ``finish_reason``
    ``length``, Responses ``status`` ``incomplete``, Gemini ``finishReason`` ``MAX_TOKENS``, …:
    a tool call in it may be cut); ``notice_message`` a whole response holding only a notice;
    ``framing`` how its streamed responses are framed (:class:`StreamFraming`)."""

    @property
    def framing(self) -> StreamFraming: ...

    def ViewState(self) -> Any: ...  # noqa: N802 - the class in each reply module

    def StreamView(self, hidden: frozenset[str], state: Any, round_no: int) -> ReplyStream: ...  # noqa: N802

    def merge(self, texts: list[str], hidden: frozenset[str], notice: str | None) -> str: ...

    def followup(self, request: str, message: str, results: list[tuple[ToolCall, str]]) -> str: ...

    def tool_calls(self, resp: dict[str, Any]) -> list[ToolCall]: ...

    def usage(self, resp: dict[str, Any]) -> Usage: ...

    def completed(self, resp: dict[str, Any]) -> bool: ...

    def truncated(self, resp: dict[str, Any]) -> bool: ...

    def notice_message(self, notice: str, model: str = "") -> str: ...


@runtime_checkable
class WireDialect(Protocol):
    """One provider wire format (the issue calls it the ``Dialect`` protocol; the name
    :class:`~headroom_core.wire.detect.Dialect` is the enum that identifies one, stored in the
    ledger as its ``value``).

    Attributes: ``id`` the enum member; ``conversation_key`` the body member holding the
    conversation list (``messages`` or ``input``); ``text_part`` the ``type`` of a text content
    part in a user message; ``separate_cache_usage`` True when the provider reports cache reads
    and writes apart from ``input_tokens`` (Anthropic) rather than inside it (OpenAI);
    ``string_input`` True when the conversation member may be one string (a user text);
    ``image_sizing`` how the provider sizes images (``"anthropic"``, ``"openai"`` or ``"gemini"``: which
    limits and token formula :mod:`headroom_core.compress.images` applies);
    ``reply`` the response side (:class:`ReplySide`); ``cache_parts`` the top-level members that
    hold ``cache_control`` breakpoints, in the provider's cache order; ``tools_key`` the top-level
    member the tool definitions live in, ``tools_path`` the keys from the body to their array
    (``(tools_key,)`` when they are the member itself; Bedrock Converse ``("toolConfig",
    "tools")``; :meth:`tools_of` reads it); ``system_keys`` the top-level members that hold the
    system prompt; ``content_key`` the member of a conversation element that holds its parts;
    ``root`` the keys leading from the request body to the object the dialect's body lives in
    (``()``: the body itself; ``("request",)`` for a body that wraps another dialect's, as Code
    Assist wraps Gemini's: :mod:`headroom_core.wire.envelope`). With a root, the plan parses,
    views and splices inside it (the envelope's bytes go upstream as sent), and every method
    taking a body gets the inner one, but ``shape_error`` and ``model_of`` (the whole body). ``cache_marker`` the member that makes
    an object a prompt-cache breakpoint (``cache_control``; Bedrock Converse's ``cachePoint``
    blocks), counted in :attr:`cache_parts`."""

    @property
    def id(self) -> Dialect: ...
    @property
    def conversation_key(self) -> str: ...
    @property
    def text_part(self) -> str: ...
    @property
    def separate_cache_usage(self) -> bool: ...
    @property
    def string_input(self) -> bool: ...
    @property
    def image_sizing(self) -> str: ...
    @property
    def reply(self) -> ReplySide: ...
    @property
    def cache_parts(self) -> tuple[str, ...]: ...
    @property
    def tools_key(self) -> str: ...
    @property
    def tools_path(self) -> tuple[str, ...]: ...
    @property
    def system_keys(self) -> tuple[str, ...]: ...
    @property
    def content_key(self) -> str: ...
    @property
    def root(self) -> tuple[str, ...]: ...
    @property
    def cache_marker(self) -> str: ...

    def inner(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """The object at :attr:`root` in a whole body (the body itself for ``()``; ``{}`` when
        there is no object there)."""
        ...

    def tools_of(self, body: Mapping[str, Any]) -> Any:
        """The tool definitions as sent, at :attr:`tools_path` (None when absent; normally a list)."""
        ...

    def serves(self, path: str) -> bool:
        """Whether a POST to ``path`` (without query) is a request of this dialect."""
        ...

    def reply_for(self, path: str) -> ReplySide:
        """The response side of a request to ``path`` (query included): :attr:`reply`, unless
        the path picks another stream framing (Gemini's ``:streamGenerateContent`` without
        ``alt=sse`` streams one JSON array: :mod:`headroom_core.wire.json_array`)."""
        ...

    def counts(self, path: str) -> bool:
        """Whether a POST to ``path`` (without query) is this dialect's token-counting request
        (planned like the request it measures, never sent to a model by the proxy)."""
        ...

    def shape_error(self, body: dict[str, Any]) -> str:
        """Why a parsed body is not a request of this dialect (``""`` when it is)."""
        ...

    def model_of(self, body: dict[str, Any], path: str) -> str:
        """The model a request names (in its body, or in its path for dialects that put it
        there); ``""`` when it names none."""
        ...

    def tool_outputs(self, body: dict[str, Any]) -> list[ToolOutput]:
        """Every tool output text in the conversation, with its path (keys and indexes)."""
        ...

    def tool_calls(self, body: dict[str, Any]) -> dict[str, ToolCall]:
        """Every tool call in the conversation's history, by call id, in order."""
        ...

    def latest_user_text(self, body: dict[str, Any]) -> str:
        """The latest user message's own text (tool results excluded)."""
        ...

    def user_texts(self, item: Any) -> Iterator[str]:
        """The user-written text parts of one conversation element (none for other roles)."""
        ...

    def tool_names(self, body: dict[str, Any]) -> list[str]:
        """Names of the tools the request offers, in order."""
        ...

    def images(self, item: Any, at: tuple[Any, ...], i: int, names: dict[str, str]) -> Iterator[ImageRef]:
        """The inline images of conversation element ``item`` (at path ``at``, index ``i``;
        ``names``: call id -> tool name, for images in tool results)."""
        ...

    def function_tool(self, name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
        """A client tool definition (JSON Schema ``schema`` of its input) in this dialect."""
        ...

    def tool_choice_allows(self, body: dict[str, Any], name: str) -> bool:
        """Whether the request's ``tool_choice`` lets the model call the tool ``name``."""
        ...

    def forced_tool_names(self, body: Mapping[str, Any]) -> set[str]:
        """The tool names the request's tool choice forces the model to call (empty when none)."""
        ...

    def tool_places(self, tools: list[Any]) -> list[tuple[int, Place]]:
        """Where the tools of a ``tools`` array (:meth:`tools_of`) are, in order: the index of
        the element each is in and the keys and indexes from that element to it (``()``: the
        element is one tool; Gemini's ``functionDeclarations`` groups hold several). Every
        element is in it at least once (as itself when it holds no tool)."""
        ...

    def tool_shape(self, tool: Any) -> ToolShape | None:
        """Where a tool (one of :meth:`tool_places`) keeps its name, description and input
        schema (:class:`~headroom_core.wire.tool_defs.ToolShape`); None for a tool without such
        a definition (built-in and server tools, cache points, groups of another kind)."""
        ...

    def response_tool_calls(self, resp: dict[str, Any]) -> list[ToolCall]:
        """The tool calls of a (non-streamed) response."""
        ...

    def usage(self, resp: dict[str, Any]) -> Usage:
        """Usage figures of a (non-streamed) response."""
        ...

    def error_body(self, message: str, too_large: bool = False) -> dict[str, Any]:
        """An error body in this provider's shape (``too_large``: a 413)."""
        ...

    def cache_lifetime_seconds(self, body: dict[str, Any]) -> float:
        """How long the provider may keep a prompt-cache entry after its last use (seconds)."""
        ...

    # -- the body layout (what the cache rules, the session key and the project read) ----------

    def conversation_of(self, body: Mapping[str, Any]) -> Any:
        """The conversation member as sent (None when absent)."""
        ...

    def system_member(self, body: Mapping[str, Any]) -> Any:
        """The system member as sent (None when absent): one value, or a list of blocks."""
        ...

    def system_value(self, body: Mapping[str, Any]) -> Any:
        """The system prompt as sent, wherever it lives (None when there is none)."""
        ...

    def system_text(self, body: Mapping[str, Any]) -> str:
        """The system prompt as one text (``""`` when there is none)."""
        ...

    def first_user_content(self, body: Mapping[str, Any]) -> Any:
        """The content of the first user message as sent (None when there is none)."""
        ...

    def opening(self, body: Mapping[str, Any], n: int) -> tuple[list[Any], list[Any]]:
        """The system values present and the first ``n`` conversation elements, as sent."""
        ...

    def environment(self, body: Mapping[str, Any], first: int, most: int) -> Iterator[Any]:
        """The values a client states its environment in (system, the first ``first`` user
        messages' content, later system messages up to element ``most``), as sent, in order."""
        ...

    def element_shape(self, m: Any) -> Any:
        """What an edit must never change in conversation element ``m`` (role, type, call ids)."""
        ...

    def prompt_parts(self, body: Mapping[str, Any]) -> list[tuple[Any, str]]:
        """The prompt cut into cacheable parts in prompt order, each ``(value, role)``."""
        ...

    def text_block(self, text: str) -> dict[str, Any]:
        """A text content part for a user message of this dialect."""
        ...


def _user_parts(item: Any, types: tuple[str, ...]) -> Iterator[str]:
    if not isinstance(item, dict) or item.get("role") != "user":
        return
    c = item.get("content")
    if isinstance(c, str):
        yield c
    elif isinstance(c, list):
        for p in c:
            if isinstance(p, dict) and p.get("type") in types and isinstance(p.get("text"), str):
                yield p["text"]


class RequestModule(Protocol):
    """The request functions of one dialect, as a module ``wire/<name>.py`` defines them (a
    module satisfies this protocol; :class:`DialectBase` calls it). ``body`` is a parsed request
    body, ``resp`` a parsed (non-streamed) response body."""

    def tool_outputs(self, body: dict[str, Any]) -> list[ToolOutput]: ...

    def latest_user_text(self, body: dict[str, Any]) -> str: ...

    def tool_names(self, body: dict[str, Any]) -> list[str]: ...

    def function_tool(self, name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]: ...

    def tool_choice_allows(self, body: dict[str, Any], name: str) -> bool: ...

    def response_tool_calls(self, resp: dict[str, Any]) -> list[ToolCall]: ...

    def usage(self, resp: dict[str, Any]) -> Usage: ...

    def error_body(self, message: str, too_large: bool = False) -> dict[str, Any]: ...


@dataclass(frozen=True)
class DialectBase:
    """A :class:`WireDialect` over ``module``, a module of the request functions named in the
    module docstring; subclasses add ``shape_error``, ``tool_calls`` and, where the dialect has
    inline images, ``image_finder``."""

    id: Dialect
    module: RequestModule
    reply: ReplySide
    conversation_key: str
    text_part: str
    separate_cache_usage: bool
    string_input: bool = False
    image_sizing: str = "openai"
    #: path endings of the dialect's requests and of its token counts (``serves``, ``counts``)
    paths: tuple[str, ...] = ()
    count_paths: tuple[str, ...] = ()
    cache_parts: tuple[str, ...] = layout.CACHED_PARTS
    tools_key: str = layout.TOOLS_KEY
    #: keys inside :attr:`tools_key` leading to the tools array (``()``: the member is the array)
    tools_under: tuple[str, ...] = ()
    system_keys: tuple[str, ...] = layout.SYSTEM_KEYS
    content_key: str = "content"
    root: tuple[str, ...] = ()
    cache_marker: str = "cache_control"

    def inner(self, body: Mapping[str, Any]) -> dict[str, Any]:
        from headroom_core.wire.envelope import inner  # envelope imports this module

        return inner(body, self.root)

    @property
    def tools_path(self) -> tuple[str, ...]:
        return (self.tools_key, *self.tools_under)

    def tools_of(self, body: Mapping[str, Any]) -> Any:
        v: Any = body
        for k in self.tools_path:
            if not isinstance(v, Mapping):
                return None
            v = v.get(k)
        return v

    def reply_for(self, path: str) -> ReplySide:
        return self.reply

    def serves(self, path: str) -> bool:
        p = path_only(path)
        return p.endswith(self.paths) and not self.counts(p) if self.paths else False

    def counts(self, path: str) -> bool:
        return path_only(path).endswith(self.count_paths) if self.count_paths else False

    def tool_outputs(self, body: dict[str, Any]) -> list[ToolOutput]:
        return self.module.tool_outputs(body)

    def latest_user_text(self, body: dict[str, Any]) -> str:
        return self.module.latest_user_text(body)

    def user_texts(self, item: Any) -> Iterator[str]:
        # text parts of either kind: clients mix ``text`` and ``input_text``
        return _user_parts(item, ("text", "input_text"))

    def tool_names(self, body: dict[str, Any]) -> list[str]:
        return self.module.tool_names(body)

    def images(self, item: Any, at: tuple[Any, ...], i: int, names: dict[str, str]) -> Iterator[ImageRef]:
        return self.image_finder(item, at, i, names)

    @staticmethod
    def image_finder(item: Any, at: tuple[Any, ...], i: int, names: dict[str, str]) -> Iterator[ImageRef]:
        return iter(())

    def function_tool(self, name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
        return self.module.function_tool(name, description, schema)

    def tool_choice_allows(self, body: dict[str, Any], name: str) -> bool:
        return self.module.tool_choice_allows(body, name)

    def forced_tool_names(self, body: Mapping[str, Any]) -> set[str]:
        return tool_defs.forced_tool_names(body)

    def tool_places(self, tools: list[Any]) -> list[tuple[int, Place]]:
        return tool_defs.tool_places(tools)

    def tool_shape(self, tool: Any) -> ToolShape | None:
        return tool_defs.tool_shape(tool)

    def response_tool_calls(self, resp: dict[str, Any]) -> list[ToolCall]:
        return self.module.response_tool_calls(resp)

    def usage(self, resp: dict[str, Any]) -> Usage:
        return self.module.usage(resp)

    def error_body(self, message: str, too_large: bool = False) -> dict[str, Any]:
        return self.module.error_body(message, too_large)

    def cache_lifetime_seconds(self, body: dict[str, Any]) -> float:
        return layout.cache_lifetime_openai(body)

    def model_of(self, body: dict[str, Any], path: str) -> str:
        return str(body.get("model", ""))

    def conversation_of(self, body: Mapping[str, Any]) -> Any:
        return layout.conversation(body)

    def system_member(self, body: Mapping[str, Any]) -> Any:
        return layout.system_member(body)

    def system_value(self, body: Mapping[str, Any]) -> Any:
        return layout.system_value(body)

    def system_text(self, body: Mapping[str, Any]) -> str:
        return layout.system_text(body)

    def first_user_content(self, body: Mapping[str, Any]) -> Any:
        return layout.first_user_content(body)

    def opening(self, body: Mapping[str, Any], n: int) -> tuple[list[Any], list[Any]]:
        return layout.opening(body, n)

    def environment(self, body: Mapping[str, Any], first: int, most: int) -> Iterator[Any]:
        return layout.environment(body, first, most)

    def element_shape(self, m: Any) -> Any:
        return layout.element_shape(m)

    def prompt_parts(self, body: Mapping[str, Any]) -> list[tuple[Any, str]]:
        return layout.prompt_parts(body)

    def text_block(self, text: str) -> dict[str, Any]:
        return {"type": self.text_part, "text": text}


class WrappedStream:
    """A :class:`ReplyStream` that wraps another round (``inner``): its ``failed``, ``complete``
    and ``message_text`` are the wrapped round's; a subclass translates ``feed`` and ``close``
    (the Code Assist envelope, the JSON-array stream)."""

    def __init__(self, inner: ReplyStream) -> None:
        self.inner = inner

    @property
    def failed(self) -> str | None:
        return self.inner.failed

    @failed.setter
    def failed(self, value: str | None) -> None:
        self.inner.failed = value

    @property
    def complete(self) -> bool:
        return self.inner.complete

    def message_text(self) -> str:
        return self.inner.message_text()


def framing_of(reply: Any) -> StreamFraming:
    """The stream framing of a reply side (its ``framing``; SSE for one that names none)."""
    return getattr(reply, "framing", SSE)
