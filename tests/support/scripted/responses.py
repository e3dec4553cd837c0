"""The OpenAI Responses API side of the scripted model, over HTTP (SSE) and over WebSocket
(``response.create`` frames): a strict check of every request the way the provider refuses bad
ones, the conversation a WebSocket frame continues (``previous_response_id``) resolved from the
history of its own socket, and the request read into the dialect-neutral view a play decides its
next reply from.

The replies themselves are rendered by :class:`tests.support.upstream.Upstream` (SSE events, or
the same events as WebSocket text frames); :meth:`Responses.reply` only gives a reply the
response id this module later resolves. Facts of the API (OpenAI's API reference, "Create a
model response", the WebSocket mode guide, and what Codex CLI 0.171 sends, recorded by
tests/e2e/agents/test_codex.py):

- the body is a JSON object whose top-level fields are among :data:`TOP_LEVEL` (an unknown one:
  ``400 Unknown parameter: '<name>'``); a WebSocket frame adds ``type: "response.create"`` and
  ``generate`` (:data:`WS_FIELDS`); ``model`` is a non-empty string;
- ``input`` is a string or an array of items whose ``type`` is in :data:`ITEM_TYPES`; a
  ``message`` item's ``role`` is in :data:`ROLES`;
- every ``function_call`` (``custom_tool_call``) is answered by a ``function_call_output``
  (``custom_tool_call_output``) with its ``call_id``, and every output answers a call made
  earlier in the conversation (``No tool call found for function call output with call_id …``);
- ``previous_response_id`` continues a response: over WebSocket, one this socket produced
  (the connection-local cache of a ``store: false`` conversation); the new ``input`` follows
  that response's input and output. Over HTTP with ``store: false`` nothing is stored, so an id
  is not found (``previous_response_not_found``);
- ``generate: false`` (the prewarm frame Codex sends first on a socket) produces no output: a
  response with an empty ``output`` whose id a later frame continues.

Usage::

    api = Responses()
    found = api.problems(rec)            # [] when the provider would take it
    if found:
        return api.refusal(rec, found)   # a RawReply: HTTP 400, or a WebSocket ``error`` event
    view = api.view(rec)                 # outputs, offered tools, latest user text, prewarm
    return api.reply(rec, Reply.text("done"))  # the reply, with the id later frames resolve
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tests.support.scripted import play
from tests.support.scripted.chat import Output
from tests.support.upstream import RawReply, RecordedRequest, Reply, ToolCall

if TYPE_CHECKING:
    from tests.support.scripted import ScriptedModel

__all__ = [
    "TOP_LEVEL",
    "WS_FIELDS",
    "ITEM_TYPES",
    "ROLES",
    "SHELL_TOOLS",
    "ResponsesView",
    "Responses",
    "is_responses",
    "conversation",
    "shell_call",
    "answer",
]

#: Top-level fields of a create-response body (OpenAI API reference, "Create a model response";
#: ``client_metadata``: what Codex sends to OpenAI's own endpoint with every request).
TOP_LEVEL = frozenset(
    {
        "background",
        "client_metadata",
        "context_management",
        "conversation",
        "include",
        "input",
        "instructions",
        "max_output_tokens",
        "max_tool_calls",
        "metadata",
        "model",
        "parallel_tool_calls",
        "previous_response_id",
        "prompt",
        "prompt_cache_key",
        "prompt_cache_retention",
        "reasoning",
        "safety_identifier",
        "service_tier",
        "store",
        "stream",
        "stream_options",
        "temperature",
        "text",
        "tool_choice",
        "tools",
        "top_logprobs",
        "top_p",
        "truncation",
        "user",
    }
)
#: What a WebSocket ``response.create`` frame has besides the body's fields.
WS_FIELDS = frozenset({"type", "generate"})
#: Input item types the API takes (the conversation items of the Responses API reference).
ITEM_TYPES = frozenset(
    {
        "message",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "reasoning",
        "compaction",
        "item_reference",
        "web_search_call",
        "file_search_call",
        "computer_call",
        "computer_call_output",
        "code_interpreter_call",
        "image_generation_call",
        "local_shell_call",
        "local_shell_call_output",
        "shell_call",
        "shell_call_output",
        "apply_patch_call",
        "apply_patch_call_output",
        "mcp_list_tools",
        "mcp_approval_request",
        "mcp_approval_response",
        "mcp_call",
        "tool_search_call",
        "tool_search_output",
    }
)
ROLES = frozenset({"user", "assistant", "system", "developer"})
_CALLS = {"function_call": "function_call_output", "custom_tool_call": "custom_tool_call_output"}
_ANSWERS = {v: k for k, v in _CALLS.items()}


@dataclass(frozen=True)
class ResponsesView:
    """What a play needs of one request (the fields of ``chat.ChatView``): ``system``
    (``instructions`` and system/developer texts joined by a blank line), ``tools`` (names
    offered, in order; a namespace's tools as ``namespace.name``), ``outputs`` (every answered
    call of the whole conversation, a WebSocket frame's continued history included), ``user``
    (the latest user text), ``users`` (every user text), ``messages`` (items in the whole
    conversation); and ``prewarm``: a ``generate: false`` frame (answer it with an empty reply,
    it is no step of the play)."""

    system: str
    tools: tuple[str, ...]
    outputs: tuple[Output, ...]
    user: str
    users: tuple[str, ...]
    messages: int
    prewarm: bool = False


def is_responses(rec: RecordedRequest) -> bool:
    """Whether ``rec`` is a Responses request: a ``POST`` to a ``…/responses`` path, or a
    WebSocket frame on one."""
    return rec.method in ("POST", "WS") and rec.path_only.rstrip("/").endswith("/responses")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _arguments(raw: Any) -> Mapping[str, Any]:
    try:
        got = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return {}
    return got if isinstance(got, dict) else {}


def _items(body: Mapping[str, Any]) -> list[Any]:
    inp = body.get("input")
    if isinstance(inp, str):
        return [{"type": "message", "role": "user", "content": inp}]
    return list(inp) if isinstance(inp, list) else []


def _item_problems(items: Sequence[Any], start: int) -> list[str]:
    out = []
    for i, it in enumerate(items[start:], start):
        if not isinstance(it, dict):
            out.append(f"input[{i}]: expected an object")
            continue
        kind = it.get("type", "message" if "role" in it else None)
        if kind not in ITEM_TYPES:
            out.append(f"input[{i}].type: invalid value {kind!r}")
        elif kind == "message" and it.get("role") not in ROLES:
            out.append(f"input[{i}].role: {it.get('role')!r} is not one of {sorted(ROLES)}")
        elif kind in _CALLS and not (isinstance(it.get("call_id"), str) and isinstance(it.get("name"), str)):
            out.append(f"input[{i}]: a {kind} needs a call_id and a name")
        elif kind in _ANSWERS and not isinstance(it.get("call_id"), str):
            out.append(f"input[{i}]: a {kind} needs a call_id")
    return out


def _pairing_problems(items: Sequence[Any]) -> list[str]:
    """Every call answered, every answer to an earlier call of its kind (over the whole history)."""
    out, open_calls = [], {}
    for it in items:
        if not isinstance(it, dict):
            continue
        kind, cid = it.get("type"), it.get("call_id")
        if kind in _CALLS:
            open_calls[cid] = kind
        elif kind in _ANSWERS:
            if open_calls.get(cid) != _ANSWERS[kind]:
                out.append(f"No tool call found for {kind.replace('_', ' ')} with call_id {cid}.")
            else:
                del open_calls[cid]
    out += [f"No tool output found for {kind.replace('_', ' ')} {cid}." for cid, kind in open_calls.items()]
    return out


def _tool_names(tools: Any) -> tuple[str, ...]:
    names: list[str] = []
    for t in tools if isinstance(tools, list) else ():
        if not isinstance(t, dict):
            continue
        if t.get("type") == "namespace":
            names += [f"{t.get('name')}.{s.get('name')}" for s in t.get("tools") or () if isinstance(s, dict)]
        elif isinstance(t.get("name"), str):
            names.append(t["name"])
        else:
            names.append(str(t.get("type")))
    return tuple(names)


class Responses:
    """The strict Responses endpoint's state: for each WebSocket (by its upgrade's
    ``Sec-WebSocket-Key``) the conversation (input and output items) behind every response id
    it produced. Thread-safe (the upstream serves each connection in its own thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        #: socket key -> response id -> the whole conversation up to and including its output
        self._history: dict[str, dict[str, list[Any]]] = {}
        #: id(rec) -> the conversation the request stands for (its continued history + input)
        self._resolved: dict[int, list[Any]] = {}

    @staticmethod
    def _socket(rec: RecordedRequest) -> str | None:
        return rec.header("sec-websocket-key") if rec.method == "WS" else None

    def _conversation(self, rec: RecordedRequest) -> tuple[list[Any] | None, list[str]]:
        """The whole conversation ``rec`` stands for (None and why when its previous response
        cannot be found)."""
        body = rec.json
        prev = body.get("previous_response_id")
        items = _items(body)
        if prev is None:
            return items, []
        sock = self._socket(rec)
        with self._lock:
            before = self._history.get(sock or "", {}).get(prev) if sock is not None else None
        if before is None:
            where = "on this WebSocket" if sock is not None else "(store is false: nothing is stored over HTTP)"
            return None, [f"previous_response_not_found: Previous response with id '{prev}' not found {where}."]
        return before + items, []

    def problems(self, rec: RecordedRequest) -> list[str]:
        """Why the provider would refuse ``rec``, one sentence each; ``[]`` when it would take it
        (then :meth:`view` and :meth:`reply` may be called)."""
        body = rec.json
        if not isinstance(body, dict):
            return ["the body is not a JSON object"]
        allowed = TOP_LEVEL | WS_FIELDS if rec.method == "WS" else TOP_LEVEL
        out = [f"Unknown parameter: '{k}'." for k in body if k not in allowed]
        if rec.method == "WS" and body.get("type") != "response.create":
            out.append(f"type: expected 'response.create', got {body.get('type')!r}")
        if not isinstance(body.get("model"), str) or not body["model"]:
            out.append("model: a non-empty string is required")
        inp = body.get("input")
        if inp is not None and not isinstance(inp, (str, list)):
            out.append("input: expected a string or an array of items")
        if "tools" in body and not isinstance(body["tools"], list):
            out.append("tools: expected an array")
        if out:
            return out
        conv, missing = self._conversation(rec)
        if conv is None:
            return missing
        out += _item_problems(conv, len(conv) - len(_items(body)))
        if body.get("generate") is not False:
            out += _pairing_problems(conv)
        if not out:
            with self._lock:
                self._resolved[id(rec)] = conv
        return out

    @staticmethod
    def refusal(rec: RecordedRequest, found: Sequence[str]) -> RawReply:
        """The provider's answer to a refused request: over HTTP a ``400`` in OpenAI's error
        shape, over WebSocket an ``error`` event (``status`` 400) as one text frame."""
        code = "previous_response_not_found" if found and found[0].startswith("previous_response_not_found") else None
        err = {"message": "; ".join(found), "type": "invalid_request_error", "param": None, "code": code}
        if rec.method == "WS":
            return RawReply(body=json.dumps({"type": "error", "status": 400, "error": err}).encode())
        return RawReply(
            status=400, headers=(("Content-Type", "application/json"),), body=json.dumps({"error": err}).encode()
        )

    def view(self, rec: RecordedRequest) -> ResponsesView:
        """The neutral view of a request :meth:`problems` accepted (its whole conversation)."""
        body = rec.json
        with self._lock:
            conv = self._resolved.get(id(rec), _items(body))
        calls: dict[str, tuple[str, Mapping[str, Any]]] = {}
        outputs: list[Output] = []
        system = [body["instructions"]] if isinstance(body.get("instructions"), str) else []
        users: list[str] = []
        for it in conv:
            kind = it.get("type", "message")
            if kind == "message" and it.get("role") in ("system", "developer"):
                system.append(_text(it.get("content")))
            elif kind == "message" and it.get("role") == "user":
                users.append(_text(it.get("content")))
            elif kind in _CALLS:
                calls[it["call_id"]] = (it["name"], _arguments(it.get("arguments", it.get("input"))))
            elif kind in _ANSWERS:
                name, args = calls.get(it["call_id"], ("", {}))
                out = it.get("output")
                outputs.append(Output(it["call_id"], name, args, out if isinstance(out, str) else _text(out)))
        return ResponsesView(
            system="\n\n".join(system),
            tools=_tool_names(body.get("tools")),
            outputs=tuple(outputs),
            user=users[-1] if users else "",
            users=tuple(users),
            messages=len(conv),
            prewarm=body.get("generate") is False,
        )

    def reply(self, rec: RecordedRequest, reply: Reply) -> Reply:
        """``reply`` with a response id of this upstream; over WebSocket the conversation up to
        its output is kept under that id for a later frame's ``previous_response_id``. A prewarm
        frame (``generate: false``) gets no output whatever ``reply`` holds."""
        body = rec.json
        if body.get("generate") is False:
            reply = Reply(text=None)
        rid = f"resp_scripted{next(self._ids):06d}"
        sock = self._socket(rec)
        # the call ids rendered must be the ones kept: fixed here, not drawn by the renderer
        reply = dataclasses.replace(
            reply, tool_calls=tuple(dataclasses.replace(c, call_id=c.id_for("openai")) for c in reply.tool_calls)
        )
        if sock is not None:
            output: list[Any] = []
            if reply.text:
                output.append(
                    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": reply.text}]}
                )
            output += [
                {"type": "function_call", "call_id": c.call_id, "name": c.name, "arguments": json.dumps(c.arguments)}
                for c in reply.tool_calls
            ]
            with self._lock:
                conv = self._resolved.pop(id(rec), _items(body))
                self._history.setdefault(sock, {})[rid] = conv + output
        else:
            with self._lock:
                self._resolved.pop(id(rec), None)
        return dataclasses.replace(reply, response_id=rid)


# -- the shared play (tests.support.scripted.play) over the Responses API ----------------------

#: Shell tools of Responses clients, by the argument shape each takes (Codex CLI: ``exec_command``
#: with ``cmd`` in 0.1xx; ``shell_command`` with a command string and ``shell`` with an argv in
#: other releases and models).
SHELL_TOOLS = frozenset({"exec_command", "shell_command", "shell"})


def conversation(view: ResponsesView) -> play.Conversation:
    """The play's view of an accepted request (its whole conversation): every user text stands
    for the first user message (Codex sends its instructions and ``<environment_context>`` as
    user messages of their own before the prompt); the calls are the answered ones (every call
    is answered in the next request: :meth:`Responses.problems` checks it)."""
    return play.Conversation(
        first_user_text="\n".join(view.users),
        tools=frozenset(view.tools),
        calls=tuple(play.Call(o.call_id, o.name, dict(o.arguments)) for o in view.outputs),
        outputs=tuple(play.Output(o.call_id, o.text) for o in view.outputs),
        ends_with_output=bool(view.outputs),
    )


def shell_call(tools: Sequence[str], command: str, call_id: str) -> ToolCall:
    """A call of the first offered tool of :data:`SHELL_TOOLS` that runs ``command`` (a shell
    line), in that tool's argument shape."""
    name = next(t for t in tools if t in SHELL_TOOLS)
    if name == "exec_command":
        args: dict[str, Any] = {"cmd": command}
    elif name == "shell":
        args = {"command": ["bash", "-lc", command]}
    else:
        args = {"command": command}
    return ToolCall(name, args, call_id)


def answer(model: "ScriptedModel", rec: RecordedRequest) -> Reply | RawReply:
    """The reply to a Responses request, over HTTP or a WebSocket frame (the adapter hook of
    :mod:`tests.support.scripted`): checked strictly (:meth:`Responses.problems`, one endpoint
    state per model), a prewarm frame answered empty, else the play's next move with the
    client's shell tool (the read step through ``cat``: Codex has no read tool)."""
    if rec.method not in ("POST", "WS"):
        err = {
            "error": {
                "message": f"Method {rec.method} not allowed",
                "type": "invalid_request_error",
                "param": None,
                "code": None,
            }
        }
        return RawReply(status=405, headers=(("Content-Type", "application/json"),), body=json.dumps(err).encode())
    api = model.state("responses", Responses)
    found = api.problems(rec)
    if found:
        return model.refuse(rec, "; ".join(found), api.refusal(rec, found))
    view = api.view(rec)
    if view.prewarm:
        return api.reply(rec, Reply(text=None))
    conv = conversation(view)
    move = play.next_move(conv, SHELL_TOOLS)
    if isinstance(move, play.Read):
        move = play.Shell(move.step, f"cat {move.rel}")
    model.note(rec, move)
    if isinstance(move, play.Shell):
        return api.reply(
            rec, Reply(tool_calls=(shell_call(view.tools, move.command, play.call_id(move.step, "call_")),))
        )
    if isinstance(move, play.Retrieve):
        return api.reply(
            rec, Reply(tool_calls=(ToolCall("headroom_retrieve", {"key": move.key}, play.call_id(move.step, "call_")),))
        )
    return api.reply(rec, Reply(text=move.text))
