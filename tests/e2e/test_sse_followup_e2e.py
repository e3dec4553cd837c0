"""The proxy's own tools in streamed and JSON responses, end to end through a real
``mitmdump -s addons/headroom.py`` with real SDK clients (issue 13 cases 1, 2, 3 and 7; issue
12: no flow waits for another flow's follow-up).

- Case 1: the follow-up states the model's streamed turn exactly (server tool input, citations,
  thinking signature, reasoning items), and the client gets every block but the proxy's call.
- Case 2: whatever fails after a follow-up, the client gets a coherent answer without the
  proxy's call (a refusal retrying cannot help: the text so far and a notice; the provider's
  failure the client would retry, issue 36 item 4: its error, ``tests/e2e/test_followup_faults_e2e.py``
  for statuses); JSON the provider sent (a lone surrogate escape) reaches the client as sent.
- Case 3: rounds run out: the text so far, a plain statement, a stop reason clients handle.
- Case 7: an upstream that gzips an SSE answer despite ``accept-encoding: identity``.
- Issue 12: a second flow sent while a slow streamed follow-up runs completes before it ends.
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import threading

import anthropic
import httpx
import pytest

from headroom_core.ccr import retrieve
from headroom_core.ccr.loop import notice_failed, notice_rounds
from headroom_core.compress import markers
from tests.support.clients import anthropic_client, http_client, iter_sse, openai_client
from tests.support.proxy import ADDON_SCRIPT
from tests.support.sse_forms import (
    anthropic_events,
    anthropic_message,
    chat_completion,
    chat_events,
    responses_events,
    responses_response,
    sse,
)
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
def proxy_one_round(module_proxy_factory):
    return module_proxy_factory(ADDON_SCRIPT, options={**OPTIONS, "headroom_retrieve_max_rounds": 1})


@pytest.fixture(scope="module")
def big_output() -> str:
    return github_scenario("paginate-issues.json")


def serve_sse(upstream, data: bytes, *, gzipped: bool = False, path: str | None = None, delay: float = 0.002) -> None:
    """The next request gets ``data`` as an SSE answer, in small chunks (gzipped if asked,
    whatever the request's ``accept-encoding``)."""
    headers = {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache"}
    if gzipped:
        data = gzip.compress(data)
        headers["content-encoding"] = "gzip"
    upstream.raw(200, b"", headers, chunks=[data[i : i + 97] for i in range(0, len(data), 97)], delay=delay, path=path)


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


def drop_none(x):
    if isinstance(x, dict):
        return {k: drop_none(v) for k, v in x.items() if v is not None}
    if isinstance(x, list):
        return [drop_none(v) for v in x]
    return x


# -- case 1: the turn stated exactly ----------------------------------------------------------

CITATION = {
    "type": "web_search_result_location",
    "url": "https://example.com/a",
    "title": "A",
    "encrypted_index": "Eo8BCioIAhgBIiQ=",
    "cited_text": "Issue 12 is open.",
}


def anthropic_turn(key: str) -> list[dict]:
    return [
        {
            "type": "thinking",
            "thinking": "The output was shortened; search first, then get it back.",
            "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgx=",
        },
        {
            "type": "server_tool_use",
            "id": "srvtoolu_01",
            "name": "web_search",
            "input": {"query": "octokit fixture issues", "max": 3},
        },
        {
            "type": "web_search_tool_result",
            "tool_use_id": "srvtoolu_01",
            "content": [
                {
                    "type": "web_search_result",
                    "url": "https://example.com/a",
                    "title": "A",
                    "encrypted_content": "EqgfCioIARgB",
                    "page_age": "1 day",
                }
            ],
        },
        {"type": "text", "text": "The fixture repository has open issues.", "citations": [CITATION]},
        {"type": "tool_use", "id": "toolu_r", "name": R, "input": {"key": key}},
    ]


def test_anthropic_streamed_turn_is_stated_exactly_in_the_follow_up(upstream, proxy, big_output):
    key = markers.offload_key(big_output)
    turn = anthropic_turn(key)
    serve_sse(upstream, sse(anthropic_events(anthropic_message(turn, "tool_use"))))
    upstream.script(Reply.text("All issues checked.", input_tokens=900, output_tokens=7))
    client = anthropic_client(upstream, proxy)
    body = anthropic_request(big_output)
    with client.messages.stream(model=MODEL, max_tokens=100, tools=body["tools"], messages=body["messages"]) as s:
        types = [e.type for e in s]
        final = s.get_final_message()
    first, follow = upstream.requests
    assert follow.json["messages"][-2] == {
        "role": "assistant",
        "content": turn,
    }  # server_tool_use input, citations, signature: as sent
    assert follow.json["messages"][-1] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_r", "content": big_output}],
    }
    assert follow.json["messages"][:-2] == first.json["messages"] and follow.json["tools"] == first.json["tools"]
    # the client: every block but the proxy's call, then the follow-up's answer; one message
    assert drop_none([b.to_dict() for b in final.content]) == drop_none(
        turn[:4] + [{"type": "text", "text": "All issues checked."}]
    )
    assert final.stop_reason == "end_turn" and types.count("message_start") == 1 and types[-1] == "message_stop"
    assert final.usage.input_tokens == 120 + 900 and final.usage.output_tokens == 40 + 7  # summed over both rounds
    assert "Traceback" not in proxy.log_text()


def test_responses_streamed_turn_is_stated_exactly_in_the_follow_up(upstream, proxy, big_output):
    key = markers.offload_key(big_output)
    produced = [
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "Get the full list back."}],
            "encrypted_content": "gAAAAABoX",
        },
        {
            "type": "message",
            "id": "msg_1",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Let me look.", "annotations": [], "logprobs": []}],
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_r",
            "name": R,
            "arguments": json.dumps({"key": key}),
            "status": "completed",
        },
    ]
    serve_sse(upstream, sse(responses_events(responses_response(produced))))
    upstream.script(Reply.text("Issues 1 and 2."))
    client = openai_client(upstream, proxy)
    events = list(client.responses.create(model="gpt-5", input=responses_items(big_output), stream=True))
    follow = upstream.requests[1].json
    assert follow["input"][3:] == produced + [
        {"type": "function_call_output", "call_id": "call_r", "output": big_output}
    ]
    done = [e for e in events if e.type == "response.completed"]
    assert len(done) == 1 and [e.type for e in events].count("response.created") == 1
    out = done[0].response.output
    assert [o.type for o in out] == ["reasoning", "message", "message"] and out[2].content[0].text == "Issues 1 and 2."
    assert not any(R in json.dumps(e.to_dict().get("item") or {}) for e in events)
    assert [e.sequence_number for e in events] == list(range(len(events)))


def test_chat_streamed_turn_is_stated_exactly_in_the_follow_up(upstream, proxy, big_output):
    key = markers.offload_key(big_output)
    call = {"id": "call_r", "type": "function", "function": {"name": R, "arguments": json.dumps({"key": key})}}
    serve_sse(
        upstream,
        sse(
            chat_events(
                chat_completion({"content": "Let me look.", "refusal": None, "tool_calls": [call]}, "tool_calls")
            ),
            named=False,
        ),
    )
    upstream.script(Reply.text("Issues 1 and 2.", input_tokens=100, output_tokens=10))
    client = openai_client(upstream, proxy)
    chunks = list(
        client.chat.completions.create(
            model="gpt-4o", messages=chat_messages(big_output), stream=True, stream_options={"include_usage": True}
        )
    )
    follow = upstream.requests[1].json
    assert follow["messages"][-2:] == [
        {"role": "assistant", "content": "Let me look.", "refusal": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_r", "content": big_output},
    ]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Let me look.Issues 1 and 2."
    assert not any(c.choices and c.choices[0].delta.tool_calls for c in chunks)
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]
    usage = [c.usage for c in chunks if c.usage is not None]
    assert len(usage) == 1 and chunks[-1].usage is usage[0]  # one usage chunk, the last, summed
    assert (usage[0].prompt_tokens, usage[0].completion_tokens, usage[0].total_tokens) == (
        1117 + 100,
        46 + 10,
        1163 + 110,
    )


# -- case 2: failures after a follow-up -------------------------------------------------------

SURROGATE_ANSWER = (
    b'{"id":"msg_2","type":"message","role":"assistant","model":"m","content":[{"type":"text",'
    b'"text":"half an emoji: \\ud83d, a number: 1e400"}],"stop_reason":"end_turn","stop_sequence":null,'
    b'"usage":{"input_tokens":5,"output_tokens":3}}'
)


def test_json_follow_up_with_a_lone_surrogate_reaches_the_client_as_sent(upstream, proxy, big_output):
    key = markers.offload_key(big_output)
    upstream.script(Reply.tool_call(R, {"key": key}, text="Checking.", input_tokens=100, output_tokens=4))
    upstream.raw(200, SURROGATE_ANSWER, {"content-type": "application/json"})
    body = {**anthropic_request(big_output), "model": MODEL, "max_tokens": 100}
    with http_client(proxy) as c:
        r = c.post(upstream.url + "/v1/messages", json=body)
    assert r.status_code == 200
    assert b'"text":"half an emoji: \\ud83d, a number: 1e400"' in r.content  # the provider's JSON, as sent
    msg = json.loads(r.content)
    assert [b["type"] for b in msg["content"]] == ["text", "text"] and msg["content"][0]["text"] == "Checking."
    assert R not in r.text and msg["stop_reason"] == "end_turn"
    assert (msg["usage"]["input_tokens"], msg["usage"]["output_tokens"]) == (105, 7)  # both rounds
    # the real SDK reads it
    upstream.script(Reply.tool_call(R, {"key": key}, text="Checking."))
    upstream.raw(200, SURROGATE_ANSWER, {"content-type": "application/json"})
    got = anthropic_client(upstream, proxy).messages.create(
        model=MODEL, max_tokens=100, tools=body["tools"], messages=body["messages"]
    )
    assert [b.text for b in got.content] == ["Checking.", "half an emoji: \ud83d, a number: 1e400"]


def test_streamed_follow_up_with_a_lone_surrogate_reaches_the_client(upstream, proxy, big_output):
    key = markers.offload_key(big_output)
    upstream.script(Reply.tool_call(R, {"key": key}, text="Checking."))
    second = anthropic_message([{"type": "text", "text": "half \ud83d"}])
    serve_sse(upstream, sse(anthropic_events(second)))  # json.dumps writes the escape: "half \\ud83d"
    client = anthropic_client(upstream, proxy)
    body = anthropic_request(big_output)
    with client.messages.stream(model=MODEL, max_tokens=100, tools=body["tools"], messages=body["messages"]) as s:
        final = s.get_final_message()
    assert [b.text for b in final.content] == ["Checking.", "half \ud83d"] and final.stop_reason == "end_turn"


@pytest.mark.parametrize("stream", [False, True])
def test_follow_up_refused_ends_the_answer_with_a_notice(upstream, proxy, big_output, stream):
    """A refusal retrying cannot help (400: the follow-up's prompt is too long)."""
    key = markers.offload_key(big_output)
    upstream.script(Reply.tool_call(R, {"key": key}, text="Checking."))
    upstream.raw(400, {"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long"}})
    client = anthropic_client(upstream, proxy)
    body = anthropic_request(big_output)
    if stream:
        with client.messages.stream(model=MODEL, max_tokens=100, tools=body["tools"], messages=body["messages"]) as s:
            msg = s.get_final_message()
    else:
        msg = client.messages.create(model=MODEL, max_tokens=100, tools=body["tools"], messages=body["messages"])
    assert [b.type for b in msg.content] == ["text", "text"]
    assert msg.content[0].text == "Checking." and msg.content[1].text == notice_failed(
        "the follow-up request got HTTP 400"
    )
    assert msg.stop_reason == "end_turn"


def test_follow_up_stream_cut_short_ends_the_answer_with_an_error_the_client_retries(upstream, proxy, big_output):
    """The provider's stream of the follow-up was cut: the text so far, then ``event: error``
    (``api_error``): the SDK raises, the agent retries (issue 36, item 4)."""
    key = markers.offload_key(big_output)
    upstream.script(
        Reply.tool_call(R, {"key": key}, text="Checking."),
        Reply.text("one two three four five six", abort_after_events=5),
    )
    client = anthropic_client(upstream, proxy)
    body = anthropic_request(big_output)
    texts: list[str] = []
    with pytest.raises(anthropic.APIStatusError) as e:
        with client.messages.stream(model=MODEL, max_tokens=100, tools=body["tools"], messages=body["messages"]) as s:
            for ev in s:
                if ev.type == "content_block_delta" and ev.delta.type == "text_delta":
                    texts.append(ev.delta.text)
    assert e.value.body["error"]["type"] == "api_error" and "ended early" in e.value.body["error"]["message"]  # type: ignore[index]
    assert texts[0] == "Checking." and "one" in "".join(texts[1:])


def test_follow_up_error_event_reaches_the_client_as_sent(upstream, proxy, big_output):
    key = markers.offload_key(big_output)
    upstream.script(Reply.tool_call(R, {"key": key}))
    error = [
        {"type": "message_start", "message": anthropic_message([], "end_turn") | {"content": []}},
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    ]
    serve_sse(upstream, sse(error))
    client = anthropic_client(upstream, proxy)
    body = anthropic_request(big_output)
    with pytest.raises(anthropic.APIStatusError) as e:
        with client.messages.stream(model=MODEL, max_tokens=100, tools=body["tools"], messages=body["messages"]) as s:
            s.get_final_message()
    assert e.value.body == {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


# -- case 3: rounds run out -------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("dialect", ["anthropic", "chat", "responses"])
def test_rounds_run_out_the_client_gets_the_text_so_far_and_a_notice(
    upstream, proxy_one_round, big_output, dialect, stream
):
    key = markers.offload_key(big_output)
    upstream.script(Reply.tool_call(R, {"key": key}, text="a"), Reply.tool_call(R, {"key": key}, text="b"))
    notice = notice_rounds(1)
    if dialect == "anthropic":
        client = anthropic_client(upstream, proxy_one_round)
        body = anthropic_request(big_output)
        kw = dict(model=MODEL, max_tokens=100, tools=body["tools"], messages=body["messages"])
        if stream:
            with client.messages.stream(**kw) as s:
                msg = s.get_final_message()
        else:
            msg = client.messages.create(**kw)
        assert [(b.type, b.text) for b in msg.content] == [("text", "a"), ("text", "b"), ("text", notice)]
        assert msg.stop_reason == "end_turn"
    elif dialect == "chat":
        client = openai_client(upstream, proxy_one_round)
        if stream:
            chunks = list(
                client.chat.completions.create(model="gpt-4o", messages=chat_messages(big_output), stream=True)
            )
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
            assert not any(c.choices and c.choices[0].delta.tool_calls for c in chunks)
        else:
            r = client.chat.completions.create(model="gpt-4o", messages=chat_messages(big_output))
            text, finish = r.choices[0].message.content, [r.choices[0].finish_reason]
            assert not r.choices[0].message.tool_calls
        assert text == "ab\n\n" + notice and finish == ["stop"]
    else:
        client = openai_client(upstream, proxy_one_round)
        if stream:
            events = list(client.responses.create(model="gpt-5", input=responses_items(big_output), stream=True))
            (done,) = [e for e in events if e.type == "response.completed"]
            resp = done.response
        else:
            resp = client.responses.create(model="gpt-5", input=responses_items(big_output))
        assert [o.type for o in resp.output] == ["message", "message", "message"] and resp.status == "completed"
        assert resp.output_text == "ab" + notice
    assert len(upstream.requests) == 2


# -- case 7: an upstream that gzips SSE anyway ------------------------------------------------


def test_gzipped_sse_is_decoded_and_the_proxy_call_never_reaches_the_client(upstream, proxy, big_output):
    key = markers.offload_key(big_output)
    first = anthropic_message(
        [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_r", "name": R, "input": {"key": key}},
        ],
        "tool_use",
    )
    serve_sse(upstream, sse(anthropic_events(first)), gzipped=True)
    serve_sse(
        upstream, sse(anthropic_events(anthropic_message([{"type": "text", "text": "All checked."}]))), gzipped=True
    )
    body = {**anthropic_request(big_output), "model": MODEL, "max_tokens": 100, "stream": True}
    with http_client(proxy) as c:
        with c.stream("POST", upstream.url + "/v1/messages", json=body, headers={"accept-encoding": "gzip"}) as r:
            assert "content-encoding" not in r.headers  # the proxy decoded it
            events = list(iter_sse(r))
    assert upstream.requests[0].header("accept-encoding") == "identity"
    raw = "".join(e.data for e in events)
    assert R not in raw and "toolu_r" not in raw
    texts = [e.json["delta"]["text"] for e in events if e.type == "content_block_delta"]
    assert "".join(texts) == "Checking.All checked." and events[-1].type == "message_stop"
    # the real SDK agrees
    serve_sse(upstream, sse(anthropic_events(first)), gzipped=True)
    serve_sse(
        upstream, sse(anthropic_events(anthropic_message([{"type": "text", "text": "All checked."}]))), gzipped=True
    )
    with anthropic_client(upstream, proxy).messages.stream(
        model=MODEL, max_tokens=100, tools=body["tools"], messages=body["messages"]
    ) as s:
        msg = s.get_final_message()
    assert [b.text for b in msg.content] == ["Checking.", "All checked."] and msg.stop_reason == "end_turn"


def test_gzipped_sse_without_proxy_tools_passes_as_the_upstream_sent_it(upstream, proxy):
    data = sse(anthropic_events(anthropic_message([{"type": "text", "text": "plain"}])))
    serve_sse(upstream, data, gzipped=True)
    body = {"model": MODEL, "max_tokens": 10, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    with http_client(proxy) as c:
        with c.stream("POST", upstream.url + "/v1/messages", json=body, headers={"accept-encoding": "gzip"}) as r:
            raw = b"".join(r.iter_raw())
            enc = r.headers.get("content-encoding")
    assert enc == "gzip" and gzip.decompress(raw) == data


# -- issue 12: no flow waits for a follow-up --------------------------------------------------


def test_a_second_flow_completes_while_a_slow_streamed_follow_up_runs(upstream, proxy, big_output):
    """The follow-up streams 24 events, 0.25 s apart; a second flow sent once the follow-up has
    started finishes before the follow-up's last event reaches the client."""
    key = markers.offload_key(big_output)
    words = " ".join(f"w{i}" for i in range(20))
    upstream.script(
        Reply.tool_call(R, {"key": key}, text="Checking."), Reply.text(words, delay=0.25), path="/v1/messages"
    )
    order: list[str] = []
    lock = threading.Lock()
    body = {**anthropic_request(big_output), "model": MODEL, "max_tokens": 100, "stream": True}

    def first() -> None:
        with http_client(proxy, timeout=httpx.Timeout(120.0)) as c:
            with c.stream("POST", upstream.url + "/v1/messages", json=body) as r:
                for ev in iter_sse(r):
                    if ev.type == "content_block_delta" and (ev.json["delta"].get("text") or "").strip() == "w0":
                        with lock:
                            order.append("follow-up started")
                    if ev.type == "message_stop":
                        with lock:
                            order.append("follow-up ended")

    t = threading.Thread(target=first)
    t.start()
    upstream.wait_for_requests(2, timeout=120)  # the follow-up request reached the upstream
    with http_client(proxy) as c:
        r = c.post(
            upstream.url + "/v1/chat/completions",
            json={"model": "gpt-4o", "messages": [{"role": "user", "content": "ping"}]},
        )
    with lock:
        order.append("second flow done")
    t.join(120)
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"].startswith("upstream saw")
    assert order.index("second flow done") < order.index("follow-up ended"), order


def test_streamed_follow_up_over_http2(upstream, proxy_factory, big_output, tmp_path):
    """The follow-up's events reach an HTTP/2 client as the same response (DATA frames on its
    stream). The client is curl (nghttp2), which prefers h2; ``connection_strategy=lazy`` lets
    mitmproxy speak HTTP/2 to the client whatever the upstream (HTTP/1.1 here) speaks."""
    curl = shutil.which("curl")
    if curl is None or "HTTP2" not in subprocess.run([curl, "--version"], capture_output=True, text=True).stdout:
        pytest.skip("curl with HTTP/2 support is not installed")
    proxy = proxy_factory(ADDON_SCRIPT, options={**OPTIONS, "connection_strategy": "lazy"})
    key = markers.offload_key(big_output)
    upstream.script(Reply.tool_call(R, {"key": key}, text="Checking."), Reply.text("Done over h2."))
    (tmp_path / "body.json").write_text(
        json.dumps({**anthropic_request(big_output), "model": MODEL, "max_tokens": 100, "stream": True})
    )
    out = tmp_path / "out.sse"
    run = subprocess.run(
        [curl, "-sS", "-N", "--http2", "-x", proxy.url, "--cacert", str(proxy.ca_path), "-H", "content-type: application/json",
         "--data-binary", f"@{tmp_path / 'body.json'}", "-o", str(out), "-w", "%{http_version}", upstream.url + "/v1/messages"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "2"
    events = [json.loads(line[6:]) for line in out.read_text().splitlines() if line.startswith("data: ")]
    text = "".join(e["delta"]["text"] for e in events if e["type"] == "content_block_delta")
    assert text == "Checking.Done over h2." and events[-1]["type"] == "message_stop"
    assert R not in out.read_text()
