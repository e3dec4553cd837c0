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


class ErrorAnswer(str):
    """A proxy tool's answer that reports a failed call (bad arguments, an unknown key, a store
    that is unavailable): the string is the text the model reads. Where the transport has an
    error flag for a tool result (Anthropic ``tool_result.is_error``, MCP ``isError``), it is set."""


class ImageAnswer(str):
    """A proxy tool's answer that is an image: the string itself is a text for places that
    cannot carry an image, ``media_type`` and ``data`` (standard base64) the image.

    Each dialect's ``followup`` (``wire/reply_*``) sends it as an image where the provider takes images in a
    tool result (Anthropic ``tool_result`` content blocks, Responses ``function_call_output``
    ``input_image``; Chat Completions: a user message with the image after the tool message).
    """

    media_type: str
    data: str

    def __new__(cls, text: str, media_type: str, data: str) -> "ImageAnswer":
        obj = super().__new__(cls, text)
        obj.media_type = media_type
        obj.data = data
        return obj

    @property
    def data_url(self) -> str:
        """The image as a ``data:`` URL."""
        return f"data:{self.media_type};base64,{self.data}"


def sum_usage(messages: list[dict[str, Any]], keys: tuple[str, ...]) -> dict[str, int]:
    """The integer ``usage`` fields named by ``keys`` summed over response objects ``messages``
    (token counts; keys no message reported are left out, booleans and non-integers ignored)."""
    out: dict[str, int] = {}
    for m in messages:
        u = m.get("usage")
        if not isinstance(u, dict):
            continue
        for k in keys:
            v = u.get(k)
            if isinstance(v, int) and not isinstance(v, bool):
                out[k] = out.get(k, 0) + v
    return out
