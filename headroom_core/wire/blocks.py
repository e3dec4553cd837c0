"""The neutral view of a request that ``compress`` and ``ccr`` work on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ToolOutput:
    """One tool output's text inside a request body.

    ``path`` leads (keys and indexes) from the body's root to the JSON string that holds the
    text; ``message_index`` is the position of its message/item in the conversation list;
    ``tool_name`` is the name of the call it answers ("" if unknown); ``call_id`` that call's id.
    """

    path: tuple[Any, ...]
    text: str
    tool_name: str
    call_id: str
    message_index: int
    is_error: bool = False


@dataclass(frozen=True)
class ToolCall:
    """A tool call the model made in a response: ``arguments`` parsed (or None if unparsable)."""

    call_id: str
    name: str
    arguments: Any
    raw_arguments: str = ""


@dataclass(frozen=True)
class Usage:
    """Token figures a provider reported for one response (None where it gave none)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
