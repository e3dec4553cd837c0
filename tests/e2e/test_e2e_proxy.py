"""End to end through a real ``mitmdump -s addons/headroom.py``: real SDK clients, a real local
HTTPS upstream speaking the providers' wire formats, the proxy's CA trusted."""

from __future__ import annotations

import hashlib
import json

import pytest

from headroom_core.ccr import retrieve
from headroom_core.ccr.loop import notice_rounds
from headroom_core.compress import markers
from tests.support.clients import anthropic_client, http_client, openai_client
from tests.support.dialect_e2e import ledger_rows
from tests.support.upstream import Reply
from tests.unit.test_request_plan import anthropic_request, github_scenario

MODEL = "claude-sonnet-4-5"


@pytest.fixture(scope="module")
def proxy(module_proxy_factory):
    return module_proxy_factory(
        __import__("tests.support.proxy", fromlist=["ADDON_SCRIPT"]).ADDON_SCRIPT,
        # compression gets all the time it needs: these tests prove behaviour, not speed, on a
        # machine that may be shared with other suites
        options={"headroom_max_body_bytes": 4_000_000, "headroom_compress_timeout_seconds": 300},
    )


@pytest.fixture(scope="module")
def big_output() -> str:
    return github_scenario("paginate-issues.json")


def tool_result_of(rec) -> str:
    return rec.json["messages"][2]["content"][0]["content"]


def test_anthropic_sdk_request_is_compressed_reversibly(upstream, proxy, big_output):
    client = anthropic_client(upstream, proxy)
    body = anthropic_request(big_output)
    msg = client.messages.create(
        model=MODEL, max_tokens=100, system=body["system"], tools=body["tools"], messages=body["messages"]
    )
    assert msg.content[0].text.startswith("upstream saw 3 messages")
    rec = upstream.requests[0]
    sent = tool_result_of(rec)
    key = markers.offload_key(big_output)
    assert len(sent) < len(big_output) / 2
    assert markers.find_marker_keys(sent) and set(markers.find_marker_keys(sent)) == {key}
    assert rec.json["tools"][-1]["name"] == retrieve.TOOL_NAME
    assert [m["role"] for m in rec.json["messages"]] == ["user", "assistant", "user"]
    assert "x-headroom" not in " ".join(rec.headers)


def test_retrieve_answered_by_proxy_non_streaming(upstream, proxy, big_output):
    key = markers.offload_key(big_output)
    upstream.script(
        Reply.tool_call(retrieve.TOOL_NAME, {"key": key}, text="Let me see everything."),
        Reply.text("All issues checked."),
    )
    client = anthropic_client(upstream, proxy)
    body = anthropic_request(big_output)
    msg = client.messages.create(model=MODEL, max_tokens=100, tools=body["tools"], messages=body["messages"])
    assert [b.type for b in msg.content] == ["text", "text"]
    assert [b.text for b in msg.content] == ["Let me see everything.", "All issues checked."]
    assert msg.stop_reason == "end_turn"
    first, follow = upstream.requests
    last = follow.json["messages"][-1]
    assert last["role"] == "user" and last["content"][0]["type"] == "tool_result"
    assert last["content"][0]["content"] == big_output  # the byte-exact original
    assert follow.json["messages"][-2]["content"][-1]["name"] == retrieve.TOOL_NAME
    assert follow.header("authorization") is None or follow.header("x-api-key") == "test-key"


def test_retrieve_answered_by_proxy_streaming(upstream, proxy, big_output):
    key = markers.offload_key(big_output)
    upstream.script(
        Reply.tool_call(retrieve.TOOL_NAME, {"key": key}, text="Checking."), Reply.text("Done: thirteen issues.")
    )
    client = anthropic_client(upstream, proxy)
    body = anthropic_request(big_output)
    with client.messages.stream(model=MODEL, max_tokens=100, tools=body["tools"], messages=body["messages"]) as stream:
        events = [e.type for e in stream]
        final = stream.get_final_message()
    assert [b.type for b in final.content] == ["text", "text"]
    assert "".join(b.text for b in final.content) == "Checking.Done: thirteen issues."
    assert events.count("message_start") == 1 and events[-1] == "message_stop"
    assert len(upstream.requests) == 2
    assert upstream.requests[1].json["messages"][-1]["content"][0]["content"] == big_output
    assert upstream.requests[1].is_stream


def test_unknown_key_gets_a_tool_result_that_says_so(upstream, proxy, big_output):
    upstream.script(Reply.tool_call(retrieve.TOOL_NAME, {"key": "0" * 24}), Reply.text("ok"))
    client = anthropic_client(upstream, proxy)
    body = anthropic_request(big_output)
    client.messages.create(model=MODEL, max_tokens=100, tools=body["tools"], messages=body["messages"])
    answer = upstream.requests[1].json["messages"][-1]["content"][0]["content"]
    assert "no original is stored under key 000000000000000000000000" in answer


@pytest.mark.parametrize("stream", [False, True])
def test_openai_chat_retrieve_loop(upstream, proxy, big_output, stream):
    key = markers.offload_key(big_output)
    upstream.script(Reply.tool_call(retrieve.TOOL_NAME, {"key": key}), Reply.text("chat answer"))
    client = openai_client(upstream, proxy)
    messages = [
        {"role": "user", "content": "which issues are open?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "gh", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": big_output},
    ]
    if stream:
        chunks = list(client.chat.completions.create(model="gpt-4o", messages=messages, stream=True))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert not any(c.choices and c.choices[0].delta.tool_calls for c in chunks)
    else:
        r = client.chat.completions.create(model="gpt-4o", messages=messages)
        text = r.choices[0].message.content
        assert not r.choices[0].message.tool_calls
    assert text == "chat answer"
    first, follow = upstream.requests
    assert len(first.json["messages"][2]["content"]) < len(big_output)
    assert follow.json["messages"][-1] == {
        "role": "tool",
        "tool_call_id": follow.json["messages"][-2]["tool_calls"][0]["id"],
        "content": big_output,
    }


@pytest.mark.parametrize("stream", [False, True])
def test_openai_responses_retrieve_loop(upstream, proxy, big_output, stream):
    key = markers.offload_key(big_output)
    upstream.script(Reply.tool_call(retrieve.TOOL_NAME, {"key": key}), Reply.text("responses answer"))
    client = openai_client(upstream, proxy)
    items = [
        {"role": "user", "content": "which issues are open?"},
        {"type": "function_call", "call_id": "c1", "name": "gh", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": big_output},
    ]
    if stream:
        events = list(client.responses.create(model="gpt-5", input=items, stream=True))
        done = [e for e in events if e.type == "response.completed"]
        text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        assert len(done) == 1
        assert not any(getattr(getattr(e, "item", None), "name", None) == retrieve.TOOL_NAME for e in events)
    else:
        r = client.responses.create(model="gpt-5", input=items)
        text = r.output_text
        assert all(getattr(o, "name", None) != retrieve.TOOL_NAME for o in r.output)
    assert text == "responses answer"
    follow = upstream.requests[1]
    assert follow.json["input"][-1] == {
        "type": "function_call_output",
        "call_id": follow.json["input"][-2]["call_id"],
        "output": big_output,
    }


def test_bypass_is_byte_identical_and_headers_are_not_forwarded(upstream, proxy, big_output):
    raw = json.dumps(anthropic_request(big_output), indent=3).encode()
    with http_client(proxy) as c:
        r = c.post(
            upstream.url + "/v1/messages",
            content=raw,
            headers={"content-type": "application/json", "x-headroom-bypass": "true", "x-headroom-session": "s1"},
        )
    assert r.status_code == 200
    rec = upstream.requests[0]
    assert rec.sha256 == hashlib.sha256(raw).hexdigest()
    assert not any(k.startswith("x-headroom") for k in rec.headers)


@pytest.mark.parametrize(
    "path,body",
    [
        ("/v1/messages", b"{this is not json"),
        ("/v1/files", json.dumps({"messages": [{"role": "user", "content": "x" * 5000}]}).encode()),
        ("/v1/messages/count_tokens", b'{"model":"m","messages":[]}'),
    ],
)
def test_untouched_requests_arrive_byte_identical(upstream, proxy, path, body):
    with http_client(proxy) as c:
        c.post(upstream.url + path, content=body, headers={"content-type": "application/json"})
    assert upstream.requests[0].sha256 == hashlib.sha256(body).hexdigest()


def test_oversized_body_gets_413_and_no_upstream_contact(upstream, proxy):
    body = json.dumps(
        {"model": MODEL, "max_tokens": 1, "messages": [{"role": "user", "content": "x" * 4_100_000}]}
    ).encode()
    with http_client(proxy) as c:
        r = c.post(upstream.url + "/v1/messages", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert r.json()["error"]["type"] == "request_too_large"
    assert upstream.requests == []


def test_corpus_replay_through_mitmdump(upstream, proxy):
    """Every real Claude Code request, in order: valid JSON upstream with the same roles, message
    count and tool ids; the recorded SSE stream reaches the client byte for byte."""
    from tests.conftest import flow_files, load_flow

    with http_client(proxy, timeout=60) as c:
        for f in flow_files():
            flow = load_flow(f)
            body = flow["request"]["body"]
            resp = flow["response"]
            raw_resp = resp["body"] if isinstance(resp["body"], str) else json.dumps(resp["body"])
            ctype = "text/event-stream" if isinstance(resp["body"], str) else "application/json"
            upstream.raw(200, raw_resp.encode(), {"content-type": ctype})
            path = (
                "/v1/messages/count_tokens"
                if set(body) <= {"model", "messages", "tools", "system"} and "max_tokens" not in body
                else "/v1/messages"
            )
            r = c.post(
                upstream.url + path,
                content=json.dumps(body).encode(),
                headers={
                    "content-type": "application/json",
                    "user-agent": flow["request"]["headers"].get("user-agent", ""),
                },
            )
            assert r.status_code == 200, f.name
            assert r.content == raw_resp.encode(), f.name
            got = upstream.requests[-1].json
            assert [m["role"] for m in got["messages"]] == [m["role"] for m in body["messages"]], f.name

            def ids(b):
                return [
                    (x.get("type"), x.get("id"), x.get("tool_use_id"))
                    for m in b["messages"]
                    if isinstance(m["content"], list)
                    for x in m["content"]
                    if x.get("type")
                    != "text"  # text blocks: a string may be replayed as one block, plus the proxy's context block
                ]

            assert ids(got) == ids(body), f.name
            if "tools" in body:  # the client's tools (in the project's order), then the proxy's
                assert sorted(t["name"] for t in got["tools"][: len(body["tools"])]) == sorted(
                    t["name"] for t in body["tools"]
                )


def _outcomes(proxy, n: int):
    """The ledger rows of ``proxy``'s database once there are at least ``n`` (within 10 s)."""
    return ledger_rows(proxy, n, timeout=10.0, poll=0.1)


def test_ledger_records_outcome_and_provider_usage(upstream, proxy_factory, big_output):
    import subprocess
    import sys
    from pathlib import Path

    from tests.support.proxy import ADDON_SCRIPT

    px = proxy_factory(ADDON_SCRIPT, options={"headroom_compress_timeout_seconds": 300})
    upstream.script(Reply.text("ok", input_tokens=1234, output_tokens=56, cache_read=1000, cache_creation=200))
    client = anthropic_client(upstream, px)
    body = anthropic_request(big_output)
    client.messages.create(model=MODEL, max_tokens=100, tools=body["tools"], messages=body["messages"])
    (row,) = _outcomes(px, 1)
    assert (row.dialect, row.client, row.action, row.status_code) == (
        "anthropic-messages",
        "anthropic-python",
        "compressed",
        200,
    )
    assert row.tokens_before > 2 * row.tokens_after > 0 and row.blocks_compressed == 1
    assert (
        row.usage_input_tokens,
        row.usage_output_tokens,
        row.usage_cache_read_tokens,
        row.usage_cache_write_tokens,
    ) == (1234, 56, 1000, 200)
    assert row.body_bytes_after < row.body_bytes_before
    out = subprocess.run(
        [str(Path(sys.executable).parent / "headroom"), "stats"],
        env={"HEADROOM_HOME": str(px.home), "HOME": str(Path.home()), "PATH": "/usr/bin:/bin", "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    shown = out.stdout.replace(",", "")
    assert str(row.tokens_before) in shown and "1234" in shown


def test_secrets_are_never_stored_or_logged(upstream, proxy_factory, big_output):
    """API keys in headers and the query reach the upstream, and appear nowhere in the proxy's
    database or its own log lines (mitmproxy's per-flow dump is off: flow_detail=0)."""
    from tests.support.proxy import ADDON_SCRIPT

    secret_key, secret_bearer, secret_query = (
        "sk-ant-api03-SECRETKEY-0001",
        "oauth-SECRETBEARER-0002",
        "AIzaSECRETQUERY0003",
    )
    px = proxy_factory(ADDON_SCRIPT, options={"flow_detail": 0})
    key = markers.offload_key(big_output)
    upstream.script(Reply.tool_call(retrieve.TOOL_NAME, {"key": key}), Reply.text("done"))
    body = json.dumps(anthropic_request(big_output)).encode()
    with http_client(px) as c:
        r = c.post(
            upstream.url + f"/v1/messages?key={secret_query}",
            content=body,
            headers={
                "content-type": "application/json",
                "x-api-key": secret_key,
                "authorization": f"Bearer {secret_bearer}",
            },
        )
    assert r.status_code == 200
    assert len(upstream.requests) == 2, (r.text, px.log_text()[-3000:])
    assert upstream.requests[1].header("x-api-key") == secret_key  # the follow-up is authenticated too
    _outcomes(px, 1)
    files = {p: p.read_bytes() for p in px.home.rglob("*") if p.is_file()}
    stored = b"".join(files.values())
    logged = px.log_text().encode()
    for secret in (secret_key, secret_bearer, secret_query):
        assert secret.encode() not in stored and secret.encode() not in logged, secret


@pytest.mark.parametrize("stream", [False, True])
def test_proxy_calls_mixed_with_client_calls_never_reach_the_client(upstream, proxy, big_output, stream):
    """The model calls headroom_retrieve and a client tool in one turn: the client gets its own
    call (renumbered), never the proxy's; a later turn continues normally."""
    from tests.support.upstream import ToolCall

    key = markers.offload_key(big_output)
    upstream.script(
        Reply.tool_calls_reply(
            [ToolCall(retrieve.TOOL_NAME, {"key": key}), ToolCall("github_api", {"path": "/x"})], text="Two things."
        )
    )
    client = anthropic_client(upstream, proxy)
    body = anthropic_request(big_output)
    if stream:
        with client.messages.stream(model=MODEL, max_tokens=100, tools=body["tools"], messages=body["messages"]) as s:
            msg = s.get_final_message()
    else:
        msg = client.messages.create(model=MODEL, max_tokens=100, tools=body["tools"], messages=body["messages"])
    assert [(b.type, getattr(b, "name", None)) for b in msg.content] == [("text", None), ("tool_use", "github_api")]
    assert msg.content[1].input == {"path": "/x"} and msg.stop_reason == "tool_use"
    assert len(upstream.requests) == 1  # nothing the proxy could continue with alone


def test_rounds_exhausted_ends_the_turn_without_the_proxy_call(upstream, proxy_factory, big_output):
    from tests.support.proxy import ADDON_SCRIPT

    px = proxy_factory(
        ADDON_SCRIPT, options={"headroom_retrieve_max_rounds": 1, "headroom_compress_timeout_seconds": 300}
    )  # the plan must finish to offer the tool
    key = markers.offload_key(big_output)
    upstream.script(
        Reply.tool_call(retrieve.TOOL_NAME, {"key": key}, text="a"),
        Reply.tool_call(retrieve.TOOL_NAME, {"key": key}, text="b"),
    )
    client = anthropic_client(upstream, px)
    body = anthropic_request(big_output)
    with client.messages.stream(model=MODEL, max_tokens=100, tools=body["tools"], messages=body["messages"]) as s:
        msg = s.get_final_message()
    # the model's text so far, then a plain statement that retrieval stopped (issue 13, case 3)
    assert [b.type for b in msg.content] == ["text", "text", "text"] and [b.text for b in msg.content[:2]] == ["a", "b"]
    assert msg.content[2].text == notice_rounds(1)
    assert msg.stop_reason == "end_turn"
    assert len(upstream.requests) == 2
