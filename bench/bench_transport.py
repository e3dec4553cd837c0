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

Further tables, each on its own flag (``--all`` runs every table):

* ``--ws-memory``: resident memory (VmRSS, MiB) of each proxy at the end of and after each of
  ``--ws-sessions`` WebSocket sessions of ``--ws-turns`` turns (every turn a ~30 KiB
  ``response.create`` frame and a 40-event response), once the proxy's warm-up has settled:
  plain mitmdump, the addon, and the addon without releasing handled messages
  (``headroom_ws_release`` left out), to show what the release is worth.
* ``--bomb``: peak resident memory (VmHWM, MiB) of ``mitmdump -s addons/headroom.py`` before and
  after a 1 MB gzip body that decodes to 1 GiB (it must get 413), next to the bomb's sizes.
* ``--followup-probe``: while a streamed response's follow-up streams for ~6 s (the model called
  ``headroom_retrieve``), a probe request every 0.1 s through the same proxy: its latency
  (median / max) and how many probes completed before the follow-up ended.
* ``--oversized``: a 1 GiB body to ``POST /v1/messages`` over ``max_body_bytes`` (32 MiB),
  streamed in 1 MiB writes by a raw socket to the base-URL port (reverse mode) and through the
  proxy port (``CONNECT`` + TLS), with ``Content-Length`` and chunked (issue 36): when the 413
  came (MiB sent by then, seconds), and the proxy's resident memory (VmRSS, MiB) before, at its
  peak (sampled every 20 ms) and 10 s after. "before" is the same proxy without the head limit
  (``headroom_body_limit``'s addon left out: the body read whole, then refused). A second table:
  a WebSocket ``response.create`` frame over ``ws_max_frame_bytes`` (32 MiB) through the proxy
  port, 64 MiB and 1 GiB: when the close 1009 came and the same memory figures; "before" without
  ``headroom_ws_limit``'s wrapper (the frame held whole, grown by ``bytes +=``).
"""

from __future__ import annotations

import argparse
import json
import socket
import ssl
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from tests.support import upstream as upstream_mod  # noqa: E402
from tests.support.clients import direct_http_client, http_client, iter_sse, ssl_context, ws_connect  # noqa: E402
from tests.support.proxy import ADDON_SCRIPT, MitmProxy  # noqa: E402
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
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "summarise the issues"}],
                },
                {"type": "function_call", "call_id": "c1", "name": "gh", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": tool_text},
            ],
            "stream": True,
        }
    )


def sse_run(
    up: Upstream, proxy: MitmProxy | None, body: dict, n: int, words: str, delay: float
) -> tuple[list[float], list[float]]:
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


def ws_run(
    up: Upstream, proxy: MitmProxy | None, frame: str, n: int, words: str, delay: float
) -> tuple[list[float], list[float]]:
    from websockets.sync.client import connect

    ttfb, lat = [], []
    conn = (
        connect(up.ws_url, ssl=ssl_context(up.cert_path), max_size=None)
        if proxy is None
        else ws_connect(up, proxy, max_size=None)
    )
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


def rss_mib(proxy: MitmProxy, field: str = "VmRSS") -> float:
    """``field`` of ``/proc/<pid>/status`` of the proxy process, in MiB."""
    for line in Path(f"/proc/{proxy.process.pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"{field} not in /proc status")


def without_release_script(tmp: Path) -> Path:
    """A script loading the Headroom addons except ``headroom_ws_release`` (the "before")."""
    p = tmp / "headroom_keep_messages.py"
    p.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(ADDON_SCRIPT.parent)!r})\n"
        "import headroom as _h\n"
        "addons = [a for a in _h.addons if type(a).__name__ != 'ReleaseWebSocketMessages']\n"
    )
    return p


def ws_memory(up: Upstream, sessions: int, turns: int) -> Table:
    import tempfile

    table = Table(
        title=f"Resident memory (MiB) at the end of / after each WebSocket session ({turns} turns: ~30 KiB frames, 40 events per turn)"
    )
    table.add_column("route")
    table.add_column("start", justify="right")
    for i in range(sessions):
        table.add_column(f"#{i + 1}", justify="right")
    table.add_column("growth #1→last (end of session)", justify="right")
    words = " ".join(f"w{i}" for i in range(38))
    with tempfile.TemporaryDirectory() as tmp:
        routes = (
            ("mitmdump", MitmProxy(None, options={"stream_large_bodies": "1"})),
            ("mitmdump+headroom", MitmProxy(ADDON_SCRIPT)),
            ("headroom, messages kept", MitmProxy(without_release_script(Path(tmp)))),
        )
        for name, proxy in routes:
            proxy.start()
            try:
                settle(proxy)
                row = [name, f"{rss_mib(proxy):.0f}"]
                peaks = []
                for sess in range(sessions):
                    peak = 0.0
                    with ws_connect(up, proxy, max_size=None) as ws:
                        for t in range(turns):
                            up.script(Reply.text(words))
                            text = f"session {sess} turn {t}\n" + "\n".join(
                                f"line {t}-{k}: {'x' * 60}" for k in range(400)
                            )
                            ws.send(ws_frame(text))
                            while json.loads(ws.recv(timeout=60)).get("type") != "response.completed":
                                pass
                            if t == turns - 1:
                                peak = rss_mib(proxy)  # the session's messages are all still live here
                    time.sleep(1.0)
                    peaks.append(peak)
                    row.append(f"{peak:.0f} / {rss_mib(proxy):.0f}")
                row.append(f"{peaks[-1] - peaks[0]:+.0f}")
                table.add_row(*row)
            finally:
                proxy.cleanup()
    return table


def settle(proxy: MitmProxy, quiet_mib: float = 3.0, window_s: float = 10.0, limit_s: float = 240.0) -> None:
    """Wait until the proxy's resident memory stops moving (the addon's warm-up loads the
    database, the vocabulary and the embedding model in the background): less than
    ``quiet_mib`` MiB of change over ``window_s`` seconds, at most ``limit_s`` seconds."""
    start = time.monotonic()
    samples: list[tuple[float, float]] = []
    while time.monotonic() - start < limit_s:
        samples.append((time.monotonic(), rss_mib(proxy)))
        recent = [v for t, v in samples if t >= samples[-1][0] - window_s]
        if samples[-1][0] - samples[0][0] >= window_s and max(recent) - min(recent) < quiet_mib:
            return
        time.sleep(1.0)


def bomb(up: Upstream) -> Table:
    import gzip

    import httpx

    member = gzip.compress(b"A" * (1 << 20), compresslevel=9)
    body = (
        gzip.compress(b'{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"')
        + member * 1024
        + gzip.compress(b'"}]}')
    )
    table = Table(title="A gzip bomb through mitmdump -s addons/headroom.py")
    for col in ("encoded", "decodes to", "status", "peak RSS before (MiB)", "peak RSS after (MiB)", "RSS after (MiB)"):
        table.add_column(col, justify="right")
    proxy = MitmProxy(ADDON_SCRIPT).start()
    try:
        settle(proxy)
        before = rss_mib(proxy, "VmHWM")
        with http_client(proxy, timeout=httpx.Timeout(300.0)) as c:
            r = c.post(
                up.url + "/v1/messages",
                content=body,
                headers={"content-encoding": "gzip", "content-type": "application/json"},
            )
        table.add_row(
            f"{len(body) / 1e6:.2f} MB",
            "1 GiB",
            str(r.status_code),
            f"{before:.0f}",
            f"{rss_mib(proxy, 'VmHWM'):.0f}",
            f"{rss_mib(proxy):.0f}",
        )
    finally:
        proxy.cleanup()
    return table


def without_body_limit_script(tmp: Path) -> Path:
    """A script loading the Headroom addons except the head limit (``BodyLimitGuard``): the
    request's body is read whole before the 413 (the "before" of ``--oversized``)."""
    p = tmp / "headroom_whole_body.py"
    p.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(ADDON_SCRIPT.parent)!r})\n"
        "import headroom as _h\n"
        "addons = [a for a in _h.addons if type(a).__name__ != 'BodyLimitGuard']\n"
    )
    return p


def without_ws_limit_script(tmp: Path) -> Path:
    """A script loading the Headroom addons with mitmproxy's WebSocket relay as it was before
    ``headroom_ws_limit`` (the "before" of ``--oversized``'s WebSocket table)."""
    p = tmp / "headroom_whole_frames.py"
    p.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(ADDON_SCRIPT.parent)!r})\n"
        "import headroom as _h\n"
        "import headroom_ws_limit\n"
        "from mitmproxy.proxy.layers import websocket\n"
        "websocket.WebsocketLayer.relay_messages = headroom_ws_limit._original_relay\n"
        "addons = _h.addons\n"
    )
    return p


class _Peak:
    """The proxy's resident memory sampled every 20 ms while in the ``with`` block (MiB)."""

    def __init__(self, proxy: MitmProxy) -> None:
        import threading

        self.proxy, self.before = proxy, rss_mib(proxy)
        self.values = [self.before]
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.done.wait(0.02):
            self.values.append(rss_mib(self.proxy))

    def __enter__(self) -> "_Peak":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        time.sleep(0.5)
        self.done.set()
        self.thread.join()

    @property
    def peak(self) -> float:
        return max(self.values)


def oversized_ws(up: Upstream) -> Table:
    import tempfile

    from websockets.exceptions import ConnectionClosed

    table = Table(
        title="A WebSocket response.create over ws_max_frame_bytes (32 MiB), through the proxy port: the close and the proxy's memory (MiB)"
    )
    for col in ("proxy", "frame", "close", "closed after s", "RSS before", "peak", "10 s after"):
        table.add_column(col, justify="left" if col in ("proxy", "frame") else "right")
    with tempfile.TemporaryDirectory() as tmp:
        for name, script, sizes in (
            ("before", without_ws_limit_script(Path(tmp)), (64,)),
            ("now", ADDON_SCRIPT, (64, 1024)),
        ):
            proxy = MitmProxy(script).start()
            try:
                settle(proxy)
                for mib in sizes:
                    frame = '{"type":"response.create","model":"m","input":"' + "x" * (mib << 20) + '"}'
                    code = "-"
                    with _Peak(proxy) as peak:
                        t0 = time.monotonic()
                        try:
                            with ws_connect(up, proxy, max_size=None, close_timeout=600) as ws:
                                ws.send(frame)
                                while True:
                                    ws.recv(timeout=600)
                        except ConnectionClosed as e:
                            code = str(e.rcvd.code) if e.rcvd is not None else "none"
                        when = time.monotonic() - t0
                    del frame
                    time.sleep(10)
                    table.add_row(
                        name,
                        f"{mib} MiB",
                        code,
                        f"{when:.1f}",
                        f"{peak.before:.0f}",
                        f"{peak.peak:.0f}",
                        f"{rss_mib(proxy):.0f}",
                    )
            finally:
                proxy.cleanup()
    return table


def _send_oversized(sock: socket.socket, host: str, total: int, chunked: bool) -> tuple[int, float, int]:
    """Send ``POST /v1/messages`` with a ``total``-byte body on ``sock`` in 1 MiB writes (all of
    it, as a client that does not read while it sends), then read the answer. Returns the
    status, the seconds until the answer's first bytes and the bytes sent by then (looked for
    after each write)."""
    head = {"host": host, "content-type": "application/json", "anthropic-version": "2023-06-01", "x-api-key": "k"}
    head.update({"transfer-encoding": "chunked"} if chunked else {"content-length": str(total)})
    sock.sendall(
        b"POST /v1/messages HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in head.items()).encode() + b"\r\n"
    )
    t0 = time.monotonic()
    piece = b"x" * (1 << 20)
    got, when, sent_then, sent = b"", 0.0, 0, 0
    while sent < total:
        n = min(len(piece), total - sent)
        try:
            sock.sendall(b"%x\r\n%s\r\n" % (n, piece[:n]) if chunked else piece[:n])
        except OSError:
            break  # the proxy closed the connection
        sent += n
        if not got:
            sock.setblocking(False)
            try:
                got = sock.recv(65536)
            except (BlockingIOError, ssl.SSLWantReadError):
                pass
            finally:
                sock.settimeout(600)
            if got:
                when, sent_then = time.monotonic() - t0, sent
    if chunked and sent == total:
        sock.sendall(b"0\r\n\r\n")
    while b"\r\n" not in got:
        more = sock.recv(65536)
        if not more:
            break
        got += more
        when, sent_then = time.monotonic() - t0, sent
    status = int(got.split(b"\r\n", 1)[0].split()[1]) if got else 0
    return status, when, sent_then


def oversized(up: Upstream) -> Table:
    import tempfile

    from tests.support.leaving_clients import _tunnel
    from tests.support.proxy import free_port

    total = 1 << 30
    table = Table(
        title="A 1 GiB body over max_body_bytes (32 MiB), sent whole in 1 MiB writes: the 413 and the proxy's memory (MiB)"
    )
    for col in (
        "proxy",
        "way in",
        "body",
        "status",
        "413 after MiB sent",
        "after s",
        "RSS before",
        "peak",
        "10 s after",
    ):
        table.add_column(col, justify="left" if col in ("proxy", "way in", "body") else "right")
    with tempfile.TemporaryDirectory() as tmp:
        for name, script in (("before", without_body_limit_script(Path(tmp))), ("now", ADDON_SCRIPT)):
            base = free_port()
            proxy = MitmProxy(script, args=["--mode", "regular", "--mode", f"reverse:{up.url}@{base}"]).start()
            try:
                settle(proxy)
                cases = [("base URL", False), ("HTTPS_PROXY", False), ("base URL", True), ("HTTPS_PROXY", True)]
                for way, chunked in cases if script == ADDON_SCRIPT else cases[:2]:
                    if way == "base URL":
                        sock, host = socket.create_connection(("127.0.0.1", base), timeout=600), f"127.0.0.1:{base}"
                    else:
                        sock, host = _tunnel(proxy, up, "http/1.1", 600)
                    with _Peak(proxy) as peak, sock:
                        status, when, sent_then = _send_oversized(sock, host, total, chunked)
                    time.sleep(10)
                    table.add_row(name, way, "chunked" if chunked else "length", str(status), f"{sent_then / (1 << 20):.0f}", f"{when:.2f}",
                                  f"{peak.before:.0f}", f"{peak.peak:.0f}", f"{rss_mib(proxy):.0f}")  # fmt: skip
            finally:
                proxy.cleanup()
    return table


def followup_probe(up: Upstream) -> Table:
    import threading

    import httpx

    sys.path.insert(0, str(ROOT))
    from headroom_core.ccr import retrieve
    from headroom_core.compress import markers

    text = json.dumps(json.loads(CORPUS.read_text()), indent=2)
    key = markers.offload_key(text)
    table = Table(title="Probe requests while a streamed follow-up runs (~6 s of events)")
    for col in ("route", "probes", "done before the follow-up ended", "probe median ms", "probe max ms"):
        table.add_column(col, justify="left" if col == "route" else "right")
    proxy = MitmProxy(ADDON_SCRIPT, options={"headroom_compress_timeout_seconds": 300}).start()
    try:
        settle(proxy)
        up.script(
            Reply.tool_call(retrieve.TOOL_NAME, {"key": key}, text="Checking."),
            Reply.text(" ".join(f"w{i}" for i in range(30)), delay=0.2),
            path="/v1/messages",
        )
        ended: list[float] = []

        def first() -> None:
            with http_client(proxy, timeout=httpx.Timeout(300.0)) as c:
                with c.stream("POST", up.url + "/v1/messages", json={**anthropic_body(text), "stream": True}) as r:
                    for _ in iter_sse(r):
                        pass
            ended.append(time.monotonic())

        probes: list[tuple[float, float]] = []
        with http_client(proxy) as c:
            c.get(up.url + "/probe")  # connection and certificate set up before measuring
            t = threading.Thread(target=first)
            t.start()
            up.wait_for_requests(3, timeout=300)  # the probe, the request, its follow-up
            while not ended:
                t0 = time.monotonic()
                c.get(up.url + "/probe")
                probes.append((t0, time.monotonic()))
                time.sleep(0.1)
        t.join()
        lat = [b - a for a, b in probes]
        before = sum(1 for _, b in probes if b < ended[0])
        table.add_row(
            "mitmdump+headroom, during a follow-up",
            str(len(probes)),
            str(before),
            f"{statistics.median(lat) * 1000:.1f}",
            f"{max(lat) * 1000:.1f}",
        )
        # the same probes with nothing else running, through this proxy and a plain mitmdump
        plain = MitmProxy(None, options={"stream_large_bodies": "1"}).start()
        try:
            for name, px in (("mitmdump+headroom, idle", proxy), ("mitmdump, idle", plain)):
                with http_client(px) as c:
                    c.get(up.url + "/probe")
                    idle = []
                    for _ in range(len(probes)):
                        t0 = time.monotonic()
                        c.get(up.url + "/probe")
                        idle.append(time.monotonic() - t0)
                        time.sleep(0.1)
                table.add_row(
                    name, str(len(idle)), "-", f"{statistics.median(idle) * 1000:.1f}", f"{max(idle) * 1000:.1f}"
                )
        finally:
            plain.cleanup()
    finally:
        proxy.cleanup()
    return table


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=15, help="requests per transport, route and size")
    ap.add_argument("--events", type=int, default=20, help="text deltas per response")
    ap.add_argument("--delay", type=float, default=0.01, help="seconds between two upstream events")
    ap.add_argument("--ws-memory", action="store_true", help="resident memory over WebSocket sessions")
    ap.add_argument("--ws-sessions", type=int, default=6, help="WebSocket sessions for --ws-memory")
    ap.add_argument("--ws-turns", type=int, default=60, help="turns per WebSocket session for --ws-memory")
    ap.add_argument("--bomb", action="store_true", help="peak memory on a 1 GiB gzip bomb")
    ap.add_argument("--followup-probe", action="store_true", help="probe latency during a slow streamed follow-up")
    ap.add_argument("--oversized", action="store_true", help="the 413 and memory for a 1 GiB body over max_body_bytes")
    ap.add_argument("--no-latency", action="store_true", help="skip the latency table")
    ap.add_argument("--all", action="store_true", help="every table")
    args = ap.parse_args()
    console = Console(width=max(Console().width, 120))
    if args.all or args.ws_memory or args.bomb or args.followup_probe or args.oversized:
        with Upstream() as up:
            if args.all or args.followup_probe:
                console.print(followup_probe(up))
            if args.all or args.bomb:
                console.print(bomb(up))
            if args.all or args.oversized:
                console.print(oversized(up))
                console.print(oversized_ws(up))
            if args.all or args.ws_memory:
                console.print(ws_memory(up, args.ws_sessions, args.ws_turns))
    if args.no_latency or (not args.all and (args.ws_memory or args.bomb or args.followup_probe or args.oversized)):
        return 0
    words = " ".join(f"w{i}" for i in range(args.events))
    sizes = {"small": "ok: 3 issues open"}
    if CORPUS.is_file():
        sizes["large"] = json.dumps(json.loads(CORPUS.read_text()), indent=2)
    table = Table(
        title=f"Transport latency, ms ({args.requests} requests x {args.events} deltas, {args.delay * 1000:.0f} ms apart)"
    )
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
