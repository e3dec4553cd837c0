"""The tool calls a request's history holds (what the model asked for, with its arguments), per
dialect, in conversation order.

Shapes: Anthropic ``tool_use`` blocks in assistant messages (``id``, ``name``, ``input``);
Chat Completions ``tool_calls[].function`` (``name``, JSON-string ``arguments``); Responses API
items ``function_call`` (JSON-string ``arguments``), ``custom_tool_call`` (free-form ``input``,
e.g. Codex ``apply_patch``) and ``local_shell_call`` (``action.command``).
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from headroom_core.wire.blocks import ToolCall
from headroom_core.wire.detect import Dialect


def _args(raw: Any) -> tuple[Any, str]:
    if isinstance(raw, str):
        try:
            return json.loads(raw) if raw else {}, raw
        except ValueError:
            return None, raw
    return raw, ""


def anthropic_calls(body: Mapping[str, Any]) -> dict[str, ToolCall]:
    """``tool_use`` blocks of ``messages``: call id -> :class:`ToolCall` (``arguments`` = ``input``)."""
    out: dict[str, ToolCall] = {}
    for m in body.get("messages") or []:
        if not isinstance(m, dict) or not isinstance(m.get("content"), list):
            continue
        for b in m["content"]:
            if isinstance(b, dict) and b.get("type") == "tool_use" and isinstance(b.get("id"), str):
                out[b["id"]] = ToolCall(b["id"], str(b.get("name", "")), b.get("input"))
    return out


def chat_calls(body: Mapping[str, Any]) -> dict[str, ToolCall]:
    """``tool_calls`` of assistant messages: call id -> :class:`ToolCall` (arguments parsed)."""
    out: dict[str, ToolCall] = {}
    for m in body.get("messages") or []:
        if not isinstance(m, dict):
            continue
        for tc in m.get("tool_calls") or []:
            if isinstance(tc, dict) and isinstance(tc.get("id"), str):
                fn = tc.get("function") or {}
                args, raw = _args(fn.get("arguments"))
                out[tc["id"]] = ToolCall(tc["id"], str(fn.get("name", "")), args, raw)
    return out


def responses_calls(body: Mapping[str, Any]) -> dict[str, ToolCall]:
    """Call items of ``input``: call id -> :class:`ToolCall`. A ``custom_tool_call``'s free-form
    ``input`` and a ``local_shell_call``'s ``action`` become ``arguments`` ``{"input": …}`` and
    ``{"command": […]}``."""
    out: dict[str, ToolCall] = {}
    items = body.get("input")
    for it in items if isinstance(items, list) else []:
        if not isinstance(it, dict) or not isinstance(it.get("call_id"), str):
            continue
        t = it.get("type")
        if t == "function_call":
            args, raw = _args(it.get("arguments"))
            out[it["call_id"]] = ToolCall(it["call_id"], str(it.get("name", "")), args, raw)
        elif t == "custom_tool_call":
            out[it["call_id"]] = ToolCall(
                it["call_id"], str(it.get("name", "")), {"input": it.get("input")}, str(it.get("input") or "")
            )
        elif t == "local_shell_call":
            action = it.get("action") or {}
            out[it["call_id"]] = ToolCall(it["call_id"], "local_shell", {"command": action.get("command")})
    return out


def tool_calls_in_request(body: Mapping[str, Any], dialect: Dialect) -> dict[str, ToolCall]:
    """Every tool call in the history of a request body of ``dialect``, by call id, in order
    (:meth:`~headroom_core.wire.dialects.WireDialect.tool_calls`)."""
    from headroom_core.wire.dialects import REGISTRY  # the registry is built from this module

    return REGISTRY[dialect].tool_calls(dict(body))
