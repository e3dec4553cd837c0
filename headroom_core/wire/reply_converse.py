"""What the client gets from a Bedrock Converse turn in which the proxy answered its own tools,
and the request that continues such a turn (:class:`~headroom_core.wire.protocol.ReplySide`).

A ``converse`` response: ``{output: {message: {role, content: [ContentBlock]}}, stopReason,
usage: {inputTokens, outputTokens, totalTokens, cacheReadInputTokens?, cacheWriteInputTokens?},
metrics: {latencyMs}}``. A ``converse-stream`` response is AWS event-stream frames
(:mod:`headroom_core.wire.eventstream`), each an event whose ``:event-type`` names it:
``messageStart`` ``{role}``; ``contentBlockStart`` ``{contentBlockIndex, start: {toolUse:
{toolUseId, name}}}`` (text blocks start with their first delta); ``contentBlockDelta``
``{contentBlockIndex, delta: {text} | {toolUse: {input: <JSON text piece>}} | {reasoningContent:
{text | signature}}}``; ``contentBlockStop`` ``{contentBlockIndex}``; ``messageStop``
``{stopReason}``; ``metadata`` ``{usage, metrics}`` (Amazon Bedrock API reference,
"ConverseStream"). Payloads may carry other members (padding ``p``): they are kept.

- :class:`StreamView`: one ``messageStart``; every block but calls to the proxy's tools,
  numbered on across rounds (a frame whose index is unchanged keeps its bytes); the last round's
  ``messageStop`` and ``metadata`` at the end, usage summed over rounds. An exception frame in a
  follow-up round fails the round, and ends the client's stream (:meth:`StreamView.failure`); a
  follow-up refused or whose connection failed ends it with one made for it
  (``throttlingException`` …), as Bedrock ends a stream it fails (botocore raises
  ``EventStreamError``).
- :func:`merge`: the same for whole responses. :func:`followup`: the request with the model's
  message as sent and a user message of ``toolResult`` blocks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from headroom_core.wire import converse as _dialect
from headroom_core.wire.blocks import ErrorAnswer, ImageAnswer, ToolCall, sum_usage
from headroom_core.wire.eventstream import EVENT_STREAM, event_frame, exception_event
from headroom_core.wire.provider_error import ProviderError
from headroom_core.wire.rawjson import Raw, RawObject, append_to_array, dumps, elements, with_member
from headroom_core.wire.sse import SSEEvent

#: Streamed responses are AWS event-stream frames.
framing = EVENT_STREAM

usage = _dialect.usage
tool_calls = _dialect.response_tool_calls
#: Usage figures summed over rounds.
USAGE_KEYS = ("inputTokens", "outputTokens", "totalTokens", "cacheReadInputTokens", "cacheWriteInputTokens")
INDEX = "contentBlockIndex"


def _hidden_block(block: Any, hidden: frozenset[str]) -> bool:
    tu = block.get("toolUse") if isinstance(block, dict) else None
    return isinstance(tu, dict) and tu.get("name") in hidden


@dataclass
class ViewState:
    """What the client has been sent so far, shared by every round of one response."""

    next_index: int = 0
    open: set[int] = field(default_factory=set)
    started: bool = False
    client_calls: bool = False


def _event(kind: str, payload: dict[str, Any] | str) -> SSEEvent:
    data = payload if isinstance(payload, str) else dumps(payload)
    return SSEEvent(event_frame(kind, data), kind, data)


@dataclass
class _Block:
    """One content block being assembled from its events."""

    kind: str = "text"
    text: list[str] = field(default_factory=list)
    signature: str = ""
    tool: dict[str, Any] = field(default_factory=dict)

    def value(self) -> dict[str, Any]:
        if self.kind == "toolUse":
            raw = "".join(self.text)
            try:
                inp = json.loads(raw) if raw.strip() else {}
            except ValueError:
                inp = {}
            return {"toolUse": {**self.tool, "input": inp}}
        if self.kind == "reasoningContent":
            rt: dict[str, Any] = {"text": "".join(self.text)}
            if self.signature:
                rt["signature"] = self.signature
            return {"reasoningContent": {"reasoningText": rt}}
        return {"text": "".join(self.text)}


class StreamView:
    """One round's frames → the client's frames (see the module docstring)."""

    def __init__(self, hidden: frozenset[str], state: ViewState, round_no: int) -> None:
        self.hidden = hidden
        self.state = state
        self.round_no = round_no
        self.failed: str | None = None
        self._error: SSEEvent | None = None
        self._map: dict[int, int | None] = {}
        self._blocks: dict[int, _Block] = {}
        self._stop: SSEEvent | None = None
        self._meta: SSEEvent | None = None
        self._role = "assistant"

    @property
    def complete(self) -> bool:
        return self._stop is not None

    def message_text(self) -> str:
        content = [self._blocks[i].value() for i in sorted(self._blocks)]
        out: dict[str, Any] = {"output": {"message": {"role": self._role, "content": content}}}
        stop = self._stop.parsed if self._stop is not None and isinstance(self._stop.parsed, dict) else {}
        out["stopReason"] = stop.get("stopReason", "end_turn" if self._stop is not None else None)
        meta = self._meta.parsed if self._meta is not None and isinstance(self._meta.parsed, dict) else {}
        for k in ("usage", "metrics"):
            if k in meta:
                out[k] = meta[k]
        return dumps(out)

    def feed(self, ev: SSEEvent) -> list[SSEEvent]:
        kind = ev.event or ""
        d = ev.parsed
        if kind.startswith("exception:"):
            if self.round_no > 0:
                msg = d.get("message") if isinstance(d, dict) else None
                self.failed = str(msg or kind)[:200]
                self._error = ev
                return []
            return [ev]
        if not isinstance(d, dict):
            return [ev]
        if kind == "messageStart":
            self._role = str(d.get("role") or "assistant")
            if self.state.started:
                return []
            self.state.started = True
            return [ev]
        if kind == "messageStop":
            self._stop = ev
            return []
        if kind == "metadata":
            self._meta = ev
            return []
        if kind in ("contentBlockStart", "contentBlockDelta", "contentBlockStop") and isinstance(d.get(INDEX), int):
            return self._block_event(ev, kind, d)
        return [ev]

    def _assemble(self, idx: int, kind: str, d: dict[str, Any]) -> None:
        b = self._blocks.setdefault(idx, _Block())
        if kind == "contentBlockStart":
            tu = (d.get("start") or {}).get("toolUse") if isinstance(d.get("start"), dict) else None
            if isinstance(tu, dict):
                b.kind, b.tool = "toolUse", dict(tu)
        elif kind == "contentBlockDelta" and isinstance(d.get("delta"), dict):
            delta = d["delta"]
            if isinstance(delta.get("text"), str):
                b.text.append(delta["text"])
            elif isinstance(delta.get("toolUse"), dict):
                b.kind = "toolUse"
                b.text.append(str(delta["toolUse"].get("input", "")))
            elif isinstance(delta.get("reasoningContent"), dict):
                b.kind = "reasoningContent"
                rc = delta["reasoningContent"]
                b.text.append(str(rc.get("text", "")))
                b.signature += str(rc.get("signature", ""))

    def _block_event(self, ev: SSEEvent, kind: str, d: dict[str, Any]) -> list[SSEEvent]:
        idx = d[INDEX]
        self._assemble(idx, kind, d)
        if idx not in self._map:
            if kind == "contentBlockStop":
                return [ev]  # a stop for a block never seen: not ours to judge
            block = self._blocks[idx].value() if kind == "contentBlockStart" else None
            if block is not None and _hidden_block(block, self.hidden):
                self._map[idx] = None
            else:
                new = self._map[idx] = self.state.next_index
                self.state.next_index += 1
                self.state.open.add(new)
                if block is not None and "toolUse" in block:
                    self.state.client_calls = True
        ci = self._map[idx]
        if ci is None:
            return []
        if kind == "contentBlockStop":
            self.state.open.discard(ci)
        return [ev if ci == idx else _event(kind, with_member(ev.data, INDEX, ci))]

    def failure(self, err: ProviderError | None, texts: list[str]) -> list[SSEEvent]:
        """The client's last frame when the provider failed the response: this round's own
        exception frame (``err`` None) or one for ``err`` (the provider's message, with the wait)."""
        if err is None and self._error is not None:
            return [self._error]
        err = err or ProviderError(500, why=self.failed or "the provider failed the stream")
        return [exception_event(err.kind, err.hinted)]

    def close(self, notice: str | None, texts: list[str]) -> list[SSEEvent]:
        """Open blocks stopped, a text block with ``notice`` (if given), this round's
        ``messageStop`` (``end_turn`` when no call is left for the client or a notice ends the
        turn) and ``metadata`` (usage summed over every round's response in ``texts``), made
        up when the upstream never sent them."""
        out = [_event("contentBlockStop", {INDEX: i}) for i in sorted(self.state.open)]
        self.state.open.clear()
        if notice:
            i = self.state.next_index
            self.state.next_index += 1
            out += [
                _event("contentBlockDelta", {"delta": {"text": notice}, INDEX: i}),
                _event("contentBlockStop", {INDEX: i}),
            ]
        stop = self._stop or _event("messageStop", {"stopReason": "end_turn"})
        reason = stop.parsed.get("stopReason") if isinstance(stop.parsed, dict) else None
        if (reason == "tool_use" and not self.state.client_calls) or (notice and reason in (None, "tool_use")):
            stop = _event("messageStop", with_member(stop.data, "stopReason", "end_turn"))
        out.append(stop)
        meta = self._meta
        if len(texts) > 1:
            base = meta.data if meta is not None else dumps({"usage": {}, "metrics": {"latencyMs": 0}})
            u = RawObject.parse(base).raw("usage")
            utext = u.text if u is not None and u.text.lstrip().startswith("{") else "{}"
            for k, v in sum_usage([Raw(t).value for t in texts], USAGE_KEYS).items():
                utext = with_member(utext, k, v)
            meta = _event("metadata", with_member(base, "usage", Raw(utext)))
        if meta is not None:
            out.append(meta)
        return out


def completed(resp: dict[str, Any]) -> bool:
    """Whether a non-streamed body is a whole response (``output.message`` with content)."""
    return isinstance(_dialect.response_message(resp).get("content"), list)


#: Stop reasons of a response cut at a limit (Amazon Bedrock API reference, "Converse":
#: ``stopReason``).
TRUNCATED = ("max_tokens", "model_context_window_exceeded")


def truncated(resp: dict[str, Any]) -> bool:
    """Whether a response stopped at a token limit (``stopReason`` in :data:`TRUNCATED`): a
    ``toolUse`` block in it may be incomplete."""
    return resp.get("stopReason") in TRUNCATED


def _content(text: str) -> Raw | None:
    out = RawObject.parse(text).object("output")
    msg = out.object("message") if "message" in out else None
    return msg.raw("content") if msg is not None else None


def merge(texts: list[str], hidden: frozenset[str], notice: str | None) -> str:
    """One response for the client from every round's (``texts``, JSON, in order): the last
    round's object, its message holding the visible blocks of every round (``notice`` appended
    as a text block), ``stopReason`` ``end_turn`` when no call is left for the client, usage
    summed over rounds. Raises ``ValueError`` when a text is not a response object."""
    blocks: list[Raw] = []
    client_calls = False
    for t in texts:
        content = _content(t)
        for raw in elements(content.text) if content is not None else []:
            if _hidden_block(raw.value, hidden):
                continue
            client_calls = client_calls or (isinstance(raw.value, dict) and "toolUse" in raw.value)
            blocks.append(raw)
    if notice:
        blocks.append(Raw(dumps({"text": notice})))
    last = RawObject.parse(texts[-1])
    output = last.object("output")
    message = output.object("message")
    message["content"] = blocks
    output["message"] = message
    last["output"] = output
    stop = last.get("stopReason")
    if (stop == "tool_use" and not client_calls) or (notice and stop in (None, "tool_use")):
        last["stopReason"] = "end_turn"
    if len(texts) > 1:
        u = last.raw("usage")
        utext = u.text if u is not None and u.text.lstrip().startswith("{") else "{}"
        for k, v in sum_usage([Raw(t).value for t in texts], USAGE_KEYS).items():
            utext = with_member(utext, k, v)
        last["usage"] = Raw(utext)
    return last.text()


def _result(call: ToolCall, text: str) -> dict[str, Any]:
    content: list[Any] = [{"text": str(text)}]
    if isinstance(text, ImageAnswer):
        fmt = text.media_type.split("/")[-1].replace("jpg", "jpeg")
        content.append({"image": {"format": fmt, "source": {"bytes": text.data}}})
    out: dict[str, Any] = {"toolUseId": call.call_id, "content": content}
    if isinstance(text, ErrorAnswer):
        out["status"] = "error"
    return {"toolResult": out}


def followup(request: str, message: str, results: list[tuple[ToolCall, str]]) -> str:
    """The next request's JSON text: ``request`` (as sent) with the model's ``output.message``
    exactly as the provider sent it and a user message of ``toolResult`` blocks, one per
    ``(call, answer text)``. Raises ``ValueError`` when ``request`` has no ``messages`` array
    or ``message`` is not a response."""
    out = RawObject.parse(message).object("output")
    turn = out.raw("message")
    if turn is None:
        raise ValueError("the response has no output.message")
    answers = {"role": "user", "content": [_result(c, t) for c, t in results]}
    return append_to_array(request, _dialect.CONVERSATION, [turn, answers])


def notice_message(notice: str, model: str = "") -> str:
    """A whole response holding only ``notice``."""
    return dumps({"output": {"message": {"role": "assistant", "content": [{"text": notice}]}}, "stopReason": "end_turn",
                  "usage": {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0}, "metrics": {"latencyMs": 0}})  # fmt: skip
