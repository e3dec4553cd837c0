"""Amazon Bedrock's Converse API (``POST /model/{modelId}/converse`` and ``/converse-stream``):
the request side (the response side and its AWS event-stream: :mod:`headroom_core.wire.reply_converse`).

Shapes (Amazon Bedrock API reference, "Converse", "ContentBlock", "ToolResultBlock",
"ToolConfiguration", "TokenUsage"): ``messages`` of ``{role: "user"|"assistant", content:
[ContentBlock]}``, a block holding exactly one of ``text``, ``toolUse`` ``{toolUseId, name,
input}``, ``toolResult`` ``{toolUseId, content: [{text} | {json} | {image} | {document} |
{video}], status?: "success"|"error"}``, ``cachePoint`` ``{type: "default"}``, ``image``,
``document``, ``reasoningContent``, …; ``system`` a list of ``{text}`` / ``{cachePoint}`` /
``{guardContent}`` blocks; ``toolConfig`` ``{tools: [{toolSpec: {name, description?,
inputSchema: {json}}} | {cachePoint}], toolChoice?: {auto: {}} | {any: {}} | {tool: {name}}}``;
the model is in the path, never in the body.

Tool output text: each ``{text}`` of a ``toolResult``'s content, and each string member of a
``{json}`` block's object (as Gemini's ``functionResponse.response``). A ``cachePoint`` block is a
prompt-cache checkpoint (Bedrock "Prompt caching": the prefix up to it is cached; at most four
per request), the Converse form of ``cache_control``.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

from headroom_core.wire.blocks import ToolCall, ToolOutput, Usage
from headroom_core.wire.tool_defs import ToolShape

CONVERSATION = "messages"
SYSTEM = "system"
#: The member holding ``tools`` (and ``toolChoice``), and the path of the tools array.
TOOL_CONFIG = "toolConfig"
TOOLS_PATH = (TOOL_CONFIG, "tools")
#: A prompt-cache checkpoint block (in ``system``, ``toolConfig.tools`` and message content).
CACHE_POINT = "cachePoint"
#: The member of a ``toolConfig.tools`` element holding a client tool's definition.
TOOL_SPEC = "toolSpec"


def _messages(body: dict[str, Any]) -> list[Any]:
    seq = body.get(CONVERSATION)
    return seq if isinstance(seq, list) else []


def _blocks(m: Any) -> list[Any]:
    c = m.get("content") if isinstance(m, dict) else None
    return c if isinstance(c, list) else []


def _args_text(args: Any) -> str:
    return json.dumps(args, ensure_ascii=False, separators=(",", ":")) if args is not None else "{}"


def tool_calls(body: dict[str, Any]) -> dict[str, ToolCall]:
    """Every ``toolUse`` block of the assistants' messages, by ``toolUseId``, in order."""
    out: dict[str, ToolCall] = {}
    for m in _messages(body):
        if not isinstance(m, dict) or m.get("role") != "assistant":
            continue
        for b in _blocks(m):
            tu = b.get("toolUse") if isinstance(b, dict) else None
            if isinstance(tu, dict):
                cid = str(tu.get("toolUseId", ""))
                out[cid] = ToolCall(cid, str(tu.get("name", "")), tu.get("input"), _args_text(tu.get("input")))
    return out


def tool_outputs(body: dict[str, Any]) -> list[ToolOutput]:
    """Every tool output text of the ``toolResult`` blocks (see the module docstring), with its
    path and the name of the ``toolUse`` it answers (by ``toolUseId``)."""
    names = {cid: c.name for cid, c in tool_calls(body).items()}
    out: list[ToolOutput] = []
    for i, m in enumerate(_messages(body)):
        if not isinstance(m, dict) or m.get("role") != "user":
            continue
        for k, b in enumerate(_blocks(m)):
            tr = b.get("toolResult") if isinstance(b, dict) else None
            if not isinstance(tr, dict) or not isinstance(tr.get("content"), list):
                continue
            cid = str(tr.get("toolUseId", ""))
            err = tr.get("status") == "error"
            at = (CONVERSATION, i, "content", k, "toolResult", "content")
            for j, part in enumerate(tr["content"]):
                if not isinstance(part, dict):
                    continue
                if isinstance(part.get("text"), str):
                    out.append(ToolOutput((*at, j, "text"), part["text"], names.get(cid, ""), cid, i, err))
                elif isinstance(part.get("json"), dict):
                    for key, v in part["json"].items():
                        if isinstance(v, str):
                            out.append(ToolOutput((*at, j, "json", key), v, names.get(cid, ""), cid, i, err))
    return out


def user_texts(item: Any) -> Iterator[str]:
    """The ``text`` blocks of one user message (tool results excluded)."""
    if isinstance(item, dict) and item.get("role") == "user":
        for b in _blocks(item):
            if isinstance(b, dict) and isinstance(b.get("text"), str):
                yield b["text"]


def latest_user_text(body: dict[str, Any]) -> str:
    """The text of the latest user message that has text blocks of its own."""
    for m in reversed(_messages(body)):
        joined = "\n".join(t for t in user_texts(m) if t.strip())
        if joined:
            return joined
    return ""


def tools(body: dict[str, Any]) -> list[Any]:
    """``toolConfig.tools`` as sent (``[]`` when absent)."""
    tc = body.get(TOOL_CONFIG)
    t = tc.get("tools") if isinstance(tc, dict) else None
    return t if isinstance(t, list) else []


def tool_names(body: dict[str, Any]) -> list[str]:
    """Names of the ``toolSpec`` tools offered, in order (cache points are no tools)."""
    return [
        str(t["toolSpec"].get("name", ""))
        for t in tools(body)
        if isinstance(t, dict) and isinstance(t.get("toolSpec"), dict)
    ]


def function_tool(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    """A ``toolSpec`` tool (its JSON Schema under ``inputSchema.json``)."""
    return {"toolSpec": {"name": name, "description": description, "inputSchema": {"json": schema}}}


def tool_shape(tool: Any) -> ToolShape | None:
    """A ``toolSpec`` tool keeps its definition in ``toolSpec``, its JSON Schema under
    ``inputSchema.json``; None for a ``cachePoint`` or anything else."""
    spec = tool.get(TOOL_SPEC) if isinstance(tool, dict) else None
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) or not spec["name"]:
        return None
    return ToolShape((TOOL_SPEC,), ("inputSchema", "json"))


def forced_tool_names(body: dict[str, Any]) -> set[str]:
    """The tool ``toolConfig.toolChoice`` ``{tool: {name}}`` forces (empty for ``auto``/``any``)."""
    tc = body.get(TOOL_CONFIG)
    choice = tc.get("toolChoice") if isinstance(tc, dict) else None
    forced = choice.get("tool") if isinstance(choice, dict) else None
    return {forced["name"]} if isinstance(forced, dict) and isinstance(forced.get("name"), str) else set()


def tool_choice_allows(body: dict[str, Any], name: str) -> bool:
    """Whether ``toolConfig.toolChoice`` lets the model call ``name``: ``auto`` and ``any``
    do; ``{tool: {name}}`` only that tool."""
    tc = body.get(TOOL_CONFIG)
    choice = tc.get("toolChoice") if isinstance(tc, dict) else None
    forced = choice.get("tool") if isinstance(choice, dict) else None
    return not (isinstance(forced, dict) and isinstance(forced.get("name"), str) and forced["name"] != name)


def response_message(resp: dict[str, Any]) -> dict[str, Any]:
    """``output.message`` of a Converse response (``{}`` when there is none)."""
    out = resp.get("output")
    m = out.get("message") if isinstance(out, dict) else None
    return m if isinstance(m, dict) else {}


def response_tool_calls(resp: dict[str, Any]) -> list[ToolCall]:
    """The ``toolUse`` blocks of a (non-streamed) response's message."""
    calls = []
    for b in _blocks(response_message(resp)):
        tu = b.get("toolUse") if isinstance(b, dict) else None
        if isinstance(tu, dict):
            calls.append(
                ToolCall(
                    str(tu.get("toolUseId", "")), str(tu.get("name", "")), tu.get("input"), _args_text(tu.get("input"))
                )
            )
    return calls


def usage(resp: dict[str, Any]) -> Usage:
    """``usage`` (TokenUsage): ``inputTokens`` (without cached tokens, as the Messages API),
    ``outputTokens``, ``cacheReadInputTokens``, ``cacheWriteInputTokens``."""
    u = resp.get("usage")
    if not isinstance(u, dict):
        return Usage()
    return Usage(
        u.get("inputTokens"), u.get("outputTokens"), u.get("cacheReadInputTokens"), u.get("cacheWriteInputTokens")
    )


def error_body(message: str, too_large: bool = False) -> dict[str, Any]:
    """Bedrock's error body (``{"message"}``; its type is the ``x-amzn-ErrorType`` header)."""
    return {"message": message}


def shape_error(body: dict[str, Any]) -> str:
    """Why a parsed body is not a Converse request (``""`` when it is): ``messages`` must be a
    list whose messages hold content block lists (an InvokeModel body has ``anthropic_version``)."""
    seq = body.get(CONVERSATION)
    if not isinstance(seq, list):
        return "no messages list"
    if "anthropic_version" in body:
        return "an InvokeModel body (anthropic_version), not Converse"
    if any(isinstance(m, dict) and not isinstance(m.get("content"), list) for m in seq):
        return "a message whose content is not a list of blocks"
    return ""


def element_shape(m: Any) -> Any:
    """What an edit must never change in a message: its role and, for each block that is not
    plain text, its kind, ``toolUseId`` and name (a ``cachePoint`` stays where it is)."""
    if not isinstance(m, dict):
        return m
    kinds = []
    for b in _blocks(m):
        if not isinstance(b, dict):
            kinds.append(b)
        elif set(b) != {"text"}:
            inner = next((v for v in b.values() if isinstance(v, dict)), {})
            kinds.append((sorted(b), inner.get("toolUseId"), inner.get("name")))
    return (m.get("role"), kinds)
