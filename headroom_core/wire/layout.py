"""Where the three JSON-message dialects (Messages, Chat Completions, Responses) keep the parts
of a request that the cache rules, the session key and the project read: the system prompt, the
conversation, the first user message, the tool definitions, the ``cache_control`` holders.

These functions are the default body layout of :class:`~headroom_core.wire.protocol.DialectBase`
(each dialect answers through its own methods; a dialect with another layout, e.g. Gemini's
``contents``/``systemInstruction``, overrides them). They read both conversation members
(``messages``, ``input``) and both system members (``system``, ``instructions``), so a body of
any of the three dialects reads the same whichever of them is asked.
"""

from __future__ import annotations

import json
from typing import Any, Iterator, Mapping

#: The members a conversation lives in (Messages and Chat ``messages``, Responses ``input``),
#: in the order they are looked for.
CONVERSATION_KEYS = ("messages", "input")
#: The members a system prompt lives in (Anthropic ``system``, Responses ``instructions``);
#: Chat Completions keeps it in ``system``/``developer`` messages.
SYSTEM_KEYS = ("system", "instructions")
#: Roles of the messages that carry a system prompt inside the conversation (Chat Completions).
SYSTEM_ROLES = ("system", "developer")
#: The member holding the tool definitions.
TOOLS_KEY = "tools"
#: The parts of a request body that hold ``cache_control`` breakpoints, in the provider's cache
#: order (``tools``, then ``system``, then the conversation).
CACHED_PARTS = (TOOLS_KEY, SYSTEM_KEYS[0], *CONVERSATION_KEYS)

Path = tuple[Any, ...]


def conversation(body: Mapping[str, Any]) -> Any:
    """The conversation member (the first of :data:`CONVERSATION_KEYS` present, as sent), or None."""
    for key in CONVERSATION_KEYS:
        if key in body:
            return body[key]
    return None


def system_member(body: Mapping[str, Any]) -> Any:
    """The system member as sent (``system``, else ``instructions``), None if neither."""
    return body.get(SYSTEM_KEYS[0], body.get(SYSTEM_KEYS[1]))


def system_value(body: Mapping[str, Any]) -> Any:
    """The system prompt as sent (:func:`system_member`, else the content of the first
    ``system``/``developer`` message of a ``messages`` list), None if none."""
    v = system_member(body)
    if v is None and isinstance(body.get("messages"), list):
        v = next(
            (m.get("content") for m in body["messages"] if isinstance(m, dict) and m.get("role") in SYSTEM_ROLES), None
        )
    return v


def system_text(body: Mapping[str, Any]) -> str:
    """The system prompt as one text: Anthropic ``system`` (a string, or text blocks joined by
    newlines), OpenAI Responses ``instructions``, and the ``system``/``developer`` messages of a
    Chat Completions body. ``""`` when there is none."""
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
    """The content of the first user message (a Responses ``input`` string is itself that
    content), None if none."""
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


def environment(body: Mapping[str, Any], first: int, most: int) -> Iterator[Any]:
    """The values a client states its environment in, in order, as sent: the system members,
    then the content of the conversation's first ``first`` user, system and developer messages
    and of its later system and developer messages (up to element ``most``); a conversation
    given as one string is itself such a value. Assistant turns and tool results never."""
    env_roles = ("user", *SYSTEM_ROLES)
    for k in SYSTEM_KEYS:
        yield body.get(k)
    for key in CONVERSATION_KEYS:
        seq = body.get(key)
        if isinstance(seq, str):
            yield seq
        if not isinstance(seq, list):
            continue
        for i, m in enumerate(seq[:most]):
            if not isinstance(m, dict):
                continue
            role = m.get("role")
            if role in SYSTEM_ROLES or (i < first and role in env_roles):
                yield m.get("content")


def element_shape(m: Any) -> Any:
    """What an edit must never change in a conversation element: its role, its type and its
    tool call ids (Anthropic ``tool_use``/``tool_result`` blocks, Chat ``tool_call_id``,
    Responses ``call_id``). Equal shapes: the same message, maybe other text."""
    if not isinstance(m, dict):
        return m
    ids = (
        [
            (b.get("type"), b.get("id"), b.get("tool_use_id"))
            for b in m.get("content") or []
            if isinstance(b, dict) and b.get("type") not in ("text", "input_text", "output_text")
        ]
        if isinstance(m.get("content"), list)
        else []
    )
    return (m.get("role"), m.get("type"), m.get("tool_call_id"), m.get("call_id"), ids)


def prompt_parts(body: Mapping[str, Any]) -> list[tuple[Any, str]]:
    """The request's prompt cut into cacheable parts in the provider's prompt order, each
    ``(value, role)`` (``role`` ``""`` except for a message's first part): every ``tools``
    entry, each system block (or the system value), then each message's content blocks (a
    message whose content is a string, alone with its role, is one part; other items whole)."""
    out: list[tuple[Any, str]] = [(t, "") for t in body.get(TOOLS_KEY) or []]
    for key in SYSTEM_KEYS:
        v = body.get(key)
        if isinstance(v, list):
            out += [(b, "") for b in v]
        elif v:
            out.append((v, ""))
    seq = conversation(body)
    if isinstance(seq, str):
        out.append((seq, "user"))
    for m in seq if isinstance(seq, list) else []:
        content = m.get("content") if isinstance(m, dict) else None
        role = str(m.get("role", m.get("type", ""))) if isinstance(m, dict) else ""
        if isinstance(content, list):
            out += [(b, role if i == 0 else "") for i, b in enumerate(content)]
        elif isinstance(m, dict) and "content" in m and set(m) <= {"role", "content", "cache_control"}:
            out.append((content, role))
        else:
            out.append((m, role))
    return out


def cache_lifetime_openai(body: Mapping[str, Any]) -> float:
    """OpenAI ("Prompt caching", platform.openai.com/docs/guides/prompt-caching): cached
    prefixes stay active up to one hour of inactivity, 24 hours with
    ``prompt_cache_retention: "24h"``."""
    return 86400.0 if body.get("prompt_cache_retention") == "24h" else 3600.0


def compact(value: Any) -> str:
    """``value`` as compact JSON text (no spaces), for byte-pattern checks."""
    return json.dumps(value, separators=(",", ":"))
