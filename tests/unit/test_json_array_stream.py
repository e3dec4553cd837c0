"""JSON-array streams (Gemini ``:streamGenerateContent`` without ``alt=sse``): the parser cuts
elements by structure in any chunking, the reply side answers the proxy's own calls inside the
array and the client gets one valid array (``[`` once, ``]`` at the end), pass-through keeps
every byte, and the dialect picks this side only for such paths."""

from __future__ import annotations

import json
from typing import Any

import pytest

from headroom_core.ccr.loop import StreamLoop
from headroom_core.wire import reply_gemini
from headroom_core.wire.detect import Dialect
from headroom_core.wire.dialect_gemini import array_stream
from headroom_core.wire.dialects import dialect
from headroom_core.wire.json_array import END, ITEM, JSON_ARRAY, JSONArrayParser, JSONArrayReply

R = "headroom_retrieve"
REQUEST = json.dumps({"contents": [{"role": "user", "parts": [{"text": "which issues are open?"}]}]})


def google_array(objs: list[Any]) -> bytes:
    """A JSON array as Google streams it: pretty-printed elements, ``\\r\\n,\\r\\n`` between."""
    return ("[" + "\r\n,\r\n".join(json.dumps(o, indent=2) for o in objs) + "]").encode()


def chunk(text: str = "", call: dict | None = None, finish: bool = False, prompt: int = 10) -> dict[str, Any]:
    parts: list[Any] = ([{"text": text}] if text else []) + ([{"functionCall": call}] if call else [])
    cand: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        cand["finishReason"] = "STOP"
    return {
        "candidates": [cand],
        "usageMetadata": {"promptTokenCount": prompt, "candidatesTokenCount": 2, "totalTokenCount": prompt + 2},
        "modelVersion": "gemini-2.5-pro",
    }


def feed_all(loop: StreamLoop, data: bytes, size: int) -> bytes:
    return b"".join(loop.feed(data[i : i + size]) for i in range(0, len(data), size))


@pytest.mark.parametrize("size", [1, 3, 17, 10_000])
def test_parser_cuts_elements_by_structure_and_keeps_every_byte(size):
    objs = [{"a": 'x,]}{"\\', "b": [1, {"c": "]"}]}, {"candidates": []}, {"t": "é ✓"}]
    data = google_array(objs) + b"\n"
    p = JSONArrayParser()
    evs = [e for i in range(0, len(data), size) for e in p.feed(data[i : i + size])] + p.feed(b"")
    assert b"".join(e.raw for e in evs) == data
    assert [json.loads(e.data) for e in evs if e.event == ITEM] == objs
    assert [e.event for e in evs][-2:] == [END, None]  # the ']' then the trailing newline
    assert evs[0].raw.startswith(b"[{") and evs[1].raw.startswith(b"\r\n,\r\n{")


def test_parser_hands_over_each_element_as_soon_as_it_is_closed():
    p = JSONArrayParser()
    assert [e.data for e in p.feed(b'[{"a": 1}')] == ['{"a": 1}']
    assert p.feed(b"\r\n,\r\n") == []
    assert [e.data for e in p.feed(b'{"b": 2}')] == ['{"b": 2}']
    assert [e.event for e in p.feed(b"]")] == [END]


def test_a_body_that_is_not_an_array_is_one_event_at_the_end():
    p = JSONArrayParser()
    body = b'{"error": {"code": 400, "message": "bad", "status": "INVALID_ARGUMENT"}}'
    assert p.feed(body) == []
    (ev,) = p.feed(b"")
    assert ev.raw == body and ev.event is None and ev.parsed["error"]["code"] == 400


def test_only_json_responses_are_array_streams_and_paths_pick_them():
    assert JSON_ARRAY.streams("application/json; charset=UTF-8") and not JSON_ARRAY.streams("text/event-stream")
    base = "/v1beta/models/gemini-2.5-pro"
    assert array_stream(base + ":streamGenerateContent") and array_stream(
        base + ":streamGenerateContent?alt=json&key=k"
    )
    assert not array_stream(base + ":streamGenerateContent?alt=sse") and not array_stream(
        base + ":streamGenerateContent?key=k&alt=SSE"
    )
    assert not array_stream(base + ":generateContent")
    d = dialect(Dialect.GEMINI)
    assert isinstance(d.reply_for(base + ":streamGenerateContent"), JSONArrayReply)
    assert (
        d.reply_for(base + ":streamGenerateContent?alt=sse") is d.reply
        and d.reply_for(base + ":generateContent") is d.reply
    )
    ca = dialect(Dialect.GEMINI_CODE_ASSIST)
    assert isinstance(ca.reply_for("/v1internal:streamGenerateContent"), JSONArrayReply)
    assert dialect(Dialect.ANTHROPIC_MESSAGES).reply_for("/v1/messages") is dialect(Dialect.ANTHROPIC_MESSAGES).reply


@pytest.mark.parametrize("size", [1, 5, 64, 100_000])
def test_without_the_proxy_s_tools_the_stream_reaches_the_client_byte_for_byte(size):
    data = google_array([chunk("Thirteen "), chunk("issues.", finish=True)])
    loop = StreamLoop(JSONArrayReply(reply_gemini), None, frozenset(), 3)
    assert feed_all(loop, data, size) + loop.end_round() == data
    assert loop.usage.input_tokens == 10 and loop.done


@pytest.mark.parametrize("size", [1, 7, 100_000])
def test_the_proxy_answers_its_retrieve_call_inside_the_array(size):
    first = google_array([chunk("Checking. "), chunk(call={"name": R, "args": {"key": "k1"}}, finish=True, prompt=100)])
    second = google_array([chunk("Thirteen "), chunk("are open.", finish=True, prompt=200)])
    loop = StreamLoop(JSONArrayReply(reply_gemini), REQUEST, frozenset({R}), 3)
    out = feed_all(loop, first, size) + loop.end_round()
    assert loop.pending is not None and loop.pending.follow_up and [c.name for c in loop.pending.calls] == [R]
    follow = json.loads(loop.next_request([(loop.pending.calls[0], "the original")]))
    assert follow["contents"][1] == {
        "role": "model",
        "parts": [{"text": "Checking. "}, {"functionCall": {"name": R, "args": {"key": "k1"}}}],
    }
    assert follow["contents"][2] == {
        "role": "user",
        "parts": [{"functionResponse": {"name": R, "response": {"output": "the original"}}}],
    }
    out += feed_all(loop, second, size) + loop.end_round()
    assert loop.done and loop.pending is None
    got = json.loads(out)  # one array, whatever the rounds
    text = "".join(p.get("text", "") for c in got for p in c["candidates"][0]["content"]["parts"])
    assert text == "Checking. Thirteen are open."
    assert not any("functionCall" in p for c in got for p in c["candidates"][0]["content"]["parts"])
    assert got[-1]["candidates"][0]["finishReason"] == "STOP"
    assert got[-1]["usageMetadata"]["promptTokenCount"] == 300  # summed over the rounds
    assert out.startswith(first[: first.index(b"\r\n,")])  # the first element with its bytes
    assert loop.usage.input_tokens == 300


def test_a_hidden_first_element_still_opens_the_client_s_array():
    first = google_array([chunk(call={"name": R, "args": {"key": "k1"}}), chunk(finish=True)])
    loop = StreamLoop(JSONArrayReply(reply_gemini), REQUEST, frozenset({R}), 3)
    out = feed_all(loop, first, 4) + loop.end_round()
    loop.next_request([(loop.pending.calls[0], "x")])
    out += feed_all(loop, google_array([chunk("Done.", finish=True)]), 4) + loop.end_round()
    got = json.loads(out)  # the hidden call's element kept its usage, with no candidate (as over SSE)
    assert got[0]["candidates"] == [] and out.startswith(b"[{")
    assert "".join(p.get("text", "") for c in got for k in c["candidates"] for p in k["content"]["parts"]) == "Done."


def test_a_refused_follow_up_ends_the_array_with_the_notice():
    first = google_array([chunk(call={"name": R, "args": {"key": "k1"}}, finish=True)])
    loop = StreamLoop(JSONArrayReply(reply_gemini), REQUEST, frozenset({R}), 3)
    out = feed_all(loop, first, 9) + loop.end_round()
    loop.next_request([(loop.pending.calls[0], "x")])
    out += loop.fail("the follow-up request got HTTP 503")
    got = json.loads(out)
    assert "retrieval failed" in got[-1]["candidates"][0]["content"]["parts"][-1]["text"]


def test_a_first_stream_cut_short_goes_to_the_client_as_it_came():
    data = google_array([chunk("Half")])[:-1] + b'\r\n,\r\n{"candi'
    loop = StreamLoop(JSONArrayReply(reply_gemini), REQUEST, frozenset({R}), 3)
    assert feed_all(loop, data, 6) + loop.end_round() == data and loop.done


def test_code_assist_envelopes_in_an_array():
    reply = dialect(Dialect.GEMINI_CODE_ASSIST).reply_for("/v1internal:streamGenerateContent")
    env = lambda o: {"response": o, "traceId": "t-1"}  # noqa: E731
    first = google_array([env(chunk(call={"name": R, "args": {"key": "k1"}}, finish=True))])
    loop = StreamLoop(reply, json.dumps({"model": "gemini-2.5-pro", "request": json.loads(REQUEST)}), frozenset({R}), 3)
    out = feed_all(loop, first, 11) + loop.end_round()
    follow = json.loads(loop.next_request([(loop.pending.calls[0], "the original")]))
    assert follow["request"]["contents"][2]["parts"][0]["functionResponse"]["response"] == {"output": "the original"}
    out += feed_all(loop, google_array([env(chunk("Done.", finish=True))]), 11) + loop.end_round()
    got = json.loads(out)
    assert [p for e in got for p in e["response"]["candidates"][0]["content"]["parts"]] == [{"text": "Done."}]
    assert all(e["traceId"] == "t-1" for e in got)


def test_a_follow_up_the_provider_refuses_ends_the_array_with_its_error_element():
    """Issue 36, item 4: the array stays JSON: the elements so far, Google's error object, ``]``."""
    first = google_array([chunk("Looking.", call={"name": R, "args": {"key": "k1"}}, finish=True)])
    loop = StreamLoop(JSONArrayReply(reply_gemini), REQUEST, frozenset({R}), 3)
    out = feed_all(loop, first, 9) + loop.end_round()
    loop.next_request([(loop.pending.calls[0], "x")])
    out += loop.refused(503, (("retry-after", "2"),), b"")
    got = json.loads(out)
    assert got[-1] == {
        "error": {
            "code": 503,
            "message": "the provider answered HTTP 503. Please try again in 2s.",
            "status": "UNAVAILABLE",
        }
    }
    assert "Looking." in json.dumps(got[:-1]) and R not in json.dumps(got)
