"""The dialects behind one protocol, and the registry that finds them.

:class:`WireDialect` is what the rest of the proxy knows of a wire format: where a request keeps
its conversation, its system prompt, its tool outputs and tool calls, how to write a tool
definition, an error body or a text part, and the response side (``reply``: the module that
reads and rewrites a turn's stream, ``wire/reply_*``). :class:`AnthropicMessages`,
:class:`OpenAIChat` and :class:`OpenAIResponses` implement it (the Responses body is the same
over HTTP and inside WebSocket ``response.create`` frames; what differs for frames, the
envelope and the close reasons, is :mod:`headroom_core.wire.responses_ws`).

Adding a dialect: one module with a class implementing :class:`WireDialect` (a member of
:class:`~headroom_core.wire.detect.Dialect` for its id, a path rule in
:func:`~headroom_core.wire.detect.dialect_for_path`), and one line in :data:`REGISTRY`.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any, Iterator, Protocol, runtime_checkable

from headroom_core.wire import anthropic, calls, image_refs, openai_chat, openai_responses, reply_anthropic, reply_chat, reply_responses
from headroom_core.wire.blocks import ToolCall, ToolOutput, Usage
from headroom_core.wire.detect import Dialect, dialect_for_path, token_count_dialect
from headroom_core.wire.image_refs import ImageRef


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
    ``image_sizing`` how the provider sizes images (``"anthropic"`` or ``"openai"``: which
    limits and token formula :mod:`headroom_core.compress.images` applies);
    ``reply`` the response-side module (``StreamView``, ``ViewState``, ``merge``, ``followup``,
    ``tool_calls``, ``usage``, ``completed``, ``notice_message``)."""

    id: Dialect
    conversation_key: str
    text_part: str
    separate_cache_usage: bool
    string_input: bool
    image_sizing: str
    reply: ModuleType

    def shape_error(self, body: dict[str, Any]) -> str:
        """Why a parsed body is not a request of this dialect (``""`` when it is)."""
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


@dataclass(frozen=True)
class _Base:
    """What the three dialects share (the functions of the dialect's request module)."""

    id: Dialect
    module: ModuleType
    reply: ModuleType
    conversation_key: str
    text_part: str
    separate_cache_usage: bool
    string_input: bool = False
    image_sizing: str = "openai"

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

    def response_tool_calls(self, resp: dict[str, Any]) -> list[ToolCall]:
        return self.module.response_tool_calls(resp)

    def usage(self, resp: dict[str, Any]) -> Usage:
        return self.module.usage(resp)

    def error_body(self, message: str, too_large: bool = False) -> dict[str, Any]:
        return self.module.error_body(message, too_large)

    def cache_lifetime_seconds(self, body: dict[str, Any]) -> float:
        """OpenAI ("Prompt caching", platform.openai.com/docs/guides/prompt-caching): cached
        prefixes stay active up to one hour of inactivity, 24 hours with
        ``prompt_cache_retention: "24h"``."""
        return 86400.0 if body.get("prompt_cache_retention") == "24h" else 3600.0


class AnthropicMessages(_Base):
    """Anthropic Messages API (``POST …/v1/messages``; :mod:`headroom_core.wire.anthropic`)."""

    def __init__(self) -> None:
        super().__init__(Dialect.ANTHROPIC_MESSAGES, anthropic, reply_anthropic, "messages", "text", True, False, "anthropic")

    image_finder = staticmethod(image_refs.anthropic_images)

    def shape_error(self, body: dict[str, Any]) -> str:
        return "" if isinstance(body.get("messages"), list) else "no messages list"

    def tool_calls(self, body: dict[str, Any]) -> dict[str, ToolCall]:
        return calls.anthropic_calls(body)

    def cache_lifetime_seconds(self, body: dict[str, Any]) -> float:
        """Anthropic ("Prompt caching", docs.anthropic.com/en/docs/build-with-claude/prompt-caching):
        5 minutes, or 1 hour for breakpoints marked ``"ttl": "1h"``."""
        import json

        return 3600.0 if '"ttl":"1h"' in json.dumps(body, separators=(",", ":")) else 300.0


class OpenAIChat(_Base):
    """OpenAI Chat Completions (``POST …/chat/completions``; :mod:`headroom_core.wire.openai_chat`)."""

    def __init__(self) -> None:
        super().__init__(Dialect.OPENAI_CHAT, openai_chat, reply_chat, "messages", "text", False)

    image_finder = staticmethod(image_refs.chat_images)

    def shape_error(self, body: dict[str, Any]) -> str:
        return "" if isinstance(body.get("messages"), list) else "no messages list"

    def tool_calls(self, body: dict[str, Any]) -> dict[str, ToolCall]:
        return calls.chat_calls(body)


class OpenAIResponses(_Base):
    """OpenAI Responses API (``POST …/responses`` and WebSocket ``response.create`` frames;
    :mod:`headroom_core.wire.openai_responses`)."""

    def __init__(self) -> None:
        super().__init__(Dialect.OPENAI_RESPONSES, openai_responses, reply_responses, "input", "input_text", False, True)

    image_finder = staticmethod(image_refs.responses_images)

    def shape_error(self, body: dict[str, Any]) -> str:
        return "" if "input" in body else "no input"

    def tool_calls(self, body: dict[str, Any]) -> dict[str, ToolCall]:
        return calls.responses_calls(body)


#: Every dialect the proxy speaks, by id. Adding a dialect adds one line here.
REGISTRY: dict[Dialect, WireDialect] = {
    Dialect.ANTHROPIC_MESSAGES: AnthropicMessages(),
    Dialect.OPENAI_CHAT: OpenAIChat(),
    Dialect.OPENAI_RESPONSES: OpenAIResponses(),
}


#: The dialects whose usage reports cache reads and writes apart from ``input_tokens`` (their
#: ``value``, as the ledger stores it).
SEPARATE_CACHE_DIALECTS: tuple[str, ...] = tuple(d.id.value for d in REGISTRY.values() if d.separate_cache_usage)


def dialect(d: Dialect | str) -> WireDialect:
    """The implementation of dialect ``d`` (an enum member or its ``value``). Raises
    ``KeyError`` for an unknown dialect, ``ValueError`` for an unknown value."""
    return REGISTRY[Dialect(d)]


@dataclass(frozen=True)
class Route:
    """What a request's method and path say, decided once per request: ``dialect`` (None: not
    an LLM API call) and ``counting`` (a token-counting request, planned like the request it
    measures but never sent to a model)."""

    dialect: Dialect | None
    counting: bool = False

    @property
    def wire(self) -> WireDialect:
        """The implementation of :attr:`dialect`. Raises ``KeyError`` when there is none."""
        if self.dialect is None:
            raise KeyError("not an LLM API call")
        return REGISTRY[self.dialect]


NOT_LLM = Route(None)


def route(method: str, path: str) -> Route:
    """The :class:`Route` of a request (method and path only: the body is not looked at)."""
    d = dialect_for_path(method, path)
    if d is not None:
        return Route(d)
    c = token_count_dialect(method, path)
    return Route(c, True) if c is not None else NOT_LLM
