"""Rebuild an OpenAI Responses API response object from its streamed events (SSE over HTTP, or
one event per text frame over WebSocket), as the API returns it unstreamed.

Events (Responses API reference, "Streaming events"): ``response.created`` and
``response.in_progress`` carry the response with empty ``output``; every output item (message,
function call, reasoning, web/file search call, custom tool call, MCP call, …) opens with
``response.output_item.added`` and closes with ``response.output_item.done``, which carries the
complete item; deltas in between (``response.output_text.delta``,
``response.function_call_arguments.delta``, …) only stream parts of it. The stream ends with
``response.completed``, ``response.incomplete`` or ``response.failed``, carrying the whole
response object.

So the rule is one for every item type: an item is what its ``output_item.done`` says (exact
text kept), else what ``output_item.added`` said with the text and argument deltas applied (a
stream cut short); the response is the terminal event's object, whose ``output`` is filled from
the items when it came without one. Values keep their exact JSON text
(:mod:`headroom_core.wire.rawjson`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from headroom_core.wire.rawjson import Raw, RawObject, members

TERMINAL = frozenset({"response.completed", "response.done", "response.incomplete", "response.failed"})
_OPENING = ("response.created", "response.in_progress", "response.queued")


@dataclass
class _Item:
    raw: Raw
    done: bool = False
    text: dict[int, list[str]] = field(default_factory=dict)  # content_index -> output_text pieces
    arguments: list[str] = field(default_factory=list)

    def final(self) -> Raw:
        if self.done or not (self.text or self.arguments):
            return self.raw
        obj = RawObject.parse(self.raw.text)
        if self.arguments:
            base = obj.get("arguments")
            obj["arguments"] = (base if isinstance(base, str) else "") + "".join(self.arguments)
        if self.text:
            content = obj.get("content")
            parts = list(content) if isinstance(content, list) else []
            for ci, pieces in sorted(self.text.items()):
                while len(parts) <= ci:
                    parts.append({"type": "output_text", "text": "", "annotations": []})
                part = dict(parts[ci]) if isinstance(parts[ci], dict) else {"type": "output_text"}
                part["text"] = (part.get("text") or "") + "".join(pieces)
                parts[ci] = part
            obj["content"] = parts
        return Raw(obj.text())


class ResponseAssembler:
    """Feed it one response's events (:meth:`accept`); :meth:`text` is the response object's
    JSON text, :meth:`message` its parsed form, :meth:`items_text` the ``output`` rebuilt from
    the item events alone.

    ``terminal``: the type of the terminal event seen (None while the response runs);
    ``error``: an ``error`` event's object.
    """

    def __init__(self) -> None:
        self.opening: Raw | None = None
        self.final: Raw | None = None
        self.items: dict[int, _Item] = {}
        self.terminal: str | None = None
        self.error: Any = None

    def accept(self, data: Any, text: str) -> None:
        """One event: ``data`` its parsed JSON, ``text`` its JSON text."""
        if not isinstance(data, dict):
            return
        t = data.get("type")
        try:
            if t in _OPENING or t in TERMINAL:
                m = members(text)
                if "response" in m:
                    if t in TERMINAL:
                        self.final, self.terminal = m["response"], t
                    else:
                        self.opening = m["response"]
                elif t in TERMINAL:
                    self.terminal = t
            elif t in ("response.output_item.added", "response.output_item.done"):
                idx = data.get("output_index")
                m = members(text)
                if isinstance(idx, int) and "item" in m:
                    old = self.items.get(idx)
                    if t.endswith(".done") or old is None or not old.done:
                        self.items[idx] = _Item(m["item"], done=t.endswith(".done"))
            elif t == "response.output_text.delta":
                it = self.items.get(data.get("output_index"))  # type: ignore[arg-type]
                if it is not None and isinstance(data.get("delta"), str):
                    it.text.setdefault(data.get("content_index", 0), []).append(data["delta"])
            elif t == "response.function_call_arguments.delta":
                it = self.items.get(data.get("output_index"))  # type: ignore[arg-type]
                if it is not None and isinstance(data.get("delta"), str):
                    it.arguments.append(data["delta"])
            elif t == "error":
                self.error = data
        except ValueError:
            pass

    def items_text(self) -> str:
        """``output`` as rebuilt from the item events, in ``output_index`` order."""
        return "[" + ",".join(self.items[i].final().text for i in sorted(self.items)) + "]"

    def text(self) -> str:
        """The response object's JSON text (the terminal event's, else the opening event's with
        the items seen; ``output`` from the items when the object has none)."""
        base = self.final or self.opening
        obj = (
            RawObject.parse(base.text)
            if base is not None
            else RawObject({"object": "response", "status": "incomplete"})
        )
        out = obj.get("output")
        if self.items and (self.final is None or not out):
            obj["output"] = Raw(self.items_text())
        elif "output" not in obj:
            obj["output"] = []
        return obj.text()

    def message(self) -> dict[str, Any]:
        """The response object, parsed."""
        message: dict[str, Any] = Raw(self.text()).value  # text() writes one JSON object
        return message
