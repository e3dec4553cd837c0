"""The dialect modules by :class:`~headroom_core.wire.detect.Dialect`."""

from __future__ import annotations

from types import ModuleType

from headroom_core.wire import anthropic, openai_chat, openai_responses
from headroom_core.wire.detect import Dialect

MODULES: dict[Dialect, ModuleType] = {
    Dialect.ANTHROPIC_MESSAGES: anthropic,
    Dialect.OPENAI_CHAT: openai_chat,
    Dialect.OPENAI_RESPONSES: openai_responses,
}


def module_for(d: Dialect) -> ModuleType:
    """The module implementing dialect ``d`` (same functions in each: ``tool_outputs``,
    ``latest_user_text``, ``tool_names``, ``function_tool``, ``response_tool_calls``,
    ``followup_body``, ``usage``, ``merge_responses``, ``error_body``, ``StreamAssembler``,
    ``continuation_events``)."""
    return MODULES[d]
