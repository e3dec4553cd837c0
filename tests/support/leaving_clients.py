"""Clients that leave in the middle of an answer, through the proxy (issue 36, item 2): what an
agent does when its user interrupts a turn or its request times out.

- :class:`H2Client`: one HTTP/2 connection that can cancel one stream (``RST_STREAM(CANCEL)``)
  while the connection stays open. The SDKs' HTTP/2 stack (httpcore) never sends a stream reset,
  so this drives the ``h2`` library (mitmproxy's own HTTP/2 dependency) over a ``CONNECT``
  tunnel directly.
- :func:`h1_send`: an HTTP/1.1 request over a TLS ``CONNECT`` tunnel, left unanswered on an open
  socket the test closes when it chooses (a non-streamed request whose client gives up while
  the proxy is still working on the answer).

::

    with H2Client(proxy, upstream) as c:
        sid = c.post("/v1/messages", body)
        c.read_until(sid, lambda got: b"Checking" in got.data)
        c.reset(sid)                    # RST_STREAM(CANCEL); the connection stays up
"""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import h2.config
import h2.connection
import h2.errors
import h2.events

from tests.support.clients import ssl_context

__all__ = ["H2Client", "H2Response", "h1_send"]


@dataclass
class H2Response:
    """What one stream received so far: ``status`` (None before the headers), ``headers``,
    ``data`` (the body bytes), ``ended`` (the server ended the stream), ``reset`` (the server
    reset it: its error code)."""

    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    data: bytes = b""
    ended: bool = False
    reset: int | None = None


def _tunnel(proxy: Any, upstream: Any, alpn: str, timeout: float) -> tuple[ssl.SSLSocket, str]:
    """A TLS connection to ``upstream`` through ``proxy``'s ``CONNECT`` (the proxy's CA trusted,
    ALPN ``alpn`` only) and the upstream's authority (``host:port``). Raises ``RuntimeError``
    when the tunnel is refused."""
    host, port = upstream.url.removeprefix("https://").rsplit(":", 1)
    authority = f"{host}:{port}"
    p_host, p_port = proxy.url.removeprefix("http://").rsplit(":", 1)
    raw = socket.create_connection((p_host, int(p_port)), timeout=timeout)
    raw.sendall(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode())
    reply = b""
    while b"\r\n\r\n" not in reply:
        got = raw.recv(4096)
        if not got:
            raise RuntimeError("the proxy closed the CONNECT tunnel")
        reply += got
    if b" 200 " not in reply.split(b"\r\n", 1)[0]:
        raise RuntimeError(f"CONNECT refused: {reply[:80]!r}")
    ctx: ssl.SSLContext = ssl_context(proxy.ca_path)
    ctx.set_alpn_protocols([alpn])
    return ctx.wrap_socket(raw, server_hostname=host), authority


def h1_send(
    proxy: Any, upstream: Any, path: str, body: bytes, headers: dict[str, str] | None = None, timeout: float = 60.0
) -> ssl.SSLSocket:
    """Send ``POST path`` with ``body`` (JSON) to ``upstream`` through ``proxy`` over HTTP/1.1
    and return the open socket without reading the answer: ``close()`` it to leave."""
    sock, authority = _tunnel(proxy, upstream, "http/1.1", timeout)
    head = {"host": authority, "content-type": "application/json", "content-length": str(len(body)), **(headers or {})}
    sock.sendall(
        f"POST {path} HTTP/1.1\r\n".encode()
        + "".join(f"{k}: {v}\r\n" for k, v in head.items()).encode()
        + b"\r\n"
        + body
    )
    return sock


class H2Client:
    """One HTTP/2 connection to ``upstream`` (``.url`` ``https://127.0.0.1:PORT``) through the
    proxy ``proxy`` (``.url``, ``.ca_path``): ``CONNECT``, TLS trusting the proxy's CA with ALPN
    ``h2`` only. Raises ``RuntimeError`` when the tunnel is refused or h2 is not negotiated."""

    def __init__(self, proxy: Any, upstream: Any, timeout: float = 60.0) -> None:
        self.sock, self.authority = _tunnel(proxy, upstream, "h2", timeout)
        if self.sock.selected_alpn_protocol() != "h2":
            raise RuntimeError(f"HTTP/2 not negotiated: {self.sock.selected_alpn_protocol()!r}")
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        self._flush()
        self.streams: dict[int, H2Response] = {}
        self.closed = False

    def __enter__(self) -> "H2Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _flush(self) -> None:
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def post(self, path: str, body: bytes, headers: dict[str, str] | None = None) -> int:
        """Send a POST of ``body`` (all of it, then the end of the stream); its stream id."""
        sid = self.conn.get_next_available_stream_id()
        hdrs = [(":method", "POST"), (":scheme", "https"), (":authority", self.authority), (":path", path),
                ("content-type", "application/json"), ("content-length", str(len(body))), *(headers or {}).items()]  # fmt: skip
        self.conn.send_headers(sid, hdrs)
        self.streams[sid] = H2Response()
        for i in range(0, len(body), 16384):
            while self.conn.local_flow_control_window(sid) < min(16384, len(body) - i):
                self._pump(1.0)
            self.conn.send_data(sid, body[i : i + 16384])
            self._flush()
        self.conn.end_stream(sid)
        self._flush()
        return sid

    def _pump(self, timeout: float) -> bool:
        """Read what arrives within ``timeout`` seconds; False when the connection closed."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except (TimeoutError, socket.timeout):
            return True
        if not data:
            self.closed = True
            return False
        for ev in self.conn.receive_data(data):
            st = self.streams.get(getattr(ev, "stream_id", 0) or 0)
            if isinstance(ev, h2.events.ResponseReceived) and st is not None:
                st.headers = {k: v for k, v in ev.headers}  # type: ignore[misc]
                st.status = int(st.headers[":status"])
            elif isinstance(ev, h2.events.DataReceived) and st is not None:
                st.data += ev.data
                self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded) and st is not None:
                st.ended = True
            elif isinstance(ev, h2.events.StreamReset) and st is not None:
                st.reset = ev.error_code
            elif isinstance(ev, h2.events.ConnectionTerminated):
                self.closed = True
        self._flush()
        return True

    def read_until(self, sid: int, done: Callable[[H2Response], bool], timeout: float = 120.0) -> H2Response:
        """Read until ``done(stream's response)`` holds; raises ``TimeoutError`` after
        ``timeout`` seconds, ``ConnectionError`` when the connection closed first."""
        deadline = time.monotonic() + timeout
        st = self.streams[sid]
        while not done(st):
            if time.monotonic() > deadline:
                raise TimeoutError(f"stream {sid}: {st}")
            if not self._pump(0.2):
                if done(st):
                    break
                raise ConnectionError(f"the connection closed; stream {sid}: {st}")
        return st

    def reset(self, sid: int) -> None:
        """Cancel stream ``sid`` (``RST_STREAM`` with ``CANCEL``); the connection stays open."""
        self.conn.reset_stream(sid, h2.errors.ErrorCodes.CANCEL)
        self._flush()

    def alive(self, seconds: float) -> bool:
        """Keep reading for ``seconds`` (answering pings and settings); whether the connection
        is still open after them."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not self.closed:
            self._pump(0.2)
        return not self.closed

    def close(self) -> None:
        """Close the connection (GOAWAY, then the socket)."""
        try:
            if not self.closed:
                self.conn.close_connection()
                self._flush()
        except OSError:
            pass
        self.sock.close()
