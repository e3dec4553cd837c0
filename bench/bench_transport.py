"""Benchmark: time to first byte and per-event latency, direct versus through mitmdump.

Run ``python bench/bench_transport.py [--requests N] [--events K] [--delay S]`` from the project
root. A local HTTPS upstream (``tests/support/upstream.py``) streams K text deltas with S
seconds between events; each request is sent

* direct (no proxy),
* through a plain ``mitmdump`` (``stream_large_bodies=1``, so SSE is streamed),
* through ``mitmdump -s addons/headroom.py``,

over SSE (Anthropic Messages, as Claude Code streams) and over WebSocket (Responses
``response.create`` frames, as Codex speaks), once with a small request and once with a large
compressible tool output (the ``github-api`` corpus scenario, when ``../shared/corpus`` is
present; repeated requests hit the decision cache and the frozen live zone, as a session's turns
do after the first).

Figures, per transport and route (milliseconds, median and 95th percentile over all requests):

* **TTFB**: from sending the request (HTTP) or frame (WebSocket) to the arrival of the first
  event.
* **event latency**: each event's arrival at the client minus the moment the upstream wrote it
  (both clocks are ``time.monotonic()`` of this one process: the upstream runs in a thread; its
  writes are timestamped by wrapping its chunk and frame writers).

The upstream's accepted sockets get ``TCP_NODELAY`` here (as asyncio, and so mitmproxy, sets on
its own sockets), so Nagle's algorithm does not hold back its small event writes.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from tests.support.clients import direct_http_client, http_client, iter_sse, ssl_context, ws_connect  # noqa: E402
from tests.support.proxy import ADDON_SCRIPT, MitmProxy  # noqa: E402
from tests.support import upstream as upstream_mod  # noqa: E402
from tests.support.upstream import Reply, Upstream  # noqa: E402

SENT: list[float] = []  # monotonic times of the upstream's event writes, in order


def _instrument(up: Upstream) -> None:
    """Timestamp every SSE chunk and WebSocket frame the upstream writes; disable Nagle."""
    write_chunk, ws_send = upstream_mod._Handler._write_chunk, upstream_mod._WS.send

    def timed_chunk(self, data: bytes) -> None:
        write_chunk(self, data)
        SENT.append(time.monotonic())

    def timed_send(self, opcode: int, payload: bytes) -> None:
        ws_send(self, opcode, payload)
        if opcode == 0x1:
            SENT.append(time.monotonic())

    upstream_mod._Handler._write_chunk = timed_chunk
    upstream_mod._WS.send = timed_send
    server = up._server
    accept = server.get_request

    def get_request():
        sock, addr = accept()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock, addr

    server.get_request = get_request

CORPUS = ROOT.parent / "shared" / "corpus" / "github-api" / "paginate-issues.json"


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values`` by nearest rank."""
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(q * (len(s) - 1)))))]


def anthropic_body(tool_text: str) -> dict:
    return {
        "model": "bench-model",
        "max_tokens": 256,
        "stream": True,
        "messages": [
            {"role": "user", "content": "summarise the issues"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "gh", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": tool_text}]},
        ],
    }


def ws_frame(tool_text: str) -> str:
    return json.dumps(
        {
            "type": "response.create",
            "model": "bench-model",
            "instructions": "bench",
            "input": [
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "summarise the issues"}]},
                {"type": "function_call", "call_id": "c1", "name": "gh", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": tool_text},
            ],
            "stream": True,
        }
    )


def sse_run(up: Upstream, proxy: MitmProxy | None, body: dict, n: int, words: str, delay: float) -> tuple[list[float], list[float]]:
    ttfb, lat = [], []
    client = direct_http_client(up) if proxy is None else http_client(proxy)
    with client:
        for _ in range(n):
            up.script(Reply.text(words, delay=delay))
            SENT.clear()
            t0 = time.monotonic()
            with client.stream("POST", up.url + "/v1/messages", json=body) as r:
                arrivals = [e.arrived for e in iter_sse(r)]
            ttfb.append(arrivals[0] - t0)
            assert len(SENT) == len(arrivals), (len(SENT), len(arrivals))
            lat += [a - s for a, s in zip(arrivals, SENT)]
    return ttfb, lat


def ws_run(up: Upstream, proxy: MitmProxy | None, frame: str, n: int, words: str, delay: float) -> tuple[list[float], list[float]]:
    from websockets.sync.client import connect

    ttfb, lat = [], []
    conn = connect(up.ws_url, ssl=ssl_context(up.cert_path), max_size=None) if proxy is None else ws_connect(up, proxy, max_size=None)
    with conn as ws:
        for _ in range(n):
            up.script(Reply.text(words, delay=delay))
            SENT.clear()
            t0 = time.monotonic()
            ws.send(frame)
            arrivals = []
            while True:
                ev = json.loads(ws.recv(timeout=60))
                arrivals.append(time.monotonic())
                if ev.get("type") == "response.completed":
                    break
            ttfb.append(arrivals[0] - t0)
            assert len(SENT) == len(arrivals), (len(SENT), len(arrivals))
            lat += [a - s for a, s in zip(arrivals, SENT)]
    return ttfb, lat


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=15, help="requests per transport, route and size")
    ap.add_argument("--events", type=int, default=20, help="text deltas per response")
    ap.add_argument("--delay", type=float, default=0.01, help="seconds between two upstream events")
    args = ap.parse_args()
    words = " ".join(f"w{i}" for i in range(args.events))
    sizes = {"small": "ok: 3 issues open"}
    if CORPUS.is_file():
        sizes["large"] = json.dumps(json.loads(CORPUS.read_text()), indent=2)
    console = Console(width=max(Console().width, 120))
    table = Table(title=f"Transport latency, ms ({args.requests} requests x {args.events} deltas, {args.delay * 1000:.0f} ms apart)")
    for col in ("transport", "request", "route", "TTFB med", "TTFB p95", "TTFB added", "event med", "event p95"):
        table.add_column(col, justify="left" if col in ("transport", "request", "route") else "right")
    with Upstream() as up:
        _instrument(up)
        plain = MitmProxy(None, options={"stream_large_bodies": "1"}).start()
        headroom = MitmProxy(ADDON_SCRIPT).start()
        try:
            for transport in ("SSE", "WebSocket"):
                for size, text in sizes.items():
                    base = None
                    for route, proxy in (("direct", None), ("mitmdump", plain), ("mitmdump+headroom", headroom)):
                        if transport == "SSE":
                            ttfb, lat = sse_run(up, proxy, anthropic_body(text), args.requests, words, args.delay)
                        else:
                            ttfb, lat = ws_run(up, proxy, ws_frame(text), args.requests, words, args.delay)
                        med = statistics.median(ttfb)
                        base = med if base is None else base
                        table.add_row(
                            transport,
                            f"{size} ({len(text) // 1024} KiB)" if size == "large" else size,
                            route,
                            f"{med * 1000:.1f}",
                            f"{pct(ttfb, 0.95) * 1000:.1f}",
                            "-" if route == "direct" else f"{(med - base) * 1000:+.1f}",
                            f"{statistics.median(lat) * 1000:.2f}",
                            f"{pct(lat, 0.95) * 1000:.2f}",
                        )
        finally:
            plain.cleanup()
            headroom.cleanup()
    console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
