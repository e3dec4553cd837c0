"""The protocol every dialect implements (:class:`WireDialect`) and :class:`DialectBase`, the
short way to implement it over a module of request functions (``tool_outputs``,
``latest_user_text``, ``tool_names``, ``function_tool``, ``tool_choice_allows``,
``response_tool_calls``, ``usage``, ``error_body``). The registry: :mod:`headroom_core.wire.dialects`.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any, Iterator, Protocol, runtime_checkable

from headroom_core.wire.blocks import ToolCall, ToolOutput, Usage
from headroom_core.wire.detect import Dialect
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
    def reply(self) -> ModuleType: ...

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
class DialectBase:
    """A :class:`WireDialect` over ``module``, a module of the request functions named in the
    module docstring; subclasses add ``shape_error``, ``tool_calls`` and, where the dialect has
    inline images, ``image_finder``."""

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
