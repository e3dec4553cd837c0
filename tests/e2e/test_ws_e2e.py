"""Responses over WebSocket, end to end: the real ``websockets`` client through a real
``mitmdump -s addons/headroom.py`` to the local upstream speaking the Responses event protocol
(``response.create`` frames in, event frames out), as Codex uses it."""

from __future__ import annotations

import hashlib
import json
import time

import pytest
from sqlalchemy import select
from websockets.exceptions import ConnectionClosed

from headroom_core import ws_policy
from headroom_core.ccr import retrieve
from headroom_core.compress import markers
from headroom_core.db.engine import open_database
from headroom_core.db.models import RequestOutcome
from headroom_core.too_large import too_large_message
from headroom_core.wire import responses_ws as rws
from tests.support.clients import http_client, ws_connect
from tests.support.proxy import ADDON_SCRIPT
from tests.support.upstream import Reply
from tests.unit.test_request_plan import github_scenario

MODEL = "gpt-5-codex"
FRAME_LIMIT = 1_500_000


@pytest.fixture(scope="module")
def proxy(module_proxy_factory):
    return module_proxy_factory(
        ADDON_SCRIPT, options={"headroom_ws_max_frame_bytes": FRAME_LIMIT, "headroom_compress_timeout_seconds": 300}
    )


@pytest.fixture(scope="module")
def slow_proxy(module_proxy_factory):
    """A proxy whose compression always times out (1 µs), with a 100 kB fail-open limit."""
    return module_proxy_factory(
        ADDON_SCRIPT, options={"headroom_compress_timeout_seconds": "0.000001", "headroom_fail_open_max_bytes": 100_000}
    )


@pytest.fixture(scope="module")
def big_output() -> str:
    return github_scenario("paginate-issues.json")


def items(tool_text: str, question: str = "which issues are open?") -> list[dict]:
    return [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": question}]},
        {"type": "function_call", "call_id": "call_1", "name": "shell", "arguments": '{"cmd":"gh issue list"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": tool_text},
    ]


def create_frame(input_items: list[dict], nested: bool = False, **extra) -> str:
    """A ``response.create`` frame as Codex serialises it (``type`` first, body at top level)."""
    body = {
        "model": MODEL,
        "instructions": "You are Codex.",
        "input": input_items,
        "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object"}}],
        "stream": True,
        **extra,
    }
    return json.dumps({"type": "response.create", "response": body} if nested else {"type": "response.create", **body})


def read_turn(ws) -> list[str]:
    """Every event frame of one response, up to its terminal event, as received (text)."""
    frames = []
    while True:
        raw = ws.recv(timeout=30)
        frames.append(raw)
        if json.loads(raw).get("type") in rws.TERMINAL_EVENTS:
            return frames


def closed_by_proxy(ws, message: str | None = None) -> ConnectionClosed:
    """The close of a refused frame, after the one in-band ``error`` event that precedes it
    (ws_policy: ``context_length_exceeded``, with ``message``: by default the close reason)."""
    got = []
    with pytest.raises(ConnectionClosed) as info:
        while True:
            got.append(ws.recv(timeout=30))
    closed = info.value
    assert closed.rcvd is not None
    assert [json.loads(f) for f in got] == [
        json.loads(ws_policy.error_event(closed.rcvd.reason if message is None else message))
    ]
    assert json.loads(got[0])["error"]["code"] == "context_length_exceeded"
    return closed


def wait_until(predicate, timeout: float = 15.0):
    """Poll ``predicate`` until it returns something truthy (not a timing assertion: a bound)."""
    deadline = time.monotonic() + timeout
    while True:
        got = predicate()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


def ws_frames(upstream) -> list:
    return [r for r in upstream.requests if r.method == "WS"]


@pytest.mark.parametrize("nested", [False, True], ids=["top-level", "nested"])
def test_large_response_create_arrives_compressed(upstream, proxy, big_output, nested):
    frame = create_frame(items(big_output), nested=nested)
    with ws_connect(upstream, proxy) as ws:
        ws.send(frame)
        events = [json.loads(f) for f in read_turn(ws)]
    assert events[-1]["type"] == "response.completed"
    (rec,) = ws_frames(upstream)
    sent = rec.json["response"] if nested else rec.json
    orig = json.loads(frame)["response"] if nested else json.loads(frame)
    out = sent["input"][2]["output"]
    assert len(out) < len(big_output) / 2
    assert set(markers.find_marker_keys(out)) == {markers.offload_key(big_output)}
    assert sent["input"][:2] == orig["input"][:2]
    assert [i.get("type") for i in sent["input"]] == ["message", "function_call", "function_call_output"]
    assert sent["tools"][0] == orig["tools"][0] and sent["tools"][-1]["name"] == retrieve.TOOL_NAME
    assert rec.json["type"] == "response.create"
    # byte-faithful splice: everything before the compressed output is the client's bytes
    head = frame[: frame.index(json.dumps(big_output)[:40])]
    assert rec.body.startswith(head.encode())


def test_server_events_stream_through_in_order_untouched(upstream, proxy):
    text = "one two three four five six seven eight"
    upstream.script(Reply.text(text, input_tokens=1234, output_tokens=56, cache_read=1000))
    odd = '{"type" :  "response.completed","response":{"usage":{"input_tokens":7,"output_tokens":1,"input_tokens_details":{"cached_tokens":0}}},"note":"caf\\u00e9 ü"}  '
    upstream.raw(200, odd.encode())
    with ws_connect(upstream, proxy) as ws:
        ws.send(create_frame(items("short output", "a fresh session")))
        frames = read_turn(ws)
        ws.send(create_frame(items("short output", "a fresh session"), previous_response_id="resp_1"))
        second = read_turn(ws)
    events = [json.loads(f) for f in frames]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[0]["type"] == "response.created" and events[-1]["type"] == "response.completed"
    assert "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta") == text
    assert all(f == json.dumps(json.loads(f)) for f in frames)  # the upstream's own serialisation
    assert second == [odd]  # byte for byte, odd spacing and escapes included
    # small frames (nothing to compress) arrive byte-identical
    assert [r.sha256 for r in ws_frames(upstream)][0] == hashlib.sha256(
        create_frame(items("short output", "a fresh session")).encode()
    ).hexdigest()


def test_usage_of_websocket_turns_reaches_the_ledger(upstream, proxy):
    upstream.script(Reply.text("ledger check", input_tokens=4321, output_tokens=65, cache_read=4000))
    with ws_connect(upstream, proxy, additional_headers={"user-agent": "codex_cli_rs/0.50.0"}) as ws:
        ws.send(create_frame(items("ledger output"), model="gpt-ledger"))
        read_turn(ws)
    sessions = open_database(f"sqlite:///{proxy.home / 'headroom.db'}")

    def row():
        with sessions() as s:
            return s.scalars(select(RequestOutcome).where(RequestOutcome.model == "gpt-ledger")).first()

    r = wait_until(row)
    assert r is not None, "no ledger row for the WebSocket turn"
    assert (r.dialect, r.status_code, r.usage_input_tokens, r.usage_output_tokens, r.usage_cache_read_tokens) == (
        "openai-responses",
        200,
        4321,
        65,
        4000,
    )


def test_oversized_frame_closes_both_sides_with_1009(upstream, proxy):
    frame = create_frame(items("x" * (FRAME_LIMIT + 10)))
    with ws_connect(upstream, proxy) as ws:
        ws.send(frame)
        # the event Codex shows says what an HTTP 413 says (one function); the close reason is short
        closed = closed_by_proxy(ws, too_large_message(len(frame.encode()), FRAME_LIMIT, "ws_max_frame_bytes"))
    want = rws.too_large_reason(len(frame.encode()), FRAME_LIMIT)
    assert closed.rcvd is not None and (closed.rcvd.code, closed.rcvd.reason) == (1009, want)
    assert "Compact your context" in want and len(want.encode()) <= 123
    assert wait_until(lambda: upstream.ws_closes) == [(1009, want)]  # the upstream is closed too
    assert ws_frames(upstream) == []  # the frame never went upstream


def test_frames_that_are_not_response_create_pass_unchanged(upstream, proxy, big_output):
    others = [
        "this is {not json",
        json.dumps({"type": "response.cancel", "input": big_output}),
        json.dumps(["response.create", big_output]),
    ]
    with ws_connect(upstream, proxy) as ws:
        for f in others:
            ws.send(f)
            read_turn(ws)
        ws.send(create_frame(items(big_output)))  # the connection is still good for real frames
        read_turn(ws)
    got = ws_frames(upstream)
    assert [r.body for r in got[:3]] == [f.encode() for f in others]
    assert len(got[3].body) < len(big_output)


def test_compression_timeout_small_frames_go_on_unchanged(upstream, slow_proxy, big_output):
    small = create_frame(items(big_output[:60_000]))
    assert len(small) < 100_000
    with ws_connect(upstream, slow_proxy) as ws:
        ws.send(small)
        read_turn(ws)
    sent = ws_frames(upstream)[0].json
    # nothing new is compressed: the tool output goes as it came; the session's tools are what
    # every later frame of the session will carry (decided at its first request, even now)
    assert sent["input"] == json.loads(small)["input"]
    assert [t["name"] for t in sent["tools"]] == ["shell", "headroom_retrieve"]


def test_compression_timeout_large_frames_are_refused_with_1009(upstream, slow_proxy, big_output):
    large = create_frame(items(big_output))
    assert len(large) > 100_000
    with ws_connect(upstream, slow_proxy) as ws:
        ws.send(large)
        closed = closed_by_proxy(ws)
    want = rws.not_compressed_reason(len(large.encode()), 100_000)
    assert closed.rcvd is not None and (closed.rcvd.code, closed.rcvd.reason) == (1009, want)
    assert "Compact your context" in want
    assert wait_until(lambda: upstream.ws_closes) == [(1009, want)]
    assert ws_frames(upstream) == []


def test_compression_timeout_large_http_body_gets_413(upstream, slow_proxy, big_output):
    # content no earlier test sent: no earlier decision the fallback could reuse
    fresh = big_output.replace('"scope"', '"scope (http)"', 1)
    body = json.dumps({"model": MODEL, "input": items(fresh)}).encode()
    with http_client(slow_proxy) as c:
        r = c.post(upstream.url + "/v1/responses", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 413
    err = r.json()["error"]
    assert (
        err["code"] == "request_too_large"
        and "/compact" in err["message"]
        and "could not be compressed" in err["message"]
    )
    assert upstream.requests == []


def test_compression_timeout_by_default_large_bodies_go_on(upstream, proxy_factory, big_output):
    """Without ``fail_open_max_bytes`` (the default) a request that could not be compressed in
    time goes upstream whatever its size (fail open; only ``max_body_bytes`` fails closed)."""
    px = proxy_factory(ADDON_SCRIPT, options={"headroom_compress_timeout_seconds": "0.000001"})
    fresh = big_output.replace('"scope"', '"scope (default limits)"', 1)
    body = json.dumps({"model": MODEL, "input": items(fresh)}).encode()
    assert len(body) > 100_000
    with http_client(px) as c:
        r = c.post(upstream.url + "/v1/responses", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 200
    (got,) = upstream.requests_to("/v1/responses")
    assert got.json["input"] == json.loads(body)["input"]  # nothing new compressed, nothing lost


def test_close_reasons_fit_a_close_frame():
    """RFC 6455 §5.5: 125-byte control payloads, 2 of them the code; cut on whole characters."""
    for reason in (rws.too_large_reason(10**15, 10**15), rws.not_compressed_reason(10**15, 10**15)):
        assert len(reason.encode()) <= 123 and "Compact your context" in reason
    cut = rws.close_reason("é" * 100)
    assert cut == "é" * 61 and len(cut.encode()) == 122


def test_frame_parsing_finds_the_body_and_splices_it_back():
    text = '{"type": "response.create",  "response": {"model":"m","input":[1]} , "x": "ü"}'
    f = rws.parse_create(text.encode())
    assert f is not None and f.nested and f.body == {"model": "m", "input": [1]}
    assert (
        f.with_body(b'{"input":[2]}') == '{"type": "response.create",  "response": {"input":[2]} , "x": "ü"}'.encode()
    )
    top = rws.parse_create(b'{"type":"response.create","input":"hi"}')
    assert top is not None and top.body_bytes == b'{"type":"response.create","input":"hi"}'
    for other in (b"not json", b'{"type":"response.cancel"}', b'{"type":"response.create"}', b"\xff\xfe", b"[]"):
        assert rws.parse_create(other) is None
    assert rws.looks_like_create(b'{"type" : "response.create", "input": "' + b"x" * 10**6)
    assert rws.is_responses_path("/backend-api/codex/responses?x=1") and not rws.is_responses_path("/v1/realtime")
