"""Anthropic Messages API: request blocks, the proxy's tools, responses and SSE events.

Shapes follow the Messages API reference: ``tool_result`` content blocks carry the output as a
string or a list of content blocks; ``tool_use`` blocks in assistant messages name the tool.
"""

from __future__ import annotations

import json
from typing import Any

from headroom_core.wire.blocks import ToolCall, ToolOutput, Usage
from headroom_core.wire.sse import SSEEvent, encode_event

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
                            ToolOutput(("messages", i, "content", j, "content", k, "text"), sub["text"], names.get(cid, ""), cid, i, err)
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


def followup_body(req: dict[str, Any], resp: dict[str, Any], results: list[tuple[ToolCall, str]]) -> dict[str, Any]:
    """The next request: the same body plus the assistant turn and the proxy's tool results."""
    body = dict(req)
    body["messages"] = list(req.get("messages") or []) + [
        {"role": "assistant", "content": resp.get("content") or []},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": c.call_id, "content": text} for c, text in results],
        },
    ]
    return body


def usage(resp: dict[str, Any]) -> Usage:
    """Usage figures of a response (``usage`` object), None where absent."""
    u = resp.get("usage") or {}
    return Usage(
        u.get("input_tokens"), u.get("output_tokens"), u.get("cache_read_input_tokens"), u.get("cache_creation_input_tokens")
    )


def merge_responses(first: dict[str, Any], final: dict[str, Any], hidden: set[str]) -> dict[str, Any]:
    """One response for the client: ``first``'s blocks except calls to ``hidden`` tools, then
    ``final``'s blocks; usage added up over both."""
    merged = dict(final)
    kept = [b for b in first.get("content") or [] if not (isinstance(b, dict) and b.get("type") == "tool_use" and b.get("name") in hidden)]
    merged["content"] = kept + list(final.get("content") or [])
    merged["usage"] = _sum_usage(first.get("usage") or {}, final.get("usage") or {})
    return merged


def _sum_usage(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = dict(b)
    for k in ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
        if isinstance(a.get(k), int) or isinstance(b.get(k), int):
            out[k] = (a.get(k) or 0) + (b.get(k) or 0)
    return out


def error_body(message: str, too_large: bool = False) -> dict[str, Any]:
    """An error body in the Messages API's shape."""
    return {"type": "error", "error": {"type": "request_too_large" if too_large else "invalid_request_error", "message": message}}


class StreamAssembler:
    """Follows a Messages SSE stream, rebuilding the message it carries and spotting calls to
    tools the proxy owns.

    ``accept(event)`` returns True while the event may go to the client as it is, False from the
    ``content_block_start`` of a call to a hidden tool on (the proxy then holds the rest back).
    ``message()`` is the assembled message (``content`` blocks with parsed ``input``) once the
    stream ended; ``usage`` holds the figures seen in ``message_start``/``message_delta``.
    """

    def __init__(self, hidden: set[str]) -> None:
        self.hidden = hidden
        self.holding = False
        self.blocks: dict[int, dict[str, Any]] = {}
        self._json: dict[int, str] = {}
        self.message_start: dict[str, Any] = {}
        self.usage: dict[str, Any] = {}
        self.stop_reason: str | None = None
        self.emitted_blocks = 0

    def accept(self, ev: SSEEvent) -> bool:
        data = ev.json()
        if not isinstance(data, dict):
            return not self.holding
        t = data.get("type")
        if t == "message_start":
            self.message_start = data.get("message") or {}
            self.usage.update(self.message_start.get("usage") or {})
        elif t == "content_block_start":
            idx = data.get("index", 0)
            block = dict(data.get("content_block") or {})
            self.blocks[idx] = block
            if block.get("type") == "tool_use" and block.get("name") in self.hidden:
                self.holding = True
            if not self.holding:
                self.emitted_blocks = idx + 1
        elif t == "content_block_delta":
            idx = data.get("index", 0)
            delta = data.get("delta") or {}
            b = self.blocks.setdefault(idx, {})
            if delta.get("type") == "text_delta":
                b["text"] = b.get("text", "") + delta.get("text", "")
            elif delta.get("type") == "input_json_delta":
                self._json[idx] = self._json.get(idx, "") + delta.get("partial_json", "")
            elif delta.get("type") == "thinking_delta":
                b["thinking"] = b.get("thinking", "") + delta.get("thinking", "")
            elif delta.get("type") == "signature_delta":
                b["signature"] = delta.get("signature", "")
        elif t == "message_delta":
            self.usage.update(data.get("usage") or {})
            self.stop_reason = (data.get("delta") or {}).get("stop_reason", self.stop_reason)
        if self.holding:
            return False
        return True

    def message(self) -> dict[str, Any]:
        content = []
        for idx in sorted(self.blocks):
            b = dict(self.blocks[idx])
            if b.get("type") == "tool_use":
                raw = self._json.get(idx, "")
                try:
                    b["input"] = json.loads(raw) if raw else (b.get("input") or {})
                except ValueError:
                    b["input"] = None
            content.append(b)
        msg = dict(self.message_start)
        msg["content"] = content
        msg["usage"] = dict(self.usage)
        msg["stop_reason"] = self.stop_reason
        return msg


def continuation_events(ev: SSEEvent, index_shift: int) -> bytes | None:
    """Re-emit an event of a follow-up stream as part of the client's ongoing stream:
    ``message_start`` and ``ping`` are dropped (the client already had them) and content block
    indexes are shifted by ``index_shift``. Returns the bytes to send, or None to drop it."""
    data = ev.json()
    if not isinstance(data, dict):
        return ev.raw
    t = data.get("type")
    if t in ("message_start",):
        return None
    if "index" in data and t and t.startswith("content_block"):
        data = dict(data)
        data["index"] = data["index"] + index_shift
        return encode_event(data, ev.event or t)
    return ev.raw


def strip_calls(resp: dict[str, Any], hidden: set[str]) -> dict[str, Any]:
    """``resp`` without its ``tool_use`` blocks for ``hidden`` tools (``stop_reason`` becomes
    ``end_turn`` when no call is left)."""
    out = dict(resp)
    out["content"] = [b for b in resp.get("content") or [] if not (isinstance(b, dict) and b.get("type") == "tool_use" and b.get("name") in hidden)]
    if not any(isinstance(b, dict) and b.get("type") == "tool_use" for b in out["content"]) and out.get("stop_reason") == "tool_use":
        out["stop_reason"] = "end_turn"
    return out


def drop_hidden(events: list[SSEEvent], hidden: set[str], shift: int = 0) -> list[bytes]:
    """Held-back events for the client without the blocks that call ``hidden`` tools: their
    events are dropped, later block indexes close the gap (then move by ``shift``), and
    ``stop_reason`` becomes ``end_turn`` when no client ``tool_use`` is left."""
    gone: set[int] = set()
    client_calls = False
    for ev in events:
        d = ev.json()
        if isinstance(d, dict) and d.get("type") == "content_block_start":
            b = d.get("content_block") or {}
            if b.get("type") == "tool_use":
                if b.get("name") in hidden:
                    gone.add(d.get("index", 0))
                else:
                    client_calls = True
    out: list[bytes] = []
    for ev in events:
        d = ev.json()
        if not isinstance(d, dict):
            out.append(ev.raw)
            continue
        t = d.get("type", "")
        if t.startswith("content_block") and "index" in d:
            if d["index"] in gone:
                continue
            new = d["index"] - sum(1 for g in gone if g < d["index"]) + shift
            if new != d["index"]:
                out.append(encode_event({**d, "index": new}, ev.event or t))
                continue
        if t == "message_delta" and not client_calls and (d.get("delta") or {}).get("stop_reason") == "tool_use":
            out.append(encode_event({**d, "delta": {**d["delta"], "stop_reason": "end_turn"}}, ev.event or t))
            continue
        out.append(ev.raw)
    return out
