"""The neutral view of one request: what the rest of the proxy reads instead of field names.

:class:`RequestView` is built once per request (by the plan, from the one
:class:`~headroom_core.wire.view.BodyView` parse, or from a parsed body with :func:`view_of`)
and answers, in any dialect: the conversation and its key, the role of each element, the system
prompt, the first and the latest user text, the tool calls and tool outputs, the tool
definitions, and where each lives in the body (paths of keys and indexes; character spans when
built from a :class:`BodyView`). Every answer is computed when first asked and kept.

The functions at the end (:func:`conversation`, :func:`system_value`, :func:`system_text`,
:func:`first_user_content`, :func:`opening`) answer for a body whose dialect is not known by
asking the dialect it reads as (:func:`~headroom_core.wire.dialects.for_body`); a reader that
knows the request's dialect asks it directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Mapping

from headroom_core.wire.blocks import ToolCall, ToolOutput
from headroom_core.wire.detect import Dialect
from headroom_core.wire.dialects import REGISTRY, WireDialect, for_body
from headroom_core.wire.layout import CACHED_PARTS, CONVERSATION_KEYS, SYSTEM_KEYS, SYSTEM_ROLES, TOOLS_KEY
from headroom_core.wire.view import BodyView

__all__ = [
    "CACHED_PARTS", "CONVERSATION_KEYS", "SYSTEM_KEYS", "SYSTEM_ROLES", "TOOLS_KEY", "RequestView", "conversation", "conversations",
    "element_shape", "first_user_content", "is_conversation_path", "opening", "system_member", "system_text", "system_value", "view_of",
]  # fmt: skip

Path = tuple[Any, ...]


@dataclass(frozen=True)
class RequestView:
    """One request, neutral. ``dialect`` the implementation, ``body`` the parsed JSON (never
    changed here), ``source`` the :class:`BodyView` it came from when there is one (spans).

    Paths lead from the body's root (e.g. ``("input", 3, "output")``)."""

    dialect: WireDialect
    body: Mapping[str, Any]
    source: BodyView | None = field(default=None, compare=False, repr=False)

    # -- the conversation ---------------------------------------------------------------------

    @property
    def id(self) -> Dialect:
        """The dialect's id (:class:`~headroom_core.wire.detect.Dialect`)."""
        return self.dialect.id

    @property
    def conversation_key(self) -> str:
        """The member holding the conversation list."""
        return self.dialect.conversation_key

    @property
    def conversation_value(self) -> Any:
        """The conversation member as sent (a list; a Responses ``input`` may be a string)."""
        return self.body.get(self.conversation_key)

    @cached_property
    def conversation(self) -> list[Any]:
        """The conversation's elements (messages or items); ``[]`` when it is not a list."""
        seq = self.conversation_value
        return seq if isinstance(seq, list) else []

    def path_of(self, i: int, *rest: Any) -> Path:
        """The path of conversation element ``i`` (and of ``rest`` inside it)."""
        return (self.conversation_key, i, *rest)

    @cached_property
    def spans(self) -> tuple[tuple[int, int], ...]:
        """Character spans of the conversation's elements in the request text (``()`` without
        a :class:`BodyView`)."""
        return self.source.elements.get(self.conversation_key, ()) if self.source is not None else ()

    @cached_property
    def roles(self) -> tuple[str, ...]:
        """The role of each conversation element (``""`` for items without one, e.g. Responses
        ``function_call_output``)."""
        return tuple(str(m.get("role") or "") if isinstance(m, dict) else "" for m in self.conversation)

    @property
    def latest_is_user(self) -> bool:
        """Whether the conversation's last element is a user message."""
        seq = self.conversation
        return bool(seq) and isinstance(seq[-1], dict) and seq[-1].get("role") == "user"

    # -- system, user text --------------------------------------------------------------------

    @cached_property
    def system(self) -> str:
        """The system prompt as one text (:func:`system_text`)."""
        return self.dialect.system_text(self.body)

    @cached_property
    def first_user(self) -> Any:
        """The content of the first user message (as sent: a string or parts), None if none."""
        return self.dialect.first_user_content(self.body)

    @cached_property
    def latest_user_text(self) -> str:
        """The latest user message's own text (tool results excluded; ``""`` if none)."""
        return self.dialect.latest_user_text(dict(self.body))

    def user_texts(self, i: int) -> list[str]:
        """The user-written text parts of conversation element ``i``."""
        return list(self.dialect.user_texts(self.conversation[i])) if 0 <= i < len(self.conversation) else []

    @property
    def input_text(self) -> str | None:
        """A Responses ``input`` given as one string (the whole conversation is that user text),
        else None."""
        v = self.conversation_value
        return v if isinstance(v, str) and self.dialect.string_input else None

    # -- tools --------------------------------------------------------------------------------

    @cached_property
    def tool_outputs(self) -> list[ToolOutput]:
        """Every tool output text, with its path and the name of the call it answers."""
        return self.dialect.tool_outputs(dict(self.body))

    @cached_property
    def tool_calls(self) -> dict[str, ToolCall]:
        """Every tool call in the history, by call id, in order."""
        return self.dialect.tool_calls(dict(self.body))

    @cached_property
    def call_names(self) -> dict[str, str]:
        """Call id -> tool name over the whole history."""
        return {cid: c.name for cid, c in self.tool_calls.items()}

    @property
    def tools(self) -> Any:
        """The tools member as sent (None when absent; normally a list)."""
        return self.dialect.tools_of(self.body)

    @cached_property
    def tool_names(self) -> list[str]:
        """Names of the tools offered, in order."""
        return self.dialect.tool_names(dict(self.body))

    def tool_choice_allows(self, name: str) -> bool:
        """Whether ``tool_choice`` lets the model call the tool ``name``."""
        return self.dialect.tool_choice_allows(dict(self.body), name)

    def text_part(self, text: str) -> dict[str, Any]:
        """A text content part for a user message of this dialect."""
        return self.dialect.text_block(text)


def view_of(d: Dialect | WireDialect, body: Mapping[str, Any], source: BodyView | None = None) -> RequestView:
    """The :class:`RequestView` of parsed ``body`` in dialect ``d`` (an id or an implementation)."""
    return RequestView(REGISTRY[d] if isinstance(d, Dialect) else d, body, source)


# -- bodies of a dialect not known ----------------------------------------------------------------


def conversation(body: Mapping[str, Any]) -> Any:
    """The conversation member of a body of any dialect (as sent), or None."""
    return for_body(body).conversation_of(body)


def conversations(body: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """Every conversation member a body has, ``(key, value)`` in :data:`CONVERSATION_KEYS` order."""
    return [(k, body[k]) for k in CONVERSATION_KEYS if k in body]


def system_member(body: Mapping[str, Any]) -> Any:
    """The system member of a body of any dialect as sent, None if none."""
    return for_body(body).system_member(body)


def system_value(body: Mapping[str, Any]) -> Any:
    """The system prompt of a body of any dialect as sent, None if none."""
    return for_body(body).system_value(body)


def system_text(body: Mapping[str, Any]) -> str:
    """The system prompt of a body of any dialect as one text (``""`` when there is none)."""
    return for_body(body).system_text(body)


def first_user_content(body: Mapping[str, Any]) -> Any:
    """The content of the first user message of a body of any dialect, None if none."""
    return for_body(body).first_user_content(body)


def opening(body: Mapping[str, Any], n: int) -> tuple[list[Any], list[Any]]:
    """The system values and the first ``n`` conversation elements of a body of any dialect."""
    return for_body(body).opening(body, n)


def element_shape(m: Any, d: WireDialect | None = None) -> Any:
    """What an edit must never change in a conversation element (``d``'s rule; the Messages,
    Chat and Responses rule when not given)."""
    return (d or next(iter(REGISTRY.values()))).element_shape(m)


def is_conversation_path(path: Path, d: WireDialect | None = None) -> bool:
    """Whether ``path`` leads into the conversation (``d``'s; any of :data:`CONVERSATION_KEYS`
    when not given)."""
    return bool(path) and (path[0] == d.conversation_key if d is not None else path[0] in CONVERSATION_KEYS)
