"""Gemini ``generateContent`` bodies (Gemini API, Vertex AI Gemini): the request side.

Shapes (Gemini API reference, ``models.generateContent``): ``contents`` is a list of
``Content`` objects ``{"role": "user"|"model", "parts": [Part, …]}``; a ``Part`` holds one of
``text`` (with ``thought: true`` for a thought summary), ``functionCall`` ``{name, args, id?}``,
``functionResponse`` ``{name, response: {…}, id?}``, ``inlineData`` ``{mimeType, data}``, … and
may carry a ``thoughtSignature`` (opaque; sent back byte for byte). ``systemInstruction`` is one
``Content`` (its ``parts``' texts); ``tools`` a list of ``Tool`` objects, those with
``functionDeclarations`` ``[{name, description, parameters | parametersJsonSchema}]`` being the
client's functions; ``toolConfig.functionCallingConfig`` ``{mode: AUTO|ANY|NONE|VALIDATED,
allowedFunctionNames}`` limits calls.

A ``functionResponse`` answers the ``functionCall`` of the same ``id`` (Gemini 2.5+ and 3 send
ids; Gemini CLI echoes them) or, without ids, the call of the same name in the latest ``model``
content before it, in order. A call without an id gets the id ``#<content>.<part>`` here (its
place), which is never sent upstream.

Tool output text: every string member of a ``functionResponse``'s ``response`` object (Gemini
CLI sends ``{"output": …}`` or ``{"error": …}``; others ``{"result": …}``, ``{"content": …}``).
"""

from __future__ import annotations

import json
from typing import Any, Iterator

from headroom_core.wire.blocks import ToolCall, ToolOutput, Usage
from headroom_core.wire.tool_defs import Place, ToolShape

CONVERSATION = "contents"
SYSTEM = "systemInstruction"
TOOLS = "tools"
DECLARATIONS = "functionDeclarations"
#: The members a ``Tool`` may hold its declarations in (protobuf JSON accepts the field's
#: lowerCamelCase and its proto name; Google's SDKs send the first).
_DECLARATION_KEYS = (DECLARATIONS, "function_declarations")
#: The members a ``FunctionDeclaration`` may hold its input schema in, in the order looked for:
#: ``parametersJsonSchema`` (JSON Schema; ``google-genai`` 1.x sends it as
#: ``parameters_json_schema``), else ``parameters`` (the OpenAPI subset, ``Schema``).
_SCHEMA_KEYS = ("parametersJsonSchema", "parameters_json_schema", "parameters")


def _declarations_of(tool: Any) -> tuple[str, list[Any]] | None:
    """``(member, declarations)`` of a ``Tool`` that declares functions, else None."""
    for k in _DECLARATION_KEYS:
        fds = tool.get(k) if isinstance(tool, dict) else None
        if isinstance(fds, list):
            return k, fds
    return None


def _contents(body: dict[str, Any]) -> list[Any]:
    seq = body.get(CONVERSATION)
    return seq if isinstance(seq, list) else []


def _parts(content: Any) -> list[Any]:
    parts = content.get("parts") if isinstance(content, dict) else None
    return parts if isinstance(parts, list) else []


def placed_id(i: int, k: int) -> str:
    """The id of a ``functionCall`` without one: its place (content ``i``, part ``k``)."""
    return f"#{i}.{k}"


def _id(fn: dict[str, Any]) -> str:
    v = fn.get("id")
    return v if isinstance(v, str) else ""


def _args_text(args: Any) -> str:
    return json.dumps(args, ensure_ascii=False, separators=(",", ":")) if args is not None else "{}"


def calls_and_outputs(body: dict[str, Any]) -> tuple[dict[str, ToolCall], list[ToolOutput]]:
    """Every ``functionCall`` of the history by id (in order) and every tool output text, each
    with the name and id of the call it answers (see the module docstring for the pairing)."""
    calls: dict[str, ToolCall] = {}
    outputs: list[ToolOutput] = []
    open_calls: list[tuple[str, str]] = []  # (name, id) of the latest model content's calls not yet answered
    for i, content in enumerate(_contents(body)):
        if not isinstance(content, dict):
            continue
        role = content.get("role")
        fresh: list[tuple[str, str]] = []
        for k, part in enumerate(_parts(content)):
            if not isinstance(part, dict):
                continue
            fc = part.get("functionCall")
            if isinstance(fc, dict) and role != "user":
                cid = _id(fc) or placed_id(i, k)
                name = str(fc.get("name", ""))
                calls[cid] = ToolCall(
                    cid, name, fc.get("args") if isinstance(fc.get("args"), dict) else {}, _args_text(fc.get("args"))
                )
                fresh.append((name, cid))
            fr = part.get("functionResponse")
            if isinstance(fr, dict):
                name = str(fr.get("name", ""))
                cid = _id(fr)
                if cid:
                    open_calls = [c for c in open_calls if c[1] != cid]
                else:
                    match = next((c for c in open_calls if c[0] == name), None)
                    if match is not None:
                        open_calls.remove(match)
                        cid = match[1]
                resp = fr.get("response")
                err = isinstance(resp, dict) and "error" in resp and "output" not in resp
                if isinstance(resp, dict):
                    for key, v in resp.items():
                        if isinstance(v, str):
                            outputs.append(
                                ToolOutput(
                                    (CONVERSATION, i, "parts", k, "functionResponse", "response", key),
                                    v,
                                    name,
                                    cid,
                                    i,
                                    err,
                                )
                            )
        if fresh:
            open_calls = fresh
    return calls, outputs


def tool_outputs(body: dict[str, Any]) -> list[ToolOutput]:
    """Every tool output text (string members of ``functionResponse.response``), with its path."""
    return calls_and_outputs(body)[1]


def tool_calls(body: dict[str, Any]) -> dict[str, ToolCall]:
    """Every ``functionCall`` of the history, by id (a placed id when it has none), in order."""
    return calls_and_outputs(body)[0]


def text_parts(content: Any) -> Iterator[str]:
    """The texts of a content's text parts (thought summaries excluded)."""
    for p in _parts(content):
        if isinstance(p, dict) and isinstance(p.get("text"), str) and not p.get("thought"):
            yield p["text"]


def user_texts(item: Any) -> Iterator[str]:
    """The user-written text parts of one content (none for ``model`` contents)."""
    if isinstance(item, dict) and item.get("role", "user") == "user":
        yield from text_parts(item)


def latest_user_text(body: dict[str, Any]) -> str:
    """The text of the latest user content that has text of its own (function responses
    excluded)."""
    for c in reversed(_contents(body)):
        joined = "\n".join(t for t in user_texts(c) if t.strip())
        if joined:
            return joined
    return ""


def declarations(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The function declarations of every ``Tool`` in ``tools``, in order."""
    tools = body.get(TOOLS)
    for t in tools if isinstance(tools, list) else []:
        found = _declarations_of(t)
        for fd in found[1] if found is not None else []:
            if isinstance(fd, dict):
                yield fd


def tool_names(body: dict[str, Any]) -> list[str]:
    """Names of the functions the request declares, in order."""
    return [str(fd.get("name", "")) for fd in declarations(body)]


def function_tool(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    """A ``Tool`` declaring one function (its JSON Schema as ``parametersJsonSchema``)."""
    return {DECLARATIONS: [{"name": name, "description": description, "parametersJsonSchema": schema}]}


def tool_places(tools: list[Any]) -> list[tuple[int, Place]]:
    """Where the tools of ``tools`` are: each function declaration of a ``Tool`` with
    ``functionDeclarations`` (``(i, ("functionDeclarations", j))``), and every other ``Tool``
    (``googleSearch``, ``codeExecution``, …, or one with no declaration) as itself."""
    out: list[tuple[int, Place]] = []
    for i, t in enumerate(tools):
        found = _declarations_of(t)
        if found is not None and found[1]:
            out += [(i, (found[0], j)) for j in range(len(found[1]))]
        else:
            out.append((i, ()))
    return out


def tool_shape(tool: Any) -> ToolShape | None:
    """A ``FunctionDeclaration`` ``{name, description?, parameters? | parametersJsonSchema?, …}``
    keeps its definition in itself, its input schema under the first of :data:`_SCHEMA_KEYS` it
    has (``parametersJsonSchema``, JSON Schema, in either spelling; else ``parameters``, the
    OpenAPI subset); None for anything else (a whole ``Tool``, a declaration without a name)."""
    if (
        not isinstance(tool, dict)
        or not isinstance(tool.get("name"), str)
        or not tool["name"]
        or _declarations_of(tool) is not None
    ):
        return None
    return ToolShape((), (next((k for k in _SCHEMA_KEYS if k in tool), "parameters"),))


def forced_tool_names(body: dict[str, Any]) -> set[str]:
    """The functions ``toolConfig.functionCallingConfig.allowedFunctionNames`` limits the model
    to (the model may call none other; empty with mode ``NONE`` or no such list)."""
    tc = body.get("toolConfig")
    fcc = tc.get("functionCallingConfig") if isinstance(tc, dict) else None
    if not isinstance(fcc, dict) or str(fcc.get("mode", "")).upper() == "NONE":
        return set()
    allowed = fcc.get("allowedFunctionNames")
    return {n for n in allowed if isinstance(n, str)} if isinstance(allowed, list) else set()


def tool_choice_allows(body: dict[str, Any], name: str) -> bool:
    """Whether ``toolConfig.functionCallingConfig`` lets the model call ``name``: not with mode
    ``NONE`` nor when ``allowedFunctionNames`` names other functions only."""
    tc = body.get("toolConfig")
    fcc = tc.get("functionCallingConfig") if isinstance(tc, dict) else None
    if not isinstance(fcc, dict):
        return True
    if str(fcc.get("mode", "")).upper() == "NONE":
        return False
    allowed = fcc.get("allowedFunctionNames")
    return not (isinstance(allowed, list) and allowed and name not in allowed)


def candidate_content(resp: dict[str, Any]) -> dict[str, Any]:
    """The first candidate's ``content`` of a response (``{}`` when there is none)."""
    cands = resp.get("candidates")
    c = cands[0] if isinstance(cands, list) and cands and isinstance(cands[0], dict) else {}
    content = c.get("content")
    return content if isinstance(content, dict) else {}


def response_tool_calls(resp: dict[str, Any]) -> list[ToolCall]:
    """The ``functionCall`` parts of a response's first candidate (a placed id ``#c.k`` for a
    call without one, ``k`` its part index)."""
    out = []
    for k, p in enumerate(_parts(candidate_content(resp))):
        fc = p.get("functionCall") if isinstance(p, dict) else None
        if isinstance(fc, dict):
            cid = _id(fc) or placed_id(-1, k)
            args = fc.get("args")
            out.append(ToolCall(cid, str(fc.get("name", "")), args if isinstance(args, dict) else {}, _args_text(args)))
    return out


def usage(resp: dict[str, Any]) -> Usage:
    """Usage of a response (``usageMetadata``): ``promptTokenCount`` (cached tokens included,
    ``cachedContentTokenCount`` of them read from the cache), output ``candidatesTokenCount``
    plus ``thoughtsTokenCount`` (thinking is billed as output)."""
    u = resp.get("usageMetadata")
    if not isinstance(u, dict):
        return Usage()
    out = u.get("candidatesTokenCount")
    thoughts = u.get("thoughtsTokenCount")
    if isinstance(thoughts, int):
        out = (out or 0) + thoughts
    return Usage(u.get("promptTokenCount"), out, u.get("cachedContentTokenCount"), None)


#: google.rpc status names by HTTP status (cloud.google.com/apis/design/errors).
_STATUS = {400: "INVALID_ARGUMENT", 413: "INVALID_ARGUMENT"}


def error_body(message: str, too_large: bool = False) -> dict[str, Any]:
    """An error body in Google's shape ``{"error": {"code", "message", "status"}}``; a size
    refusal has code 413 and status ``INVALID_ARGUMENT`` (not retried by Google's clients,
    unlike ``RESOURCE_EXHAUSTED``)."""
    code = 413 if too_large else 400
    return {"error": {"code": code, "message": message, "status": _STATUS[code]}}


def shape_error(body: dict[str, Any]) -> str:
    """Why a parsed body is not a ``generateContent``/``countTokens`` request (``""`` when it is)."""
    return "" if isinstance(body.get(CONVERSATION), list) else "no contents list"


def element_shape(c: Any) -> Any:
    """What an edit must never change in a content: its role and, for each part that is not
    plain text, which kind it is, its function's name and id, and its thought signature (a
    text part may be appended: the proxy's context block)."""
    if not isinstance(c, dict):
        return c
    kinds = []
    for p in _parts(c):
        if isinstance(p, dict) and set(p) <= {"text"}:
            continue
        if not isinstance(p, dict):
            kinds.append(p)
            continue
        fn = p.get("functionCall") or p.get("functionResponse")
        named = fn if isinstance(fn, dict) else {}
        kinds.append(
            (sorted(k for k in p if k != "text"), named.get("name"), named.get("id"), p.get("thoughtSignature"))
        )
    return (c.get("role"), kinds)
