"""Rebuild an Anthropic Messages response from its SSE events, exactly as the API would have
returned it without ``stream``.

The event grammar (Messages API reference, "Streaming Messages"): ``message_start`` carries the
message with empty ``content``; each content block comes as ``content_block_start`` (the block,
with empty text or input), any number of ``content_block_delta`` and a ``content_block_stop``;
``message_delta`` carries top-level changes (``stop_reason``, ``stop_sequence``, ``container``, …)
and cumulative ``usage``; ``message_stop`` ends the stream; ``ping`` and ``error`` may come at any
time. The delta rules follow the reference and the official SDK's accumulator
(``anthropic.lib.streaming._beta_messages.accumulate_event``):

- ``text_delta`` appends ``text``; ``thinking_delta`` appends ``thinking``;
- ``signature_delta`` sets ``signature``; ``compaction_delta`` sets ``content`` and
  ``encrypted_content``;
- ``citations_delta`` appends ``citation`` to the block's ``citations``;
- ``input_json_delta`` pieces are joined into the block's ``input`` (``tool_use``,
  ``server_tool_use``, ``mcp_tool_use``, or any block that receives them): the JSON text the
  model wrote, kept as written;
- a delta type this module does not know is kept as sent: each string member is appended to the
  block's member of that name, any other member replaces it;
- blocks delivered whole in ``content_block_start`` (``redacted_thinking``, the server tools'
  ``*_tool_result`` blocks, ``mcp_tool_result``, unknown future types) are kept as sent.

Every value the provider sent and this module does not combine keeps its exact JSON text
(:mod:`headroom_core.wire.rawjson`), so numbers and lone surrogate escapes survive.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from headroom_core.wire.rawjson import Raw, RawObject, dumps, elements, members

#: Delta types whose members replace the block's (the rest of the known ones append).
_SETS = {"signature_delta": ("signature",), "compaction_delta": ("content", "encrypted_content")}
_APPENDS = {"text_delta": "text", "thinking_delta": "thinking"}


@dataclass
class _Block:
    """One content block being assembled: its start form plus what the deltas added."""

    start: Raw
    appended: dict[str, list[str]] = field(default_factory=dict)
    replaced: dict[str, Raw] = field(default_factory=dict)
    input_json: list[str] = field(default_factory=list)
    citations: list[Raw] = field(default_factory=list)
    stopped: bool = False

    def text(self) -> str:
        try:
            obj = RawObject.parse(self.start.text)
        except ValueError:
            return self.start.text
        for name, pieces in self.appended.items():
            base = obj.get(name)
            obj[name] = (base if isinstance(base, str) else "") + "".join(pieces)
        for name, raw in self.replaced.items():
            obj[name] = raw
        if self.input_json:
            joined = "".join(self.input_json).strip()
            try:
                Raw(joined).value  # noqa: B018 - only checks that the pieces make JSON
                obj["input"] = Raw(joined)
            except ValueError:
                pass  # a stream cut short: the start form's input stays
        if self.citations:
            base = obj.raw("citations")
            try:
                earlier = elements(base.text) if base is not None else []
            except ValueError:
                earlier = []
            obj["citations"] = Raw("[" + ",".join(r.text for r in earlier + self.citations) + "]")
        return obj.text()


class MessageAssembler:
    """Feed it the events of one Messages SSE stream (:meth:`accept`); :meth:`text` is the
    response object's JSON text, :meth:`message` its parsed form.

    ``started``/``ended``: ``message_start``/``message_stop`` seen; ``error``: the ``error``
    event's ``error`` object, if the stream carried one.
    """

    def __init__(self) -> None:
        self.start: RawObject = RawObject()
        self.blocks: dict[int, _Block] = {}
        self.delta: dict[str, Raw] = {}
        self.extra: dict[str, Raw] = {}
        self.usage: dict[str, Raw] = {}
        self.started = False
        self.ended = False
        self.error: Any = None

    def accept(self, data: Any, text: str) -> None:
        """One event: ``data`` its parsed JSON, ``text`` its JSON text. Events that are not JSON
        objects, and events of unknown types, change nothing."""
        if not isinstance(data, dict):
            return
        t = data.get("type")
        try:
            if t == "message_start":
                self._message_start(text)
            elif t == "content_block_start":
                idx = data.get("index")
                m = members(text)
                if isinstance(idx, int) and "content_block" in m:
                    self.blocks[idx] = _Block(m["content_block"])
            elif t == "content_block_delta":
                self._content_block_delta(data, text)
            elif t == "content_block_stop":
                b = self.blocks.get(data.get("index"))  # type: ignore[arg-type]
                if b is not None:
                    b.stopped = True
            elif t == "message_delta":
                self._message_delta(text)
            elif t == "message_stop":
                self.ended = True
            elif t == "error":
                self.error = data.get("error")
        except ValueError:
            pass  # an event that is not one JSON object: nothing to take from it

    def _message_start(self, text: str) -> None:
        m = members(text)
        if "message" not in m:
            return
        self.start = RawObject.parse(m["message"].text)
        self.started = True
        u = self.start.raw("usage")
        if u is not None:
            try:
                self.usage = members(u.text)
            except ValueError:
                self.usage = {}

    def _content_block_delta(self, data: dict[str, Any], text: str) -> None:
        b = self.blocks.get(data.get("index"))  # type: ignore[arg-type]
        delta = data.get("delta")
        if b is None or not isinstance(delta, dict):
            return
        kind = delta.get("type")
        if kind in _APPENDS:
            piece = delta.get(_APPENDS[kind])
            if isinstance(piece, str):
                b.appended.setdefault(_APPENDS[kind], []).append(piece)
            return
        if kind == "input_json_delta":
            piece = delta.get("partial_json")
            if isinstance(piece, str):
                b.input_json.append(piece)
            return
        dm = members(members(text)["delta"].text)
        if kind == "citations_delta":
            if "citation" in dm:
                b.citations.append(dm["citation"])
            return
        names = _SETS.get(kind)  # type: ignore[arg-type]
        for name, raw in dm.items():
            if name == "type" or (names is not None and name not in names):
                continue
            v = delta.get(name)
            if names is None and isinstance(v, str):
                b.appended.setdefault(name, []).append(v)
            else:
                b.replaced[name] = raw

    def _message_delta(self, text: str) -> None:
        m = members(text)
        for name, raw in m.items():
            if name == "delta":
                self.delta.update(members(raw.text))
            elif name == "usage":
                try:
                    u = members(raw.text)
                except ValueError:
                    continue
                # cumulative totals: a figure overwrites, a null or absent one keeps the earlier
                self.usage.update({k: v for k, v in u.items() if v.text != "null"})
            elif name != "type":
                self.extra[name] = raw

    def text(self) -> str:
        """The response object's JSON text (``content`` in index order)."""
        obj = RawObject(dict(self.start.items))
        obj["content"] = Raw("[" + ",".join(self.blocks[i].text() for i in sorted(self.blocks)) + "]")
        for name, raw in {**self.delta, **self.extra}.items():
            obj[name] = raw
        if self.usage or "usage" in obj:
            obj["usage"] = Raw("{" + ",".join(f"{dumps(k)}:{v.text}" for k, v in self.usage.items()) + "}")
        return obj.text()

    def message(self) -> dict[str, Any]:
        """The response object, parsed."""
        message: dict[str, Any] = Raw(self.text()).value  # text() writes one JSON object
        return message

    def block_text(self, index: int) -> str | None:
        """One content block's JSON text (None when no block has this index)."""
        b = self.blocks.get(index)
        return b.text() if b is not None else None
