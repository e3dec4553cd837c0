"""The OpenAI Chat Completions side of the scripted model: a strict check of every request the
way the provider refuses bad ones, and the request read into a dialect-neutral view a play can
decide its next reply from.

The replies themselves are rendered by :class:`tests.support.upstream.Upstream` (JSON or SSE, as
the request asks); this module only reads requests. Facts of the API (OpenAI's API reference,
"Create chat completion", and the 400 errors the service answers):

- the request body is a JSON object whose top-level fields are among :data:`TOP_LEVEL`
  (an unknown one: ``400 Unrecognized request argument supplied: <name>``);
- ``model`` is a non-empty string and ``messages`` a non-empty array;
- every message's ``role`` is one of :data:`ROLES`; a ``tool`` message has a ``tool_call_id``
  and a content (a string or an array of text parts);
- an assistant message with ``tool_calls`` must be followed by one ``tool`` message per call id
  before any other message, and a ``tool`` message must answer such a call;
- ``tools`` are ``{"type": "function", "function": {"name": ...}}`` with names of at most 64
  letters, digits, ``_`` or ``-``, each name once.

Usage::

    problems = chat.problems(rec.json)      # [] when the provider would take it
    if problems:
        return chat.refusal(problems)       # a RawReply: 400 in OpenAI's error shape
    view = chat.view(rec.json)              # outputs, offered tools, latest user text
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tests.support.scripted import play
from tests.support.upstream import RawReply, RecordedRequest, Reply

if TYPE_CHECKING:
    from tests.support.scripted import ScriptedModel

__all__ = [
    "TOP_LEVEL",
    "ROLES",
    "SHELL_TOOLS",
    "Output",
    "ChatView",
    "problems",
    "refusal",
    "view",
    "is_chat",
    "conversation",
    "reply_for",
    "answer",
]

#: Shell tool names of Chat Completions agents (opencode: ``bash``).
SHELL_TOOLS = frozenset({"bash", "shell"})
#: opencode's read tool (an absolute ``filePath``).
READ_TOOL = "read"

#: Top-level fields of a Chat Completions request (OpenAI API reference, create chat completion).
TOP_LEVEL = frozenset(
    {
        "messages",
        "model",
        "audio",
        "frequency_penalty",
        "function_call",
        "functions",
        "logit_bias",
        "logprobs",
        "max_completion_tokens",
        "max_tokens",
        "metadata",
        "modalities",
        "n",
        "parallel_tool_calls",
        "prediction",
        "presence_penalty",
        "prompt_cache_key",
        "prompt_cache_retention",
        "reasoning_effort",
        "response_format",
        "safety_identifier",
        "seed",
        "service_tier",
        "stop",
        "store",
        "stream",
        "stream_options",
        "temperature",
        "tool_choice",
        "tools",
        "top_logprobs",
        "top_p",
        "user",
        "verbosity",
        "web_search_options",
    }
)
#: Message roles the API takes.
ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_PART_TYPES = frozenset({"text", "image_url", "input_audio", "file", "refusal"})


@dataclass(frozen=True)
class Output:
    """One answered tool call of the conversation: the call's ``call_id``, ``name`` and parsed
    ``arguments`` (``{}`` when they are not a JSON object) and the ``text`` the client answered
    with (text parts joined), in the order the answers appear."""

    call_id: str
    name: str
    arguments: Mapping[str, Any]
    text: str


@dataclass(frozen=True)
class ChatView:
    """What a play needs of one request: ``system`` (system and developer texts joined by a
    blank line), ``tools`` (names offered, in order), ``outputs`` (every answered call),
    ``user`` (the latest user text), ``users`` (every user text, in order) and ``messages``
    (how many)."""

    system: str
    tools: tuple[str, ...]
    outputs: tuple[Output, ...]
    user: str
    users: tuple[str, ...]
    messages: int


def is_chat(body: Any) -> bool:
    """Whether ``body`` has the shape of a Chat Completions request (an object with ``messages``)."""
    return isinstance(body, dict) and "messages" in body


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _content_problems(i: int, role: str, content: Any, *, required: bool) -> list[str]:
    if content is None:
        return [f"messages[{i}]: a {role} message needs a content"] if required else []
    if isinstance(content, str):
        return []
    if not isinstance(content, list):
        return [f"messages[{i}].content: expected a string or an array of parts"]
    out = []
    for j, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") not in _PART_TYPES:
            out.append(f"messages[{i}].content[{j}]: unknown part {json.dumps(part)[:80]}")
        elif role in ("tool", "system", "developer") and part["type"] != "text":
            out.append(f"messages[{i}].content[{j}]: a {role} message takes text parts only")
    return out


def _call_problems(i: int, calls: Any) -> tuple[list[str], list[str]]:
    """Problems of an assistant message's ``tool_calls`` and the ids it opens."""
    if not isinstance(calls, list) or not calls:
        return [f"messages[{i}].tool_calls: expected a non-empty array"], []
    out, ids = [], []
    for j, c in enumerate(calls):
        fn = c.get("function") if isinstance(c, dict) else None
        if not isinstance(c, dict) or c.get("type") != "function" or not isinstance(c.get("id"), str) or not c["id"]:
            out.append(f"messages[{i}].tool_calls[{j}]: needs an id and type 'function'")
            continue
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not isinstance(fn.get("arguments"), str):
            out.append(f"messages[{i}].tool_calls[{j}].function: needs a name and arguments (a string)")
        ids.append(c["id"])
    return out, ids


def _message_problems(messages: Sequence[Any]) -> list[str]:
    out: list[str] = []
    open_ids: list[str] = []  # calls of the last assistant message still waiting for their tool message
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            out.append(f"messages[{i}]: expected an object")
            continue
        role = m.get("role")
        if role not in ROLES:
            out.append(f"messages[{i}].role: {role!r} is not one of {sorted(ROLES)}")
            continue
        if role == "tool":
            cid = m.get("tool_call_id")
            if not isinstance(cid, str) or cid not in open_ids:
                out.append(
                    f"messages[{i}]: a 'tool' message must answer a tool_call of the assistant message before it ({cid!r} does not)"
                )
            else:
                open_ids.remove(cid)
            out += _content_problems(i, role, m.get("content"), required=True)
            continue
        if open_ids:
            out.append(
                f"messages[{i}]: tool_call_ids {open_ids} of an assistant message are not answered by 'tool' messages before this {role} message"
            )
            open_ids = []
        if role == "assistant":
            if "tool_calls" in m and m["tool_calls"] is not None:
                more, open_ids = _call_problems(i, m["tool_calls"])
                out += more
            out += _content_problems(i, role, m.get("content"), required=not m.get("tool_calls"))
        else:
            out += _content_problems(i, role, m.get("content"), required=True)
    if open_ids:
        out.append(f"tool_call_ids {open_ids} of the last assistant message are not answered by 'tool' messages")
    return out


def _tool_problems(tools: Any) -> list[str]:
    if not isinstance(tools, list):
        return ["tools: expected an array"]
    out, seen = [], set()
    for i, t in enumerate(tools):
        fn = t.get("function") if isinstance(t, dict) else None
        if not isinstance(t, dict) or t.get("type") != "function" or not isinstance(fn, dict):
            out.append(f"tools[{i}]: expected {{'type': 'function', 'function': {{...}}}}")
            continue
        name = fn.get("name")
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            out.append(f"tools[{i}].function.name: {name!r} is not 1-64 letters, digits, '_' or '-'")
        elif name in seen:
            out.append(f"tools[{i}].function.name: {name!r} is given twice")
        seen.add(name)
        if "parameters" in fn and not isinstance(fn["parameters"], dict):
            out.append(f"tools[{i}].function.parameters: expected a JSON schema object")
    return out


def problems(body: Any) -> list[str]:
    """Why the provider would refuse ``body`` (a parsed request), one sentence each; ``[]`` when
    it would take it."""
    if not isinstance(body, dict):
        return ["the body is not a JSON object"]
    out = [f"Unrecognized request argument supplied: {k}" for k in body if k not in TOP_LEVEL]
    if not isinstance(body.get("model"), str) or not body["model"]:
        out.append("model: a non-empty string is required")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        out.append("messages: a non-empty array is required")
    else:
        out += _message_problems(messages)
    if "tools" in body:
        out += _tool_problems(body["tools"])
    if "stream_options" in body and not body.get("stream"):
        out.append("stream_options: only allowed when stream is true")
    return out


def refusal(found: Sequence[str]) -> RawReply:
    """A ``400`` in OpenAI's error shape naming the first problem (all of them in the message)."""
    body = {"error": {"message": "; ".join(found), "type": "invalid_request_error", "param": None, "code": None}}
    return RawReply(status=400, headers=(("Content-Type", "application/json"),), body=json.dumps(body).encode())


def _arguments(raw: Any) -> Mapping[str, Any]:
    try:
        got = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return {}
    return got if isinstance(got, dict) else {}


def view(body: Mapping[str, Any]) -> ChatView:
    """The neutral view of a request that :func:`problems` accepted."""
    messages = body["messages"]
    calls: dict[str, tuple[str, Mapping[str, Any]]] = {}
    outputs: list[Output] = []
    system: list[str] = []
    users: list[str] = []
    for m in messages:
        role = m["role"]
        if role in ("system", "developer"):
            system.append(_text(m.get("content")))
        elif role == "user":
            users.append(_text(m.get("content")))
        elif role == "assistant":
            for c in m.get("tool_calls") or ():
                calls[c["id"]] = (c["function"]["name"], _arguments(c["function"]["arguments"]))
        elif role == "tool":
            name, args = calls.get(m["tool_call_id"], ("", {}))
            outputs.append(Output(m["tool_call_id"], name, args, _text(m.get("content"))))
    tools = tuple(t["function"]["name"] for t in body.get("tools") or ())
    return ChatView(
        system="\n\n".join(system),
        tools=tools,
        outputs=tuple(outputs),
        user=users[-1] if users else "",
        users=tuple(users),
        messages=len(messages),
    )


def conversation(body: Mapping[str, Any]) -> play.Conversation:
    """The play's view of a request that :func:`problems` accepted."""
    v = view(body)
    messages = body["messages"]
    calls = tuple(
        play.Call(c["id"], c["function"]["name"], dict(_arguments(c["function"]["arguments"])))
        for m in messages
        if m["role"] == "assistant"
        for c in m.get("tool_calls") or ()
    )
    return play.Conversation(
        first_user_text=v.users[0] if v.users else "",
        tools=frozenset(v.tools),
        calls=calls,
        outputs=tuple(play.Output(o.call_id, o.text) for o in v.outputs),
        ends_with_output=messages[-1]["role"] == "tool",
    )


def reply_for(move: play.Move, task: play.Task) -> Reply:
    """The reply that makes ``move`` with opencode's tools (``bash``, ``read``)."""
    if isinstance(move, play.Shell):
        return Reply.tool_call(
            "bash", {"command": move.command, "description": f"Run {move.command}"}, play.call_id(move.step, "call_")
        )
    if isinstance(move, play.Read):
        return Reply.tool_call(READ_TOOL, {"filePath": task.path(move.rel)}, play.call_id(move.step, "call_"))
    if isinstance(move, play.Retrieve):
        return Reply.tool_call("headroom_retrieve", {"key": move.key}, play.call_id(move.step, "call_"))
    return Reply.text_reply(move.text)


def answer(model: "ScriptedModel", rec: RecordedRequest) -> Reply | RawReply:
    """The reply to a ``/v1/chat/completions`` request (the adapter hook of :mod:`tests.support.scripted`)."""
    if rec.method != "POST":
        body = {
            "error": {
                "message": f"Method {rec.method} not allowed",
                "type": "invalid_request_error",
                "param": None,
                "code": None,
            }
        }
        return RawReply(status=405, headers=(("Content-Type", "application/json"),), body=json.dumps(body).encode())
    found = problems(rec.json)
    if found:
        return model.refuse(rec, "; ".join(found), refusal(found))
    conv = conversation(rec.json)
    move = play.next_move(conv, SHELL_TOOLS)
    if isinstance(move, play.Read) and READ_TOOL not in conv.tools:
        move = play.Shell(move.step, f"cat {move.rel}")
    model.note(rec, move)
    return reply_for(move, model.task)
