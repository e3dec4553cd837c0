"""An oversized body is refused from its head, never held (issue 36, "fails closed on oversized
payloads"; ``addons/headroom_body_limit.py``), through a real ``mitmdump`` on both ways in: a
base-URL port (mitmproxy reverse mode, plain HTTP, as ``headroom proxy`` opens them) and the
proxy port as ``HTTPS_PROXY`` (``CONNECT`` + TLS), over HTTP/1.1 and HTTP/2.

- a ``Content-Length`` over ``max_body_bytes`` gets the 413 in the dialect's error shape before
  one byte of the body is sent, and the upstream gets nothing;
- a body without a length (chunked, HTTP/2 without ``content-length``) gets it once the bytes
  read pass the limit, having read at most the limit plus the chunk that passed it;
- an SDK that writes its whole body before it reads gets the 413 (the rest of the body is read
  and dropped), and the refusal is in the ledger;
- an API call sent to the proxy port itself gets its advice (``headroom_direct``) the same way;
- a body of exactly the limit, with a length or chunked, still goes upstream;
- a WebSocket ``response.create`` over ``ws_max_frame_bytes`` (one frame, or a message of many)
  is dropped as it arrives (``addons/headroom_ws_limit.py``) and refused by its whole size as
  before: the ``error`` event, close 1009, the ledger row; nothing of it goes upstream.

Memory (resident before / peak / after a 1 GB body) is measured by ``bench/bench_transport.py
--oversized``, not asserted here.
"""

from __future__ import annotations

import json
import socket
import ssl
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import pytest
from websockets.exceptions import ConnectionClosed

from headroom_core import ws_policy
from headroom_core.too_large import too_large_message
from headroom_core.wire import responses_ws as rws
from tests.support.clients import anthropic_client, http_client, ws_connect
from tests.support.leaving_clients import H2Client, H2Response, _tunnel
from tests.support.proxy import ADDON_SCRIPT, free_port
from tests.support.upstream import Reply

LIMIT = 1_000_000
#: the chunk size of the chunked bodies sent here (bytes)
CHUNK = 64 * 1024
HUGE = 2_000_000_000


@pytest.fixture(scope="module")
def proxy(module_proxy_factory, upstream_server):
    """The Headroom proxy with 1 MB limits (HTTP bodies, WebSocket frames): its proxy port, and
    a base-URL port (``.base``) forwarding to the test upstream."""
    base = free_port()
    p = module_proxy_factory(ADDON_SCRIPT, options={"headroom_max_body_bytes": LIMIT, "headroom_ws_max_frame_bytes": LIMIT},
                             args=["--mode", "regular", "--mode", f"reverse:{upstream_server.url}@{base}"])  # fmt: skip
    p.base = base
    return p


def _open(proxy: Any, upstream: Any, way: str) -> tuple[socket.socket, str]:
    """A connection that reaches ``upstream`` through ``proxy`` the ``way`` named: ``base-url``
    (plain HTTP to its base-URL port) or ``https-proxy`` (``CONNECT``, then TLS trusting the
    proxy's CA); and the ``Host`` to send."""
    if way == "base-url":
        return socket.create_connection(("127.0.0.1", proxy.base), timeout=60), f"127.0.0.1:{proxy.base}"
    return _tunnel(proxy, upstream, "http/1.1", 60)


def _head(path: str, host: str, headers: dict[str, str]) -> bytes:
    head = {
        "host": host,
        "content-type": "application/json",
        "anthropic-version": "2023-06-01",
        "x-api-key": "test-key",
        **headers,
    }
    return f"POST {path} HTTP/1.1\r\n".encode() + "".join(f"{k}: {v}\r\n" for k, v in head.items()).encode() + b"\r\n"


def _response(sock: socket.socket, got: bytes = b"") -> tuple[int, dict[str, str], Any]:
    """The HTTP/1.1 response read from ``sock`` (``got``: its first bytes, read already):
    status, headers (lowercase names), JSON body (its ``content-length``)."""
    while b"\r\n\r\n" not in got:
        more = sock.recv(65536)
        assert more, f"the proxy closed the connection without an answer: {got!r}"
        got += more
    head, body = got.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    while len(body) < int(headers["content-length"]):
        body += sock.recv(65536)
    return int(lines[0].split()[1]), headers, json.loads(body)


def _arrived(sock: socket.socket) -> bytes:
    """What the proxy sent on ``sock`` so far, without waiting (b"" when nothing; a TLS socket
    may be readable with no data for the application: a session ticket)."""
    sock.setblocking(False)
    try:
        return sock.recv(65536)
    except (BlockingIOError, ssl.SSLWantReadError):
        return b""
    finally:
        sock.settimeout(60)


def _chunks(n: int, size: int = CHUNK) -> Iterator[bytes]:
    yield b'{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"'
    for _ in range(n):
        yield b"x" * size


def _nothing_upstream(proxy: Any, upstream: Any) -> None:
    """The upstream got no request but the small one sent now, after the refused ones."""
    upstream.script(Reply.text("ok"))
    with httpx.Client(trust_env=False, timeout=60) as c:
        r = c.post(
            f"http://127.0.0.1:{proxy.base}/v1/messages",
            json={"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "after"}]},
        )
    assert r.status_code == 200
    assert [json.loads(q.body)["messages"][0]["content"] for q in upstream.requests] == ["after"]


def _ledger(proxy: Any, expect: int, status: int = 413) -> list[tuple[int | None, str, int]]:
    """(status, action, bytes before) of the proxy's ``status`` rows, once ``expect`` are written."""
    from headroom_core.db.engine import open_database
    from headroom_core.db.models import RequestOutcome

    sessions = open_database(f"sqlite:///{proxy.home / 'headroom.db'}")
    rows: list[tuple[int | None, str, int]] = []
    for _ in range(200):  # the row is written after the answer went out
        with sessions() as s:
            rows = [
                (r.status_code, r.action, r.body_bytes_before)
                for r in s.query(RequestOutcome)
                .filter(RequestOutcome.status_code == status)
                .order_by(RequestOutcome.id)
            ]
        if len(rows) >= expect:
            break
        time.sleep(0.05)
    return rows


WAYS = ["base-url", "https-proxy"]


@pytest.mark.parametrize("way", WAYS)
def test_content_length_over_the_limit_gets_413_before_the_body(upstream, proxy, way):
    sock, host = _open(proxy, upstream, way)
    with sock:
        sock.sendall(_head("/v1/messages", host, {"content-length": str(HUGE)}))
        status, headers, body = _response(sock)  # not one byte of the body sent
    assert status == 413 and headers["content-type"] == "application/json" and headers["connection"] == "close"
    assert set(body) == {"type", "error"} and body["type"] == "error" and body["error"]["type"] == "request_too_large"
    assert (
        f"the request body is {HUGE} bytes (its Content-Length), over the limit of {LIMIT} bytes (headroom max_body_bytes)"
        in body["error"]["message"]
    )
    _nothing_upstream(proxy, upstream)


def test_a_call_to_the_proxy_port_itself_gets_its_advice_before_the_body(upstream, proxy):
    """``headroom_direct``'s 400 (use a base URL) is sent at once too, the body never read whole."""
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=60) as sock:
        sock.sendall(_head("/v1/messages", f"127.0.0.1:{proxy.port}", {"content-length": str(HUGE)}))
        status, headers, body = _response(sock)
    assert status == 400 and headers["connection"] == "close" and body["type"] == "error"
    assert f"http://127.0.0.1:{proxy.base}" in body["error"]["message"]
    _nothing_upstream(proxy, upstream)


@pytest.mark.parametrize("path,message_of", [
    ("/v1/chat/completions", lambda b: b["error"]["message"] if b["error"]["code"] == "request_too_large" else None),
    ("/v1beta/models/gemini-2.5-pro:generateContent", lambda b: b["error"]["message"] if (b["error"]["code"], b["error"]["status"]) == (413, "INVALID_ARGUMENT") else None),
])  # fmt: skip
def test_other_dialects_get_their_own_shape(upstream, proxy, path, message_of):
    sock, host = _open(proxy, upstream, "https-proxy")
    with sock:
        sock.sendall(_head(path, host, {"content-length": str(LIMIT + 1)}))
        status, _, body = _response(sock)
    assert status == 413 and f"{LIMIT + 1} bytes (its Content-Length)" in message_of(body)
    _nothing_upstream(proxy, upstream)


@pytest.mark.parametrize("way", WAYS)
def test_chunked_body_is_refused_once_the_bytes_read_pass_the_limit(upstream, proxy, way):
    sock, host = _open(proxy, upstream, way)
    sent = 0
    with sock:
        sock.sendall(_head("/v1/messages", host, {"transfer-encoding": "chunked"}))
        got = b""
        for chunk in _chunks(4 * LIMIT // CHUNK):
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            sent += len(chunk)
            got = _arrived(sock)
            if got:
                break
        status, headers, body = _response(sock, got)
    assert status == 413 and headers["connection"] == "close" and body["error"]["type"] == "request_too_large"
    message = body["error"]["message"]
    read = int(message.split(" after ")[1].split(" bytes were read")[0])
    assert f"passed the limit of {LIMIT} bytes (headroom max_body_bytes)" in message
    assert LIMIT < read <= LIMIT + CHUNK  # the limit plus the chunk that passed it, nothing more
    assert sent < 4 * LIMIT  # answered while the client was still sending
    _nothing_upstream(proxy, upstream)


@pytest.mark.parametrize("way", WAYS)
def test_an_sdk_that_writes_its_whole_body_first_gets_the_413(upstream, proxy, way):
    """The anthropic SDK sends all 3 MB, then reads: the proxy reads and drops the rest after
    its answer, so the SDK sees the 413 (not a reset connection); the ledger has the row."""
    before = len(_ledger(proxy, 0))
    big = "x" * (3 * LIMIT)
    if way == "base-url":
        client = anthropic.Anthropic(
            base_url=f"http://127.0.0.1:{proxy.base}",
            api_key="test-key",
            max_retries=0,
            http_client=httpx.Client(trust_env=False, timeout=60),
        )
    else:
        client = anthropic_client(upstream, proxy)
    with pytest.raises(anthropic.APIStatusError) as e:
        client.messages.create(model="claude-sonnet-4-5", max_tokens=5, messages=[{"role": "user", "content": big}])
    assert e.value.status_code == 413 and e.value.body["error"]["type"] == "request_too_large"  # type: ignore[index]
    sent = len(
        json.dumps({"max_tokens": 5, "messages": [{"role": "user", "content": big}], "model": "claude-sonnet-4-5"})
    )
    rows = _ledger(proxy, before + 1)[before:]
    assert len(rows) == 1 and rows[0][0] == 413 and rows[0][1] == "rejected" and abs(rows[0][2] - sent) < 100
    _nothing_upstream(proxy, upstream)


def test_a_body_of_exactly_the_limit_still_goes_upstream(upstream, proxy):
    pad = LIMIT - len(
        json.dumps({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": ""}]}).encode()
    )
    body = json.dumps({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "y" * pad}]}).encode()
    assert len(body) == LIMIT
    upstream.script(Reply.text("one"), Reply.text("two"))
    with http_client(proxy) as c:
        sized = c.post(upstream.url + "/v1/messages", content=body, headers={"content-type": "application/json"})
        chunked = c.post(
            upstream.url + "/v1/messages",
            content=iter([body[:CHUNK], body[CHUNK:]]),
            headers={"content-type": "application/json"},
        )
    assert (sized.status_code, chunked.status_code) == (200, 200)
    assert [json.loads(q.body)["messages"][0]["content"] for q in upstream.requests] == ["y" * pad] * 2


def test_http2_over_the_limit_is_refused_and_the_connection_goes_on(upstream, proxy_factory):
    """HTTP/2 through ``HTTPS_PROXY`` (h2 to the client: ``connection_strategy=lazy``): a
    ``content-length`` over the limit is answered before any DATA frame, a stream without
    one once it passes the limit; the connection then carries a request that goes upstream."""
    px = proxy_factory(ADDON_SCRIPT, options={"headroom_max_body_bytes": LIMIT, "connection_strategy": "lazy"})

    def open_stream(c: H2Client, headers: list[tuple[str, str]]) -> int:
        sid = c.conn.get_next_available_stream_id()
        c.conn.send_headers(sid, [(":method", "POST"), (":scheme", "https"), (":authority", c.authority), (":path", "/v1/messages"),
                                  ("content-type", "application/json"), *headers])  # fmt: skip
        c.streams[sid] = H2Response()
        c._flush()
        return sid

    def answered(st: H2Response) -> bool:
        return st.ended or st.reset is not None

    with H2Client(px, upstream) as c:
        sid = open_stream(c, [("content-length", str(HUGE))])
        head = c.read_until(sid, answered, timeout=60)
        sid2 = open_stream(c, [])
        sent = 0
        for chunk in _chunks(4 * LIMIT // 16384, 16384):
            while c.conn.local_flow_control_window(sid2) < len(chunk) and not answered(c.streams[sid2]):
                c._pump(0.2)
            if answered(c.streams[sid2]):
                break
            c.conn.send_data(sid2, chunk)
            c._flush()
            sent += len(chunk)
            c._pump(0.001)
        counted = c.read_until(sid2, answered, timeout=60)
        upstream.script(Reply.text("ok"))
        small = c.read_until(
            c.post(
                "/v1/messages",
                json.dumps(
                    {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "after"}]}
                ).encode(),
            ),
            answered,
        )
    assert (head.status, counted.status, small.status) == (413, 413, 200)
    assert f"the request body is {HUGE} bytes (its Content-Length)" in json.loads(head.data)["error"]["message"]
    assert f"passed the limit of {LIMIT} bytes" in json.loads(counted.data)["error"]["message"] and sent < 4 * LIMIT
    assert [json.loads(q.body)["messages"][0]["content"] for q in upstream.requests] == ["after"]


@pytest.mark.parametrize("fragments", [1, 64], ids=["one-frame", "fragmented"])
def test_a_websocket_frame_over_the_limit_is_dropped_as_it_arrives_and_refused(upstream, proxy, fragments):
    before = len(_ledger(proxy, 0, 1009))
    text = json.dumps({"type": "response.create", "model": "gpt-5", "input": "x" * (8 * LIMIT)})
    step = -(-len(text) // fragments)
    got: list[str] = []
    with ws_connect(upstream, proxy) as ws:
        ws.send(text if fragments == 1 else iter([text[i : i + step] for i in range(0, len(text), step)]))
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                got.append(ws.recv(timeout=60))
    want = rws.too_large_reason(len(text.encode()), LIMIT)
    assert closed.value.rcvd is not None and (closed.value.rcvd.code, closed.value.rcvd.reason) == (1009, want)
    assert [json.loads(g) for g in got] == [
        json.loads(ws_policy.error_event(too_large_message(len(text.encode()), LIMIT, "ws_max_frame_bytes")))
    ]
    assert [r for r in upstream.requests if r.method == "WS"] == []  # not one frame of it went upstream
    assert _ledger(proxy, before + 1, 1009)[before:] == [(1009, "rejected", len(text.encode()))]


def test_a_websocket_frame_of_the_limit_still_goes_upstream(upstream, proxy):
    head = json.dumps({"type": "response.create", "model": "gpt-5", "input": ""})
    text = head[:-2] + "y" * (LIMIT - len(head)) + head[-2:]
    assert len(text.encode()) == LIMIT
    upstream.script(Reply.text("ok"))
    with ws_connect(upstream, proxy) as ws:
        ws.send(text)
        while json.loads(ws.recv(timeout=60))["type"] != "response.completed":
            pass
    (frame,) = [r for r in upstream.requests if r.method == "WS"]
    assert json.loads(frame.body)["input"] == "y" * (LIMIT - len(head))
