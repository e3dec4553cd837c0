"""Streamed forms of non-streamed responses, the way each provider streams them.

Given the object an API returns without ``stream`` (a Messages ``message``, a
``chat.completion``, a Responses ``response``), these build the SSE events the same API sends
with ``stream: true``, following the providers' references:

- Anthropic Messages ("Streaming Messages"): ``message_start`` with empty ``content``; per block
  ``content_block_start`` (text empty, tool input ``{}``, thinking empty), deltas
  (``text_delta``, ``citations_delta``, ``input_json_delta``, ``thinking_delta`` then
  ``signature_delta``, ``compaction_delta``; blocks without deltas such as
  ``redacted_thinking`` and the server tools' results arrive whole), ``content_block_stop``;
  ``message_delta`` (stop reason, final usage); ``message_stop``. A block type unknown here
  streams its string members as an unknown delta type (``<type>_delta``), the rest whole.
- OpenAI Chat Completions ("The chat completion chunk object"): a first chunk with ``role``,
  string members in pieces, tool calls opened with ``id``/``name`` then ``arguments`` pieces,
  a finish chunk, a usage chunk (``choices: []``) and ``[DONE]``.
- OpenAI Responses ("Streaming events"): ``response.created``/``in_progress``; per item
  ``output_item.added``, its deltas (message text, function call arguments, reasoning summary),
  ``output_item.done``; ``response.completed``; ``sequence_number`` on each.

The tests check that the proxy's assembly of these streams gives back the object they came from.
"""

from __future__ import annotations

import copy
import json
from typing import Any


def pieces(s: str, n: int = 3) -> list[str]:
    """``s`` cut into about ``n`` pieces (never an empty list for a non-empty string)."""
    if len(s) < n:
        return [s] if s else []
    step = -(-len(s) // n)
    return [s[i : i + step] for i in range(0, len(s), step)]


def sse(events: list[dict[str, Any]] | list[Any], named: bool = True) -> bytes:
    """The SSE bytes of ``events`` (each a JSON object, or the string ``[DONE]``)."""
    out = []
    for e in events:
        data = e if isinstance(e, str) else json.dumps(e, separators=(",", ":"))
        head = f"event: {e['type']}\n" if named and isinstance(e, dict) and "type" in e else ""
        out.append(f"{head}data: {data}\n\n")
    return "".join(out).encode()


# -- Anthropic Messages -----------------------------------------------------------------------

_TOOL_INPUT = ("tool_use", "server_tool_use", "mcp_tool_use")
_WHOLE = (
    "redacted_thinking", "web_search_tool_result", "web_fetch_tool_result", "code_execution_tool_result",
    "bash_code_execution_tool_result", "text_editor_code_execution_tool_result", "tool_search_tool_result",
    "mcp_tool_result", "container_upload",
)  # fmt: skip


def _anthropic_block(index: int, block: dict[str, Any]) -> list[dict[str, Any]]:
    t = block.get("type")
    start = copy.deepcopy(block)
    deltas: list[dict[str, Any]] = []
    if t == "text":
        start["text"] = ""
        cites = start.pop("citations", None) if isinstance(block.get("citations"), list) else None
        texts = pieces(block["text"])
        for i, p in enumerate(texts):
            deltas.append({"type": "text_delta", "text": p})
            if cites and i == 0:
                deltas += [{"type": "citations_delta", "citation": c} for c in cites]
        if cites and not texts:
            deltas += [{"type": "citations_delta", "citation": c} for c in cites]
    elif t in _TOOL_INPUT:
        start["input"] = {}
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in ["", *pieces(json.dumps(block["input"]))]]
    elif t == "thinking":
        start.update(thinking="", signature="")
        deltas = [{"type": "thinking_delta", "thinking": p} for p in pieces(block["thinking"])]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    elif t == "compaction":
        start.update(content=None, encrypted_content=None)
        deltas = [
            {
                "type": "compaction_delta",
                "content": block.get("content"),
                "encrypted_content": block.get("encrypted_content"),
            }
        ]
    elif t not in _WHOLE:
        # a type this side does not know: string members streamed as an unknown delta type
        strings = {k: v for k, v in block.items() if k != "type" and isinstance(v, str)}
        for k, v in strings.items():
            start[k] = ""
            deltas += [{"type": f"{t}_delta", k: p} for p in pieces(v)]
    return [
        {"type": "content_block_start", "index": index, "content_block": start},
        *[{"type": "content_block_delta", "index": index, "delta": d} for d in deltas],
        {"type": "content_block_stop", "index": index},
    ]


def anthropic_events(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The Messages SSE events for the non-streamed ``message``."""
    usage = dict(message.get("usage") or {})
    top = {
        k: v for k, v in message.items() if k not in ("content", "stop_reason", "stop_sequence", "usage", "container")
    }
    start = {**top, "content": [], "stop_reason": None, "stop_sequence": None, "usage": {**usage, "output_tokens": 1}}
    evs: list[dict[str, Any]] = [{"type": "message_start", "message": start}, {"type": "ping"}]
    for i, b in enumerate(message["content"]):
        evs += _anthropic_block(i, b)
    delta = {"stop_reason": message.get("stop_reason"), "stop_sequence": message.get("stop_sequence")}
    if "container" in message:
        delta["container"] = message["container"]
    evs.append({"type": "message_delta", "delta": delta, "usage": {"output_tokens": usage.get("output_tokens", 0)}})
    evs.append({"type": "message_stop"})
    return evs


def anthropic_message(content: list[dict[str, Any]], stop_reason: str = "end_turn", **usage: int) -> dict[str, Any]:
    """A Messages response object holding ``content``."""
    return {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage.get("input_tokens", 120),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": usage.get("cache_read", 0),
            "output_tokens": usage.get("output_tokens", 40),
        },
    }


# -- OpenAI Chat Completions ------------------------------------------------------------------


def chat_events(completion: dict[str, Any]) -> list[Any]:
    """The Chat Completions SSE chunks (then ``[DONE]``) for the non-streamed ``completion``."""
    base = {k: v for k, v in completion.items() if k not in ("choices", "usage", "object")}
    base["object"] = "chat.completion.chunk"

    def chunk(index: int, delta: dict[str, Any], finish: Any = None, **extra: Any) -> dict[str, Any]:
        return {**base, "choices": [{"index": index, "delta": delta, "finish_reason": finish, **extra}]}

    out: list[Any] = []
    for ch in completion["choices"]:
        i, msg = ch["index"], ch["message"]
        first: dict[str, Any] = {"role": msg.get("role", "assistant")}
        later: list[dict[str, Any]] = []
        for k, v in msg.items():
            if k in ("role", "tool_calls"):
                continue
            if isinstance(v, str):
                first[k] = ""
                later += [{k: p} for p in pieces(v)]
            else:
                first[k] = copy.deepcopy(v)
        out.append(chunk(i, first))
        out += [chunk(i, d) for d in later]
        for n, tc in enumerate(msg.get("tool_calls") or []):
            fn = tc["function"]
            out.append(
                chunk(
                    i,
                    {
                        "tool_calls": [
                            {
                                "index": n,
                                "id": tc["id"],
                                "type": tc["type"],
                                "function": {"name": fn["name"], "arguments": ""},
                            }
                        ]
                    },
                )
            )
            out += [
                chunk(i, {"tool_calls": [{"index": n, "function": {"arguments": p}}]}) for p in pieces(fn["arguments"])
            ]
        extra = {"logprobs": ch["logprobs"]} if ch.get("logprobs") is not None else {}
        out.append(chunk(i, {}, ch.get("finish_reason"), **extra))
    if completion.get("usage") is not None:
        out.append({**base, "choices": [], "usage": completion["usage"]})
    out.append("[DONE]")
    return out


def chat_completion(message: dict[str, Any], finish_reason: str = "stop", **extra: Any) -> dict[str, Any]:
    """A ``chat.completion`` with one choice holding ``message``."""
    return {
        "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
        "object": "chat.completion",
        "created": 1741570283,
        "model": "gpt-4o-2024-08-06",
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "logprobs": None, "finish_reason": finish_reason}
        ],
        "usage": {"prompt_tokens": 1117, "completion_tokens": 46, "total_tokens": 1163},
        "service_tier": "default",
        "system_fingerprint": "fp_fc9f1d7035",
        **extra,
    }


# -- OpenAI Responses -------------------------------------------------------------------------


def _item_events(index: int, item: dict[str, Any]) -> list[dict[str, Any]]:
    t = item.get("type")
    iid = item.get("id", f"item_{index}")
    where = {"item_id": iid, "output_index": index}
    if t == "message":
        evs = [
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": {**item, "status": "in_progress", "content": []},
            }
        ]
        for ci, part in enumerate(item.get("content") or []):
            at = {**where, "content_index": ci}
            evs.append({"type": "response.content_part.added", **at, "part": {**part, "text": ""}})
            evs += [
                {"type": "response.output_text.delta", **at, "delta": p, "logprobs": []}
                for p in pieces(part.get("text", ""))
            ]
            evs.append({"type": "response.output_text.done", **at, "text": part.get("text", ""), "logprobs": []})
            evs.append({"type": "response.content_part.done", **at, "part": part})
        return evs + [{"type": "response.output_item.done", "output_index": index, "item": item}]
    if t == "function_call":
        evs = [
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": {**item, "status": "in_progress", "arguments": ""},
            }
        ]
        evs += [
            {"type": "response.function_call_arguments.delta", **where, "delta": p} for p in pieces(item["arguments"])
        ]
        evs.append({"type": "response.function_call_arguments.done", **where, "arguments": item["arguments"]})
        return evs + [{"type": "response.output_item.done", "output_index": index, "item": item}]
    if t == "reasoning":
        evs = [{"type": "response.output_item.added", "output_index": index, "item": {**item, "summary": []}}]
        for si, part in enumerate(item.get("summary") or []):
            at = {**where, "summary_index": si}
            evs.append({"type": "response.reasoning_summary_part.added", **at, "part": {**part, "text": ""}})
            evs += [{"type": "response.reasoning_summary_text.delta", **at, "delta": p} for p in pieces(part["text"])]
            evs.append({"type": "response.reasoning_summary_text.done", **at, "text": part["text"]})
            evs.append({"type": "response.reasoning_summary_part.done", **at, "part": part})
        return evs + [{"type": "response.output_item.done", "output_index": index, "item": item}]
    added = {**item, "status": "in_progress"} if "status" in item else item
    return [
        {"type": "response.output_item.added", "output_index": index, "item": added},
        {"type": "response.output_item.done", "output_index": index, "item": item},
    ]


def responses_events(response: dict[str, Any]) -> list[dict[str, Any]]:
    """The Responses streaming events for the non-streamed ``response``."""
    opening = {**response, "status": "in_progress", "output": [], "usage": None}
    evs: list[dict[str, Any]] = [
        {"type": "response.created", "response": opening},
        {"type": "response.in_progress", "response": opening},
    ]
    for i, item in enumerate(response["output"]):
        evs += _item_events(i, item)
    evs.append({"type": "response.completed", "response": response})
    return [{**e, "sequence_number": n} for n, e in enumerate(evs)]


def responses_response(output: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """A Responses ``response`` object holding ``output``."""
    return {
        "id": "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b",
        "object": "response",
        "created_at": 1741476542,
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "model": "gpt-5-2025-08-07",
        "output": output,
        "parallel_tool_calls": True,
        "store": True,
        "usage": {
            "input_tokens": 36,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 87,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 123,
        },
        **extra,
    }
