"""Ollama's chat API (``POST /api/chat``): ``role: "tool"`` outputs, function tools, a response's
calls and usage (the response side and its NDJSON stream: :mod:`headroom_core.wire.reply_ollama`).

Shapes (Ollama "API reference", ``/api/chat``): ``messages`` of ``{role, content, images?,
tool_calls?, tool_name?, thinking?}``; ``tools`` as ``{"type": "function", "function": {name,
description, parameters}}``; an assistant's ``tool_calls`` are ``{"function": {name, arguments}}``
with ``arguments`` an object, without ids (newer servers may add ``id``), and a tool's result is a
``role: "tool"`` message naming the tool in ``tool_name``. So a result is paired with its call by
``tool_name``, else by its order after the assistant message that made the calls.
"""

from __future__ import annotations

from typing import Any

from headroom_core.wire.blocks import ToolCall, ToolOutput, Usage

#: The conversation member, and the member holding the tool definitions.
CONVERSATION = "messages"
TOOLS = "tools"


def _calls_of(m: Any) -> list[dict[str, Any]]:
    tcs = m.get("tool_calls") if isinstance(m, dict) else None
    return [tc for tc in tcs if isinstance(tc, dict)] if isinstance(tcs, list) else []


def call_id(tc: dict[str, Any], message_index: int, k: int) -> str:
    """A call's id: its own ``id``, else made from its place (message index and position)."""
    return str(tc.get("id") or f"call_{message_index}_{k}")


def tool_outputs(body: dict[str, Any]) -> list[ToolOutput]:
    """Every ``role: "tool"`` message's text, with the tool's name (``tool_name``, else the call
    at the same position among the latest assistant message's calls)."""
    out: list[ToolOutput] = []
    calls: list[tuple[str, str]] = []  # (id, name) of the latest assistant message's calls
    nth = 0
    for i, m in enumerate(body.get(CONVERSATION) or []):
        if not isinstance(m, dict):
            continue
        if m.get("role") == "assistant":
            calls = [
                (call_id(tc, i, k), str((tc.get("function") or {}).get("name", "")))
                for k, tc in enumerate(_calls_of(m))
            ]
            nth = 0
            continue
        if m.get("role") != "tool":
            continue
        cid, name = calls[nth] if nth < len(calls) else ("", "")
        nth += 1
        if isinstance(m.get("tool_name"), str) and m["tool_name"] != name:
            name = m["tool_name"]
            cid = next((c for c, n in calls if n == name), cid)
        if isinstance(m.get("content"), str):
            out.append(ToolOutput((CONVERSATION, i, "content"), m["content"], name, cid, i))
    return out


def tool_calls(body: dict[str, Any]) -> dict[str, ToolCall]:
    """Every call in the assistants' messages, by id (:func:`call_id`), in order."""
    out: dict[str, ToolCall] = {}
    for i, m in enumerate(body.get(CONVERSATION) or []):
        if isinstance(m, dict) and m.get("role") == "assistant":
            for k, tc in enumerate(_calls_of(m)):
                fn = tc.get("function") or {}
                out[call_id(tc, i, k)] = ToolCall(call_id(tc, i, k), str(fn.get("name", "")), fn.get("arguments"))
    return out


def latest_user_text(body: dict[str, Any]) -> str:
    """The text of the latest ``role: "user"`` message."""
    for m in reversed(body.get(CONVERSATION) or []):
        text = m.get("content") if isinstance(m, dict) and m.get("role") == "user" else None
        if isinstance(text, str) and text.strip():
            return text
    return ""


def tool_names(body: dict[str, Any]) -> list[str]:
    """Names of the function tools offered, in order."""
    tools = body.get(TOOLS)
    if not isinstance(tools, list):
        return []
    return [
        str(t["function"].get("name", "")) if isinstance(t, dict) and isinstance(t.get("function"), dict) else ""
        for t in tools
    ]


def function_tool(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    """A function tool definition in this dialect."""
    return {"type": "function", "function": {"name": name, "description": description, "parameters": schema}}


def response_tool_calls(resp: dict[str, Any]) -> list[ToolCall]:
    """The calls of a (non-streamed) response's ``message``."""
    msg = resp.get("message") if isinstance(resp.get("message"), dict) else {}
    out = []
    for k, tc in enumerate(_calls_of(msg)):
        fn = tc.get("function") or {}
        out.append(ToolCall(str(tc.get("id") or f"call_r{k}"), str(fn.get("name", "")), fn.get("arguments")))
    return out


def usage(resp: dict[str, Any]) -> Usage:
    """``prompt_eval_count`` and ``eval_count`` (Ollama reports no prompt cache)."""
    return Usage(resp.get("prompt_eval_count"), resp.get("eval_count"), None, None)


def error_body(message: str, too_large: bool = False) -> dict[str, Any]:
    """Ollama's error body (``{"error": "…"}``)."""
    return {"error": message}


def tool_choice_allows(body: dict[str, Any], name: str) -> bool:
    """Ollama has no ``tool_choice``: every offered tool may be called."""
    return True
