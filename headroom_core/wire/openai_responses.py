"""OpenAI Responses API: ``function_call_output`` items, function tools, responses and events.

The same body shape travels over HTTP (``POST …/responses``) and inside WebSocket
``response.create`` frames.
"""

from __future__ import annotations

import json
from typing import Any

from headroom_core.wire.blocks import ToolCall, ToolOutput, Usage
from headroom_core.wire.sse import SSEEvent

NAME = "openai-responses"


def tool_outputs(body: dict[str, Any]) -> list[ToolOutput]:
    """Every ``function_call_output`` item's text (string ``output``, or its text parts)."""
    names: dict[str, str] = {}
    out: list[ToolOutput] = []
    items = body.get("input")
    if not isinstance(items, list):
        return out
    for i, it in enumerate(items):
        if not isinstance(it, dict):
            continue
        if it.get("type") in ("function_call", "custom_tool_call"):
            names[str(it.get("call_id", ""))] = str(it.get("name", ""))
        if it.get("type") not in ("function_call_output", "custom_tool_call_output"):
            continue
        cid = str(it.get("call_id", ""))
        o = it.get("output")
        if isinstance(o, str):
            out.append(ToolOutput(("input", i, "output"), o, names.get(cid, ""), cid, i))
        elif isinstance(o, list):
            for k, p in enumerate(o):
                if isinstance(p, dict) and p.get("type") in ("input_text", "output_text") and isinstance(p.get("text"), str):
                    out.append(ToolOutput(("input", i, "output", k, "text"), p["text"], names.get(cid, ""), cid, i))
    return out


def latest_user_text(body: dict[str, Any]) -> str:
    """The latest user text: ``input`` itself when it is a string, else the last user item."""
    inp = body.get("input")
    if isinstance(inp, str):
        return inp
    for it in reversed(inp if isinstance(inp, list) else []):
        if isinstance(it, dict) and it.get("role") == "user":
            c = it.get("content")
            if isinstance(c, str) and c.strip():
                return c
            if isinstance(c, list):
                t = "\n".join(p.get("text", "") for p in c if isinstance(p, dict) and p.get("type") == "input_text")
                if t.strip():
                    return t
    return ""


def tool_names(body: dict[str, Any]) -> list[str]:
    """Names of the function tools offered, in order (none when ``tools`` is not an array)."""
    tools = body.get("tools")
    return [str(t.get("name", "")) for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []


def function_tool(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    """A function tool definition in this dialect."""
    return {"type": "function", "name": name, "description": description, "parameters": schema}


def response_tool_calls(resp: dict[str, Any]) -> list[ToolCall]:
    """The ``function_call`` output items of a (non-streamed) response."""
    calls = []
    for it in resp.get("output") or []:
        if isinstance(it, dict) and it.get("type") == "function_call":
            raw = it.get("arguments") or ""
            try:
                args = json.loads(raw) if raw else {}
            except ValueError:
                args = None
            calls.append(ToolCall(str(it.get("call_id", "")), str(it.get("name", "")), args, raw))
    return calls


def followup_body(req: dict[str, Any], resp: dict[str, Any], results: list[tuple[ToolCall, str]]) -> dict[str, Any]:
    """The next request: the input plus the response's output items and the proxy's outputs."""
    inp = req.get("input")
    items = [{"role": "user", "content": inp}] if isinstance(inp, str) else list(inp or [])
    produced = [it for it in resp.get("output") or [] if isinstance(it, dict) and it.get("type") in ("message", "function_call")]
    body = dict(req)
    body["input"] = items + produced + [{"type": "function_call_output", "call_id": c.call_id, "output": text} for c, text in results]
    return body


def usage(resp: dict[str, Any]) -> Usage:
    """Usage of a response; ``input_tokens_details.cached_tokens`` is the cache read."""
    u = resp.get("usage") or {}
    return Usage(u.get("input_tokens"), u.get("output_tokens"), (u.get("input_tokens_details") or {}).get("cached_tokens"), None)


def merge_responses(first: dict[str, Any], final: dict[str, Any], hidden: set[str]) -> dict[str, Any]:
    """One response for the client: ``first``'s items except hidden calls, then ``final``'s."""
    merged = dict(final)
    kept = [it for it in first.get("output") or [] if not (isinstance(it, dict) and it.get("type") == "function_call" and it.get("name") in hidden)]
    merged["output"] = kept + list(final.get("output") or [])
    fu, lu = first.get("usage") or {}, final.get("usage") or {}
    if fu or lu:
        u = dict(lu)
        for k in ("input_tokens", "output_tokens", "total_tokens"):
            u[k] = (fu.get(k) or 0) + (lu.get(k) or 0)
        merged["usage"] = u
    return merged


def error_body(message: str, too_large: bool = False) -> dict[str, Any]:
    """An error body in OpenAI's shape."""
    return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": "request_too_large" if too_large else None}}


class StreamAssembler:
    """Follows a Responses SSE stream. ``accept`` is False from the ``response.output_item.added``
    of a hidden function call on; ``message()`` is the final ``response`` object (from
    ``response.completed``, or assembled from the items seen)."""

    def __init__(self, hidden: set[str]) -> None:
        self.hidden = hidden
        self.holding = False
        self.items: dict[int, dict[str, Any]] = {}
        self.final: dict[str, Any] = {}
        self.emitted_items = 0

    def accept(self, ev: SSEEvent) -> bool:
        data = ev.json()
        if not isinstance(data, dict):
            return not self.holding
        t = data.get("type", "")
        if t in ("response.output_item.added", "response.output_item.done"):
            idx = data.get("output_index", 0)
            item = data.get("item") or {}
            self.items[idx] = item
            if item.get("type") == "function_call" and item.get("name") in self.hidden:
                self.holding = True
            if not self.holding:
                self.emitted_items = idx + 1
        elif t in ("response.completed", "response.incomplete", "response.failed"):
            self.final = data.get("response") or {}
            return not self.holding
        return not self.holding

    def message(self) -> dict[str, Any]:
        if self.final:
            return self.final
        return {"output": [self.items[i] for i in sorted(self.items)], "usage": {}}


_SKIP_IN_CONTINUATION = {"response.created", "response.in_progress"}


def continuation_events(ev: SSEEvent, index_shift: int) -> bytes | None:
    """Events of a follow-up stream: its ``response.created``/``in_progress`` are dropped and
    ``output_index`` shifted so the client sees one response."""
    data = ev.json()
    if not isinstance(data, dict):
        return ev.raw
    if data.get("type") in _SKIP_IN_CONTINUATION:
        return None
    if "output_index" in data and index_shift:
        from headroom_core.wire.sse import encode_event

        data = dict(data)
        data["output_index"] += index_shift
        return encode_event(data, ev.event)
    return ev.raw


def strip_calls(resp: dict[str, Any], hidden: set[str]) -> dict[str, Any]:
    """``resp`` without ``function_call`` items for ``hidden`` tools."""
    out = dict(resp)
    out["output"] = [it for it in resp.get("output") or [] if not (isinstance(it, dict) and it.get("type") == "function_call" and it.get("name") in hidden)]
    return out


def drop_hidden(events: list[SSEEvent], hidden: set[str], shift: int = 0) -> list[bytes]:
    """Held-back events for the client without the output items that call ``hidden`` tools
    (later ``output_index`` values close the gap; ``response.completed`` loses those items)."""
    from headroom_core.wire.sse import encode_event

    gone: set[int] = set()
    for ev in events:
        d = ev.json()
        if isinstance(d, dict) and d.get("type") == "response.output_item.added":
            it = d.get("item") or {}
            if it.get("type") == "function_call" and it.get("name") in hidden:
                gone.add(d.get("output_index", 0))
    out: list[bytes] = []
    for ev in events:
        d = ev.json()
        if not isinstance(d, dict):
            out.append(ev.raw)
            continue
        if "output_index" in d:
            if d["output_index"] in gone:
                continue
            new = d["output_index"] - sum(1 for g in gone if g < d["output_index"]) + shift
            if new != d["output_index"]:
                out.append(encode_event({**d, "output_index": new}, ev.event))
                continue
        if isinstance(d.get("response"), dict) and d["response"].get("output"):
            resp = strip_calls(d["response"], hidden)
            out.append(encode_event({**d, "response": resp}, ev.event))
            continue
        out.append(ev.raw)
    return out
