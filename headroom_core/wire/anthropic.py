"""Anthropic Messages API: request blocks, the proxy's tools, a response's calls and usage
(streams and what the client gets: ``assemble_anthropic``, ``reply_anthropic``).

Shapes follow the Messages API reference: ``tool_result`` content blocks carry the output as a
string or a list of content blocks; ``tool_use`` blocks in assistant messages name the tool.
"""

from __future__ import annotations

from typing import Any

from headroom_core.wire.blocks import ToolCall, ToolOutput, Usage

NAME = "anthropic-messages"


def tool_outputs(body: dict[str, Any]) -> list[ToolOutput]:
    """Every ``tool_result`` text in ``messages``, with the tool name from its ``tool_use``."""
    names: dict[str, str] = {}
    out: list[ToolOutput] = []
    msgs = body.get("messages")
    if not isinstance(msgs, list):
        return out
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or not isinstance(m.get("content"), list):
            continue
        for j, b in enumerate(m["content"]):
            if not isinstance(b, dict):
                continue
            if b.get("type") == "tool_use" and isinstance(b.get("id"), str):
                names[b["id"]] = str(b.get("name", ""))
            if b.get("type") != "tool_result" or m.get("role") != "user":
                continue
            cid = str(b.get("tool_use_id", ""))
            err = bool(b.get("is_error"))
            c = b.get("content")
            if isinstance(c, str):
                out.append(ToolOutput(("messages", i, "content", j, "content"), c, names.get(cid, ""), cid, i, err))
            elif isinstance(c, list):
                for k, sub in enumerate(c):
                    if isinstance(sub, dict) and sub.get("type") == "text" and isinstance(sub.get("text"), str):
                        out.append(
                            ToolOutput(
                                ("messages", i, "content", j, "content", k, "text"),
                                sub["text"],
                                names.get(cid, ""),
                                cid,
                                i,
                                err,
                            )
                        )
    return out


def latest_user_text(body: dict[str, Any]) -> str:
    """The text of the latest user message that has text of its own (tool results excluded)."""
    for m in reversed(body.get("messages") or []):
        if not isinstance(m, dict) or m.get("role") != "user":
            continue
        c = m.get("content")
        if isinstance(c, str) and c.strip():
            return c
        if isinstance(c, list):
            texts = [b.get("text", "") for b in c if isinstance(b, dict) and b.get("type") == "text"]
            joined = "\n".join(t for t in texts if isinstance(t, str) and t.strip())
            if joined:
                return joined
    return ""


def tool_names(body: dict[str, Any]) -> list[str]:
    """Names of the tools the request offers, in order (none when ``tools`` is not an array)."""
    tools = body.get("tools")
    return [t.get("name", "") for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []


def function_tool(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    """A client tool definition in this dialect."""
    return {"name": name, "description": description, "input_schema": schema}


def response_tool_calls(resp: dict[str, Any]) -> list[ToolCall]:
    """The ``tool_use`` blocks of a (non-streamed) response."""
    calls = []
    for b in resp.get("content") or []:
        if isinstance(b, dict) and b.get("type") == "tool_use":
            calls.append(ToolCall(str(b.get("id", "")), str(b.get("name", "")), b.get("input")))
    return calls


def usage(resp: dict[str, Any]) -> Usage:
    """Usage figures of a response (``usage`` object), None where absent."""
    u = resp.get("usage") or {}
    return Usage(
        u.get("input_tokens"),
        u.get("output_tokens"),
        u.get("cache_read_input_tokens"),
        u.get("cache_creation_input_tokens"),
    )


def error_body(message: str, too_large: bool = False) -> dict[str, Any]:
    """An error body in the Messages API's shape."""
    return {
        "type": "error",
        "error": {"type": "request_too_large" if too_large else "invalid_request_error", "message": message},
    }


def tool_choice_allows(body: dict[str, Any], name: str) -> bool:
    """Whether the request's ``tool_choice`` lets the model call the tool ``name``: not with
    ``{"type": "none"}`` nor when it forces another tool (``{"type": "tool", "name": …}``)."""
    tc = body.get("tool_choice")
    if not isinstance(tc, dict):
        return True
    if tc.get("type") == "none":
        return False
    if tc.get("type") == "tool":
        return tc.get("name") == name
    return True
