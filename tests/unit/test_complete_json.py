"""The non-streamed retrieval loop (:func:`headroom_core.ccr.loop.complete_json`) with a fake
``send`` (async, scripted ``(status, body[, headers])`` replies, every body it was given recorded)
and a fake ``answer``: rounds until the model stops calling the proxy's tools, rounds running out,
a follow-up refused (an error the client retries, or the notice when retrying cannot help) or
answered with something that is not a response, a lost connection and an exception in ``send``,
the proxy's and the client's calls in one turn; usage summed over rounds in each dialect.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field

import pytest

from headroom_core.ccr.followup_error import FollowUpLost
from headroom_core.ccr.loop import complete_json, notice_failed, notice_rounds
from headroom_core.wire import reply_anthropic, reply_chat, reply_responses
from tests.support.sse_forms import anthropic_message, chat_completion, responses_response

R = "headroom_retrieve"
HIDDEN = frozenset({R})
ANTHROPIC_REQUEST = json.dumps(
    {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "why did it fail?"}]}
)
CHAT_REQUEST = json.dumps({"model": "m", "messages": [{"role": "user", "content": "why did it fail?"}]})
RESPONSES_REQUEST = json.dumps({"model": "m", "input": "why did it fail?"})


@dataclass
class Fakes:
    """``send`` answers with the scripted replies in order (an Exception instance is raised);
    ``answer`` returns the proxy tool's text and records the call."""

    replies: list = field(default_factory=list)
    bodies: list[dict] = field(default_factory=list)
    answered: list[str] = field(default_factory=list)

    async def send(self, body: bytes) -> tuple[int, bytes, tuple[tuple[str, str], ...]]:
        self.bodies.append(json.loads(body))
        r = self.replies[len(self.bodies) - 1]
        if isinstance(r, Exception):
            raise r
        return (*r, ()) if len(r) == 2 else r

    async def answer(self, call) -> str:
        self.answered.append(call.call_id)
        return f"original {call.arguments['key']}"


def run(reply, request: str, first: dict, fakes: Fakes, max_rounds: int = 3):
    return asyncio.run(complete_json(reply, request, json.dumps(first), HIDDEN, fakes.answer, fakes.send, max_rounds))


def ok(obj: dict) -> tuple[int, bytes]:
    return 200, json.dumps(obj).encode()


# -- Anthropic Messages ---------------------------------------------------------------------------


def a_call(cid: str, key: str, name: str = R) -> dict:
    return {"type": "tool_use", "id": cid, "name": name, "input": {"key": key}}


def test_two_rounds_then_the_answer_usage_summed():
    r0 = anthropic_message(
        [{"type": "text", "text": "Looking."}, a_call("toolu_1", "k1")], "tool_use", input_tokens=100, output_tokens=10
    )
    r1 = anthropic_message([a_call("toolu_2", "k2")], "tool_use", input_tokens=200, output_tokens=20, cache_read=50)
    r2 = anthropic_message(
        [{"type": "text", "text": "The disk was full."}], input_tokens=300, output_tokens=30, cache_read=70
    )
    f = Fakes([ok(r1), ok(r2)])
    out = run(reply_anthropic, ANTHROPIC_REQUEST, r0, f)
    assert out.rounds == 2 and f.answered == ["toolu_1", "toolu_2"] and len(out.texts) == 3
    # each follow-up is the previous request plus the turn and the answer
    assert [m["role"] for m in f.bodies[0]["messages"]] == ["user", "assistant", "user"]
    assert f.bodies[0]["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "original k1"}
    ]
    assert f.bodies[1]["messages"][:3] == f.bodies[0]["messages"]
    assert f.bodies[1]["messages"][4]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "original k2"}
    ]
    body = json.loads(out.body)
    assert body["content"] == [{"type": "text", "text": "Looking."}, {"type": "text", "text": "The disk was full."}]
    assert body["stop_reason"] == "end_turn"
    assert body["usage"] == {
        "input_tokens": 600,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 120,
        "output_tokens": 60,
    }


def test_rounds_run_out_the_last_calls_are_carried_out_and_the_notice_ends_the_answer():
    r0 = anthropic_message([a_call("toolu_1", "k1")], "tool_use", input_tokens=1, output_tokens=1)
    r1 = anthropic_message(
        [{"type": "text", "text": "More:"}, a_call("toolu_2", "k2")], "tool_use", input_tokens=2, output_tokens=2
    )
    f = Fakes([ok(r1)])
    out = run(reply_anthropic, ANTHROPIC_REQUEST, r0, f, max_rounds=1)
    assert out.rounds == 1 and len(f.bodies) == 1 and f.answered == ["toolu_1", "toolu_2"]
    body = json.loads(out.body)
    assert body["content"] == [{"type": "text", "text": "More:"}, {"type": "text", "text": notice_rounds(1)}]
    assert body["stop_reason"] == "end_turn" and body["usage"]["input_tokens"] == 3


def test_zero_rounds_allowed_answers_and_says_so_without_a_follow_up():
    r0 = anthropic_message([a_call("toolu_1", "k1")], "tool_use")
    f = Fakes([])
    out = run(reply_anthropic, ANTHROPIC_REQUEST, r0, f, max_rounds=0)
    assert out.rounds == 0 and f.bodies == [] and f.answered == ["toolu_1"]
    assert json.loads(out.body)["content"] == [{"type": "text", "text": notice_rounds(0)}]


@pytest.mark.parametrize("status", [408, 409, 429, 500, 503, 529])
def test_a_follow_up_refused_with_a_status_clients_retry_is_passed_to_the_client(status):
    """Issue 36, item 4: the client gets the provider's status, headers and error body, not a
    finished answer with a notice."""
    r0 = anthropic_message(
        [{"type": "text", "text": "Let me read it."}, a_call("toolu_1", "k1")],
        "tool_use",
        input_tokens=9,
        output_tokens=3,
    )
    err = b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
    f = Fakes([(status, err, (("retry-after", "7"), ("content-type", "application/json")))])
    out = run(reply_anthropic, ANTHROPIC_REQUEST, r0, f)
    assert out.body is None and out.rounds == 0 and len(out.texts) == 1
    assert (out.error.status, out.error.body, out.error.retry_after) == (status, err, 7.0)


@pytest.mark.parametrize(("status", "headers"), [(400, ()), (404, ()), (500, (("x-should-retry", "false"),))])
def test_a_follow_up_refused_in_a_way_retrying_cannot_help_ends_with_the_notice(status, headers):
    r0 = anthropic_message(
        [{"type": "text", "text": "Let me read it."}, a_call("toolu_1", "k1")],
        "tool_use",
        input_tokens=9,
        output_tokens=3,
    )
    f = Fakes(
        [(status, b'{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long"}}', headers)]
    )
    out = run(reply_anthropic, ANTHROPIC_REQUEST, r0, f)
    assert out.rounds == 0 and len(out.texts) == 1 and out.error is None
    body = json.loads(out.body)
    assert body["content"] == [
        {"type": "text", "text": "Let me read it."},
        {"type": "text", "text": notice_failed(f"the follow-up request got HTTP {status}")},
    ]
    assert body["stop_reason"] == "end_turn" and body["usage"]["input_tokens"] == 9  # one round: its own usage
    assert "invalid_request_error" not in out.body.decode()


@pytest.mark.parametrize(("timed_out", "status"), [(False, 502), (True, 504)])
def test_a_follow_up_whose_connection_failed_is_a_gateway_error_to_retry(timed_out, status):
    r0 = anthropic_message([a_call("toolu_1", "k1")], "tool_use")
    out = run(
        reply_anthropic,
        ANTHROPIC_REQUEST,
        r0,
        Fakes([FollowUpLost("the follow-up request failed: ConnectError", timed_out)]),
    )
    assert (
        out.body is None
        and out.error.status == status
        and out.error.body == b""
        and "ConnectError" in out.error.message
    )


def test_a_follow_up_that_is_not_a_response_and_one_that_raises():
    r0 = anthropic_message([a_call("toolu_1", "k1")], "tool_use")
    out = run(reply_anthropic, ANTHROPIC_REQUEST, r0, Fakes([ok({"type": "error", "error": {"message": "x"}})]))
    assert json.loads(out.body)["content"] == [
        {"type": "text", "text": notice_failed("the follow-up answer was not a response")}
    ]
    out = run(reply_anthropic, ANTHROPIC_REQUEST, r0, Fakes([TimeoutError("slow")]))
    assert (
        json.loads(out.body)["content"] == [{"type": "text", "text": notice_failed("TimeoutError")}] and out.rounds == 0
    )
    out = run(reply_anthropic, ANTHROPIC_REQUEST, r0, Fakes([(200, b"not json")]))
    assert json.loads(out.body)["content"] == [{"type": "text", "text": notice_failed("JSONDecodeError")}]


def test_client_calls_beside_proxy_calls_no_follow_up_proxy_calls_removed():
    r0 = anthropic_message([a_call("toolu_1", "k1"), a_call("toolu_c", "x", name="Read")], "tool_use")
    f = Fakes([])
    out = run(reply_anthropic, ANTHROPIC_REQUEST, r0, f)
    assert f.bodies == [] and f.answered == ["toolu_1"] and out.rounds == 0
    body = json.loads(out.body)
    assert body["content"] == [a_call("toolu_c", "x", name="Read")] and body["stop_reason"] == "tool_use"


def test_nothing_to_do_leaves_the_provider_s_bytes():
    r0 = anthropic_message([a_call("toolu_c", "x", name="Read")], "tool_use")
    f = Fakes([])
    out = run(reply_anthropic, ANTHROPIC_REQUEST, r0, f)
    assert out.body is None and out.rounds == 0 and f.answered == [] and f.bodies == []
    # an error body (not a completed response) is passed on too
    out = asyncio.run(
        complete_json(reply_anthropic, ANTHROPIC_REQUEST, '{"type":"error","error":{}}', HIDDEN, f.answer, f.send, 3)
    )
    assert out.body is None and out.texts == ('{"type":"error","error":{}}',)


def test_values_keep_the_provider_s_exact_text():
    """Numbers and escapes in what the client gets are written as the provider wrote them."""
    r0 = '{"type":"message","role":"assistant","content":[{"type":"text","text":"caf\\u00e9 1.50"},{"type":"tool_use","id":"toolu_1","name":"headroom_retrieve","input":{"key":"k1"}}],"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":1}}'
    r1 = '{"type":"message","role":"assistant","content":[{"type":"text","text":"x","score":1.0e2}],"stop_reason":"end_turn","usage":{"input_tokens":2,"output_tokens":2}}'
    f = Fakes([(200, r1.encode())])
    out = asyncio.run(complete_json(reply_anthropic, ANTHROPIC_REQUEST, r0, HIDDEN, f.answer, f.send, 3))
    text = out.body.decode()
    assert '"text":"caf\\u00e9 1.50"' in text and '"score":1.0e2' in text
    assert json.loads(text)["usage"] == {"input_tokens": 3, "output_tokens": 3}


# -- Chat Completions and Responses ---------------------------------------------------------------


def test_chat_rounds_usage_summed_and_tool_messages_sent():
    tc = {"id": "call_1", "type": "function", "function": {"name": R, "arguments": '{"key": "k1"}'}}
    r0 = chat_completion(
        {"content": None, "tool_calls": [tc]},
        "tool_calls",
        usage={"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
    )
    r1 = chat_completion(
        {"content": "Done."}, "stop", usage={"prompt_tokens": 30, "completion_tokens": 4, "total_tokens": 34}
    )
    f = Fakes([ok(r1)])
    out = run(reply_chat, CHAT_REQUEST, r0, f)
    assert out.rounds == 1
    assert f.bodies[0]["messages"][1:] == [
        {"role": "assistant", "content": None, "tool_calls": [tc]},
        {"role": "tool", "tool_call_id": "call_1", "content": "original k1"},
    ]
    body = json.loads(out.body)
    ch = body["choices"][0]
    assert ch["message"]["content"] == "Done." and "tool_calls" not in ch["message"] and ch["finish_reason"] == "stop"
    assert body["usage"] == {"prompt_tokens": 40, "completion_tokens": 6, "total_tokens": 46}


def test_chat_error_status_keeps_the_client_s_call_out_and_says_why():
    tc = {"id": "call_1", "type": "function", "function": {"name": R, "arguments": '{"key": "k1"}'}}
    r0 = chat_completion({"content": "Reading.", "tool_calls": [tc]}, "tool_calls")
    out = run(reply_chat, CHAT_REQUEST, r0, Fakes([(400, b"")]))
    ch = json.loads(out.body)["choices"][0]
    assert ch["message"]["content"] == "Reading.\n\n" + notice_failed("the follow-up request got HTTP 400")
    assert "tool_calls" not in ch["message"] and ch["finish_reason"] == "stop"
    out = run(reply_chat, CHAT_REQUEST, r0, Fakes([(503, b"")]))
    assert out.body is None and out.error.status == 503


def test_responses_rounds_usage_summed_and_outputs_sent():
    fc = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": R,
        "arguments": '{"key":"k1"}',
        "status": "completed",
    }
    msg = {
        "type": "message",
        "id": "msg_1",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Done.", "annotations": []}],
    }
    r0 = responses_response([fc])
    r1 = responses_response([msg], id="resp_2")
    f = Fakes([ok(r1)])
    out = run(reply_responses, RESPONSES_REQUEST, r0, f)
    assert out.rounds == 1
    assert f.bodies[0]["input"][-1] == {"type": "function_call_output", "call_id": "call_1", "output": "original k1"}
    body = json.loads(out.body)
    assert body["output"] == [msg] and body["status"] == "completed"
    assert (body["usage"]["input_tokens"], body["usage"]["output_tokens"], body["usage"]["total_tokens"]) == (
        72,
        174,
        246,
    )
