"""Faults around the proxy's follow-ups over HTTP (issue 36, items 2, 4 and 5), each through a
real ``mitmdump -s addons/headroom.py`` with real clients and the scripted upstream:

- item 2: a client that leaves while the proxy's follow-up runs (its connection closed while
  it waits for a non-streamed answer, a streamed answer it stops reading, an HTTP/2 stream it
  resets while its connection stays up) stops the follow-up at once: the upstream sees the
  follow-up's connection closed (plain mitmproxy closes at once too; before, it stayed open
  until the model answered or the 600 s read timeout) and no request after the client left;
  the ledger row says 499.
- item 4: a provider error on a follow-up reaches the client as an error it retries: non-streamed,
  the provider's status, ``retry-after`` (and the other headers) and error body; streamed (its
  status already sent), the dialect's error event after the text so far (Anthropic ``event:
  error`` with the provider's error object, Chat's error chunk, Responses ``response.failed``
  holding the items so far); a connection that drops is a 502 in the dialect's shape. The ledger
  row has the provider's status.
- item 5: a call to ``headroom_retrieve`` that the model's token limit cut is never carried out
  (no follow-up reaches the upstream, the ledger row counts no round) and the client sees the
  truncation in its dialect's terms (Anthropic ``max_tokens``, Chat ``length``, Responses
  ``incomplete``).
"""

from __future__ import annotations

import json
import time

import anthropic
import httpx
import openai
import pytest

from headroom_core.ccr import retrieve
from headroom_core.compress import markers
from tests.support.clients import anthropic_client, http_client, iter_sse, openai_client
from tests.support.dialect_e2e import ledger_rows
from tests.support.leaving_clients import H2Client, h1_send
from tests.support.proxy import ADDON_SCRIPT
from tests.support.sse_forms import anthropic_events, anthropic_message, responses_events, responses_response, sse
from tests.support.upstream import Reply
from tests.unit.test_request_plan import anthropic_request, github_scenario

MODEL = "claude-sonnet-4-5"
R = retrieve.TOOL_NAME
# the machine is loaded: let every plan finish, so the proxy's tools are always offered
OPTIONS = {"headroom_compress_timeout_seconds": 300}


@pytest.fixture(scope="module")
def proxy(module_proxy_factory):
    return module_proxy_factory(ADDON_SCRIPT, options=OPTIONS)


@pytest.fixture(scope="module")
def big_output() -> str:
    return github_scenario("paginate-issues.json")


def chat_messages(big_output: str) -> list[dict]:
    return [
        {"role": "user", "content": "which issues are open?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "gh", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": big_output},
    ]


def responses_items(big_output: str) -> list[dict]:
    return [
        {"role": "user", "content": "which issues are open?"},
        {"type": "function_call", "call_id": "c1", "name": "gh", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": big_output},
    ]


def _rows_of(proxy, model: str, n: int = 1, timeout: float = 30.0) -> list:
    """The ledger rows of requests for ``model`` (each test names its own), once there are
    ``n`` (rows are written off the response path, a moment later)."""
    deadline = time.monotonic() + timeout
    while True:
        rows = [r for r in ledger_rows(proxy, 0, timeout=0) if r.model == model]
        if len(rows) >= n or time.monotonic() > deadline:
            return rows
        time.sleep(0.2)


# -- item 2: the client leaves during a follow-up ----------------------------------------------

#: how long the scripted model takes over a follow-up that nobody should wait for (seconds)
SLOW = 120.0


def _retrieve_again(key: str) -> bytes:
    """A non-streamed answer that calls ``headroom_retrieve`` again (a next round, if asked)."""
    return json.dumps(
        anthropic_message([{"type": "tool_use", "id": "toolu_2", "name": R, "input": {"key": key}}], "tool_use")
    ).encode()


def _left_and_nothing_after(upstream, left: float, follow_up: int = 1) -> float:
    """Once the client left (``left``, monotonic): the seconds until the upstream saw the
    follow-up's connection closed; every request the upstream got was sent before ``left``."""
    closed = upstream.closed_at(follow_up, timeout=60)
    assert closed is not None, "the follow-up's connection stayed open after the client left"
    time.sleep(1.0)  # a next round would start now, had the loop gone on
    assert [r.received_at < left for r in upstream.requests] == [True] * (follow_up + 1)
    return closed - left


def test_a_client_that_leaves_a_non_streamed_answer_stops_its_follow_up(upstream, proxy, big_output):
    key = markers.offload_key(big_output)
    upstream.script(Reply.tool_call(R, {"key": key}, text="Checking."))
    upstream.raw(200, _retrieve_again(key), {"content-type": "application/json"}, wait=SLOW)  # a slow model
    upstream.script(Reply.tool_call(R, {"key": key}), Reply.text("round 3"))  # rounds nobody may start
    body = json.dumps({**anthropic_request(big_output), "model": "left-json", "max_tokens": 100}).encode()
    sock = h1_send(proxy, upstream, "/v1/messages", body, {"x-api-key": "k", "anthropic-version": "2023-06-01"})
    upstream.wait_for_requests(2, timeout=180)  # the proxy's follow-up is waiting for the model
    sock.close()  # the client gives up (a timeout, an interrupt)
    _left_and_nothing_after(upstream, time.monotonic())
    (row,) = _rows_of(proxy, "left-json")
    assert (row.status_code, row.retrieve_rounds) == (499, 0)  # no follow-up answered before the client left


def test_a_client_that_stops_reading_a_streamed_answer_stops_its_hung_follow_up(upstream, proxy, big_output):
    key = markers.offload_key(big_output)
    upstream.script(Reply.tool_call(R, {"key": key}, text="Checking."))
    start = anthropic_events(anthropic_message([], "end_turn"))[:1]
    # the follow-up's answer starts, then the model stalls (the provider's stream hangs)
    upstream.raw(200, b"", {"content-type": "text/event-stream"}, chunks=[sse(start)], hang=SLOW)
    upstream.script(Reply.text("round 3"))
    body = {**anthropic_request(big_output), "model": MODEL, "max_tokens": 100, "stream": True}
    with http_client(proxy, timeout=httpx.Timeout(180.0)) as c:
        with c.stream("POST", upstream.url + "/v1/messages", json=body) as r:
            for ev in iter_sse(r):
                if ev.type == "content_block_delta" and ev.json["delta"].get("text") == "Checking.":
                    upstream.wait_for_requests(2, timeout=180)  # the follow-up waits for the model
                    break  # the user stops reading: httpx closes the connection here
    _left_and_nothing_after(upstream, time.monotonic())


def test_a_client_that_leaves_before_the_follow_up_starts_gets_none(upstream, proxy, big_output):
    """The client stops reading as soon as it has the first round's text, while the rest of
    that round (the proxy's call) is still coming: no follow-up is ever sent."""
    key = markers.offload_key(big_output)
    upstream.script(Reply.tool_call(R, {"key": key}, text="Checking.", delay=0.2), Reply.text("round 2"))
    body = {**anthropic_request(big_output), "model": MODEL, "max_tokens": 100, "stream": True}
    with http_client(proxy, timeout=httpx.Timeout(180.0)) as c:
        with c.stream("POST", upstream.url + "/v1/messages", json=body) as r:
            for ev in iter_sse(r):
                if ev.type == "content_block_delta" and ev.json["delta"].get("text") == "Checking.":
                    break  # the rest of the first round (the proxy's call) is still on its way
    time.sleep(3.0)  # the first round's last events (0.2 s apart) and a follow-up would be done by now
    assert len(upstream.requests) == 1


def test_an_http2_stream_reset_stops_the_follow_up_and_the_connection_stays(upstream, proxy_factory, big_output):
    px = proxy_factory(ADDON_SCRIPT, options={**OPTIONS, "connection_strategy": "lazy"})  # h2 to the client
    key = markers.offload_key(big_output)
    upstream.script(Reply.tool_call(R, {"key": key}, text="Checking."))
    upstream.raw(
        200,
        b"",
        {"content-type": "text/event-stream"},
        chunks=[sse(anthropic_events(anthropic_message([], "end_turn"))[:1])],
        hang=SLOW,
    )
    upstream.script(Reply.text("round 3"))
    body = json.dumps({**anthropic_request(big_output), "model": MODEL, "max_tokens": 100, "stream": True}).encode()
    with H2Client(px, upstream) as c:
        sid = c.post("/v1/messages", body, {"x-api-key": "k", "anthropic-version": "2023-06-01"})
        got = c.read_until(sid, lambda st: b"Checking." in st.data, timeout=180)
        assert got.status == 200
        upstream.wait_for_requests(2, timeout=180)
        c.reset(sid)  # RST_STREAM(CANCEL): the user interrupted; the connection stays
        _left_and_nothing_after(upstream, time.monotonic())
        assert c.alive(0.5)  # the client's other streams may go on
        sid2 = c.post(
            "/v1/messages",
            json.dumps({"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}).encode(),
        )
        assert c.read_until(sid2, lambda st: st.ended, timeout=60).status == 200


# -- item 4: the provider fails a follow-up ----------------------------------------------------

RATE_LIMITED = {
    "type": "error",
    "error": {
        "type": "rate_limit_error",
        "message": "Number of request tokens has exceeded your per-minute rate limit.",
    },
    "request_id": "req_011",
}


def test_a_non_streamed_429_reaches_the_client_with_its_retry_after(upstream, proxy, big_output):
    key = markers.offload_key(big_output)
    upstream.script(Reply.tool_call(R, {"key": key}, text="Checking."))
    upstream.raw(
        429, RATE_LIMITED, {"retry-after": "7", "anthropic-ratelimit-tokens-remaining": "0", "x-should-retry": "true"}
    )
    body = anthropic_request(big_output)
    with pytest.raises(anthropic.RateLimitError) as e:
        anthropic_client(upstream, proxy).messages.create(
            model="rate-limited", max_tokens=100, tools=body["tools"], messages=body["messages"]
        )
    r = e.value.response
    assert e.value.status_code == 429 and e.value.body == RATE_LIMITED  # the provider's error body, as sent
    assert (
        r.headers["retry-after"],
        r.headers["anthropic-ratelimit-tokens-remaining"],
        r.headers["x-should-retry"],
    ) == ("7", "0", "true")
    assert len(upstream.requests) == 2
    (row,) = _rows_of(proxy, "rate-limited")
    assert (row.status_code, row.retrieve_rounds) == (429, 0)


def test_a_streamed_529_ends_with_the_error_event_after_the_text_so_far(upstream, proxy, big_output):
    key = markers.offload_key(big_output)
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    upstream.script(Reply.tool_call(R, {"key": key}, text="Checking."))
    upstream.raw(529, overloaded, {"retry-after": "3"})
    body = {**anthropic_request(big_output), "model": "overloaded", "max_tokens": 100, "stream": True}
    with http_client(proxy) as c:
        with c.stream("POST", upstream.url + "/v1/messages", json=body) as r:
            events = list(iter_sse(r))
    assert r.status_code == 200  # sent with the first round
    texts = [e.json["delta"]["text"] for e in events if e.type == "content_block_delta"]
    assert texts == ["Checking."] and "message_stop" not in [e.type for e in events]
    assert events[-1].event == "error" and events[-1].json == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded. Please try again in 3s."},
    }
    # the SDK raises on it (an agent retries)
    upstream.script(Reply.tool_call(R, {"key": key}, text="Checking."))
    upstream.raw(529, overloaded)
    with pytest.raises(anthropic.APIStatusError) as e:
        with anthropic_client(upstream, proxy).messages.stream(
            model="overloaded", max_tokens=100, tools=body["tools"], messages=body["messages"]
        ) as s:
            s.get_final_message()
    assert e.value.body == overloaded
    rows = _rows_of(proxy, "overloaded", 2)
    assert [r.status_code for r in rows] == [529, 529]


def test_a_chat_streamed_429_ends_with_the_error_chunk(upstream, proxy, big_output):
    key = markers.offload_key(big_output)
    err = {
        "error": {
            "message": "Rate limit reached for gpt-4o.",
            "type": "requests",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }
    upstream.script(Reply.tool_call(R, {"key": key}, text="Checking."))
    upstream.raw(429, err, {"retry-after-ms": "1500"})
    text = ""
    with pytest.raises(openai.APIError) as e:
        for c in openai_client(upstream, proxy).chat.completions.create(
            model="gpt-4o", messages=chat_messages(big_output), stream=True
        ):
            text += (c.choices[0].delta.content or "") if c.choices else ""
    assert text == "Checking." and e.value.body == {
        **err["error"],
        "message": "Rate limit reached for gpt-4o. Please try again in 1.5s.",
    }


def test_a_responses_streamed_500_ends_with_response_failed_holding_the_text_so_far(upstream, proxy, big_output):
    key = markers.offload_key(big_output)
    upstream.script(Reply.tool_call(R, {"key": key}, text="Checking."))
    upstream.raw(
        500,
        {
            "error": {
                "message": "The server had an error while processing your request.",
                "type": "server_error",
                "param": None,
                "code": None,
            }
        },
    )
    events = list(
        openai_client(upstream, proxy).responses.create(model="gpt-5", input=responses_items(big_output), stream=True)
    )
    last = events[-1]
    assert last.type == "response.failed" and last.response.status == "failed"
    assert (
        last.response.output_text == "Checking."
        and last.response.error.message == "The server had an error while processing your request."
    )
    assert not any(e.type == "response.completed" for e in events) and [e.sequence_number for e in events] == list(
        range(len(events))
    )


def test_a_follow_up_whose_connection_drops_is_a_502_to_retry(upstream, proxy, big_output):
    key = markers.offload_key(big_output)
    upstream.script(Reply.tool_call(R, {"key": key}, text="Checking."))
    upstream.raw(abort=True)  # the provider's connection drops without an answer
    body = anthropic_request(big_output)
    with pytest.raises(anthropic.InternalServerError) as e:
        anthropic_client(upstream, proxy).messages.create(
            model=MODEL, max_tokens=100, tools=body["tools"], messages=body["messages"]
        )
    assert e.value.status_code == 502 and e.value.body["error"]["type"] == "api_error"  # type: ignore[index]
    assert "retry the request" in e.value.message


# -- item 5: a proxy call cut at the token limit ----------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_anthropic_retrieve_cut_by_max_tokens_is_never_carried_out(upstream, proxy, big_output, stream):
    key = markers.offload_key(big_output)
    upstream.script(Reply.tool_call(R, {"key": key}, text="Checking.", stop_reason="max_tokens"))
    client = anthropic_client(upstream, proxy)
    body = anthropic_request(big_output)
    kw = dict(model=f"cut-{stream}", max_tokens=100, tools=body["tools"], messages=body["messages"])
    if stream:
        with client.messages.stream(**kw) as s:
            msg = s.get_final_message()
    else:
        msg = client.messages.create(**kw)
    assert [(b.type, getattr(b, "text", None)) for b in msg.content] == [("text", "Checking.")]
    assert msg.stop_reason == "max_tokens"
    assert len(upstream.requests) == 1  # no follow-up: the cut call was not answered
    (row,) = _rows_of(proxy, f"cut-{stream}")
    assert (row.status_code, row.retrieve_rounds) == (200, 0)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_chat_retrieve_cut_by_length_is_never_carried_out(upstream, proxy, big_output, stream):
    key = markers.offload_key(big_output)
    upstream.script(Reply.tool_call(R, {"key": key}, text="Checking.", stop_reason="length"))
    client = openai_client(upstream, proxy)
    if stream:
        chunks = list(client.chat.completions.create(model="gpt-4o", messages=chat_messages(big_output), stream=True))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        assert not any(c.choices and c.choices[0].delta.tool_calls for c in chunks)
    else:
        r = client.chat.completions.create(model="gpt-4o", messages=chat_messages(big_output))
        text, finish = r.choices[0].message.content, [r.choices[0].finish_reason]
        assert not r.choices[0].message.tool_calls
    assert text == "Checking." and finish == ["length"]
    assert len(upstream.requests) == 1


def test_responses_retrieve_cut_by_max_output_tokens_is_never_carried_out(upstream, proxy, big_output):
    key = markers.offload_key(big_output)
    msg = {
        "type": "message",
        "id": "msg_1",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Checking.", "annotations": []}],
    }
    fc = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_r",
        "name": R,
        "arguments": json.dumps({"key": key})[:12],
        "status": "incomplete",
    }
    resp = responses_response([msg, fc], status="incomplete", incomplete_details={"reason": "max_output_tokens"})
    evs = responses_events(resp)
    evs[-1] = {**evs[-1], "type": "response.incomplete"}
    upstream.raw(200, b"", {"content-type": "text/event-stream"}, chunks=[sse(evs)])
    events = list(
        openai_client(upstream, proxy).responses.create(model="gpt-5", input=responses_items(big_output), stream=True)
    )
    (last,) = [e for e in events if e.type == "response.incomplete"]
    assert last.response.status == "incomplete" and last.response.incomplete_details.reason == "max_output_tokens"
    assert [o.type for o in last.response.output] == ["message"] and last.response.output_text == "Checking."
    assert not any(R in json.dumps(e.to_dict()) for e in events)
    assert len(upstream.requests) == 1
