"""OpenAI Chat Completions: ``role: "tool"`` outputs, function tools, a response's calls and usage
(streams and what the client gets: ``assemble_chat``, ``reply_chat``)."""

from __future__ import annotations

import json
from typing import Any

from headroom_core.wire.blocks import ToolCall, ToolOutput, Usage

NAME = "openai-chat"


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") in ("text", "input_text")
        )
    return ""


def tool_outputs(body: dict[str, Any]) -> list[ToolOutput]:
    """Every ``role: "tool"`` message's text, with the function name from the assistant's call."""
    names: dict[str, str] = {}
    out: list[ToolOutput] = []
    for i, m in enumerate(body.get("messages") or []):
        if not isinstance(m, dict):
            continue
        for tc in m.get("tool_calls") or []:
            if isinstance(tc, dict):
                names[str(tc.get("id", ""))] = str((tc.get("function") or {}).get("name", ""))
        if m.get("role") != "tool":
            continue
        cid = str(m.get("tool_call_id", ""))
        name = names.get(cid, str(m.get("name", "")))
        c = m.get("content")
        if isinstance(c, str):
            out.append(ToolOutput(("messages", i, "content"), c, name, cid, i))
        elif isinstance(c, list):
            for k, p in enumerate(c):
                if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str):
                    out.append(ToolOutput(("messages", i, "content", k, "text"), p["text"], name, cid, i))
    return out


def latest_user_text(body: dict[str, Any]) -> str:
    """The text of the latest ``role: "user"`` message."""
    for m in reversed(body.get("messages") or []):
        if isinstance(m, dict) and m.get("role") == "user":
            t = _text_of(m.get("content"))
            if t.strip():
                return t
    return ""


def tool_names(body: dict[str, Any]) -> list[str]:
    """Names of the function tools offered, in order (none when ``tools`` is not an array)."""
    tools = body.get("tools")
    if not isinstance(tools, list):
        return []
    return [
        str(t["function"].get("name", "")) if isinstance(t.get("function"), dict) else ""
        for t in tools
        if isinstance(t, dict)
    ]


def function_tool(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    """A function tool definition in this dialect."""
    return {"type": "function", "function": {"name": name, "description": description, "parameters": schema}}


def _parse_args(raw: str) -> Any:
    try:
        return json.loads(raw) if raw else {}
    except ValueError:
        return None


def response_tool_calls(resp: dict[str, Any]) -> list[ToolCall]:
    """The tool calls of the first choice of a (non-streamed) response."""
    choices = resp.get("choices") or [{}]
    msg = (choices[0] or {}).get("message") or {}
    calls = []
    for tc in msg.get("tool_calls") or []:
        fn = tc.get("function") or {}
        raw = fn.get("arguments") or ""
        calls.append(ToolCall(str(tc.get("id", "")), str(fn.get("name", "")), _parse_args(raw), raw))
    return calls


def usage(resp: dict[str, Any]) -> Usage:
    """Usage of a response; ``prompt_tokens_details.cached_tokens`` is the cache read."""
    u = resp.get("usage") or {}
    details = u.get("prompt_tokens_details") or {}
    return Usage(u.get("prompt_tokens"), u.get("completion_tokens"), details.get("cached_tokens"), None)


def error_body(message: str, too_large: bool = False) -> dict[str, Any]:
    """An error body in OpenAI's shape."""
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": None,
            "code": "request_too_large" if too_large else None,
        }
    }


def tool_choice_allows(body: dict[str, Any], name: str) -> bool:
    """Whether ``tool_choice`` (or the legacy ``function_call``) lets the model call the
    function ``name``: not with ``"none"`` nor when it names another function."""
    for key in ("tool_choice", "function_call"):
        tc = body.get(key)
        if tc == "none":
            return False
        if isinstance(tc, dict):
            fn = tc.get("function") if isinstance(tc.get("function"), dict) else tc
            if tc.get("type") == "allowed_tools":
                allowed = (tc.get("allowed_tools") or {}).get("tools") or tc.get("tools") or []
                return any(
                    isinstance(t, dict) and (t.get("function") or {}).get("name", t.get("name")) == name
                    for t in allowed
                )
            if isinstance(fn, dict) and "name" in fn:
                return fn.get("name") == name
    return True
