"""Proves the end-to-end harness itself: real SDK clients -> a real plain ``mitmdump``
(no addon) -> the scripted HTTPS upstream, in every dialect and streaming mode."""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

import anthropic  # noqa: E402
import httpx  # noqa: E402

from tests.support.clients import (  # noqa: E402
    anthropic_client,
    direct_http_client,
    http_client,
    openai_client,
    post_stream,
    ws_connect,
)
from tests.support.fixtures import (  # noqa: E402,F401
    module_proxy_factory,
    plain_proxy,
    proxy_factory,
    upstream,
    upstream_server,
)
from tests.support.proxy import MitmProxy  # noqa: E402
from tests.support.upstream import Reply, ToolCall, Upstream  # noqa: E402

MODEL_A = "claude-sonnet-4-5"
MODEL_O = "gpt-4.1"
USER = [{"role": "user", "content": "Say hello."}]


@pytest.fixture
def ant(upstream: Upstream, plain_proxy: MitmProxy):
    with anthropic_client(upstream, plain_proxy) as c:
        yield c


@pytest.fixture
def oai(upstream: Upstream, plain_proxy: MitmProxy):
    with openai_client(upstream, plain_proxy) as c:
        yield c


# ---------------------------------------------------------------- Anthropic Messages


def test_anthropic_json_text_and_usage(ant, upstream: Upstream) -> None:
    upstream.script(Reply.text("hello from upstream", input_tokens=1234, cache_read=1000, cache_creation=200))
    msg = ant.messages.create(model=MODEL_A, max_tokens=64, messages=USER)
    assert msg.content[0].type == "text"
    assert msg.content[0].text == "hello from upstream"
    assert msg.stop_reason == "end_turn"
    assert msg.usage.input_tokens == 1234
    assert msg.usage.cache_read_input_tokens == 1000
    assert msg.usage.cache_creation_input_tokens == 200
    (req,) = upstream.requests
    assert (req.method, req.path) == ("POST", "/v1/messages")
    assert req.header("x-api-key") == "test-key"
    assert req.json["messages"] == USER and req.json["model"] == MODEL_A


def test_anthropic_default_reply_echoes_digest(ant, upstream: Upstream) -> None:
    msg = ant.messages.create(model=MODEL_A, max_tokens=64, messages=USER)
    (req,) = upstream.requests
    assert msg.content[0].text == f"upstream saw 1 messages sha256={req.sha256}"
    assert msg.usage.input_tokens == len(req.body) // 4


def test_anthropic_stream_helper(ant, upstream: Upstream) -> None:
    upstream.script(Reply.text("streamed hello world", cache_read=77))
    with ant.messages.stream(model=MODEL_A, max_tokens=64, messages=USER) as stream:
        pieces = list(stream.text_stream)
        final = stream.get_final_message()
    assert "".join(pieces) == "streamed hello world"
    assert len(pieces) == 3
    assert final.content[0].text == "streamed hello world"
    assert final.usage.cache_read_input_tokens == 77
    assert upstream.last.json["stream"] is True


def test_anthropic_create_stream_event_sequence(ant, upstream: Upstream) -> None:
    upstream.script(Reply.text("a b"))
    events = list(ant.messages.create(model=MODEL_A, max_tokens=64, messages=USER, stream=True))
    assert [e.type for e in events] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]  # the SDK drops `ping`
    assert events[-2].delta.stop_reason == "end_turn"


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_tool_use(ant, upstream: Upstream, stream: bool) -> None:
    upstream.script(
        Reply.tool_call("headroom_retrieve", {"key": "0123abcd"}, call_id="toolu_test1", text="Let me check.")
    )
    kwargs = dict(model=MODEL_A, max_tokens=64, messages=USER)
    if stream:
        with ant.messages.stream(**kwargs) as s:
            msg = s.get_final_message()
    else:
        msg = ant.messages.create(**kwargs)
    assert [b.type for b in msg.content] == ["text", "tool_use"]
    assert msg.content[0].text == "Let me check."
    tool = msg.content[1]
    assert (tool.id, tool.name, tool.input) == ("toolu_test1", "headroom_retrieve", {"key": "0123abcd"})
    assert msg.stop_reason == "tool_use"


def test_anthropic_raw_sse_wire_shape(plain_proxy: MitmProxy, upstream: Upstream) -> None:
    upstream.script(Reply.tool_call("Read", {"path": "a.py"}, text="Hi"))
    with http_client(plain_proxy) as c:
        r, events = post_stream(
            c,
            upstream.url + "/v1/messages",
            {"model": MODEL_A, "max_tokens": 5, "stream": True, "messages": USER},
            headers={"x-api-key": "k", "anthropic-version": "2023-06-01"},
        )
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    types = [e.event for e in events]
    assert types[:3] == ["message_start", "content_block_start", "ping"]
    assert types[-2:] == ["message_delta", "message_stop"]
    assert all(e.json["type"] == e.event for e in events)
    partial = "".join(
        e.json["delta"]["partial_json"]
        for e in events
        if e.event == "content_block_delta" and e.json["delta"]["type"] == "input_json_delta"
    )
    assert json.loads(partial) == {"path": "a.py"}


def test_anthropic_count_tokens(ant, upstream: Upstream) -> None:
    upstream.script(Reply.text("not consumed by count_tokens"))
    n = ant.messages.count_tokens(model=MODEL_A, messages=USER)
    assert n.input_tokens == len(upstream.last.body) // 4
    assert upstream.last.path == "/v1/messages/count_tokens"
    assert upstream.pending == 1


def test_anthropic_raw_error_reply(ant, upstream: Upstream) -> None:
    upstream.raw(
        529,
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        headers={"request-id": "req_x"},
    )
    with pytest.raises(anthropic.APIStatusError) as ei:
        ant.messages.create(model=MODEL_A, max_tokens=64, messages=USER)
    assert ei.value.status_code == 529
    assert ei.value.body["error"]["type"] == "overloaded_error"


# ---------------------------------------------------------------- OpenAI Chat Completions


def test_openai_chat_json(oai, upstream: Upstream) -> None:
    upstream.script(Reply.text("chat hello", input_tokens=500, cache_read=128))
    r = oai.chat.completions.create(model=MODEL_O, messages=USER)
    assert r.choices[0].message.content == "chat hello"
    assert r.choices[0].finish_reason == "stop"
    assert r.usage.prompt_tokens == 500
    assert r.usage.prompt_tokens_details.cached_tokens == 128
    assert upstream.last.path == "/v1/chat/completions"
    assert upstream.last.header("authorization") == "Bearer test-key"


def test_openai_chat_stream_with_usage(oai, upstream: Upstream) -> None:
    upstream.script(Reply.text("one two three", cache_read=9))
    chunks = list(
        oai.chat.completions.create(model=MODEL_O, messages=USER, stream=True, stream_options={"include_usage": True})
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "one two three"
    assert chunks[-1].choices == [] and chunks[-1].usage.prompt_tokens_details.cached_tokens == 9
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"


def test_openai_chat_stream_without_usage_has_no_usage_chunk(plain_proxy, upstream: Upstream) -> None:
    upstream.script(Reply.text("x y"))
    with http_client(plain_proxy) as c:
        _, events = post_stream(
            c, upstream.url + "/v1/chat/completions", {"model": MODEL_O, "messages": USER, "stream": True}
        )
    assert events[-1].data == "[DONE]"
    assert all("usage" not in e.json for e in events[:-1])
    assert all(e.event is None for e in events)


@pytest.mark.parametrize("stream", [False, True])
def test_openai_chat_tool_calls(oai, upstream: Upstream, stream: bool) -> None:
    upstream.script(
        Reply.tool_calls_reply(
            [
                ToolCall("headroom_retrieve", {"key": "beef"}, "call_1"),
                ToolCall("shell", {"cmd": ["ls", "-la"]}, "call_2"),
            ]
        )
    )
    if stream:
        calls: dict[int, dict] = {}
        finish = None
        for ch in oai.chat.completions.create(model=MODEL_O, messages=USER, stream=True):
            if not ch.choices:
                continue
            finish = ch.choices[0].finish_reason or finish
            for tc in ch.choices[0].delta.tool_calls or []:
                slot = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
                slot["id"] = tc.id or slot["id"]
                if tc.function:
                    slot["name"] += tc.function.name or ""
                    slot["arguments"] += tc.function.arguments or ""
        got = [(c["id"], c["name"], json.loads(c["arguments"])) for _, c in sorted(calls.items())]
    else:
        r = oai.chat.completions.create(model=MODEL_O, messages=USER)
        finish = r.choices[0].finish_reason
        got = [(t.id, t.function.name, json.loads(t.function.arguments)) for t in r.choices[0].message.tool_calls]
    assert finish == "tool_calls"
    assert got == [("call_1", "headroom_retrieve", {"key": "beef"}), ("call_2", "shell", {"cmd": ["ls", "-la"]})]


# ---------------------------------------------------------------- OpenAI Responses


def test_openai_responses_json(oai, upstream: Upstream) -> None:
    upstream.script(Reply.text("responses hello", input_tokens=42, cache_read=40))
    r = oai.responses.create(model=MODEL_O, input="hi", instructions="be brief")
    assert r.output_text == "responses hello"
    assert r.status == "completed"
    assert r.usage.input_tokens == 42 and r.usage.input_tokens_details.cached_tokens == 40
    assert upstream.last.path == "/v1/responses" and upstream.last.json["input"] == "hi"


def test_openai_responses_stream(oai, upstream: Upstream) -> None:
    upstream.script(Reply.text("alpha beta"))
    events = list(oai.responses.create(model=MODEL_O, input="hi", stream=True))
    types = [e.type for e in events]
    assert types[0] == "response.created" and types[-1] == "response.completed"
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == "alpha beta"
    assert events[-1].response.output_text == "alpha beta"
    assert [e.sequence_number for e in events] == list(range(len(events)))


def test_openai_responses_stream_helper(oai, upstream: Upstream) -> None:
    upstream.script(Reply.text("helper text"))
    with oai.responses.stream(model=MODEL_O, input="hi") as s:
        final = s.get_final_response()
    assert final.output_text == "helper text"


@pytest.mark.parametrize("stream", [False, True])
def test_openai_responses_function_call(oai, upstream: Upstream, stream: bool) -> None:
    upstream.script(Reply.tool_call("headroom_retrieve", {"key": "c0ffee"}, "call_r1", text="Looking."))
    if stream:
        events = list(oai.responses.create(model=MODEL_O, input="hi", stream=True))
        types = [e.type for e in events]
        assert "response.function_call_arguments.delta" in types
        done = [e for e in events if e.type == "response.function_call_arguments.done"]
        assert json.loads(done[0].arguments) == {"key": "c0ffee"}
        output = events[-1].response.output
    else:
        output = oai.responses.create(model=MODEL_O, input="hi").output
    assert [o.type for o in output] == ["message", "function_call"]
    fc = output[1]
    assert (fc.call_id, fc.name, json.loads(fc.arguments)) == ("call_r1", "headroom_retrieve", {"key": "c0ffee"})


def test_responses_over_websocket(plain_proxy: MitmProxy, upstream: Upstream) -> None:
    upstream.script(Reply.text("ws hello there"))
    with ws_connect(upstream, plain_proxy) as ws:
        ws.send(json.dumps({"type": "response.create", "model": MODEL_O, "input": "hi"}))
        events = []
        while not events or events[-1]["type"] != "response.completed":
            events.append(json.loads(ws.recv(timeout=10)))
    assert "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta") == "ws hello there"
    frames = [r for r in upstream.requests if r.method == "WS"]
    assert len(frames) == 1 and frames[0].json["type"] == "response.create"


# ---------------------------------------------------------------- transport properties


WEIRD_BODY = (
    b'{ "model" :"claude-x",\n  "max_tokens":5, "messages":[{"role":"user","content":'
    b'"caf\\u00e9 \xe2\x98\x83 \\"q\\"   "}],"zzz":1.50,"aaa":null }\n'
)


@pytest.fixture(scope="module")
def buffered_proxy(module_proxy_factory) -> MitmProxy:
    """A default mitmdump (no script, no streaming option): it buffers whole bodies."""
    return module_proxy_factory(None)


@pytest.mark.parametrize("mode", ["streaming", "buffered"])
def test_upstream_receives_exact_bytes(mode: str, request: pytest.FixtureRequest, upstream: Upstream) -> None:
    proxy = request.getfixturevalue("plain_proxy" if mode == "streaming" else "buffered_proxy")
    sent_sha = hashlib.sha256(WEIRD_BODY).hexdigest()
    with http_client(proxy) as c:
        r = c.post(upstream.url + "/v1/messages", content=WEIRD_BODY, headers={"content-type": "application/json"})
    assert r.status_code == 200
    req = upstream.last
    assert req.body == WEIRD_BODY
    assert req.sha256 == sent_sha
    assert r.json()["content"][0]["text"].endswith(f"sha256={sent_sha}")


def test_direct_client_reaches_upstream_without_proxy(upstream: Upstream) -> None:
    with direct_http_client(upstream) as c:
        r = c.post(upstream.url + "/v1/chat/completions", json={"model": "m", "messages": USER})
    assert r.json()["object"] == "chat.completion"


def test_unknown_path_is_404(plain_proxy: MitmProxy, upstream: Upstream) -> None:
    with http_client(plain_proxy) as c:
        r = c.get(upstream.url + "/v1/models")
    assert r.status_code == 404 and r.json()["error"]["type"] == "not_found_error"
    assert upstream.last.method == "GET"


def test_sse_arrives_incrementally_anthropic_sdk(ant, upstream: Upstream) -> None:
    delay = 0.3
    upstream.script(Reply.text("one two three four", delay=delay))
    arrivals: list[tuple[str, float]] = []
    with ant.messages.stream(model=MODEL_A, max_tokens=64, messages=USER) as s:
        for text in s.text_stream:
            arrivals.append((text, time.monotonic()))
    assert "".join(t for t, _ in arrivals) == "one two three four"
    times = [t for _, t in arrivals]
    assert times == sorted(times)
    # the deltas are 3 events apart upstream; a buffering proxy would deliver them together
    assert times[-1] - times[0] > (len(times) - 1) * delay / 2, times


def test_sse_arrives_incrementally_raw(plain_proxy: MitmProxy, upstream: Upstream) -> None:
    delay = 0.2
    upstream.script(Reply.text("a b c", delay=delay))
    with http_client(plain_proxy) as c:
        _, events = post_stream(c, upstream.url + "/v1/responses", {"model": MODEL_O, "input": "hi", "stream": True})
    deltas = [e for e in events if e.event == "response.output_text.delta"]
    assert len(deltas) == 3
    assert deltas[-1].arrived - deltas[0].arrived > 2 * delay * 0.5
    assert events[-1].arrived - events[0].arrived > (len(events) - 1) * delay * 0.5


def test_scripted_path_filter_and_fifo(ant, oai, upstream: Upstream) -> None:
    upstream.script(Reply.text("for chat"), path="/v1/chat/completions")
    upstream.script("first anthropic", "second anthropic")
    a1 = ant.messages.create(model=MODEL_A, max_tokens=5, messages=USER).content[0].text
    c1 = oai.chat.completions.create(model=MODEL_O, messages=USER).choices[0].message.content
    a2 = ant.messages.create(model=MODEL_A, max_tokens=5, messages=USER).content[0].text
    assert (a1, c1, a2) == ("first anthropic", "for chat", "second anthropic")
    assert upstream.pending == 0


def test_proxy_restart_keeps_port_and_ca(proxy_factory, upstream: Upstream) -> None:
    proxy = proxy_factory(None, env={"HEADROOM_TEST_MARK": "1"})
    ca_before, url_before = proxy.ca_path.read_bytes(), proxy.url
    proxy.restart()
    assert proxy.url == url_before and proxy.ca_path.read_bytes() == ca_before
    with anthropic_client(upstream, proxy) as c:
        msg = c.messages.create(model=MODEL_A, max_tokens=5, messages=USER)
    assert msg.content[0].text.startswith("upstream saw 1 messages")
    assert "proxy listening at" in proxy.log_text()
    assert proxy.stop() is not None and not proxy.running


def test_default_mitmdump_buffers_sse(buffered_proxy: MitmProxy, upstream: Upstream) -> None:
    """Documents why the addon must set ``flow.response.stream``: without it mitmproxy
    holds the whole SSE body and releases it at once."""
    delay = 0.2
    upstream.script(Reply.text("x y", delay=delay))
    with http_client(buffered_proxy) as c:
        _, events = post_stream(
            c, upstream.url + "/v1/chat/completions", {"model": MODEL_O, "messages": USER, "stream": True}
        )
    assert len(events) == 5 and events[-1].data == "[DONE]"
    assert events[-1].arrived - events[0].arrived < delay


def test_truncated_upstream_stream_surfaces_as_client_error(ant, upstream: Upstream) -> None:
    upstream.script(Reply.text("never finished", abort_after_events=4))
    # the SDK does not wrap a mid-stream failure: httpx's error reaches the caller
    with pytest.raises(httpx.RemoteProtocolError, match="incomplete chunked read"):
        with ant.messages.stream(model=MODEL_A, max_tokens=64, messages=USER) as s:
            list(s.text_stream)


def test_raw_chunked_reply(plain_proxy: MitmProxy, upstream: Upstream) -> None:
    upstream.raw(200, headers={"content-type": "text/plain"}, chunks=[b"ab", b"cd", b"ef"], delay=0.05)
    with http_client(plain_proxy) as c:
        r = c.post(upstream.url + "/anything", content=b"x")
    assert r.text == "abcdef"
    upstream.raw(abort=True)
    with http_client(plain_proxy) as c:
        r = c.post(upstream.url + "/v1/messages", json={"model": "m", "messages": []})
    assert r.status_code == 502 and "server closed connection" in r.text  # mitmproxy's error page
