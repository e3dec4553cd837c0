"""The dialects behind one protocol, and the registry that finds them.

:class:`~headroom_core.wire.protocol.WireDialect` is what the rest of the proxy knows of a wire format: where a request keeps
its conversation, its system prompt, its tool outputs and tool calls, how to write a tool
definition, an error body or a text part, and the response side (``reply``: the module that
reads and rewrites a turn's stream, ``wire/reply_*``). :class:`AnthropicMessages`,
:class:`OpenAIChat` and :class:`OpenAIResponses` implement it (the Responses body is the same
over HTTP and inside WebSocket ``response.create`` frames; what differs for frames, the
envelope and the close reasons, is :mod:`headroom_core.wire.responses_ws`).

Adding a dialect: its modules in ``wire/`` (a class implementing
:class:`~headroom_core.wire.protocol.WireDialect`, with the paths it serves and counts, its body
layout and its response side, and a member of :class:`~headroom_core.wire.detect.Dialect` for
its id) and one line in :data:`REGISTRY`. Nothing outside ``wire/`` changes: detection, the
plan, the cache rules, the session key, the project and the addons all ask the dialect.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from headroom_core.wire.detect import Dialect
from headroom_core.wire.dialect_anthropic import AnthropicMessages
from headroom_core.wire.dialect_bedrock import BedrockInvoke
from headroom_core.wire.dialect_chat import OpenAIChat
from headroom_core.wire.dialect_code_assist import CodeAssist
from headroom_core.wire.dialect_converse import BedrockConverse
from headroom_core.wire.dialect_gemini import GeminiAPI, VertexGemini
from headroom_core.wire.dialect_ollama import OllamaChat
from headroom_core.wire.dialect_responses import OpenAIResponses
from headroom_core.wire.dialect_vertex_anthropic import VertexAnthropic
from headroom_core.wire.protocol import WireDialect

__all__ = ["REGISTRY", "SEPARATE_CACHE_DIALECTS", "NOT_LLM", "Route", "WireDialect", "dialect", "for_body", "route"]


#: Every dialect the proxy speaks, by id. Adding a dialect adds one line here.
REGISTRY: dict[Dialect, WireDialect] = {
    Dialect.ANTHROPIC_MESSAGES: AnthropicMessages(),
    Dialect.OPENAI_CHAT: OpenAIChat(),
    Dialect.OPENAI_RESPONSES: OpenAIResponses(),
    Dialect.GEMINI: GeminiAPI(),
    Dialect.VERTEX_GEMINI: VertexGemini(),
    Dialect.VERTEX_ANTHROPIC: VertexAnthropic(),
    Dialect.BEDROCK_INVOKE: BedrockInvoke(),
    Dialect.BEDROCK_CONVERSE: BedrockConverse(),
    Dialect.OLLAMA_CHAT: OllamaChat(),
    Dialect.GEMINI_CODE_ASSIST: CodeAssist(),
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


def dialect_for_path(method: str, path: str) -> Dialect | None:
    """The dialect whose requests a method and path are (the first in :data:`REGISTRY` that
    ``serves`` the path; POST only), before the body is looked at; None: not an LLM request."""
    if method.upper() != "POST":
        return None
    return next((d.id for d in REGISTRY.values() if d.serves(path)), None)


def token_count_dialect(method: str, path: str) -> Dialect | None:
    """The dialect of a token-counting request (the first in :data:`REGISTRY` that ``counts``
    the path; POST only): it measures the body of the request it names, so the proxy plans it
    like that request without sending or storing anything. None for other requests."""
    if method.upper() != "POST":
        return None
    return next((d.id for d in REGISTRY.values() if d.counts(path)), None)


def route(method: str, path: str) -> Route:
    """The :class:`Route` of a request (method and path only: the body is not looked at)."""
    d = dialect_for_path(method, path)
    if d is not None:
        return Route(d)
    c = token_count_dialect(method, path)
    return Route(c, True) if c is not None else NOT_LLM


def for_body(body: Mapping[str, Any]) -> WireDialect:
    """The dialect a parsed body of unknown dialect reads as: the first in :data:`REGISTRY`
    whose shape it has (``shape_error`` empty), else the first registered. For readers that get
    a body alone (benchmarks, a stored body); a request's own dialect comes from its route."""
    for d in REGISTRY.values():
        try:
            if not d.shape_error(dict(body)):
                return d
        except Exception:  # noqa: BLE001 - a shape check never fails the reader
            continue
    return next(iter(REGISTRY.values()))
