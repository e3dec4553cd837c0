"""The streamed retrieval loop (:class:`headroom_core.ccr.loop.StreamLoop`) driven the way
``addons/headroom_llm.py`` drives it, with a fake ``send`` in place of the follow-up HTTP request:
the upstream's streams are real recorded ones (``../shared/corpus``) or built by
``tests/support/sse_forms.py``, fed in chunks that cut SSE events (and their line endings)
anywhere. Asserted: what the client receives, the proxy calls handed to the caller (their
arguments assembled from the deltas), the follow-up bodies the fake ``send`` got, and how
the response ends after a last round, exhausted rounds, a refused follow-up or an error event.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from headroom_core.ccr.loop import StreamLoop, notice_failed, notice_rounds
from headroom_core.wire import reply_anthropic, reply_chat, reply_responses
from headroom_core.wire.assemble_anthropic import MessageAssembler
from headroom_core.wire.assemble_chat import CompletionAssembler
from headroom_core.wire.assemble_responses import ResponseAssembler
from headroom_core.wire.blocks import ToolCall, Usage
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

R = "headroom_retrieve"
ANTHROPIC_REQUEST = json.dumps(
    {
        "model": "claude-opus-4-20250514",
        "max_tokens": 64,
        "stream": True,
        "messages": [{"role": "user", "content": "find the terminal code"}],
    }
)
CHAT_REQUEST = json.dumps({"model": "gpt-4o", "stream": True, "messages": [{"role": "user", "content": "hi"}]})
RESPONSES_REQUEST = json.dumps({"model": "gpt-5", "stream": True, "input": "weather in Florence?"})


# -- the driver and the fake upstream -----------------------------------------------------------


@dataclass
class FakeSend:
    """Stands in for the follow-up request: records each body, answers with the next scripted
    ``(status, SSE bytes)``."""

    replies: list[tuple[int, bytes]]
    bodies: list[dict] = field(default_factory=list)

    def __call__(self, body: bytes) -> tuple[int, bytes]:
        self.bodies.append(json.loads(body))
        return self.replies[len(self.bodies) - 1]


def feed_chunks(loop: StreamLoop, data: bytes, size: int) -> bytes:
    return b"".join(loop.feed(data[i : i + size]) for i in range(0, len(data), size))


def drive(
    loop: StreamLoop, first: bytes, send: FakeSend, size: int = 7, answer=lambda c: f"original of {c.call_id}"
) -> tuple[bytes, list[tuple[ToolCall, ...]]]:
    """The client's bytes of the whole response and every pending step's calls, as the addon
    runs the loop (``_continue_stream``): answer, then follow up or finish; a refused follow-up
    ends the response with ``fail``."""
    out = feed_chunks(loop, first, size) + loop.end_round()
    steps = []
    while loop.pending is not None:
        p = loop.pending
        steps.append(p.calls)
        results = [(c, answer(c)) for c in p.calls]
        if not p.follow_up:
            out += loop.finish()
            break
        status, stream = send(loop.next_request(results))
        if status != 200:
            out += loop.refused(status, (("retry-after", "20"),), stream)
            break
        out += feed_chunks(loop, stream, size) + loop.end_round()
    return out, steps


def assembled(asm_cls, data: bytes) -> dict:
    """What a client assembles from the bytes it received."""
    asm, p = asm_cls(), SSEParser()
    for ev in p.feed(data) + p.feed(b""):
        asm.accept(ev.parsed, ev.data)
    return asm.message()


def event_types(data: bytes) -> list[str]:
    p = SSEParser()
    return [ev.parsed.get("type") if isinstance(ev.parsed, dict) else ev.data for ev in p.feed(data) + p.feed(b"")]


def recorded_anthropic(name: str) -> bytes:
    return json.loads((corpus_dir("anthropic-flows") / name).read_text())["response"]["body"].encode()


def recorded_responses(name: str) -> bytes:
    return json.loads((corpus_dir("openai-flows") / name).read_text())["response_sse"].encode()


GREP_INPUT = {"pattern": "terminal|term_id|jobid", "glob": "**/*.lua", "output_mode": "files_with_matches"}
GREP_ID = "toolu_01EVuDPhw9adCjWaAxeMyaWS"


# -- tap mode and chunking -------------------------------------------------------------------------


@pytest.mark.parametrize("size", [1, 2, 7, 100, 1 << 20])
def test_a_recorded_stream_in_any_chunking_reaches_the_client_unchanged(size):
    """No proxy tools called: whatever the chunking (events and CRLF-free line ends cut at every
    byte for size 1), the client's bytes are the upstream's; the loop still reads the response."""
    data = recorded_anthropic("session-a-01.json")
    loop = StreamLoop(reply_anthropic, ANTHROPIC_REQUEST, frozenset({R}), 3)
    out = feed_chunks(loop, data, size) + loop.end_round()
    assert out == data
    assert loop.done and loop.pending is None and loop.rounds == 0
    assert loop.called == ["Grep"]
    assert loop.usage == Usage(input_tokens=4, output_tokens=135, cache_read_tokens=0, cache_write_tokens=58101)


def test_tap_mode_returns_each_chunk_itself_even_mid_event():
    data = recorded_responses("fantasy-responses/003.json")
    loop = StreamLoop(reply_responses, None, frozenset(), 3)
    assert loop.tap
    cut = data.index(b'"sequence_number":5') + 3  # inside an event
    assert loop.feed(data[:cut]) == data[:cut] and loop.feed(data[cut:]) == data[cut:]
    assert loop.end_round() == b"" and loop.done and loop.pending is None
    assert loop.called == ["weather"]


def test_crlf_line_ends_cut_between_cr_and_lf_are_one_event_boundary():
    msg = anthropic_message([{"type": "text", "text": "Hello there"}], input_tokens=3, output_tokens=2)
    data = sse(anthropic_events(msg)).replace(b"\n", b"\r\n")
    loop = StreamLoop(reply_anthropic, ANTHROPIC_REQUEST, frozenset({R}), 3)
    out = b""
    for i in range(0, len(data), 5):  # 5 is odd: many chunks end between \r and \n
        out += loop.feed(data[i : i + 5])
    out += loop.end_round()
    assert out == data and loop.done
    assert json.loads(loop.texts[0])["content"] == [{"type": "text", "text": "Hello there"}]


# -- Anthropic: recorded tool_use taken as the proxy's own ------------------------------------------


@pytest.mark.parametrize("size", [1, 13, 4096])
def test_anthropic_recorded_call_to_a_proxy_tool_is_answered_and_hidden(size):
    """session-a-01's reply is a text block then a ``Grep`` tool_use (input streamed in four
    ``input_json_delta`` pieces). With ``Grep`` taken as a proxy tool the client sees the text,
    then the follow-up round's text as the next block, one ending, usage summed."""
    first = recorded_anthropic("session-a-01.json")
    second = anthropic_message(
        [{"type": "text", "text": "Three files manage terminals."}], input_tokens=50, output_tokens=7
    )
    send = FakeSend([(200, sse(anthropic_events(second)))])
    loop = StreamLoop(reply_anthropic, ANTHROPIC_REQUEST, frozenset({"Grep"}), 3)
    out, steps = drive(loop, first, send, size)

    assert steps == [(ToolCall(GREP_ID, "Grep", GREP_INPUT),)]
    assert loop.done and loop.rounds == 1 and loop.called == ["Grep"]
    # the follow-up: the request as sent, the assistant turn as streamed, the proxy's answer
    assert len(send.bodies) == 1
    body = send.bodies[0]
    assert body["messages"][0] == json.loads(ANTHROPIC_REQUEST)["messages"][0]
    assert body["messages"][1]["role"] == "assistant"
    assert body["messages"][1]["content"][1] == {"type": "tool_use", "id": GREP_ID, "name": "Grep", "input": GREP_INPUT}
    assert body["messages"][2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": GREP_ID, "content": f"original of {GREP_ID}"}],
    }

    assert b"Grep" not in out and b"input_json_delta" not in out
    types = event_types(out)
    assert types.count("message_start") == 1 and types.count("message_delta") == 1 and types[-1] == "message_stop"
    msg = assembled(MessageAssembler, out)
    assert msg["content"] == [
        {
            "type": "text",
            "text": "I'll help you detect which terminal buffers are running Claude Code in Neovim. Let me search for how terminal buffers are managed in your config.",
        },
        {"type": "text", "text": "Three files manage terminals."},
    ]
    assert msg["stop_reason"] == "end_turn"  # the only call was the proxy's
    assert msg["usage"]["input_tokens"] == 4 + 50 and msg["usage"]["output_tokens"] == 135 + 7
    assert msg["usage"]["cache_creation_input_tokens"] == 58101
    assert loop.usage == Usage(input_tokens=54, output_tokens=142, cache_read_tokens=0, cache_write_tokens=58101)


def test_anthropic_client_call_beside_a_proxy_call_ends_the_turn_for_the_client():
    """The model calls the proxy's tool and the client's together: no follow-up; the proxy's
    call is carried out and removed, the client's call keeps its input and gets the block
    index the client expects (1, not 2); the stop reason stays ``tool_use``."""
    msg = anthropic_message(
        [
            {"type": "text", "text": "Two things."},
            {"type": "tool_use", "id": "toolu_r", "name": R, "input": {"key": "ab12"}},
            {"type": "tool_use", "id": "toolu_c", "name": "Bash", "input": {"command": "ls -la", "timeout": 5}},
        ],
        "tool_use", input_tokens=9, output_tokens=4,
    )  # fmt: skip
    send = FakeSend([])
    loop = StreamLoop(reply_anthropic, ANTHROPIC_REQUEST, frozenset({R}), 3)
    out, steps = drive(loop, sse(anthropic_events(msg)), send)
    assert steps == [(ToolCall("toolu_r", R, {"key": "ab12"}),)] and send.bodies == []
    assert loop.done and loop.rounds == 0
    got = assembled(MessageAssembler, out)
    assert got["content"] == [
        {"type": "text", "text": "Two things."},
        {"type": "tool_use", "id": "toolu_c", "name": "Bash", "input": {"command": "ls -la", "timeout": 5}},
    ]
    assert got["stop_reason"] == "tool_use"
    starts = [
        json.loads(line[6:])
        for line in out.split(b"\n")
        if line.startswith(b"data: ") and b"content_block_start" in line
    ]
    assert [s["index"] for s in starts] == [0, 1]


def test_anthropic_rounds_run_out_after_max_rounds_with_the_notice():
    ask = anthropic_message(
        [{"type": "tool_use", "id": "toolu_r1", "name": R, "input": {"key": "aa"}}],
        "tool_use",
        input_tokens=5,
        output_tokens=1,
    )
    ask2 = anthropic_message(
        [{"type": "tool_use", "id": "toolu_r2", "name": R, "input": {"key": "bb"}}],
        "tool_use",
        input_tokens=6,
        output_tokens=2,
    )
    ask3 = anthropic_message(
        [{"type": "text", "text": "still"}, {"type": "tool_use", "id": "toolu_r3", "name": R, "input": {"key": "cc"}}],
        "tool_use",
        input_tokens=7,
        output_tokens=3,
    )
    send = FakeSend([(200, sse(anthropic_events(ask2))), (200, sse(anthropic_events(ask3)))])
    loop = StreamLoop(reply_anthropic, ANTHROPIC_REQUEST, frozenset({R}), 2)
    out, steps = drive(loop, sse(anthropic_events(ask)), send)
    assert [[c.call_id for c in s] for s in steps] == [
        ["toolu_r1"],
        ["toolu_r2"],
        ["toolu_r3"],
    ]  # the last calls are carried out too
    assert len(send.bodies) == 2 and loop.rounds == 2 and loop.done
    # the second follow-up carries both earlier turns and both answers, in order
    assert [m["role"] for m in send.bodies[1]["messages"]] == ["user", "assistant", "user", "assistant", "user"]
    assert send.bodies[1]["messages"][4]["content"][0]["tool_use_id"] == "toolu_r2"
    got = assembled(MessageAssembler, out)
    assert got["content"] == [{"type": "text", "text": "still"}, {"type": "text", "text": notice_rounds(2)}]
    assert got["stop_reason"] == "end_turn"
    assert got["usage"]["input_tokens"] == 18 and got["usage"]["output_tokens"] == 6


@pytest.mark.parametrize(("status", "body", "etype", "message"), [
    (529, b"", "overloaded_error", "the provider answered HTTP 529. Please try again in 20s."),
    (429, b'{"type":"error","error":{"type":"rate_limit_error","message":"Rate limited."},"request_id":"req_1"}', "rate_limit_error", "Rate limited. Please try again in 20s."),
])  # fmt: skip
def test_anthropic_refused_follow_up_ends_with_an_error_event_the_client_retries(status, body, etype, message):
    """Issue 36, item 4: the text so far, then ``event: error`` (the provider's error object, or
    one made from the status), the wait in its message; no made-up ending."""
    ask = anthropic_message(
        [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_r", "name": R, "input": {"key": "aa"}},
        ],
        "tool_use",
    )
    loop = StreamLoop(reply_anthropic, ANTHROPIC_REQUEST, frozenset({R}), 3)
    out, _ = drive(loop, sse(anthropic_events(ask)), FakeSend([(status, body)]))
    p = SSEParser()
    evs = p.feed(out) + p.feed(b"")
    assert evs[-1].event == "error" and evs[-1].parsed["error"] == {"type": etype, "message": message}
    assert "message_stop" not in event_types(out) and R not in out.decode()
    assert assembled(MessageAssembler, out)["content"] == [{"type": "text", "text": "Let me look."}]  # the text so far
    assert loop.done and loop.pending is None and loop.provider_error.status == status
    if body:
        assert evs[-1].parsed["request_id"] == "req_1"  # the provider's error object, as sent but the message
    assert loop.fail("again") == b"" and loop.refused(500, (), b"") == b""  # once over, nothing more reaches the client


def test_anthropic_refused_follow_up_that_retrying_cannot_help_ends_with_the_notice():
    ask = anthropic_message(
        [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_r", "name": R, "input": {"key": "aa"}},
        ],
        "tool_use",
    )
    loop = StreamLoop(reply_anthropic, ANTHROPIC_REQUEST, frozenset({R}), 3)
    out, _ = drive(loop, sse(anthropic_events(ask)), FakeSend([(400, b"")]))
    got = assembled(MessageAssembler, out)
    assert got["content"] == [
        {"type": "text", "text": "Let me look."},
        {"type": "text", "text": notice_failed("the follow-up request got HTTP 400")},
    ]
    assert got["stop_reason"] == "end_turn" and loop.provider_error is None


def test_anthropic_error_event_in_a_follow_up_ends_the_stream_as_sent():
    ask = anthropic_message([{"type": "tool_use", "id": "toolu_r", "name": R, "input": {"key": "aa"}}], "tool_use")
    error_ev = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    error = sse([{"type": "message_start", "message": {**ask, "content": [], "stop_reason": None}}, error_ev])
    loop = StreamLoop(reply_anthropic, ANTHROPIC_REQUEST, frozenset({R}), 3)
    out, _ = drive(loop, sse(anthropic_events(ask)), FakeSend([(200, error)]))
    assert (
        out.endswith(sse([error_ev]))
        and event_types(out).count("message_start") == 1
        and "message_stop" not in event_types(out)
    )


def test_without_the_request_the_loop_cannot_follow_up_and_says_so():
    ask = anthropic_message([{"type": "tool_use", "id": "toolu_r", "name": R, "input": {"key": "aa"}}], "tool_use")
    loop = StreamLoop(reply_anthropic, None, frozenset({R}), 3)
    out = loop.feed(sse(anthropic_events(ask))) + loop.end_round()
    assert loop.pending is not None and not loop.pending.follow_up and loop.pending.exhausted
    with pytest.raises(RuntimeError):
        loop.next_request([(loop.pending.calls[0], "x")])
    out += loop.finish()
    assert assembled(MessageAssembler, out)["content"] == [{"type": "text", "text": notice_rounds(0)}]


def test_next_request_without_a_pending_step_raises():
    loop = StreamLoop(reply_anthropic, ANTHROPIC_REQUEST, frozenset({R}), 3)
    with pytest.raises(RuntimeError, match="pending follow-up"):
        loop.next_request([])


def test_a_first_response_cut_short_goes_to_the_client_as_it_came():
    data = recorded_anthropic("session-a-01.json")
    cut = data[: data.index(b'event: content_block_start\ndata: {"type":"content_block_start","index":1')]
    loop = StreamLoop(reply_anthropic, ANTHROPIC_REQUEST, frozenset({"Grep"}), 3)
    out = feed_chunks(loop, cut, 3) + loop.end_round()
    assert out == cut and loop.done and loop.pending is None  # no made-up ending for a client stream cut upstream


# -- Chat Completions and Responses -----------------------------------------------------------------


def test_chat_proxy_call_among_tool_call_deltas_is_answered_and_hidden():
    rc = {"id": "call_r", "type": "function", "function": {"name": R, "arguments": '{"key": "abcdef0123"}'}}
    first = chat_completion({"content": "Checking.", "refusal": None, "tool_calls": [rc]}, "tool_calls")
    second = chat_completion(
        {"content": " It is 42.", "refusal": None},
        "stop",
        usage={"prompt_tokens": 200, "completion_tokens": 5, "total_tokens": 205},
    )
    send = FakeSend([(200, sse(chat_events(second), named=False))])
    loop = StreamLoop(reply_chat, CHAT_REQUEST, frozenset({R}), 3)
    out, steps = drive(loop, sse(chat_events(first), named=False), send, size=11)
    assert steps == [(ToolCall("call_r", R, {"key": "abcdef0123"}, '{"key": "abcdef0123"}'),)]
    assert send.bodies[0]["messages"][1:] == [
        {"role": "assistant", "content": "Checking.", "refusal": None, "tool_calls": [rc]},
        {"role": "tool", "tool_call_id": "call_r", "content": "original of call_r"},
    ]
    assert R.encode() not in out and out.endswith(b"data: [DONE]\n\n") and out.count(b"[DONE]") == 1
    got = assembled(CompletionAssembler, out)
    ch = got["choices"][0]
    assert (
        ch["message"]["content"] == "Checking. It is 42."
        and "tool_calls" not in ch["message"]
        and ch["finish_reason"] == "stop"
    )
    assert got["usage"] == {"prompt_tokens": 1117 + 200, "completion_tokens": 46 + 5, "total_tokens": 1163 + 205}


def test_responses_recorded_function_call_taken_as_the_proxy_s_is_answered_and_hidden():
    """fantasy-responses/003: a reasoning item, then a ``weather`` call whose arguments arrive
    in seven deltas. With ``weather`` as a proxy tool the client sees the reasoning item and the
    next round's message at output index 1, sequence numbers without a gap."""
    first = recorded_responses("fantasy-responses/003.json")
    msg = {
        "type": "message",
        "id": "msg_2",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Sunny, 24 C.", "annotations": []}],
    }
    second = responses_response([msg])
    send = FakeSend([(200, sse(responses_events(second)))])
    loop = StreamLoop(reply_responses, RESPONSES_REQUEST, frozenset({"weather"}), 3)
    out, steps = drive(loop, first, send, size=64)
    args = '{"location":"Florence, Italy"}'
    assert steps == [(ToolCall("call_nYgMM3oZuxort2H8Ky4uP5RE", "weather", {"location": "Florence, Italy"}, args),)]
    assert send.bodies[0]["input"][-1] == {
        "type": "function_call_output",
        "call_id": "call_nYgMM3oZuxort2H8Ky4uP5RE",
        "output": "original of call_nYgMM3oZuxort2H8Ky4uP5RE",
    }
    assert b"function_call_arguments" not in out
    p = SSEParser()
    evs = [e.parsed for e in p.feed(out) + p.feed(b"")]
    assert [e["sequence_number"] for e in evs] == list(range(len(evs)))
    assert [e["type"] for e in evs].count("response.created") == 1 and evs[-1]["type"] == "response.completed"
    added = [(e["output_index"], e["item"]["type"]) for e in evs if e["type"] == "response.output_item.added"]
    assert added == [(0, "reasoning"), (1, "message")]
    final = evs[-1]["response"]
    assert [o["type"] for o in final["output"]] == ["reasoning", "message"] and final["output"][1]["content"][0][
        "text"
    ] == "Sunny, 24 C."
    assert (
        final["usage"]["input_tokens"] == 63 + 36
        and final["usage"]["output_tokens"] == 77 + 87
        and final["usage"]["total_tokens"] == 140 + 123
    )
    assert assembled(ResponseAssembler, out)["output"] == final["output"]
