"""Streamed turns rebuilt exactly (issue 13, case 1): for every recorded SSE stream in
``../shared/corpus`` and a generated stream per block, item and delta type, the message the proxy
assembles equals the provider's non-streamed form of it; values the provider sent keep their
exact JSON text (numbers, lone surrogate escapes)."""

from __future__ import annotations

import json

import pytest
from anthropic.lib.streaming._messages import accumulate_event  # the official SDK's accumulator

from headroom_core.wire.assemble_anthropic import MessageAssembler
from headroom_core.wire.assemble_chat import CompletionAssembler
from headroom_core.wire.assemble_responses import ResponseAssembler
from headroom_core.wire.rawjson import Raw
from headroom_core.wire.sse import SSEParser
from tests.conftest import corpus_dir
from tests.support.sse_forms import (
    anthropic_events,
    anthropic_message,
    chat_completion,
    chat_events,
    responses_events,
    responses_response,
    sse,
)


def events_of(raw: bytes, chunk: int = 0):
    """Parse SSE bytes as they would arrive (in ``chunk``-byte pieces when given)."""
    p = SSEParser()
    parts = [raw[i : i + chunk] for i in range(0, len(raw), chunk)] if chunk else [raw]
    out = []
    for part in parts:
        out += p.feed(part)
    return out + p.feed(b"")


def assemble(asm, raw: bytes, chunk: int = 7):
    for ev in events_of(raw, chunk):
        asm.accept(ev.parsed, ev.data)
    return asm


def drop_none(x):
    """The SDK's objects do not tell an absent member from a null one."""
    if isinstance(x, dict):
        return {k: drop_none(v) for k, v in x.items() if v is not None}
    if isinstance(x, list):
        return [drop_none(v) for v in x]
    return x


# -- Anthropic Messages -----------------------------------------------------------------------


def recorded_anthropic_streams() -> list[tuple[str, str]]:
    out = []
    for p in sorted(corpus_dir("anthropic-flows").glob("*.json")):
        body = json.loads(p.read_text())["response"]["body"]
        if isinstance(body, str):
            out.append((p.name, body))
    return out


def test_every_recorded_anthropic_stream_is_rebuilt_as_the_sdk_rebuilds_it():
    streams = recorded_anthropic_streams()
    assert len(streams) >= 25
    for name, body in streams:
        mine = assemble(MessageAssembler(), body.encode()).message()
        snapshot = None
        for ev in events_of(body.encode()):
            if isinstance(ev.parsed, dict) and ev.parsed.get("type") != "ping":
                snapshot = accumulate_event(event=ev.parsed, current_snapshot=snapshot)
        assert drop_none(mine) == drop_none(snapshot.to_dict()), name
        # and every tool_use input is the JSON the model streamed, parsed
        for block in mine["content"]:
            if block["type"] == "tool_use":
                assert isinstance(block["input"], dict) and block["input"], name


CITATION = {
    "type": "web_search_result_location",
    "url": "https://example.com/a",
    "title": "A",
    "encrypted_index": "Eo8BCioIAhgBIiQ=",
    "cited_text": "Issue 12 is open.",
}
ANTHROPIC_BLOCKS = {
    "text": {"type": "text", "text": "Plain answer text, in several pieces."},
    "text with citations": {
        "type": "text",
        "text": "The fixture repository has open issues.",
        "citations": [CITATION, {**CITATION, "cited_text": "Issue 13 too."}],
    },
    "tool_use": {
        "type": "tool_use",
        "id": "toolu_01A",
        "name": "Read",
        "input": {"file_path": "/src/app.py", "limit": 2000, "flags": [True, None, 1.5]},
    },
    "server_tool_use": {
        "type": "server_tool_use",
        "id": "srvtoolu_01B",
        "name": "web_search",
        "input": {"query": "octokit fixture issues"},
    },
    "mcp_tool_use": {
        "type": "mcp_tool_use",
        "id": "mcptoolu_01C",
        "name": "echo",
        "server_name": "example",
        "input": {"param1": "value1"},
    },
    "thinking": {
        "type": "thinking",
        "thinking": "The user wants the list; the marker says 480 were omitted.",
        "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds=",
    },
    "redacted_thinking": {
        "type": "redacted_thinking",
        "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP",
    },
    "web_search_tool_result": {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_01B",
        "content": [
            {
                "type": "web_search_result",
                "url": "https://example.com/a",
                "title": "A",
                "encrypted_content": "EqgfCioIARgBIiQ3",
                "page_age": "April 30, 2025",
            }
        ],
    },
    "web_fetch_tool_result": {
        "type": "web_fetch_tool_result",
        "tool_use_id": "srvtoolu_01D",
        "content": {
            "type": "web_fetch_result",
            "url": "https://example.com",
            "content": {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "x"}},
            "retrieved_at": "2025-08-25T10:30:02Z",
        },
    },
    "code_execution_tool_result": {
        "type": "code_execution_tool_result",
        "tool_use_id": "srvtoolu_01E",
        "content": {"type": "code_execution_result", "stdout": "4\n", "stderr": "", "return_code": 0, "content": []},
    },
    "mcp_tool_result": {
        "type": "mcp_tool_result",
        "tool_use_id": "mcptoolu_01C",
        "is_error": False,
        "content": [{"type": "text", "text": "Tool result text"}],
    },
    "container_upload": {"type": "container_upload", "file_id": "file_011CNha8iCJcU1wXNR6q4V8w"},
    "compaction": {
        "type": "compaction",
        "content": "Summary of the earlier conversation.",
        "encrypted_content": "Eu8BCioIAhgC",
    },
    "unknown future block": {
        "type": "future_widget",
        "body": "streamed in pieces",
        "meta": {"x": 1, "big": 12345678901234567890},
    },
}


@pytest.mark.parametrize("kind", list(ANTHROPIC_BLOCKS))
def test_anthropic_block_rebuilt_exactly(kind):
    msg = anthropic_message([ANTHROPIC_BLOCKS[kind]], "tool_use" if "tool_use" in kind else "end_turn")
    got = assemble(MessageAssembler(), sse(anthropic_events(msg))).message()
    assert got == msg


def test_anthropic_every_block_type_in_one_message():
    msg = anthropic_message(
        list(ANTHROPIC_BLOCKS.values()), "tool_use", input_tokens=5000, cache_read=4000, output_tokens=321
    )
    asm = assemble(MessageAssembler(), sse(anthropic_events(msg)), chunk=3)
    assert asm.message() == msg
    assert asm.started and asm.ended


def test_anthropic_values_keep_their_exact_text():
    """A lone surrogate escape and numbers Python would change come back exactly as streamed."""
    raw = (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"x","content":[],"stop_reason":null,"usage":{"input_tokens":3,"output_tokens":1}}}\n\n'
        b'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n'
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"half \\ud83d"}}\n\n'
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\\ude00 whole"}}\n\n'
        b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
        b'event: content_block_start\ndata: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"calc","input":{}}}\n\n'
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\\"x\\": 1e400, \\"y\\": 0.1000000000000000055511151231257827, \\"s\\": \\"\\\\ud83d\\"}"}}\n\n'
        b'event: content_block_stop\ndata: {"type":"content_block_stop","index":1}\n\n'
        b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":9}}\n\n'
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    )
    asm = assemble(MessageAssembler(), raw)
    text = asm.text()
    text.encode("utf-8")  # never a raw surrogate
    assert '{"x": 1e400, "y": 0.1000000000000000055511151231257827, "s": "\\ud83d"}' in text
    msg = json.loads(text)
    assert msg["content"][0]["text"] == "half \U0001f600 whole"  # the pair split over two deltas joins
    assert msg["content"][1]["input"]["s"] == "\ud83d" and msg["usage"] == {"input_tokens": 3, "output_tokens": 9}


def test_anthropic_usage_is_cumulative_and_a_null_keeps_the_earlier_figure():
    msg = anthropic_message([ANTHROPIC_BLOCKS["text"]], input_tokens=10, output_tokens=7)
    evs = anthropic_events(msg)
    evs[-2]["usage"] = {"output_tokens": 7, "input_tokens": None, "cache_read_input_tokens": 99}
    got = assemble(MessageAssembler(), sse(evs)).message()
    assert got["usage"] == {**msg["usage"], "cache_read_input_tokens": 99}


# -- OpenAI Responses -------------------------------------------------------------------------


def recorded_responses_streams() -> list[tuple[str, str]]:
    out = []
    for p in sorted(corpus_dir("openai-flows").glob("*/*.json")):
        rec = json.loads(p.read_text())
        if "response_sse" in rec:
            out.append((f"{p.parent.name}/{p.name}", rec["response_sse"]))
    return out


def without_ciphertext(x):
    """``encrypted_content`` is encrypted afresh each time the API serialises an item (the
    recorded ``output_item.done`` and ``response.completed`` carry different ciphertexts of
    the same reasoning): compare that it is there, not its bytes."""
    if isinstance(x, dict):
        return {k: ("<ciphertext>" if k == "encrypted_content" and v else without_ciphertext(v)) for k, v in x.items()}
    if isinstance(x, list):
        return [without_ciphertext(v) for v in x]
    return x


def test_every_recorded_responses_stream_rebuilds_the_completed_response():
    streams = recorded_responses_streams()
    assert len(streams) >= 6
    for name, body in streams:
        asm = ResponseAssembler()
        completed = None
        for ev in events_of(body.encode(), 11):
            asm.accept(ev.parsed, ev.data)
            if isinstance(ev.parsed, dict) and ev.parsed.get("type") == "response.completed":
                completed = ev.parsed["response"]
        assert completed is not None and asm.terminal == "response.completed"
        assert asm.message() == completed, name
        # the items alone (output_item.done) give the same output
        assert without_ciphertext(Raw(asm.items_text()).value) == without_ciphertext(completed["output"]), name


RESPONSES_ITEMS = {
    "message": {
        "type": "message",
        "id": "msg_1",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Issues 1 and 2 are open.", "annotations": [], "logprobs": []}],
    },
    "function_call": {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "shell",
        "arguments": '{"cmd": ["gh", "issue", "list"]}',
        "status": "completed",
    },
    "reasoning": {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Looking at the marker first."}],
        "encrypted_content": "gAAAAABo",
    },
    "custom_tool_call": {
        "type": "custom_tool_call",
        "id": "ctc_1",
        "call_id": "call_2",
        "name": "apply_patch",
        "input": "*** Begin Patch\n*** End Patch",
        "status": "completed",
    },
    "web_search_call": {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search", "query": "octokit"},
    },
    "unknown future item": {"type": "future_item", "id": "fi_1", "payload": {"n": 12345678901234567890, "s": "x"}},
}


@pytest.mark.parametrize("kind", list(RESPONSES_ITEMS))
def test_responses_item_rebuilt_exactly(kind):
    resp = responses_response([RESPONSES_ITEMS[kind]])
    asm = assemble(ResponseAssembler(), sse(responses_events(resp)))
    assert asm.message() == resp
    assert Raw(asm.items_text()).value == resp["output"]


def test_responses_stream_cut_short_is_rebuilt_from_the_deltas():
    resp = responses_response([RESPONSES_ITEMS["message"], RESPONSES_ITEMS["function_call"]])
    evs = [e for e in responses_events(resp) if e["type"] not in ("response.output_item.done", "response.completed")]
    asm = assemble(ResponseAssembler(), sse(evs))
    out = Raw(asm.items_text()).value
    assert out[0]["content"][0]["text"] == "Issues 1 and 2 are open."
    assert out[1]["arguments"] == RESPONSES_ITEMS["function_call"]["arguments"] and asm.terminal is None


# -- OpenAI Chat Completions ------------------------------------------------------------------

CHAT_MESSAGES = {
    "content": ({"content": "Issues 1 and 2 are open.", "refusal": None, "annotations": []}, "stop"),
    "tool_calls": (
        {
            "content": None,
            "refusal": None,
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "shell", "arguments": '{"cmd": "gh issue list"}'},
                },
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "read", "arguments": '{"path": "README.md"}'},
                },
            ],
        },
        "tool_calls",
    ),
    "refusal": ({"content": None, "refusal": "I can't help with that."}, "stop"),
    "reasoning_content": ({"content": "42", "reasoning_content": "Six times seven.", "refusal": None}, "stop"),
    "content and a tool call": (
        {
            "content": "Let me check.",
            "tool_calls": [{"id": "call_c", "type": "function", "function": {"name": "shell", "arguments": "{}"}}],
        },
        "tool_calls",
    ),
}


@pytest.mark.parametrize("kind", list(CHAT_MESSAGES))
def test_chat_message_rebuilt_exactly(kind):
    message, finish = CHAT_MESSAGES[kind]
    completion = chat_completion(message, finish)
    got = assemble(CompletionAssembler(), sse(chat_events(completion), named=False)).message()
    assert got == completion


def test_chat_several_choices_and_logprobs():
    completion = chat_completion({"content": "a", "refusal": None}, "stop")
    completion["choices"].append(
        {
            "index": 1,
            "message": {"role": "assistant", "content": "b", "refusal": None},
            "logprobs": {"content": [{"token": "b", "logprob": -0.1, "bytes": [98], "top_logprobs": []}]},
            "finish_reason": "length",
        }
    )
    asm = assemble(CompletionAssembler(), sse(chat_events(completion), named=False))
    assert asm.message() == completion and asm.done and asm.finished
