"""Where a tool definition keeps its name, description and input schema, in a dialect's shape.

A dialect says where the tools of its ``tools`` array are (:meth:`WireDialect.tool_places
<headroom_core.wire.protocol.WireDialect.tool_places>`: one per element, or several inside one,
as Gemini's ``functionDeclarations`` groups) and where each keeps what describes it
(:meth:`WireDialect.tool_shape <headroom_core.wire.protocol.WireDialect.tool_shape>`: a
:class:`ToolShape`); everything outside ``wire/`` reads and rewrites tool definitions through
those two, never by field names. The shapes of the Messages, Chat Completions and Responses
bodies (the default of :class:`~headroom_core.wire.protocol.DialectBase`, :func:`tool_shape`):

* Anthropic Messages: ``{"name", "description", "input_schema", ...}`` (no ``type``, or
  ``"type": "custom"``);
* OpenAI Chat Completions: ``{"type": "function", "function": {"name", "description", "parameters"}}``;
* OpenAI Responses: ``{"type": "function", "name", "description", "parameters"}``.

Built-in tools (``web_search``, ``computer_20250124``, …) have no such container: None.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

#: Keys and indexes from a ``tools`` element to one tool inside it (``()``: the element is the tool).
Place = tuple[str | int, ...]


@dataclass(frozen=True)
class ToolShape:
    """Where one tool definition keeps what describes it: ``container`` the keys from the tool
    to the object holding its ``name`` and ``description`` (``()``: the tool itself; Chat
    Completions ``("function",)``; Bedrock Converse ``("toolSpec",)``) and ``schema`` the keys
    from that object to the JSON Schema of the tool's input (``("input_schema",)``,
    ``("parameters",)``; Converse ``("inputSchema", "json")``)."""

    container: tuple[str, ...]
    schema: tuple[str, ...]

    @property
    def schema_label(self) -> str:
        """The schema's keys joined with ``.`` (``input_schema``, ``inputSchema.json``)."""
        return ".".join(self.schema)

    def container_of(self, tool: Any) -> dict[str, Any] | None:
        """The object at :attr:`container` in ``tool`` (None when there is no object there)."""
        v = tool
        for k in self.container:
            v = v.get(k) if isinstance(v, dict) else None
        return v if isinstance(v, dict) else None

    def schema_of(self, container: Mapping[str, Any]) -> tuple[bool, Any]:
        """``(present, value)``: the value at :attr:`schema` in ``container``; ``present`` False
        when its first key is absent (a tool without an input schema); ``(True, None)`` when a
        key on the way holds no object (a schema not understood)."""
        if not self.schema or self.schema[0] not in container:
            return False, None
        v: Any = container
        for k in self.schema:
            if not isinstance(v, dict) or k not in v:
                return True, None
            v = v[k]
        return True, v

    def with_container(self, tool: dict[str, Any], container: dict[str, Any]) -> dict[str, Any]:
        """``tool`` with the object at :attr:`container` replaced by ``container`` (new objects
        along the way, keys in their order; ``tool`` not mutated)."""
        out: dict[str, Any] = _with(tool, self.container, container)
        return out

    def with_schema(self, container: dict[str, Any], schema: Any) -> dict[str, Any]:
        """``container`` with the value at :attr:`schema` replaced by ``schema`` (as
        :meth:`with_container`)."""
        out: dict[str, Any] = _with(container, self.schema, schema)
        return out


def _with(obj: dict[str, Any], keys: tuple[str, ...], value: Any) -> Any:
    if not keys:
        return value
    inner = obj.get(keys[0])
    return {**obj, keys[0]: _with(inner if isinstance(inner, dict) else {}, keys[1:], value)}


def tool_places(tools: list[Any]) -> list[tuple[int, Place]]:
    """Where the tools of a Messages, Chat Completions or Responses ``tools`` array are: each
    element is one tool, ``(index, ())``."""
    return [(i, ()) for i in range(len(tools))]


def tool_shape(tool: Any) -> ToolShape | None:
    """The :class:`ToolShape` of a Messages, Chat Completions or Responses tool definition
    (:func:`tool_definition`); None for a built-in tool or a shape not understood."""
    found = tool_definition(tool)
    if found is None:
        return None
    return ToolShape(("function",) if found[0] is not tool else (), (found[1],))


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
