"""OpenAI Chat Completions: ``role: "tool"`` outputs, function tools, responses and SSE chunks."""

from __future__ import annotations

import json
from typing import Any

from headroom_core.wire.blocks import ToolCall, ToolOutput, Usage
from headroom_core.wire.sse import SSEEvent

NAME = "openai-chat"


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") in ("text", "input_text"))
    return ""


def tool_outputs(body: dict[str, Any]) -> list[ToolOutput]:
    """Every ``role: "tool"`` message's text, with the function name from the assistant's call."""
    names: dict[str, str] = {}
    out: list[ToolOutput] = []
    for i, m in enumerate(body.get("messages") or []):
        if not isinstance(m, dict):
            continue
        for tc in m.get("tool_calls") or []:
            if isinstance(tc, dict):
                names[str(tc.get("id", ""))] = str((tc.get("function") or {}).get("name", ""))
        if m.get("role") != "tool":
            continue
        cid = str(m.get("tool_call_id", ""))
        name = names.get(cid, str(m.get("name", "")))
        c = m.get("content")
        if isinstance(c, str):
            out.append(ToolOutput(("messages", i, "content"), c, name, cid, i))
        elif isinstance(c, list):
            for k, p in enumerate(c):
                if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str):
                    out.append(ToolOutput(("messages", i, "content", k, "text"), p["text"], name, cid, i))
    return out


def latest_user_text(body: dict[str, Any]) -> str:
    """The text of the latest ``role: "user"`` message."""
    for m in reversed(body.get("messages") or []):
        if isinstance(m, dict) and m.get("role") == "user":
            t = _text_of(m.get("content"))
            if t.strip():
                return t
    return ""


def tool_names(body: dict[str, Any]) -> list[str]:
    """Names of the function tools offered, in order (none when ``tools`` is not an array)."""
    tools = body.get("tools")
    if not isinstance(tools, list):
        return []
    return [str(t["function"].get("name", "")) if isinstance(t.get("function"), dict) else "" for t in tools if isinstance(t, dict)]


def function_tool(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    """A function tool definition in this dialect."""
    return {"type": "function", "function": {"name": name, "description": description, "parameters": schema}}


def _parse_args(raw: str) -> Any:
    try:
        return json.loads(raw) if raw else {}
    except ValueError:
        return None


def response_tool_calls(resp: dict[str, Any]) -> list[ToolCall]:
    """The tool calls of the first choice of a (non-streamed) response."""
    choices = resp.get("choices") or [{}]
    msg = (choices[0] or {}).get("message") or {}
    calls = []
    for tc in msg.get("tool_calls") or []:
        fn = tc.get("function") or {}
        raw = fn.get("arguments") or ""
        calls.append(ToolCall(str(tc.get("id", "")), str(fn.get("name", "")), _parse_args(raw), raw))
    return calls


def followup_body(req: dict[str, Any], resp: dict[str, Any], results: list[tuple[ToolCall, str]]) -> dict[str, Any]:
    """The next request: the same body plus the assistant message and one tool message per call."""
    msg = dict(((resp.get("choices") or [{}])[0] or {}).get("message") or {})
    msg.setdefault("role", "assistant")
    body = dict(req)
    body["messages"] = list(req.get("messages") or []) + [msg] + [
        {"role": "tool", "tool_call_id": c.call_id, "content": text} for c, text in results
    ]
    return body


def usage(resp: dict[str, Any]) -> Usage:
    """Usage of a response; ``prompt_tokens_details.cached_tokens`` is the cache read."""
    u = resp.get("usage") or {}
    details = u.get("prompt_tokens_details") or {}
    return Usage(u.get("prompt_tokens"), u.get("completion_tokens"), details.get("cached_tokens"), None)


def merge_responses(first: dict[str, Any], final: dict[str, Any], hidden: set[str]) -> dict[str, Any]:
    """One response for the client: ``first``'s text before the hidden call, then ``final``."""
    merged = json.loads(json.dumps(final))
    fmsg = ((first.get("choices") or [{}])[0] or {}).get("message") or {}
    prefix = fmsg.get("content") or ""
    if merged.get("choices") and prefix:
        m = merged["choices"][0].setdefault("message", {})
        m["content"] = prefix + (m.get("content") or "")
    fu, lu = first.get("usage") or {}, final.get("usage") or {}
    if fu or lu:
        u = dict(lu)
        for k in ("prompt_tokens", "completion_tokens", "total_tokens"):
            u[k] = (fu.get(k) or 0) + (lu.get(k) or 0)
        merged["usage"] = u
    return merged


def error_body(message: str, too_large: bool = False) -> dict[str, Any]:
    """An error body in OpenAI's shape."""
    return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": "request_too_large" if too_large else None}}


class StreamAssembler:
    """Follows a Chat Completions SSE stream (``chat.completion.chunk`` objects, ``[DONE]``).

    ``accept(event)`` is False from the first delta that starts a call to a hidden tool, and for
    ``[DONE]`` and the finish chunk while holding. ``message()`` gives the assembled response in
    the non-streamed shape.
    """

    def __init__(self, hidden: set[str]) -> None:
        self.hidden = hidden
        self.holding = False
        self.content = ""
        self.calls: dict[int, dict[str, Any]] = {}
        self.usage: dict[str, Any] = {}
        self.base: dict[str, Any] = {}

    def accept(self, ev: SSEEvent) -> bool:
        data = ev.json()
        if not isinstance(data, dict):
            return not self.holding
        if not self.base:
            self.base = {k: data.get(k) for k in ("id", "model", "created")}
        if data.get("usage"):
            self.usage = data["usage"]
        for ch in data.get("choices") or []:
            delta = ch.get("delta") or {}
            if isinstance(delta.get("content"), str):
                self.content += delta["content"]
            for tc in delta.get("tool_calls") or []:
                idx = tc.get("index", 0)
                c = self.calls.setdefault(idx, {"id": "", "name": "", "arguments": ""})
                if tc.get("id"):
                    c["id"] = tc["id"]
                fn = tc.get("function") or {}
                if fn.get("name"):
                    c["name"] = fn["name"]
                    if fn["name"] in self.hidden:
                        self.holding = True
                c["arguments"] += fn.get("arguments") or ""
        return not self.holding

    def message(self) -> dict[str, Any]:
        tcs = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for _, c in sorted(self.calls.items())
        ]
        msg: dict[str, Any] = {"role": "assistant", "content": self.content or None}
        if tcs:
            msg["tool_calls"] = tcs
        return {**self.base, "object": "chat.completion", "choices": [{"index": 0, "message": msg}], "usage": self.usage}


def continuation_events(ev: SSEEvent, index_shift: int) -> bytes | None:
    """Chunks of a follow-up stream go to the client as they are."""
    return ev.raw


def strip_calls(resp: dict[str, Any], hidden: set[str]) -> dict[str, Any]:
    """``resp`` without tool calls to ``hidden`` tools (``finish_reason`` becomes ``stop`` when
    no call is left)."""
    out = json.loads(json.dumps(resp))
    for ch in out.get("choices") or []:
        msg = ch.get("message") or {}
        kept = [tc for tc in msg.get("tool_calls") or [] if (tc.get("function") or {}).get("name") not in hidden]
        if kept:
            msg["tool_calls"] = kept
        else:
            msg.pop("tool_calls", None)
            if ch.get("finish_reason") == "tool_calls":
                ch["finish_reason"] = "stop"
    return out


def drop_hidden(events: list[SSEEvent], hidden: set[str], shift: int = 0) -> list[bytes]:
    """Held-back chunks for the client without tool calls to ``hidden`` tools (remaining calls
    renumbered; ``finish_reason`` ``tool_calls`` becomes ``stop`` when none is left)."""
    from headroom_core.wire.sse import encode_event

    gone: set[int] = set()
    client_calls = False
    for ev in events:
        d = ev.json()
        for ch in (d.get("choices") or []) if isinstance(d, dict) else []:
            for tc in (ch.get("delta") or {}).get("tool_calls") or []:
                name = (tc.get("function") or {}).get("name")
                if name:
                    if name in hidden:
                        gone.add(tc.get("index", 0))
                    else:
                        client_calls = True
    out: list[bytes] = []
    for ev in events:
        d = ev.json()
        if not isinstance(d, dict) or not d.get("choices"):
            out.append(ev.raw)
            continue
        d = json.loads(ev.data)
        for ch in d["choices"]:
            delta = ch.get("delta") or {}
            if "tool_calls" in delta:
                kept = [dict(tc, index=tc.get("index", 0) - sum(1 for g in gone if g < tc.get("index", 0))) for tc in delta["tool_calls"] if tc.get("index", 0) not in gone]
                if kept:
                    delta["tool_calls"] = kept
                else:
                    del delta["tool_calls"]
            if ch.get("finish_reason") == "tool_calls" and not client_calls:
                ch["finish_reason"] = "stop"
        out.append(encode_event(d))
    return out
