"""Skeletons of tool definitions: what the model needs to know a tool exists and to call it.

A skeleton keeps a tool's name, the first sentence of its description (followed by a short
note naming the tool that gives the full definition) and an input schema that is still valid
JSON Schema: property names, ``type``, ``required``, ``enum``, ``const``, ``format``,
``nullable`` (OpenAPI's, as Gemini's ``parameters`` use it: it widens, never narrows), the
object/array structure (``properties``, ``patternProperties``, ``additionalProperties``,
``items``, ``prefixItems``, ``additionalItems``, ``unevaluatedProperties``), the combinators
``anyOf``/``allOf`` (``oneOf`` becomes ``anyOf``) and references (``$ref``, ``$id``, ``$defs``,
``definitions``). Everything else goes: every ``description`` and ``title``, ``examples``,
``default``, bounds and patterns (``minimum``, ``maxLength``, ``pattern``, …), ``not``,
``if``/``then``/``else``, ``contains``, ``propertyNames``, dependencies and ``$schema``.

Only constraints are removed (and ``oneOf`` relaxed to ``anyOf``, ``not`` dropped whole), so
every instance the full schema accepts, the skeleton accepts too: a model that calls the tool
from its skeleton sends arguments the client's tool can still receive.

Shapes understood are those the request's dialect describes (``shape_of``, its
:meth:`~headroom_core.wire.protocol.WireDialect.tool_shape`; by default Anthropic Messages,
OpenAI Chat Completions and OpenAI Responses; Gemini function declarations, Bedrock Converse
``toolSpec`` tools); anything else (server and built-in tools) has no skeleton, and neither
has a tool the client defers itself (``"defer_loading": true``,
:mod:`headroom_core.wire.tool_deferral`). All functions are pure and deterministic (key order
kept).
"""

from __future__ import annotations

import re
from typing import Any

from headroom_core.tools.minify import ShapeOf, _container
from headroom_core.wire.tool_deferral import is_deferred
from headroom_core.wire.tool_defs import tool_shape

#: Longest first sentence kept, in characters (cut at a word, then "…").
FIRST_SENTENCE_MAX_CHARS = 200

# Keywords whose value is data, kept as it is.
_DATA_KEYS = ("type", "enum", "const", "required", "format", "nullable", "$ref", "$id")
# Keywords whose value is one subschema (or a boolean schema).
_ONE = ("additionalProperties", "unevaluatedProperties", "additionalItems")
# Keywords whose value is a list of subschemas.
_LIST = ("anyOf", "allOf", "prefixItems")
# Keywords whose value maps names to subschemas.
_MAP = ("properties", "patternProperties", "$defs", "definitions")

_LIST_ITEM = re.compile(r"^(?:[-*•+]\s|\d+[.)]\s|#)")
_LEAD = re.compile(r"^(?:[-*•+#>]+\s*)+")
# A sentence ends at . ! or ? followed by whitespace or the end, not after e.g. / i.e. / etc. / vs.
_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\betc)(?<!\bvs)(?<!\bcf)[.!?](?=\s|$)", re.IGNORECASE)


def first_sentence(text: str, max_chars: int = FIRST_SENTENCE_MAX_CHARS) -> str:
    """The first sentence of a tool description: the first paragraph (lines joined, stopping at
    a blank line or a list item), leading list or heading marks removed, up to its first
    sentence end; a trailing ``:`` becomes ``…``; at most ``max_chars`` characters (cut at a
    word, ``…`` appended). ``""`` for a blank text."""
    lines: list[str] = []
    for raw in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        s = raw.strip()
        if not s:
            if lines:
                break
            continue
        if lines and _LIST_ITEM.match(s):
            break
        lines.append(s)
    para = _LEAD.sub("", " ".join(lines)).strip()
    para = re.sub(r"\s+", " ", para)
    m = _END.search(para)
    out = para[: m.end()] if m else para
    if out.endswith(":"):
        out = out[:-1].rstrip() + "…"
    if len(out) > max_chars:
        cut = out[: max_chars - 1]
        space = cut.rfind(" ")
        out = (cut[:space] if space > max_chars // 2 else cut).rstrip(" ,;:-") + "…"
    return out


def skeleton_schema(node: Any) -> Any:
    """The skeleton of a JSON Schema node (see the module docstring); a non-object node (a
    boolean schema, or anything else) is returned as it is. Never mutates ``node``."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    extra_all: list[Any] = []
    for key, value in node.items():
        if key in _DATA_KEYS:
            out[key] = value
        elif key in _ONE:
            out[key] = skeleton_schema(value)
        elif key == "items":
            out[key] = [skeleton_schema(v) for v in value] if isinstance(value, list) else skeleton_schema(value)
        elif key in _LIST and isinstance(value, list):
            out[key] = [skeleton_schema(v) for v in value]
        elif key == "oneOf" and isinstance(value, list):
            # exactly-one becomes at-least-one: relaxed branches may overlap
            extra_all.append({"anyOf": [skeleton_schema(v) for v in value]})
        elif key in _MAP and isinstance(value, dict):
            out[key] = {k: skeleton_schema(v) for k, v in value.items()}
    for term in extra_all:
        if "anyOf" not in out:
            out["anyOf"] = term["anyOf"]
        else:
            out["allOf"] = list(out.get("allOf", [])) + [term]
    return out


def _resolves(root: Any, ref: str) -> bool:
    """Whether a local ``$ref`` (``#`` or ``#/a/b``, JSON Pointer escapes) names a node of ``root``."""
    if ref == "#":
        return True
    if not ref.startswith("#/"):
        return not ref.startswith("#")  # remote or anchor refs: resolved (or not) as in the original
    node = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return False
    return True


def _refs(node: Any) -> list[str]:
    out: list[str] = []
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                out.append(v)
            else:
                out += _refs(v)
    elif isinstance(node, list):
        for v in node:
            out += _refs(v)
    return out


def skeleton(tool: Any, note: str = "", shape_of: ShapeOf = tool_shape) -> dict[str, Any] | None:
    """The skeleton of one tool definition, in the tool's own shape, or None when the tool has
    none: not a function/custom tool (server and built-in tools), a tool the client defers
    itself (``"defer_loading": true``), or a schema whose local ``$ref`` s would no longer
    resolve. The description becomes its :func:`first_sentence`
    followed by ``note`` (the note alone when the tool had no description); every other
    member (``name``, ``type``, ``strict``, …) is kept in its place. ``cache_control`` is kept
    if present (callers strip it first). ``shape_of``: the dialect's
    :meth:`~headroom_core.wire.protocol.WireDialect.tool_shape` (where the tool keeps its
    definition and schema)."""
    found = _container(tool, shape_of)
    if found is None or is_deferred(tool):
        return None
    container, shape = found
    out: dict[str, Any] = {}
    for key, value in container.items():
        if key == "description" and isinstance(value, str):
            out[key] = (first_sentence(value) + note).strip()
        else:
            out[key] = value
    if "description" not in out and note.strip():
        out["description"] = note.strip()
    present, schema = shape.schema_of(container)
    if present and isinstance(schema, dict):
        schema = skeleton_schema(schema)
        if not all(_resolves(schema, r) for r in _refs(schema)):
            return None
        out = shape.with_schema(out, schema)
    return shape.with_container(tool, out)
