"""Where a tool definition keeps its name, description and input schema, in any dialect.

* Anthropic Messages: ``{"name", "description", "input_schema", ...}`` (no ``type``, or
  ``"type": "custom"``);
* OpenAI Chat Completions: ``{"type": "function", "function": {"name", "description", "parameters"}}``;
* OpenAI Responses: ``{"type": "function", "name", "description", "parameters"}``.

Built-in tools (``web_search``, ``computer_20250124``, …) have no such container: None.
"""

from __future__ import annotations

from typing import Any, Mapping


def tool_definition(tool: Any) -> tuple[dict[str, Any], str] | None:
    """``(container, schema_key)`` of a client tool definition: the object holding ``name``,
    ``description`` and the JSON Schema under ``schema_key`` (``input_schema`` or
    ``parameters``); None for a built-in tool or a shape not understood."""
    if not isinstance(tool, dict):
        return None
    kind = tool.get("type")
    if kind == "function":
        fn = tool.get("function")
        if isinstance(fn, dict):  # OpenAI Chat Completions
            return (fn, "parameters") if isinstance(fn.get("name"), str) and fn["name"] else None
        if "function" in tool:
            return None
        if isinstance(tool.get("name"), str) and tool["name"]:  # OpenAI Responses
            return tool, "parameters"
        return None
    if kind is None or (kind == "custom" and "input_schema" in tool):  # Anthropic
        if isinstance(tool.get("name"), str) and tool["name"] and "function" not in tool and "parameters" not in tool:
            return tool, "input_schema"
    return None


def rebuild_tool(tool: dict[str, Any], container: dict[str, Any]) -> dict[str, Any]:
    """``tool`` with its container (:func:`tool_definition`) replaced by ``container``."""
    if tool.get("type") == "function" and isinstance(tool.get("function"), dict):
        return {k: (container if k == "function" else v) for k, v in tool.items()}
    return container


def forced_tool_names(body: Mapping[str, Any]) -> set[str]:
    """Tool names the request's ``tool_choice`` names, in any dialect's shape (Anthropic
    ``{"type": "tool", "name"}``, Responses ``{"type": "function", "name"}``, Chat
    ``{"type": "function", "function": {"name"}}``)."""
    tc = body.get("tool_choice")
    out: set[str] = set()
    if isinstance(tc, dict):
        for holder in (tc, tc.get("function")):
            if isinstance(holder, dict) and isinstance(holder.get("name"), str):
                out.add(holder["name"])
    return out
