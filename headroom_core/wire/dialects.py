"""The dialect modules by :class:`~headroom_core.wire.detect.Dialect`."""

from __future__ import annotations

from types import ModuleType

from headroom_core.wire import anthropic, openai_chat, openai_responses, reply_anthropic, reply_chat, reply_responses
from headroom_core.wire.detect import Dialect

MODULES: dict[Dialect, ModuleType] = {
    Dialect.ANTHROPIC_MESSAGES: anthropic,
    Dialect.OPENAI_CHAT: openai_chat,
    Dialect.OPENAI_RESPONSES: openai_responses,
}


#: What the client gets from a turn the proxy took part in, per dialect (``StreamView``,
#: ``ViewState``, ``merge``, ``followup``, ``tool_calls``, ``usage``, ``completed``,
#: ``notice_message``), over the exact stream assembly of ``wire/assemble_*``.
REPLIES: dict[Dialect, ModuleType] = {
    Dialect.ANTHROPIC_MESSAGES: reply_anthropic,
    Dialect.OPENAI_CHAT: reply_chat,
    Dialect.OPENAI_RESPONSES: reply_responses,
}


def module_for(d: Dialect) -> ModuleType:
    """The module implementing dialect ``d`` (same functions in each: ``tool_outputs``,
    ``latest_user_text``, ``tool_names``, ``function_tool``, ``response_tool_calls``,
    ``usage``, ``error_body``)."""
    return MODULES[d]


def reply_for(d: Dialect) -> ModuleType:
    """The response-side module of dialect ``d`` (:data:`REPLIES`)."""
    return REPLIES[d]
