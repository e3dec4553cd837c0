"""The retrieval loop's decisions, without I/O (:mod:`headroom_core.ccr.loop`), per dialect:

- a turn without calls to the proxy's tools reaches the client byte for byte, even when the
  proxy offered them (events are only held until the turn's end);
- over rounds, the client's stream assembles to the same message as the non-streamed merge of
  the same rounds: every visible block once, proxy calls gone, usage summed, one ending;
- failures and exhausted rounds end the stream with the notice and an ending clients accept.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from headroom_core.ccr.loop import StreamLoop, StreamTap, complete_json, notice_failed, notice_rounds
from headroom_core.wire import reply_anthropic, reply_chat, reply_responses
from headroom_core.wire.assemble_anthropic import MessageAssembler
from headroom_core.wire.assemble_chat import CompletionAssembler
from headroom_core.wire.assemble_responses import ResponseAssembler
from headroom_core.wire.decode import decoder_for
from headroom_core.wire.sse import SSEParser
from tests.support.sse_forms import (
    anthropic_events,
    anthropic_message,
    chat_completion,
    chat_events,
    responses_events,
    responses_response,
    sse,
)

R = "headroom_retrieve"
HIDDEN = frozenset({R})

ANTHROPIC_REQUEST = json.dumps(
    {
        "model": "m",
        "max_tokens": 9,
        "stream": True,
        "messages": [{"role": "user", "content": "hi \\ud83d"}],
        "tools": [],
    }
)
CHAT_REQUEST = json.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]})
RESPONSES_REQUEST = json.dumps({"model": "m", "stream": True, "input": "hi"})


def call(name: str = R, cid: str = "toolu_r") -> dict:
    return {"type": "tool_use", "id": cid, "name": name, "input": {"key": "ab" * 12}}


# (reply module, request, assembler, [round streams as (sse bytes, non-streamed text)])
def anthropic_rounds() -> list[tuple[bytes, str]]:
    r0 = anthropic_message(
        [
            {"type": "thinking", "thinking": "t", "signature": "s"},
            {"type": "text", "text": "Looking \ud83d"},
            call(),
            {"type": "text", "text": "after the call"},
        ],
        "tool_use",
        input_tokens=10,
        output_tokens=5,
    )
    r1 = anthropic_message([{"type": "text", "text": "Found it."}], input_tokens=20, output_tokens=6)
    return [(sse(anthropic_events(m)), json.dumps(m)) for m in (r0, r1)]


def chat_rounds() -> list[tuple[bytes, str]]:
    tc = {"id": "call_r", "type": "function", "function": {"name": R, "arguments": '{"key": "x"}'}}
    r0 = chat_completion({"content": "Looking.", "refusal": None, "tool_calls": [tc]}, "tool_calls")
    r1 = chat_completion({"content": " Found it.", "refusal": None}, "stop")
    return [(sse(chat_events(m), named=False), json.dumps(m)) for m in (r0, r1)]


def responses_rounds() -> list[tuple[bytes, str]]:
    fc = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_r",
        "name": R,
        "arguments": '{"key": "x"}',
        "status": "completed",
    }
    msg = {
        "type": "message",
        "id": "msg_1",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Looking.", "annotations": []}],
    }
    r0 = responses_response([{"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"}, msg, fc])
    r1 = responses_response(
        [{**msg, "id": "msg_2", "content": [{"type": "output_text", "text": "Found it.", "annotations": []}]}]
    )
    return [(sse(responses_events(m)), json.dumps(m)) for m in (r0, r1)]


DIALECTS = {
    "anthropic": (reply_anthropic, ANTHROPIC_REQUEST, MessageAssembler, anthropic_rounds),
    "chat": (reply_chat, CHAT_REQUEST, CompletionAssembler, chat_rounds),
    "responses": (reply_responses, RESPONSES_REQUEST, ResponseAssembler, responses_rounds),
}


def feed_in_pieces(loop: StreamLoop, data: bytes, n: int = 29) -> bytes:
    return b"".join(loop.feed(data[i : i + n]) for i in range(0, len(data), n))


def client_message(asm_cls, data: bytes) -> dict:
    asm = asm_cls()
    p = SSEParser()
    for ev in p.feed(data) + p.feed(b""):
        asm.accept(ev.parsed, ev.data)
    return asm.message()


def run(loop: StreamLoop, rounds: list[tuple[bytes, str]], answer: str = "the original") -> bytes:
    out = feed_in_pieces(loop, rounds[0][0]) + loop.end_round()
    for data, _ in rounds[1:]:
        assert loop.pending is not None and loop.pending.follow_up
        body = json.loads(loop.next_request([(c, answer) for c in loop.pending.calls]))
        assert body  # a JSON request
        out += feed_in_pieces(loop, data) + loop.end_round()
    return out


@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_a_turn_without_proxy_calls_reaches_the_client_byte_for_byte(dialect):
    reply, request, _, rounds = DIALECTS[dialect]
    data = rounds()[-1][0]
    loop = StreamLoop(reply, request, HIDDEN, 3)
    got = feed_in_pieces(loop, data) + loop.end_round()
    assert got == data and loop.done and loop.pending is None and loop.rounds == 0


@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_the_streamed_answer_equals_the_json_merge_of_the_same_rounds(dialect):
    reply, request, asm_cls, rounds_of = DIALECTS[dialect]
    rounds = rounds_of()
    loop = StreamLoop(reply, request, HIDDEN, 3)
    streamed = client_message(asm_cls, run(loop, rounds))
    merged = json.loads(reply.merge([t for _, t in rounds], HIDDEN, None))
    assert loop.done and loop.rounds == 1 and loop.called == [R]
    assert R not in json.dumps(streamed)
    if dialect == "anthropic":
        assert (
            streamed["content"] == merged["content"] and streamed["stop_reason"] == merged["stop_reason"] == "end_turn"
        )
        assert [b["type"] for b in streamed["content"]] == ["thinking", "text", "text", "text"]
        assert streamed["usage"]["input_tokens"] == merged["usage"]["input_tokens"] == 30
        assert streamed["usage"]["output_tokens"] == merged["usage"]["output_tokens"] == 11
    elif dialect == "chat":
        m = streamed["choices"][0]
        assert m["message"]["content"] == merged["choices"][0]["message"]["content"] == "Looking. Found it."
        assert (
            "tool_calls" not in m["message"] and m["finish_reason"] == merged["choices"][0]["finish_reason"] == "stop"
        )
    else:
        assert streamed["output"] == merged["output"] and [o["type"] for o in merged["output"]] == [
            "reasoning",
            "message",
            "message",
        ]
        assert streamed["usage"]["input_tokens"] == 72


def test_anthropic_follow_up_request_states_the_turn_as_sent():
    rounds = anthropic_rounds()
    loop = StreamLoop(reply_anthropic, ANTHROPIC_REQUEST, HIDDEN, 3)
    feed_in_pieces(loop, rounds[0][0])
    loop.end_round()
    body = loop.next_request([(loop.pending.calls[0], "orig \ud83d")])
    text = body.decode("utf-8")
    assert text.startswith(ANTHROPIC_REQUEST[: -len(']}],"tools":[]}')])  # the request's bytes first
    req = json.loads(text)
    assert req["messages"][1] == {"role": "assistant", "content": json.loads(rounds[0][1])["content"]}
    assert req["messages"][2]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "toolu_r",
        "content": "orig \ud83d",
    }


@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_rounds_run_out_the_stream_ends_with_the_notice(dialect):
    reply, request, asm_cls, rounds_of = DIALECTS[dialect]
    first = rounds_of()[0][0]
    loop = StreamLoop(reply, request, HIDDEN, 1)
    out = feed_in_pieces(loop, first) + loop.end_round()
    loop.next_request([(c, "x") for c in loop.pending.calls])
    out += feed_in_pieces(loop, first) + loop.end_round()  # the model asks again
    assert loop.pending is not None and not loop.pending.follow_up and loop.pending.exhausted
    out += loop.finish()
    msg = client_message(asm_cls, out)
    assert R not in json.dumps(msg) and loop.done
    text = json.dumps(msg)
    assert json.dumps(notice_rounds(1))[1:-1] in text
    if dialect == "anthropic":
        assert msg["content"][-1] == {"type": "text", "text": notice_rounds(1)} and msg["stop_reason"] == "end_turn"
    elif dialect == "chat":
        assert msg["choices"][0]["finish_reason"] == "stop" and msg["choices"][0]["message"]["content"].endswith(
            notice_rounds(1)
        )
    else:
        assert msg["output"][-1]["content"][0]["text"] == notice_rounds(1) and msg["status"] == "completed"


def last_event(out: bytes):
    p = SSEParser()
    return (p.feed(out) + p.feed(b""))[-1]


@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_a_follow_up_cut_short_ends_the_stream_with_an_error_the_client_retries(dialect):
    """Issue 36, item 4: the follow-up's stream was cut (the provider's side failed): the text so
    far, then the dialect's error event (a gateway error, 502), not a finished answer."""
    reply, request, asm_cls, rounds_of = DIALECTS[dialect]
    rounds = rounds_of()
    loop = StreamLoop(reply, request, HIDDEN, 3)
    out = feed_in_pieces(loop, rounds[0][0]) + loop.end_round()
    loop.next_request([(c, "x") for c in loop.pending.calls])
    half = rounds[1][0][: len(rounds[1][0]) // 2]
    out += feed_in_pieces(loop, half) + loop.end_round()
    assert loop.done and loop.provider_error is not None and loop.provider_error.status == 502
    got = json.dumps(client_message(asm_cls, out))
    assert R not in got and "Looking" in got  # the text so far stayed
    last = last_event(out)
    if dialect == "anthropic":
        assert last.event == "error" and last.parsed["error"]["type"] == "api_error" and b"message_stop" not in out
    elif dialect == "chat":
        assert last.parsed["error"]["type"] == "server_error" and b"[DONE]" not in out
    else:
        assert last.event == "response.failed" and last.parsed["response"]["status"] == "failed"
        assert last.parsed["response"]["error"]["code"] == "server_error" and "Looking." in json.dumps(
            last.parsed["response"]["output"]
        )


def test_stream_tap_decodes_a_gzipped_stream():
    import gzip

    data = anthropic_rounds()[-1][0]
    tap = StreamTap(StreamLoop(reply_anthropic, ANTHROPIC_REQUEST, HIDDEN, 3), decoder_for("gzip"))
    z = gzip.compress(data)
    chunks = [tap(z[i : i + 50]) for i in range(0, len(z), 50)] + [tap(b"")]
    out = b"".join(b"".join(c) if isinstance(c, list) else c for c in chunks)
    assert out == data and tap.loop.done  # decoded for the client (the proxy drops content-encoding)


@pytest.mark.parametrize("gzipped", [False, True])
def test_a_first_response_cut_short_reaches_the_client_as_it_came_compressed_or_not(gzipped):
    import gzip
    import zlib

    data = anthropic_rounds()[0][0]
    cut = data[: data.index(b"event: content_block_stop")]  # the upstream's connection ended here
    tap = StreamTap(StreamLoop(reply_anthropic, ANTHROPIC_REQUEST, HIDDEN, 3), decoder_for("gzip") if gzipped else None)
    if gzipped:  # what a gzip stream cut at the same point decodes to: the same events, no ending
        z = gzip.compress(data)
        cut_z = z[: len(z) * len(cut) // len(data)]
        cut = zlib.decompressobj(31).decompress(cut_z)
        wire = cut_z
    else:
        wire = cut
    chunks = [tap(wire[i : i + 50]) for i in range(0, len(wire), 50)] + [tap(b"")]
    out = b"".join(b"".join(c) if isinstance(c, list) else c for c in chunks)
    assert out == cut and b"message_stop" not in out  # no made-up ending, as with a plain stream
    assert tap.loop.done and tap.loop.pending is None and not tap.broken


@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_json_loop_merges_and_survives_a_failing_follow_up(dialect):
    reply, request, _, rounds_of = DIALECTS[dialect]
    rounds = rounds_of()

    async def answer(c):
        return "orig"

    async def send_ok(body: bytes):
        json.loads(body)
        return 200, rounds[1][1].encode(), ()

    async def send_fail(body: bytes):
        return 400, b'{"error": "boom"}', ()

    async def send_busy(body: bytes):
        return 500, b'{"error": "boom"}', (("retry-after", "3"),)

    ok = asyncio.run(complete_json(reply, request, rounds[0][1], HIDDEN, answer, send_ok, 3))
    assert ok.rounds == 1 and json.loads(ok.body) == json.loads(reply.merge([t for _, t in rounds], HIDDEN, None))
    bad = asyncio.run(complete_json(reply, request, rounds[0][1], HIDDEN, answer, send_fail, 3))
    text = bad.body.decode()
    assert (
        bad.rounds == 0
        and R not in text
        and json.dumps(notice_failed("the follow-up request got HTTP 400"))[1:-1] in text
    )
    busy = asyncio.run(complete_json(reply, request, rounds[0][1], HIDDEN, answer, send_busy, 3))
    assert busy.body is None and (busy.error.status, busy.error.retry_after) == (500, 3.0)  # the client retries
    none = asyncio.run(complete_json(reply, request, rounds[1][1], HIDDEN, answer, send_fail, 3))
    assert none.body is None  # nothing to change: the provider's bytes go to the client


# -- a response cut at the token limit (issue 36, item 5) -------------------------------------


def truncated_rounds(dialect: str) -> tuple[bytes, str]:
    """A first round that calls the proxy's tool and stops at the token limit, in the dialect's
    own terms, as (SSE bytes, non-streamed text)."""
    if dialect == "anthropic":
        m = anthropic_message([{"type": "text", "text": "Looking."}, call()], "max_tokens")
        return sse(anthropic_events(m)), json.dumps(m)
    if dialect == "chat":
        tc = {"id": "call_r", "type": "function", "function": {"name": R, "arguments": '{"key": "ab'}}
        m = chat_completion({"content": "Looking.", "refusal": None, "tool_calls": [tc]}, "length")
        return sse(chat_events(m), named=False), json.dumps(m)
    fc = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_r",
        "name": R,
        "arguments": '{"key": "ab',
        "status": "incomplete",
    }
    msg = {
        "type": "message",
        "id": "msg_1",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Looking.", "annotations": []}],
    }
    m = responses_response([msg, fc], status="incomplete", incomplete_details={"reason": "max_output_tokens"})
    evs = responses_events(m)
    evs[-1] = {**evs[-1], "type": "response.incomplete"}
    return sse(evs), json.dumps(m)


STOPPED = {
    "anthropic": lambda m: m["stop_reason"],
    "chat": lambda m: m["choices"][0]["finish_reason"],
    "responses": lambda m: m["status"],
}
TRUNCATED = {"anthropic": "max_tokens", "chat": "length", "responses": "incomplete"}


@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_a_proxy_call_cut_at_the_token_limit_is_never_carried_out_and_the_client_sees_the_truncation(dialect):
    reply, request, asm, _ = DIALECTS[dialect]
    data, text = truncated_rounds(dialect)
    assert reply.truncated(json.loads(text))
    loop = StreamLoop(reply, request, HIDDEN, 3)
    out = feed_in_pieces(loop, data) + loop.end_round()
    assert loop.done and loop.pending is None and loop.rounds == 0  # nothing to answer, no follow-up
    got = client_message(asm, out)
    assert R not in json.dumps(got) and "Looking." in json.dumps(got) and STOPPED[dialect](got) == TRUNCATED[dialect]
    answered: list = []

    async def answer(c):
        answered.append(c)
        return "orig"

    async def send(body: bytes):
        raise AssertionError("no follow-up for a truncated call")

    res = asyncio.run(complete_json(reply, request, text, HIDDEN, answer, send, 3))
    merged = json.loads(res.body)
    assert (
        answered == []
        and res.rounds == 0
        and R not in res.body.decode()
        and STOPPED[dialect](merged) == TRUNCATED[dialect]
    )
