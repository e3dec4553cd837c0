"""The scripted model's Gemini API adapter (``…/models/{m}:generateContent``,
``:streamGenerateContent``, ``:countTokens``; Vertex AI's ``…/publishers/google/models/{m}:…``).

Validates like the API (its documented request shape, ai.google.dev "models.generateContent",
and its error messages' shapes; a refused request gets a 400 ``INVALID_ARGUMENT`` in Google's
error body ``{"error": {code, message, status}}``):

- the body is a JSON object with no top-level field the API does not know (:data:`FIELDS`);
  ``contents`` a non-empty list of ``Content`` (``role`` ``user`` or ``model``, ``parts`` a
  non-empty list); each ``Part`` holds exactly one data member (:data:`DATA`) besides its
  metadata (:data:`PART_META`); a ``text`` a string, a ``functionResponse`` a ``name`` and a
  ``response`` object, a ``functionCall`` a ``name`` and ``args`` object;
- every ``functionCall`` part of a ``model`` content is answered by a ``functionResponse`` of the
  same name in the next content (a ``user`` one), as many responses as calls (the API's "Please
  ensure that the number of function response parts is equal to the number of function call
  parts of the function call turn."); a response with an ``id`` names a call of that turn;
- function declarations have unique names matching :data:`FN_NAME`.

Then maps the play's moves to Gemini CLI's tools: shell -> ``run_shell_command`` ``{"command",
"description"}``, read -> ``read_file`` with the path in whichever property its declaration
requires (absolute), ``headroom_retrieve`` ``{"key"}``. A side request asking for JSON
(``generationConfig.responseJsonSchema`` / ``responseSchema``: Gemini CLI's routing and
next-speaker checks) gets the smallest JSON value of its schema (first enum values).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from tests.support.scripted import play
from tests.support.upstream import RawReply, RecordedRequest, Reply

if TYPE_CHECKING:
    from tests.support.scripted import ScriptedModel

#: Top-level fields of a generateContent request (Gemini API reference).
FIELDS = frozenset(
    {
        "contents",
        "tools",
        "toolConfig",
        "safetySettings",
        "systemInstruction",
        "generationConfig",
        "cachedContent",
        "labels",
        "model",
    }
)
#: countTokens takes ``contents`` or a whole ``generateContentRequest``.
COUNT_FIELDS = frozenset({"contents", "generateContentRequest"})
#: A Part's data members (exactly one per part).
DATA = frozenset(
    {"text", "inlineData", "fileData", "functionCall", "functionResponse", "executableCode", "codeExecutionResult"}
)
#: A Part's metadata members.
PART_META = frozenset({"thought", "thoughtSignature", "videoMetadata", "partMetadata", "mediaResolution"})
#: Function names: a letter or underscore, then letters, digits, ``_ . : -``; 64 at most.
FN_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$")
#: Gemini CLI's tool names (any release so far).
SHELL_TOOLS = frozenset({"run_shell_command"})
READ_TOOL = "read_file"
#: A Gemini generation or count method at the end of a path.
METHODS = (":generateContent", ":streamGenerateContent", ":countTokens")


class Invalid(ValueError):
    """A request the API would refuse (the message is the API's kind of message)."""


def error(message: str, status: int = 400, kind: str = "INVALID_ARGUMENT") -> RawReply:
    """The API's error response."""
    body = {"error": {"code": status, "message": message, "status": kind}}
    return RawReply(
        status=status, headers=(("Content-Type", "application/json; charset=UTF-8"),), body=json.dumps(body).encode()
    )


def _part(p: Any, where: str) -> str:
    """The data member of a valid part (raises :class:`Invalid`)."""
    if not isinstance(p, dict):
        raise Invalid(f"Invalid value at '{where}' (type.googleapis.com/google.ai.generativelanguage.v1beta.Part)")
    unknown = [k for k in p if k not in DATA and k not in PART_META]
    if unknown:
        raise Invalid(f"Invalid JSON payload received. Unknown name \"{unknown[0]}\" at '{where}': Cannot find field.")
    data = [k for k in p if k in DATA]
    if len(data) != 1:
        raise Invalid(f"{where}: a part must hold exactly one of {sorted(DATA)} (got {data})")
    kind = data[0]
    v = p[kind]
    if kind == "text" and not isinstance(v, str):
        raise Invalid(f"Invalid value at '{where}.text' (TYPE_STRING)")
    if kind in ("functionCall", "functionResponse"):
        if not isinstance(v, dict) or not isinstance(v.get("name"), str) or not v["name"]:
            raise Invalid(f"{where}.{kind}.name: Name cannot be empty.")
        payload = "args" if kind == "functionCall" else "response"
        if payload in v and not isinstance(v[payload], dict):
            raise Invalid(f"Invalid value at '{where}.{kind}.{payload}' (type.googleapis.com/google.protobuf.Struct)")
        if kind == "functionResponse" and "response" not in v:
            raise Invalid(f"{where}.functionResponse.response: required")
    return kind


def validate(body: Any, *, count: bool = False) -> None:
    """Raise :class:`Invalid` with the API's kind of message when ``body`` breaks a rule above."""
    if not isinstance(body, dict):
        raise Invalid("Invalid JSON payload received. Expected an object.")
    for k in body:
        if k not in (COUNT_FIELDS if count else FIELDS):
            raise Invalid(f'Invalid JSON payload received. Unknown name "{k}": Cannot find field.')
    if count and "generateContentRequest" in body:
        body = body["generateContentRequest"]
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        raise Invalid("* GenerateContentRequest.contents: contents is not specified")
    names = []
    for t in body.get("tools") or []:
        for fd in (t.get("functionDeclarations") or []) if isinstance(t, dict) else []:
            names.append(fd.get("name") if isinstance(fd, dict) else None)
    for i, n in enumerate(names):
        if not isinstance(n, str) or not FN_NAME.match(n):
            raise Invalid(f"* GenerateContentRequest.tools[0].function_declarations[{i}].name: Invalid function name.")
    if len(set(names)) != len(names):
        raise Invalid("* GenerateContentRequest.tools: Duplicate function declaration names.")
    pending: list[tuple[str, str]] = []  # (name, id) of the previous model content's calls
    for i, c in enumerate(contents):
        where = f"contents[{i}]"
        if not isinstance(c, dict) or c.get("role", "user") not in ("user", "model"):
            raise Invalid(f"Please use a valid role: user, model. ({where})")
        parts = c.get("parts")
        if not isinstance(parts, list) or not parts:
            raise Invalid(f"* GenerateContentRequest.{where}.parts: contents.parts must not be empty.")
        kinds = [_part(p, f"{where}.parts[{k}]") for k, p in enumerate(parts)]
        responses = [
            (p["functionResponse"]["name"], p["functionResponse"].get("id", ""))
            for p, kd in zip(parts, kinds)
            if kd == "functionResponse"
        ]
        if pending:
            if c.get("role", "user") != "user" or len(responses) != len(pending):
                raise Invalid(
                    "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn."
                )
            for name, rid in responses:
                if not any(name == pn and (not rid or not pid or rid == pid) for pn, pid in pending):
                    raise Invalid(
                        f"{where}: function response {name!r} ({rid}) answers no function call of the previous turn"
                    )
        elif responses:
            raise Invalid(f"{where}: function response parts must follow a function call turn")
        pending = []
        if c.get("role") == "model":
            pending = [
                (p["functionCall"]["name"], p["functionCall"].get("id", ""))
                for p, kd in zip(parts, kinds)
                if kd == "functionCall"
            ]
    if pending and not count:
        raise Invalid(
            "Please ensure that function call turn comes immediately after a user turn or after a function response turn."
        )


def _texts(c: dict[str, Any]) -> list[str]:
    return [
        p["text"]
        for p in c.get("parts") or []
        if isinstance(p, dict) and isinstance(p.get("text"), str) and not p.get("thought")
    ]


def _output_text(resp: Any) -> str:
    if isinstance(resp, dict):
        for k in ("output", "error", "result", "content"):
            if isinstance(resp.get(k), str):
                return resp[k]
    return json.dumps(resp)


def conversation(body: dict[str, Any]) -> play.Conversation:
    """The play's view of a (valid) request: the user texts before the first function call
    stand for the first user message (Gemini CLI puts its environment in a content of its own
    before the prompt); calls and outputs paired by id, else by name in order."""
    contents = body["contents"]
    calls: list[play.Call] = []
    outputs: list[play.Output] = []
    opening: list[str] = []
    called = False
    open_calls: list[play.Call] = []
    for c in contents:
        for p in c.get("parts") or []:
            fc, fr = p.get("functionCall"), p.get("functionResponse")
            if isinstance(fc, dict):
                call = play.Call(str(fc.get("id") or ""), str(fc["name"]), dict(fc.get("args") or {}))
                calls.append(call)
                open_calls.append(call)
                called = True
            elif isinstance(fr, dict):
                match = next(
                    (
                        x
                        for x in open_calls
                        if (fr.get("id") and x.call_id == fr["id"]) or (not fr.get("id") and x.name == fr["name"])
                    ),
                    None,
                )
                if match is not None:
                    open_calls.remove(match)
                resp = fr.get("response")
                outputs.append(
                    play.Output(
                        match.call_id if match else str(fr.get("id") or ""),
                        _output_text(resp),
                        isinstance(resp, dict) and "error" in resp,
                    )
                )
        if not called and c.get("role", "user") == "user":
            opening += _texts(c)
    last = contents[-1]
    tools = frozenset(
        str(fd.get("name"))
        for t in body.get("tools") or []
        if isinstance(t, dict)
        for fd in t.get("functionDeclarations") or []
        if isinstance(fd, dict)
    )
    ends = last.get("role", "user") == "user" and any(
        isinstance(p, dict) and "functionResponse" in p for p in last.get("parts") or []
    )
    return play.Conversation("\n".join(opening), tools, tuple(calls), tuple(outputs), ends)


def _declaration(body: dict[str, Any], name: str) -> dict[str, Any]:
    for t in body.get("tools") or []:
        for fd in t.get("functionDeclarations") or [] if isinstance(t, dict) else []:
            if isinstance(fd, dict) and fd.get("name") == name:
                return fd
    return {}


def _read_args(body: dict[str, Any], path: str) -> dict[str, Any]:
    """``read_file``'s arguments: the path in the property its declaration requires (a release
    names it ``absolute_path``, another ``file_path``)."""
    fd = _declaration(body, READ_TOOL)
    schema = fd.get("parametersJsonSchema") or fd.get("parameters") or {}
    required = [r for r in schema.get("required") or [] if isinstance(r, str)]
    return {(required[0] if required else "file_path"): path}


def _smallest(schema: Any) -> Any:
    """The smallest JSON value of a JSON Schema (or Gemini ``Schema``): first enum values,
    numbers at their ``minimum``, required properties only."""
    if not isinstance(schema, dict):
        return ""
    if schema.get("enum"):
        return schema["enum"][0]
    kind = str(schema.get("type", "object")).lower()
    if kind == "object":
        props = schema.get("properties") or {}
        return {k: _smallest(props.get(k)) for k in schema.get("required") or list(props)}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    return "scripted"


def reply_for(move: play.Move, task: play.Task, body: dict[str, Any]) -> Reply:
    """The Gemini reply that makes ``move`` with Gemini CLI's tools (call ids from the play)."""
    if isinstance(move, play.Shell):
        return Reply.tool_call(
            "run_shell_command",
            {"command": move.command, "description": f"Run {move.command}"},
            play.call_id(move.step, "gc-"),
        )
    if isinstance(move, play.Read):
        return Reply.tool_call(READ_TOOL, _read_args(body, task.path(move.rel)), play.call_id(move.step, "gc-"))
    if isinstance(move, play.Retrieve):
        return Reply.tool_call("headroom_retrieve", {"key": move.key}, play.call_id(move.step, "gc-"))
    if isinstance(move, play.Side):
        gc = body.get("generationConfig") or {}
        schema = gc.get("responseJsonSchema") or gc.get("responseSchema")
        if schema is not None or gc.get("responseMimeType") == "application/json":
            return Reply.text_reply(json.dumps(_smallest(schema or {"type": "object"})))
    return Reply.text_reply(move.text)


def is_gemini(path: str) -> bool:
    """Whether ``path`` (no query) is a Gemini API or Vertex AI Gemini method this adapter answers."""
    return "/models/" in path and path.endswith(METHODS)


def answer(model: "ScriptedModel", rec: RecordedRequest) -> Reply | RawReply:
    """The reply to a Gemini generation or token count."""
    if rec.method != "POST":
        return error(f"Method {rec.method} not allowed", 405, "UNIMPLEMENTED")
    count = rec.path_only.endswith(":countTokens")
    try:
        validate(rec.json, count=count)
    except Invalid as e:
        return model.refuse(rec, str(e), error(str(e)))
    if count:
        return Reply.text_reply("")  # the upstream answers with totalTokens of the body
    conv = conversation(rec.json)
    move = play.next_move(conv, SHELL_TOOLS)
    if isinstance(move, play.Read) and READ_TOOL not in conv.tools:
        move = play.Shell(move.step, f"cat {move.rel}")
    model.note(rec, move)
    return reply_for(move, model.task, rec.json)
