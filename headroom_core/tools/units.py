"""The tools of a request's ``tools`` array one by one, as its dialect places them.

Most dialects send one tool per element of the array; Gemini groups its function declarations
inside one element (``{"functionDeclarations": [...]}``). Minifying, skeletons and tools on
demand work on single tools: :func:`units` lists them through the dialect's
:meth:`~headroom_core.wire.protocol.WireDialect.tool_places` (where each tool is) and names
them through its :meth:`~headroom_core.wire.protocol.WireDialect.tool_shape` (where each keeps
its name), so no field name of a dialect is read here. The order of the array (the scope's
tool order, :mod:`headroom_core.tools.order`) stays a matter of its elements.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from headroom_core.tools.order import tool_id, unique
from headroom_core.wire import jsonedit
from headroom_core.wire.protocol import WireDialect
from headroom_core.wire.tool_defs import Place


@dataclass(frozen=True)
class Unit:
    """One tool of a ``tools`` array: ``element`` the index of the element it is in, ``at`` the
    keys and indexes from that element to it (``()``: the element is the tool), ``value`` the
    tool as parsed, and ``id`` its identity among the array's tools: its name (in the dialect's
    shape), else its built-in ``type`` (``type:<t>``), else ``""``; a repeated id suffixed
    ``#2``, ``#3``… (:func:`~headroom_core.tools.order.unique`). For the Messages, Chat
    Completions and Responses arrays the ids are :func:`~headroom_core.tools.order.unique_ids`."""

    element: int
    at: Place
    value: Any
    id: str


def name_of(wire: WireDialect, tool: Any) -> str:
    """A tool's name: :func:`~headroom_core.tools.order.tool_id` (the Messages, Chat
    Completions and Responses shapes), else the ``name`` of its definition in the dialect's
    shape (Bedrock Converse's ``toolSpec``), else ``""``."""
    found = tool_id(tool)
    if found:
        return found
    shape = wire.tool_shape(tool)
    c = shape.container_of(tool) if shape is not None else None
    return c["name"] if c is not None and isinstance(c.get("name"), str) else ""


def units(wire: WireDialect, tools: Any) -> list[Unit]:
    """The tools of ``tools`` (a request's tools array, :meth:`~headroom_core.wire.protocol.WireDialect.tools_of`)
    in order, each a :class:`Unit`; ``[]`` when ``tools`` is not a list."""
    if not isinstance(tools, list):
        return []
    places = wire.tool_places(tools)
    values = [jsonedit.value_at(tools[e], at) for e, at in places]
    ids = unique([name_of(wire, v) for v in values])
    return [Unit(e, at, v, i) for (e, at), v, i in zip(places, values, ids)]
