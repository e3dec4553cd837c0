"""The neutral view of one request: what the rest of the proxy reads instead of field names.

:class:`RequestView` is built once per request (by the plan, from the one
:class:`~headroom_core.wire.view.BodyView` parse, or from a parsed body with :func:`view_of`)
and answers, in any dialect: the conversation and its key, the role of each element, the system
prompt, the first and the latest user text, the tool calls and tool outputs, the tool
definitions, and where each lives in the body (paths of keys and indexes; character spans when
built from a :class:`BodyView`). Every answer is computed when first asked and kept.

The functions at the end (:func:`conversation`, :func:`system_value`, :func:`system_text`,
:func:`first_user_content`, :func:`opening_texts`) answer for a body whose dialect is not known
(the session key, the project, the volatile prefix log look at bodies of any dialect).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Mapping

from headroom_core.wire.blocks import ToolCall, ToolOutput
from headroom_core.wire.detect import Dialect
from headroom_core.wire.dialects import REGISTRY, WireDialect
from headroom_core.wire.view import BodyView

#: The members a conversation lives in, whatever the dialect (Messages and Chat ``messages``,
#: Responses ``input``), in the order they are looked for when the dialect is not known.
CONVERSATION_KEYS = ("messages", "input")
#: The members a system prompt lives in (Anthropic ``system``, Responses ``instructions``);
#: Chat Completions keeps it in ``system``/``developer`` messages.
SYSTEM_KEYS = ("system", "instructions")
#: Roles of the messages that carry a system prompt inside the conversation (Chat Completions).
SYSTEM_ROLES = ("system", "developer")
#: The member holding the tool definitions (all dialects).
TOOLS_KEY = "tools"

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
        return system_text(self.body)

    @cached_property
    def first_user(self) -> Any:
        """The content of the first user message (as sent: a string or parts), None if none."""
        return first_user_content(self.body)

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
        """The ``tools`` member as sent (None when absent; normally a list)."""
        return self.body.get(TOOLS_KEY)

    @cached_property
    def tool_names(self) -> list[str]:
        """Names of the tools offered, in order."""
        return self.dialect.tool_names(dict(self.body))

    def tool_choice_allows(self, name: str) -> bool:
        """Whether ``tool_choice`` lets the model call the tool ``name``."""
        return self.dialect.tool_choice_allows(dict(self.body), name)

    def text_part(self, text: str) -> dict[str, Any]:
        """A text content part for a user message of this dialect."""
        return {"type": self.dialect.text_part, "text": text}


def view_of(d: Dialect | WireDialect, body: Mapping[str, Any], source: BodyView | None = None) -> RequestView:
    """The :class:`RequestView` of parsed ``body`` in dialect ``d`` (an id or an implementation)."""
    return RequestView(REGISTRY[d] if isinstance(d, Dialect) else d, body, source)


# -- bodies of a dialect not known ----------------------------------------------------------------


def conversation(body: Mapping[str, Any]) -> Any:
    """The conversation member of a body of any dialect (the first of :data:`CONVERSATION_KEYS`
    present, as sent), or None."""
    for key in CONVERSATION_KEYS:
        if key in body:
            return body[key]
    return None


def conversations(body: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """Every conversation member a body has, ``(key, value)`` in :data:`CONVERSATION_KEYS` order."""
    return [(k, body[k]) for k in CONVERSATION_KEYS if k in body]


def system_member(body: Mapping[str, Any]) -> Any:
    """The system member as sent (``system``, else ``instructions``), None if neither."""
    return body.get(SYSTEM_KEYS[0], body.get(SYSTEM_KEYS[1]))


def system_value(body: Mapping[str, Any]) -> Any:
    """The system prompt as sent (:func:`system_member`, else the content of the first
    ``system``/``developer`` message of a ``messages`` list), None if none."""
    v = system_member(body)
    if v is None and isinstance(body.get("messages"), list):
        v = next((m.get("content") for m in body["messages"] if isinstance(m, dict) and m.get("role") in SYSTEM_ROLES), None)
    return v


def system_text(body: Mapping[str, Any]) -> str:
    """The system prompt of a body of any dialect as one text: Anthropic ``system`` (a string,
    or text blocks joined by newlines), OpenAI Responses ``instructions``, and the
    ``system``/``developer`` messages of a Chat Completions body. ``""`` when there is none."""
    parts: list[str] = []

    def add(v: Any) -> None:
        if isinstance(v, str):
            parts.append(v)
        elif isinstance(v, list):
            for b in v:
                if isinstance(b, str):
                    parts.append(b)
                elif isinstance(b, dict) and isinstance(b.get("text"), str):
                    parts.append(b["text"])

    for key in SYSTEM_KEYS:
        add(body.get(key))
    msgs = body.get("messages")
    if isinstance(msgs, list):
        for m in msgs:
            if isinstance(m, dict) and m.get("role") in SYSTEM_ROLES:
                add(m.get("content"))
    return "\n".join(parts)


def first_user_content(body: Mapping[str, Any]) -> Any:
    """The content of the first user message of a body of any dialect (a Responses ``input``
    string is itself that content), None if none."""
    for key in CONVERSATION_KEYS:
        seq = body.get(key)
        if isinstance(seq, str):
            return seq
        if isinstance(seq, list):
            for m in seq:
                if isinstance(m, dict) and m.get("role") == "user":
                    return m.get("content")
    return None


def opening(body: Mapping[str, Any], n: int) -> tuple[list[Any], list[Any]]:
    """What a client states its environment in: the system values present (``system``,
    ``instructions``, as sent) and the first ``n`` elements of each conversation list."""
    systems = [body[k] for k in SYSTEM_KEYS if body.get(k) is not None]
    firsts: list[Any] = []
    for key in CONVERSATION_KEYS:
        seq = body.get(key)
        if isinstance(seq, list):
            firsts.extend(seq[:n])
    return systems, firsts


def element_shape(m: Any) -> Any:
    """What an edit must never change in a conversation element (any dialect): its role, its
    type and its tool call ids (Anthropic ``tool_use``/``tool_result`` blocks, Chat
    ``tool_call_id``, Responses ``call_id``). Equal shapes: the same message, maybe other text."""
    if not isinstance(m, dict):
        return m
    ids = [(b.get("type"), b.get("id"), b.get("tool_use_id")) for b in m.get("content") or [] if isinstance(b, dict) and b.get("type") not in ("text", "input_text", "output_text")] if isinstance(m.get("content"), list) else []
    return (m.get("role"), m.get("type"), m.get("tool_call_id"), m.get("call_id"), ids)


def is_conversation_path(path: Path) -> bool:
    """Whether ``path`` leads into a conversation list (any dialect)."""
    return bool(path) and path[0] in CONVERSATION_KEYS


#: The parts of a request body that hold ``cache_control`` breakpoints, in the provider's
#: cache order (``tools``, then ``system``, then the conversation).
CACHED_PARTS = (TOOLS_KEY, SYSTEM_KEYS[0], *CONVERSATION_KEYS)
