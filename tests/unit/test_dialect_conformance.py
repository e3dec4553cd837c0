"""What every registered dialect must do (issue 32): a dialect without a case here fails
``test_every_registered_dialect_has_a_case``. Per dialect: detection by method + path + body
shape on any host, the neutral view, a compressed tool output spliced in place, the retrieve
round trip (JSON: merge and follow-up; streamed: the proxy's call hidden, one answer), the
token-count route, the 413 body's shape, and fail-open on a body it cannot parse."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

import pytest

from headroom_core.ccr.loop import StreamLoop
from headroom_core.request_plan import Action, Code, plan_request
from headroom_core.runtime import Runtime
from headroom_core.settings import load_settings
from headroom_core.wire.blocks import ToolCall
from headroom_core.wire.detect import Dialect, detect
from headroom_core.wire.dialects import REGISTRY, route
from headroom_core.wire.protocol import framing_of
from headroom_core.wire.request_view import view_of
from tests.unit.test_dialects import ANTHROPIC, CHAT, RESPONSES

R = "headroom_retrieve"
ROWS = json.dumps(
    [{"id": i, "name": f"item-{i}", "state": "open" if i % 9 else "closed", "size": i * 17} for i in range(300)],
    indent=1,
)


@dataclass(frozen=True)
class Case:
    path: str
    count_path: str | None
    body: dict[str, Any]
    output_at: Callable[[dict[str, Any]], str]  # the tool output's text in a body
    with_output: Callable[[str], dict[str, Any]]  # the body with that output
    response: Callable[[list[ToolCall], str], dict[str, Any]]  # a response with text and calls
    stream: Callable[[list[ToolCall], str], bytes]  # the same as SSE
    error_of: Callable[[dict[str, Any]], Any]  # where an error body keeps its message


def _gemini_body(out: str = "a.py\nb.py") -> dict[str, Any]:
    return {
        "systemInstruction": {"parts": [{"text": "You are Gemini CLI."}]},
        "tools": [{"functionDeclarations": [{"name": "shell", "parametersJsonSchema": {"type": "object"}}]}],
        "contents": [
            {"role": "user", "parts": [{"text": "list the files"}]},
            {
                "role": "model",
                "parts": [{"functionCall": {"name": "shell", "args": {"cmd": "ls"}}, "thoughtSignature": "c2ln"}],
            },
            {"role": "user", "parts": [{"functionResponse": {"name": "shell", "response": {"output": out}}}]},
            {"role": "user", "parts": [{"text": "which is bigger?"}]},
        ],
    }


def _gemini_resp(calls: list[ToolCall], text: str) -> dict[str, Any]:
    parts = ([{"text": text}] if text else []) + [
        {"functionCall": {"name": c.name, "args": c.arguments}} for c in calls
    ]
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 2, "totalTokenCount": 12},
    }


def _sse(objs: list[Any], events: list[str] | None = None) -> bytes:
    out = b""
    for i, o in enumerate(objs):
        head = f"event: {events[i]}\n" if events else ""
        out += (head + "data: " + json.dumps(o) + "\n\n").encode()
    return out


def _anthropic_resp(calls: list[ToolCall], text: str) -> dict[str, Any]:
    content = ([{"type": "text", "text": text}] if text else []) + [
        {"type": "tool_use", "id": c.call_id, "name": c.name, "input": c.arguments} for c in calls
    ]
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": content,
        "stop_reason": "tool_use" if calls else "end_turn",
        "usage": {"input_tokens": 10, "output_tokens": 2},
    }


def _anthropic_stream(calls: list[ToolCall], text: str) -> bytes:
    evs: list[Any] = [
        {"type": "message_start", "message": {**_anthropic_resp([], ""), "content": [], "stop_reason": None}}
    ]
    i = 0
    if text:
        evs += [
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
            {"type": "content_block_stop", "index": 0},
        ]
        i = 1
    for c in calls:
        evs += [{"type": "content_block_start", "index": i, "content_block": {"type": "tool_use", "id": c.call_id, "name": c.name, "input": {}}},
                {"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": json.dumps(c.arguments)}}, {"type": "content_block_stop", "index": i}]  # fmt: skip
        i += 1
    evs += [
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use" if calls else "end_turn"},
            "usage": {"output_tokens": 2},
        },
        {"type": "message_stop"},
    ]
    return _sse(evs, [e["type"] for e in evs])


GEMINI = Case(
    "/v1beta/models/gemini-2.5-pro:generateContent", "/v1beta/models/gemini-2.5-pro:countTokens", _gemini_body(),
    lambda b: b["contents"][2]["parts"][0]["functionResponse"]["response"]["output"], _gemini_body, _gemini_resp,
    lambda calls, text: _sse([_gemini_resp(calls, text)]).replace(b"\n\n", b"\r\n\r\n"), lambda e: e["error"]["message"],
)  # fmt: skip
CASES: dict[Dialect, Case] = {
    Dialect.ANTHROPIC_MESSAGES: Case(
        "/v1/messages",
        "/v1/messages/count_tokens",
        ANTHROPIC,
        lambda b: b["messages"][2]["content"][0]["content"],
        lambda out: {
            **ANTHROPIC,
            "messages": [
                *ANTHROPIC["messages"][:2],
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "t1", "content": out},
                        {"type": "text", "text": "which is bigger?"},
                    ],
                },
            ],
        },
        _anthropic_resp,
        _anthropic_stream,
        lambda e: e["error"]["message"],
    ),
    Dialect.GEMINI: GEMINI,
    Dialect.VERTEX_GEMINI: Case(
        "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
        "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-pro:countTokens",
        *list(GEMINI.__dict__.values())[2:],
    ),
}


def _ca(body: dict[str, Any]) -> dict[str, Any]:
    """A Gemini body in Code Assist's envelope (gemini-cli code_assist/converter.ts)."""
    return {
        "model": "gemini-2.5-pro",
        "project": "proj-1",
        "user_prompt_id": "p1",
        "request": {**body, "session_id": "s1"},
    }


CASES[Dialect.GEMINI_CODE_ASSIST] = Case(
    "/v1internal:streamGenerateContent?alt=sse", "/v1internal:countTokens", _ca(_gemini_body()),
    lambda b: GEMINI.output_at(b["request"]), lambda out: _ca(_gemini_body(out)),
    lambda calls, text: {"response": _gemini_resp(calls, text), "traceId": "t-1"},
    lambda calls, text: _sse([{"response": _gemini_resp(calls, text), "traceId": "t-1"}]), GEMINI.error_of,
)  # fmt: skip


def _versioned(case: Case, version: str, **kw: Any) -> Case:
    """The Messages case for a host that takes the Messages body with ``anthropic_version`` and
    the model in the path (Vertex AI, Bedrock InvokeModel)."""

    def body(b: dict[str, Any]) -> dict[str, Any]:
        return {"anthropic_version": version, **{k: v for k, v in b.items() if k != "model"}}

    fields = {**case.__dict__, "body": body(case.body), "with_output": lambda out: body(case.with_output(out)), **kw}
    return Case(**fields)


def _event_stream(calls: list[ToolCall], text: str) -> bytes:
    """The Messages stream in Bedrock's event-stream ``chunk`` frames."""
    from headroom_core.wire.eventstream import chunk_frame
    from headroom_core.wire.sse import SSEParser

    return b"".join(chunk_frame(ev.data) for ev in SSEParser().feed(_anthropic_stream(calls, text)))


CASES[Dialect.VERTEX_ANTHROPIC] = _versioned(
    CASES[Dialect.ANTHROPIC_MESSAGES], "vertex-2023-10-16", path="/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-sonnet-4@20250514:streamRawPredict",
    count_path="/v1/projects/p/locations/us-east5/publishers/anthropic/models/count-tokens:rawPredict",
)  # fmt: skip
CASES[Dialect.BEDROCK_INVOKE] = _versioned(
    CASES[Dialect.ANTHROPIC_MESSAGES], "bedrock-2023-05-31", path="/model/us.anthropic.claude-sonnet-4-20250514-v1%3A0/invoke-with-response-stream",
    count_path=None, stream=_event_stream, error_of=lambda e: e["message"],
)  # fmt: skip


def _ollama_body(out: str = "a.py\nb.py") -> dict[str, Any]:
    return {
        "model": "qwen3:8b",
        "tools": [
            {"type": "function", "function": {"name": "shell", "description": "Run.", "parameters": {"type": "object"}}}
        ],
        "messages": [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "list the files"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": "shell", "arguments": {"cmd": "ls"}}}],
            },
            {"role": "tool", "content": out, "tool_name": "shell"},
            {"role": "user", "content": "which is bigger?"},
        ],
    }


def _ollama_resp(calls: list[ToolCall], text: str) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        msg["tool_calls"] = [{"function": {"name": c.name, "arguments": c.arguments}} for c in calls]
    return {
        "model": "qwen3:8b",
        "created_at": "2026-05-04T10:00:00Z",
        "message": msg,
        "done": True,
        "done_reason": "stop",
        "prompt_eval_count": 10,
        "eval_count": 2,
    }


def _ollama_stream(calls: list[ToolCall], text: str) -> bytes:
    lines = [
        {"model": "qwen3:8b", "created_at": "t", "message": {"role": "assistant", "content": w}, "done": False}
        for w in text.split(" ")
        if text
    ]
    if calls:
        lines.append(
            {
                "model": "qwen3:8b",
                "created_at": "t",
                "message": {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"function": {"name": c.name, "arguments": c.arguments}} for c in calls],
                },
                "done": False,
            }
        )
    lines.append({**_ollama_resp([], ""), "created_at": "t"})
    return b"".join(json.dumps(x).encode() + b"\n" for x in lines)


CASES[Dialect.OLLAMA_CHAT] = Case(
    "/api/chat", None, _ollama_body(), lambda b: b["messages"][3]["content"], _ollama_body, _ollama_resp, _ollama_stream, lambda e: e["error"],
)  # fmt: skip


def _converse_body(out: str = "a.py\nb.py") -> dict[str, Any]:
    return {
        "system": [{"text": "You are a coding agent."}, {"cachePoint": {"type": "default"}}],
        "toolConfig": {
            "tools": [
                {"toolSpec": {"name": "shell", "description": "Run.", "inputSchema": {"json": {"type": "object"}}}},
                {"cachePoint": {"type": "default"}},
            ]
        },
        "messages": [
            {"role": "user", "content": [{"text": "list the files"}]},
            {
                "role": "assistant",
                "content": [{"toolUse": {"toolUseId": "t1", "name": "shell", "input": {"cmd": "ls"}}}],
            },
            {
                "role": "user",
                "content": [
                    {"toolResult": {"toolUseId": "t1", "content": [{"text": out}], "status": "success"}},
                    {"text": "which is bigger?"},
                    {"cachePoint": {"type": "default"}},
                ],
            },
        ],
        "inferenceConfig": {"maxTokens": 512},
    }


def _converse_resp(calls: list[ToolCall], text: str) -> dict[str, Any]:
    content = ([{"text": text}] if text else []) + [
        {"toolUse": {"toolUseId": c.call_id, "name": c.name, "input": c.arguments}} for c in calls
    ]
    return {"output": {"message": {"role": "assistant", "content": content}}, "stopReason": "tool_use" if calls else "end_turn",
            "usage": {"inputTokens": 10, "outputTokens": 2, "totalTokens": 12, "cacheReadInputTokens": 5, "cacheWriteInputTokens": 0}, "metrics": {"latencyMs": 9}}  # fmt: skip


def _converse_stream(calls: list[ToolCall], text: str) -> bytes:
    """ConverseStream's events in AWS event-stream frames (a text block starts with its delta)."""
    from headroom_core.wire.eventstream import event_frame

    evs: list[tuple[str, Any]] = [("messageStart", {"role": "assistant", "p": "abc"})]
    i = 0
    if text:
        evs += [
            ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": text}}),
            ("contentBlockStop", {"contentBlockIndex": 0}),
        ]
        i = 1
    for c in calls:
        evs += [("contentBlockStart", {"contentBlockIndex": i, "start": {"toolUse": {"toolUseId": c.call_id, "name": c.name}}}),
                ("contentBlockDelta", {"contentBlockIndex": i, "delta": {"toolUse": {"input": json.dumps(c.arguments)}}}), ("contentBlockStop", {"contentBlockIndex": i})]  # fmt: skip
        i += 1
    evs += [
        ("messageStop", {"stopReason": "tool_use" if calls else "end_turn"}),
        ("metadata", {"usage": _converse_resp([], "")["usage"], "metrics": {"latencyMs": 9}}),
    ]
    return b"".join(event_frame(k, json.dumps(v)) for k, v in evs)


CASES[Dialect.BEDROCK_CONVERSE] = Case(
    "/model/us.anthropic.claude-sonnet-4-20250514-v1%3A0/converse-stream", None, _converse_body(),
    lambda b: b["messages"][2]["content"][0]["toolResult"]["content"][0]["text"], _converse_body, _converse_resp, _converse_stream, lambda e: e["message"],
)  # fmt: skip
#: dialects whose full round trip is covered elsewhere (test_sse_followup_e2e, test_e2e_proxy):
#: here detection, view, count, 413 and fail-open only
VIEW_ONLY = {
    Dialect.OPENAI_CHAT: ("/v1/chat/completions", None, CHAT),
    Dialect.OPENAI_RESPONSES: ("/v1/responses", "/v1/responses/input_tokens", RESPONSES),
}


def _view(d: Dialect, body: dict[str, Any]):
    """The neutral view of a whole body (inside the dialect's ``root`` when it has one)."""
    return view_of(d, REGISTRY[d].inner(body))


def _rt(tmp_path, **kw: Any) -> Runtime:
    return Runtime(load_settings({"home": str(tmp_path), **kw}, env={}))


def test_every_registered_dialect_has_a_case():
    assert set(REGISTRY) == set(CASES) | set(VIEW_ONLY)


@pytest.mark.parametrize("d", list(REGISTRY))
def test_detection_view_count_413_and_fail_open(d, tmp_path):
    path, count, body = (CASES[d].path, CASES[d].count_path, CASES[d].body) if d in CASES else VIEW_ONLY[d]
    raw = json.dumps(body).encode()
    for host_path in (path, "/gateway/x" + path):  # any host, any prefix
        assert route("POST", host_path).dialect is d and not route("POST", host_path).counting
        assert detect("POST", host_path, raw).dialect is d
    assert route("GET", path).dialect is None
    assert detect("POST", path, b'{"nothing": 1}').dialect is None  # body shape checked
    if count:
        assert route("POST", count).counting and route("POST", count).dialect is d
    v = _view(d, body)
    assert v.latest_user_text == "which is bigger?" and [o.text for o in v.tool_outputs] == ["a.py\nb.py"]
    (call,) = v.tool_calls.values()
    assert call.name == v.tool_outputs[0].tool_name and v.tool_names == [call.name]
    assert (
        v.system
        and v.first_user is not None
        and v.dialect.element_shape(v.conversation[-1]) == v.dialect.element_shape(v.conversation[-1])
    )
    # 413 in the dialect's own shape, and a body it cannot parse goes on as sent
    too = plan_request(_rt(tmp_path, max_body_bytes=100), "POST", path, {}, raw)
    assert (
        too.action is Action.REJECT
        and too.status == 413
        and "max_body_bytes" in json.dumps(json.loads(too.error_body or b""))
    )
    assert json.loads(too.error_body or b"") == REGISTRY[d].error_body(
        json.loads(too.error_body or b"") and _message(d, too.error_body), True
    )
    bad = plan_request(_rt(tmp_path), "POST", path, {}, raw[:-3])
    assert bad.action is Action.PASSTHROUGH and bad.code is Code.NOT_PARSED and bad.body is None


def _message(d: Dialect, body: bytes | None) -> str:
    e = json.loads(body or b"")
    return CASES[d].error_of(e) if d in CASES else (e["error"]["message"])


@pytest.mark.parametrize("d", list(CASES))
def test_splice_compresses_in_place_and_count_is_planned_like_it(d, tmp_path):
    c = CASES[d]
    body = c.with_output(ROWS)
    plan = plan_request(_rt(tmp_path), "POST", c.path, {}, json.dumps(body).encode())
    assert plan.action is Action.REWRITE and plan.dialect is d
    sent = json.loads(plan.body or b"")
    assert R in plan.hidden_tools and R in _view(d, sent).tool_names  # offered in the dialect's own tool shape
    out = c.output_at(sent)
    assert len(out) < len(ROWS) / 3 and "headroom_retrieve key=" in out
    # everything but the output and the tools is the client's
    assert _view(d, sent).latest_user_text == "which is bigger?" and len(_view(d, sent).conversation) == len(
        _view(d, body).conversation
    )
    if c.count_path:
        counted = plan_request(_rt(tmp_path / "c"), "POST", c.count_path, {}, json.dumps(body).encode())
        assert (
            counted.dry_run
            and counted.action is Action.REWRITE
            and len(c.output_at(json.loads(counted.body or b""))) == len(out)
        )


def _payloads(reply: Any, stream: bytes) -> str:
    p = framing_of(reply).parser()
    return "\n".join(e.data for e in p.feed(stream) + p.feed(b""))


@pytest.mark.parametrize("d", list(CASES))
def test_retrieve_round_trip_json_and_streamed(d):
    c, reply = CASES[d], REGISTRY[d].reply
    hidden = frozenset({R})
    mine = ToolCall("call_r", R, {"key": "0" * 24})
    request = json.dumps(c.body)
    # JSON: the proxy's call found, the follow-up answers it, the client gets one answer without it
    first = json.dumps(c.response([mine], "Checking."))
    (got,) = reply.tool_calls(json.loads(first))
    assert got.name == R and got.arguments == {"key": "0" * 24}
    follow = reply.followup(request, first, [(got, "THE ORIGINAL")])
    assert follow.startswith(request[: request.rindex("which is bigger?")])  # the request's prefix kept
    assert (
        "THE ORIGINAL" in follow
        and len(_view(d, json.loads(follow)).conversation) == len(_view(d, c.body).conversation) + 2
    )
    second = json.dumps(c.response([], "Done."))
    merged = json.loads(reply.merge([first, second], hidden, None))
    assert reply.tool_calls(merged) == [] and "Checking." in json.dumps(merged) and "Done." in json.dumps(merged)
    # streamed: the same through the loop
    loop = StreamLoop(reply, request, hidden, 3)
    out = loop.feed(c.stream([mine], "Checking.")) + loop.end_round()
    assert loop.pending is not None and loop.pending.follow_up and [x.name for x in loop.pending.calls] == [R]
    body2 = loop.next_request([(loop.pending.calls[0], "THE ORIGINAL")])
    assert b"THE ORIGINAL" in body2
    out += loop.feed(c.stream([], "Done.")) + loop.end_round()
    seen = _payloads(reply, out)  # what the events carry, whatever their framing
    assert loop.done and R not in seen and "Checking." in seen and "Done." in seen
    # a round without the proxy's call reaches the client byte for byte
    plain = c.stream([], "Just text.")
    tap = StreamLoop(reply, request, hidden, 3)
    assert tap.feed(plain) + tap.end_round() == plain


def test_gemini_thought_signatures_and_parts_go_back_as_sent():
    reply = REGISTRY[Dialect.GEMINI].reply
    resp = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {"text": "hmm", "thought": True},
                        {"functionCall": {"name": R, "args": {"key": "k"}}, "thoughtSignature": "U2lnIQ=="},
                    ],
                },
                "finishReason": "STOP",
            }
        ]
    }
    text = json.dumps(resp)
    (call,) = reply.tool_calls(resp)
    follow = json.loads(reply.followup(json.dumps(_gemini_body()), text, [(call, "X")]))
    assert follow["contents"][-2] == resp["candidates"][0]["content"]
    assert follow["contents"][-1] == {
        "role": "user",
        "parts": [{"functionResponse": {"name": R, "response": {"output": "X"}}}],
    }


#: per dialect family: the stop member of a response that called a tool / finished, and its value
#: when the response stopped at the token limit (the dialect's own terms)
_STOPS = {
    "stop_reason": ("tool_use", "max_tokens"),  # Messages (Anthropic, Vertex AI, Bedrock InvokeModel)
    "finishReason": ("STOP", "MAX_TOKENS"),  # Gemini, Vertex Gemini, Code Assist
    "done_reason": ("stop", "length"),  # Ollama
    "stopReason": ("tool_use", "max_tokens"),  # Bedrock Converse
}


def _cut(text: str) -> str:
    """``text`` (a response's or an event's JSON) with its stop member saying "token limit"."""
    import re

    for key, (old, new) in _STOPS.items():
        text = re.sub(rf'("{key}"\s*:\s*)"{old}"', rf'\1"{new}"', text)
    return text


def _cut_stream(reply: Any, stream: bytes) -> bytes:
    """``stream`` with the stop member of every event changed by :func:`_cut`, framed again."""
    from headroom_core.wire.eventstream import EVENT_STREAM, chunk_frame, event_frame
    from headroom_core.wire.ndjson import NDJSON

    framing = framing_of(reply)
    p = framing.parser()
    out = b""
    for ev in p.feed(stream) + p.feed(b""):
        data = _cut(ev.data)
        if framing is EVENT_STREAM:
            out += chunk_frame(data) if ev.event == "chunk" else event_frame(ev.event or "", data)
        elif framing is NDJSON:
            out += data.encode() + b"\n"
        else:
            out += (f"event: {ev.event}\n" if ev.event else "").encode() + b"data: " + data.encode() + b"\n\n"
    return out


@pytest.mark.parametrize("d", list(CASES))
def test_a_proxy_call_cut_at_the_token_limit_is_never_carried_out(d):
    """Issue 36, item 5: a response stopped at its token limit whose last block is the proxy's
    call: the call is never answered (its input may be cut), and the client gets the response
    without it, its stop reason still the dialect's "token limit"."""
    import asyncio

    from headroom_core.ccr.loop import complete_json

    c, reply = CASES[d], REGISTRY[d].reply
    hidden = frozenset({R})
    mine = ToolCall("call_r", R, {"key": "0" * 24})
    first = _cut(json.dumps(c.response([mine], "Checking.")))
    assert reply.truncated(json.loads(first)) and not reply.truncated(
        json.loads(json.dumps(c.response([mine], "Checking.")))
    )
    answered: list[ToolCall] = []

    async def answer(call: ToolCall) -> str:
        answered.append(call)
        return "THE ORIGINAL"

    async def send(body: bytes) -> tuple[int, bytes]:
        raise AssertionError("a truncated call gets no follow-up")

    got = asyncio.run(complete_json(reply, json.dumps(c.body), first, hidden, answer, send, 3))
    assert answered == [] and got.rounds == 0 and got.body is not None
    merged = json.loads(got.body)
    assert reply.tool_calls(merged) == [] and "Checking." in got.body.decode() and reply.truncated(merged)
    # streamed: no pending call, the client's events without it, ending in the truncation
    loop = StreamLoop(reply, json.dumps(c.body), hidden, 3)
    out = loop.feed(_cut_stream(reply, c.stream([mine], "Checking."))) + loop.end_round()
    seen = _payloads(reply, out)
    assert loop.done and loop.pending is None and R not in seen and "Checking." in seen
    assert any(new in seen for _, new in _STOPS.values())


@pytest.mark.parametrize("d", list(CASES))
def test_a_follow_up_the_provider_refuses_ends_the_stream_with_the_dialect_s_error(d):
    """Issue 36, item 4: a follow-up refused with 429 (``retry-after: 9``): the client keeps the
    text so far and the stream ends with the dialect's own error (its last event: an error
    object or an exception frame carrying the provider's message and the wait), no made-up
    ending; an error event inside the follow-up's stream ends it as the provider sent it."""
    c, reply = CASES[d], REGISTRY[d].reply
    hidden = frozenset({R})
    mine = ToolCall("call_r", R, {"key": "0" * 24})
    loop = StreamLoop(reply, json.dumps(c.body), hidden, 3)
    out = loop.feed(c.stream([mine], "Checking.")) + loop.end_round()
    loop.next_request([(loop.pending.calls[0], "THE ORIGINAL")])
    out += loop.refused(429, (("retry-after", "9"),), b"")
    p = framing_of(reply).parser()
    events = [e for e in p.feed(out) + p.feed(b"") if e.data]
    last = events[-1]
    seen = "\n".join(e.data for e in events[:-1])
    assert loop.done and loop.provider_error is not None and loop.provider_error.status == 429
    assert "Checking." in seen and R not in seen
    assert "Please try again in 9s." in last.data  # the wait, in the dialect's error message
    if (last.event or "").startswith("exception:"):  # Bedrock: an exception frame
        assert last.event == "exception:throttlingException"
    else:
        err = json.loads(last.data)
        assert err.get("type") == "error" or "error" in err  # Anthropic's error event; Google's, Ollama's error objects
    assert not any(w in seen for w in ("message_stop", "messageStop", '"done": true', '"done":true'))
