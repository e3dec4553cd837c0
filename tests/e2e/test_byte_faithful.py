"""Byte-faithful passthrough through a real ``mitmdump -s addons/headroom.py``: requests the proxy
leaves alone reach the upstream with the SHA-256 the client sent (bypass, non-LLM paths, small
LLM calls of every dialect, count_tokens, bodies that are not JSON), streamed or not; the
response bytes (a real recorded SSE stream, cut at awkward places) reach the client unchanged;
and a request the proxy does change keeps every byte outside the spans it edited."""

from __future__ import annotations

import hashlib
import json

import pytest

from headroom_core.wire import jsonedit
from tests.conftest import flow_files, load_flow
from tests.support.clients import http_client
from tests.support.proxy import ADDON_SCRIPT
from tests.unit.test_request_plan import anthropic_request, github_scenario


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


@pytest.fixture(scope="module")
def proxy(module_proxy_factory):
    return module_proxy_factory(ADDON_SCRIPT)


@pytest.fixture(scope="module")
def recorded_sse() -> bytes:
    """A real Anthropic SSE stream (session-a-02's response), as the provider sent it."""
    return load_flow(flow_files()[1])["response"]["body"].encode()


def odd_chunks(data: bytes, n: int = 9) -> list[bytes]:
    """``data`` cut into ``n`` pieces at positions that split events and UTF-8 sequences."""
    step = max(1, len(data) // n + 3)
    return [data[i : i + step] for i in range(0, len(data), step)]


def send(
    proxy, upstream, path: str, body: bytes, headers: dict | None = None, method: str = "POST"
) -> tuple[int, bytes]:
    """Send ``body`` through the proxy; return the status and the exact response bytes."""
    with http_client(proxy, timeout=60) as c:
        with c.stream(
            method,
            upstream.url + path,
            content=body if method == "POST" else None,
            headers={"content-type": "application/json", **(headers or {})},
        ) as r:
            data = b"".join(r.iter_raw())
            return r.status_code, data


def anthropic_small(stream: bool) -> bytes:
    # unusual but valid formatting: the proxy must not re-serialise it
    return json.dumps(
        {
            "model": "claude-sonnet-4",
            "max_tokens": 64,
            "stream": stream,
            "messages": [{"role": "user", "content": "Grüße — say hi"}],
        },
        indent=1,
    ).encode()


SMALL = {
    "anthropic": ("/v1/messages", anthropic_small),
    "openai-chat": (
        "/v1/chat/completions",
        lambda s: json.dumps(
            {"model": "gpt-4o", "stream": s, "messages": [{"role": "user", "content": "hi \u00e9"}]}, ensure_ascii=True
        ).encode(),
    ),
    "openai-responses": (
        "/v1/responses",
        lambda s: json.dumps({"model": "gpt-5", "stream": s, "input": "hi"}, separators=(", ", " : ")).encode(),
    ),
}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("dialect", sorted(SMALL))
def test_small_llm_request_reaches_upstream_byte_identical(upstream, proxy, dialect, stream):
    path, make = SMALL[dialect]
    body = make(stream)
    status, _ = send(proxy, upstream, path, body)
    assert status == 200
    (rec,) = upstream.requests
    assert rec.sha256 == sha(body)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_bypass_reaches_upstream_byte_identical(upstream, proxy, stream):
    """A request the proxy would compress (a large JSON tool output) goes as sent when bypassed."""
    body = anthropic_request(github_scenario("paginate-issues.json"))
    body["stream"] = stream
    raw = json.dumps(body, indent=2).encode()
    status, _ = send(proxy, upstream, "/v1/messages", raw, {"x-headroom-bypass": "true"})
    assert status == 200
    assert upstream.requests[0].sha256 == sha(raw)
    assert not any(k.startswith("x-headroom") for k in upstream.requests[0].headers)


@pytest.mark.parametrize(
    "method,path,body",
    [
        ("POST", "/v1/files", json.dumps({"messages": [{"role": "user", "content": "x" * 5000}]}).encode()),
        ("POST", "/v1/messages", b"{this is not json"),
        ("POST", "/v1/messages", b'["a JSON array, not an object"]'),
        ("GET", "/v1/models", b""),
    ],
    ids=["non-llm-path", "not-json", "not-an-object", "get"],
)
def test_non_llm_requests_reach_upstream_byte_identical(upstream, proxy, method, path, body):
    send(proxy, upstream, path, body, method=method)
    (rec,) = upstream.requests
    assert (rec.method, rec.sha256) == (method, sha(body))


def test_real_count_tokens_call_is_byte_identical(upstream, proxy):
    flow = next(load_flow(f) for f in flow_files() if "max_tokens" not in load_flow(f)["request"]["body"])
    raw = json.dumps(flow["request"]["body"]).encode()
    status, data = send(proxy, upstream, "/v1/messages/count_tokens", raw)
    assert status == 200 and "input_tokens" in json.loads(data)
    assert upstream.requests[0].sha256 == sha(raw)


@pytest.mark.parametrize("bypass", [False, True], ids=["planned", "bypass"])
def test_recorded_sse_reaches_client_byte_identical(upstream, proxy, recorded_sse, bypass):
    """The real stream, cut into pieces that split events, arrives whole and unchanged."""
    upstream.raw(200, headers={"content-type": "text/event-stream"}, chunks=odd_chunks(recorded_sse))
    headers = {"x-headroom-bypass": "true"} if bypass else {}
    status, data = send(proxy, upstream, "/v1/messages", anthropic_small(True), headers)
    assert status == 200
    assert sha(data) == sha(recorded_sse)


def test_json_response_reaches_client_byte_identical(upstream, proxy):
    reply = json.dumps(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "content": [{"type": "text", "text": "hé"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 3, "cache_read_input_tokens": 0, "output_tokens": 1},
        },
        indent=2,
    ).encode()
    upstream.raw(200, reply, {"content-type": "application/json"})
    status, data = send(proxy, upstream, "/v1/messages", anthropic_small(False))
    assert status == 200 and data == reply


def test_rewritten_request_keeps_every_byte_outside_its_edits(upstream, proxy):
    """Only the compressed tool output and the appended proxy tool differ: the client's own
    formatting (indentation, escapes, key order) survives everywhere else."""
    body = anthropic_request(github_scenario("paginate-issues.json"))
    body = {
        "model": body["model"],
        "messages": body["messages"],
        "system": body["system"],
        "max_tokens": 100,
        "tools": body["tools"],
    }
    body["messages"][0]["content"] = "Which issues are still open? \u00e9t\u00e9 \U0001f600"
    raw = json.dumps(body, indent=3, ensure_ascii=True).encode()
    send(proxy, upstream, "/v1/messages", raw)
    got = upstream.requests[0].body.decode()
    sent = raw.decode()
    edited = [("messages", 2, "content", 0, "content"), ("tools",)]

    def outside(text: str) -> list[str]:
        cuts = sorted(jsonedit.span(text, p) for p in edited)
        out, pos = [], 0
        for a, b in cuts:
            out.append(text[pos:a])
            pos = b
        return out + [text[pos:]]

    assert got != sent
    assert outside(got) == outside(sent)
    # the prefix up to the first edit is the client's exact bytes
    first = jsonedit.span(sent, edited[0])[0]
    assert got[:first] == sent[:first]
    # the client's tools are there, byte for byte, before the proxy's own
    a, b = jsonedit.span(sent, ("tools",))
    assert got[jsonedit.span(got, ("tools",))[0] :].startswith(sent[a : b - 1].rstrip())
