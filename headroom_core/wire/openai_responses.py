"""OpenAI Responses API: ``function_call_output`` items, function tools, a response's calls and
usage (streams and what the client gets: ``assemble_responses``, ``reply_responses``).

The same body shape travels over HTTP (``POST …/responses``) and inside WebSocket
``response.create`` frames.
"""

from __future__ import annotations

import json
from typing import Any

from headroom_core.wire.blocks import ToolCall, ToolOutput, Usage

NAME = "openai-responses"


def tool_outputs(body: dict[str, Any]) -> list[ToolOutput]:
    """Every ``function_call_output`` item's text (string ``output``, or its text parts)."""
    names: dict[str, str] = {}
    out: list[ToolOutput] = []
    items = body.get("input")
    if not isinstance(items, list):
        return out
    for i, it in enumerate(items):
        if not isinstance(it, dict):
            continue
        if it.get("type") in ("function_call", "custom_tool_call"):
            names[str(it.get("call_id", ""))] = str(it.get("name", ""))
        if it.get("type") not in ("function_call_output", "custom_tool_call_output"):
            continue
        cid = str(it.get("call_id", ""))
        o = it.get("output")
        if isinstance(o, str):
            out.append(ToolOutput(("input", i, "output"), o, names.get(cid, ""), cid, i))
        elif isinstance(o, list):
            for k, p in enumerate(o):
                if (
                    isinstance(p, dict)
                    and p.get("type") in ("input_text", "output_text")
                    and isinstance(p.get("text"), str)
                ):
                    out.append(ToolOutput(("input", i, "output", k, "text"), p["text"], names.get(cid, ""), cid, i))
    return out


def latest_user_text(body: dict[str, Any]) -> str:
    """The latest user text: ``input`` itself when it is a string, else the last user item."""
    inp = body.get("input")
    if isinstance(inp, str):
        return inp
    for it in reversed(inp if isinstance(inp, list) else []):
        if isinstance(it, dict) and it.get("role") == "user":
            c = it.get("content")
            if isinstance(c, str) and c.strip():
                return c
            if isinstance(c, list):
                t = "\n".join(p.get("text", "") for p in c if isinstance(p, dict) and p.get("type") == "input_text")
                if t.strip():
                    return t
    return ""


def tool_names(body: dict[str, Any]) -> list[str]:
    """Names of the function tools offered, in order (none when ``tools`` is not an array)."""
    tools = body.get("tools")
    return [str(t.get("name", "")) for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []


def function_tool(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    """A function tool definition in this dialect."""
    return {"type": "function", "name": name, "description": description, "parameters": schema}


def response_tool_calls(resp: dict[str, Any]) -> list[ToolCall]:
    """The ``function_call`` output items of a (non-streamed) response."""
    calls = []
    for it in resp.get("output") or []:
        if isinstance(it, dict) and it.get("type") == "function_call":
            raw = it.get("arguments") or ""
            try:
                args = json.loads(raw) if raw else {}
            except ValueError:
                args = None
            calls.append(ToolCall(str(it.get("call_id", "")), str(it.get("name", "")), args, raw))
    return calls


def usage(resp: dict[str, Any]) -> Usage:
    """Usage of a response; ``input_tokens_details.cached_tokens`` is the cache read."""
    u = resp.get("usage") or {}
    return Usage(
        u.get("input_tokens"), u.get("output_tokens"), (u.get("input_tokens_details") or {}).get("cached_tokens"), None
    )


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
    """Whether ``tool_choice`` lets the model call the function ``name``: not with ``"none"``,
    nor when it forces another tool (``{"type": "function", "name": …}``, a built-in tool type),
    nor with ``allowed_tools`` that leave it out."""
    tc = body.get("tool_choice")
    if tc == "none":
        return False
    if not isinstance(tc, dict):
        return True
    if tc.get("type") == "allowed_tools":
        return any(isinstance(t, dict) and t.get("name") == name for t in tc.get("tools") or [])
    if tc.get("type") == "function":
        return tc.get("name") == name
    return tc.get("type") in (None, "auto", "required")
