"""Benchmark: how many agents one proxy serves at an agent's pace (issue 33).

N concurrent agents each replay a real Claude Code session (``../shared/corpus/anthropic-flows``
session-a: its Messages API requests in order), made distinct per agent so that no cache is
shared between agents: every string of the body (system prompt, tools, messages, tool outputs)
has a different set of its single spaces between two non-spaces doubled (a pattern of the
agent's number; valid JSON, every kind of output keeps its kind: JSON, logs, numbered reads and
code stay what they were), the same message always the same bytes within an agent (the session
grows turn by turn as the client's does), and each agent has its own API key. An agent sends its
next request only after its previous answer plus a think time (``--think``, seeded jitter).

The upstream (its own process, asyncio HTTPS) answers each request with the SSE stream recorded
for that turn, after a model-like delay (``--ttfb`` seconds to the first byte, then the events
over ``--stream`` seconds), and ends the stream with an SSE comment giving its own time for the
request; the proxy's added time of a request is the client's time minus that.

For each proxy the bench runs rounds of N agents (N doubling from 1, then one step between the
last N that held and the first that did not) and finds the largest N at which every request
succeeds and the added p95 stays under ``--p95-ms`` (100 ms): over all requests, and over the
continuing turns (each agent's first request, a conversation the proxy has never seen, counts
its whole system prompt and tools: the heaviest request of a session). Proxies: Headroom (``mitmdump -s
addons/headroom.py``), plain mitmdump (the floor), and the peer proxy ``headroom-ai`` from PyPI
(``--peer``: a venv of its own, installed on first use with pip; base-URL mode, its rate limit
off) when it installs and runs here; skipped with the reason otherwise. Also printed: the
proxy's CPU seconds (its process and children: Headroom's compression worker) per request and
per MB of new tool output (the tool results a request adds to the conversation), and its
resident memory at the end.

Before the rounds, one round of ``--warm-up`` agents (default 1; distinct from every measured
agent) is run and not counted, for every proxy alike: a proxy's first traffic pays one-time
costs (first connections, first statements, caches filling) that a proxy serving agents has
paid long before. Each round also prints the added p95 of each turn (which turns set the p95: a session's first
request and a changed tool list are the heavy ones) and the proxy's process id (for a sampling
profiler); ``--agents 4,4`` runs those rounds only, without the search.

Run: ``.venv/bin/python bench/bench_capacity.py [--quick] [--turns 6] [--max-agents 64]
[--agents N,N…] [--peer DIR|none]``. Default: a few minutes on a 2-core machine. Not a test:
asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import random
import re
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_load import _descendants, pct, rss_mib  # noqa: E402

CORPUS = REPO.parent / "shared" / "corpus" / "anthropic-flows"
PEER_PACKAGE = "headroom-ai[proxy]==0.42.0"
#: request headers of the recording kept (no credentials, no transport headers)
KEEP_HEADERS = ("anthropic-version", "anthropic-beta", "user-agent", "x-app", "content-type", "accept")


# ---------------------------------------------------------------------------------------------
# the session, made distinct per agent


def load_session(turns: int) -> list[tuple[dict, dict, bytes]]:
    """The first ``turns`` requests of session-a: ``(headers, body, recorded SSE answer)``."""
    out = []
    for f in sorted(CORPUS.glob("session-a-*.json"))[:turns]:
        d = json.loads(f.read_text())
        hdrs = {k.lower(): v for k, v in d["request"]["headers"].items() if k.lower() in KEEP_HEADERS}
        out.append((hdrs, d["request"]["body"], d["response"]["body"].encode()))
    return out


_SPACE = re.compile(rb"(?<=[^ ]) (?=[^ ])")


def distinct(raw: bytes, agent: int) -> bytes:
    """``raw`` (compact JSON: every space is inside a string) with the single spaces between two
    non-spaces doubled where bit ``j % 8`` of ``agent + 1`` is set (``j``: the space's number)."""
    bits = agent + 1
    count = iter(range(1 << 62))
    return _SPACE.sub(lambda m: b"  " if bits >> (next(count) % 8) & 1 else b" ", raw)


def _dump(v: object) -> bytes:
    return json.dumps(v, ensure_ascii=False, separators=(",", ":")).encode()


class AgentBodies:
    """The bodies one agent sends: each member of the recorded body and each message made
    distinct once and reused, so a message has the same bytes in every later turn."""

    def __init__(self, agent: int) -> None:
        self.agent = agent
        self._done: dict[bytes, bytes] = {}

    def _part(self, value: object) -> bytes:
        raw = _dump(value)
        got = self._done.get(raw)
        if got is None:
            got = self._done[raw] = distinct(raw, self.agent)
        return got

    def body(self, recorded: dict) -> bytes:
        parts = []
        for k, v in recorded.items():
            if k == "messages":
                val = b"[" + b",".join(self._part(m) for m in v) + b"]"
            elif k in ("system", "tools"):
                val = self._part(v)
            else:
                val = _dump(v)
            parts.append(_dump(k) + b":" + val)
        return b"{" + b",".join(parts) + b"}"


def new_tool_bytes(session: list[tuple[dict, dict, bytes]]) -> list[int]:
    """Per turn, the bytes of tool results that turn adds (not in the turn before)."""
    seen: set[str] = set()
    out = []
    for _, body, _ in session:
        n = 0
        cur = set()
        for m in body.get("messages", []):
            if isinstance(m.get("content"), list):
                for b in m["content"]:
                    if isinstance(b, dict) and b.get("type") == "tool_result":
                        s = json.dumps(b.get("content"))
                        cur.add(s)
                        if s not in seen:
                            n += len(s)
        seen = cur
        out.append(n)
    return out


# ---------------------------------------------------------------------------------------------
# the upstream: the recorded stream of the turn the request names, after a model-like delay


def upstream_main(certdir: str, answers: list[bytes], ttfb: float, stream_s: float, port_w) -> None:
    from tests.support.upstream import make_self_signed_cert

    cert, key = make_self_signed_cert(Path(certdir))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    chunks = [[e + b"\n\n" for e in a.split(b"\n\n") if e.strip()] for a in answers]

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                t0 = time.monotonic()
                hdrs = {}
                for ln in head.decode("latin-1").split("\r\n")[1:]:
                    if ":" in ln:
                        k, v = ln.split(":", 1)
                        hdrs[k.strip().lower()] = v.strip()
                if hdrs.get("transfer-encoding", "").lower() == "chunked":
                    while True:
                        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                        await reader.readexactly(size + 2)
                        if size == 0:
                            break
                else:
                    await reader.readexactly(int(hdrs.get("content-length", "0")))
                t0 = time.monotonic()  # the request is in: the model's time starts
                events = chunks[int(hdrs.get("x-bench-turn", "0")) % len(chunks)]
                await asyncio.sleep(ttfb)
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n\r\n"
                )
                step = stream_s / max(1, len(events))
                for e in events:
                    writer.write(b"%x\r\n%s\r\n" % (len(e), e))
                    await writer.drain()
                    await asyncio.sleep(step)
                tail = b": bench-upstream-ms %d\n\n" % round(1000 * (time.monotonic() - t0))
                writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(tail), tail))
                await writer.drain()
        except Exception:  # noqa: BLE001 - a broken connection
            return
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ctx, limit=2**26, backlog=1024)
        port_w.send(server.sockets[0].getsockname()[1])
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        async with server:
            await stop.wait()

    asyncio.run(main())


# ---------------------------------------------------------------------------------------------
# the agents


def agents_main(target: dict, session, n_agents: int, think: float, seed: int, out_w) -> None:
    """Run ``n_agents`` agents through ``target`` (``{"mode": "forward"|"base", "port",
    "up_port", "ca"}``); send ``{"added", "total", "errors", "samples", "requests"}``."""
    import h11

    up_host = f"127.0.0.1:{target['up_port']}"
    ctx = ssl.create_default_context(cafile=target["ca"]) if target["mode"] == "forward" else None
    added: list[float] = []
    total: list[float] = []
    errors: list[str] = []
    by_turn: list[tuple[int, float]] = []

    async def connect():
        reader, writer = await asyncio.open_connection("127.0.0.1", target["port"], limit=2**24)
        if target["mode"] == "forward":
            writer.write(f"CONNECT {up_host} HTTP/1.1\r\nHost: {up_host}\r\n\r\n".encode())
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 200"):
                raise ConnectionError(head[:80])
            await writer.start_tls(ctx, server_hostname="127.0.0.1")
        return reader, writer

    async def agent(k: int) -> None:
        rnd = random.Random(seed * 1000 + k)
        bodies = AgentBodies(seed * 1000 + k)
        await asyncio.sleep(rnd.uniform(0, think))  # agents start spread over one think time
        conn = None
        host = up_host if target["mode"] == "forward" else f"127.0.0.1:{target['port']}"
        for turn, (hdrs, recorded, _) in enumerate(session):
            body = bodies.body(recorded)
            head = "".join(f"{k2}: {v}\r\n" for k2, v in hdrs.items() if k2 != "content-type")
            req = (f"POST /v1/messages HTTP/1.1\r\nHost: {host}\r\ncontent-type: application/json\r\n{head}"
                   f"x-api-key: bench-{seed}-{k}\r\nx-bench-turn: {turn}\r\ncontent-length: {len(body)}\r\n\r\n").encode()  # fmt: skip
            t0 = time.monotonic()
            try:
                if conn is None:
                    conn = await connect()
                reader, writer = conn
                writer.write(req + body)
                await writer.drain()
                h = h11.Connection(h11.CLIENT)
                h.send(
                    h11.Request(method="POST", target="/v1/messages", headers=[("host", host), ("content-length", "0")])
                )
                h.send(h11.EndOfMessage())
                status, data, done = 0, bytearray(), False
                while not done:
                    ev = h.next_event()
                    if ev is h11.NEED_DATA:
                        got = await asyncio.wait_for(reader.read(65536), 300)
                        if not got:
                            raise ConnectionError("closed mid-response")
                        h.receive_data(got)
                    elif isinstance(ev, h11.Response):
                        status = ev.status_code
                    elif isinstance(ev, h11.Data):
                        data += ev.data
                    elif isinstance(ev, h11.EndOfMessage):
                        done = True
                t = time.monotonic() - t0
                m = re.search(rb": bench-upstream-ms (\d+)", data)
                if status != 200 or b"message_stop" not in data:
                    errors.append(f"turn {turn}: status {status}, {len(data)} bytes: {bytes(data[:120])!r}")
                else:
                    total.append(t)
                    if m:
                        added.append(t - int(m.group(1)) / 1000)
                        by_turn.append((turn, t - int(m.group(1)) / 1000))
                if h.our_state is h11.MUST_CLOSE or h.their_state is h11.MUST_CLOSE:
                    writer.close()
                    conn = None
            except Exception as e:  # noqa: BLE001 - counted
                errors.append(f"turn {turn}: {type(e).__name__}: {e}"[:200])
                if conn is not None:
                    conn[1].close()
                conn = None
            await asyncio.sleep(think * rnd.uniform(0.5, 1.5))
        if conn is not None:
            conn[1].close()

    async def main() -> None:
        await asyncio.gather(*(agent(k) for k in range(n_agents)))

    asyncio.run(main())
    out_w.send(
        {
            "added": added,
            "total": total,
            "errors": len(errors),
            "samples": errors[:3],
            "requests": n_agents * len(session),
            "by_turn": by_turn,
        }
    )


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its live children (the compression worker)."""
    tick = os.sysconf("SC_CLK_TCK")
    s = 0.0
    for p in [pid, *_descendants(pid)]:
        try:
            f = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        s += (int(f[11]) + int(f[12])) / tick
    return s


# ---------------------------------------------------------------------------------------------
# the proxies


class Target:
    """A running proxy: its pid, how agents reach it, and how to stop it."""

    def __init__(self, label: str, mode: str, port: int, pid: int, ca: str, stop) -> None:
        self.label, self.mode, self.port, self.pid, self.ca, self.stop = label, mode, port, pid, ca, stop


def start_mitm(label: str, script: Path | None) -> Target:
    from tests.support.proxy import MitmProxy

    opts: dict = {"flow_detail": 0}
    px = MitmProxy(script, options=opts, startup_timeout=120).start()
    if script is not None:
        px.wait_for_log(r"headroom: ready", timeout=120, since_start=True)
    print(f"{label}: process {px.process.pid}", flush=True)
    return Target(label, "forward", px.port, px.process.pid, str(px.ca_path), px.cleanup)


def peer_venv(where: Path) -> tuple[Path | None, str]:
    """The peer proxy's ``headroom`` executable in its own venv (installed on first use), or
    None and why not."""
    exe = where / "bin" / "headroom"
    if exe.exists():
        return exe, ""
    try:
        subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, capture_output=True, timeout=300)
        r = subprocess.run(
            [str(where / "bin" / "pip"), "install", "-q", PEER_PACKAGE], capture_output=True, text=True, timeout=1800
        )
    except (subprocess.SubprocessError, OSError) as e:
        return None, f"could not install {PEER_PACKAGE}: {e}"
    if r.returncode != 0 or not exe.exists():
        return None, f"pip install {PEER_PACKAGE} failed: {(r.stderr or r.stdout).strip().splitlines()[-1:]}"
    return exe, ""


def start_peer(exe: Path, up_port: int, cafile: Path) -> tuple[Target | None, str]:
    from tests.support.proxy import free_port

    port = free_port()
    home = Path(tempfile.mkdtemp(prefix="bench-peer-"))
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HEADROOM_", "ANTHROPIC_", "OPENAI_")) and "proxy" not in k.lower()
    }
    env.update(HOME=str(home), ANTHROPIC_TARGET_API_URL=f"https://127.0.0.1:{up_port}", SSL_CERT_FILE=str(cafile),
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1")  # fmt: skip
    log = open(home / "peer.log", "wb")
    proc = subprocess.Popen(
        [str(exe), "proxy", "--port", str(port), "--no-rate-limit", "--no-http2", "--no-subscription-tracking"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=home, start_new_session=True,
    )  # fmt: skip

    def stop() -> None:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        log.close()
        shutil.rmtree(home, ignore_errors=True)

    import httpx

    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = (home / "peer.log").read_text(errors="replace")[-400:]
            stop()
            return None, f"the peer proxy exited ({proc.returncode}): {tail}"
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code < 500:
                return Target("headroom-ai (peer)", "base", port, proc.pid, "", stop), ""
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    stop()
    return None, "the peer proxy did not answer /health within 180 s"


# ---------------------------------------------------------------------------------------------
# rounds and the capacity search


def run_round(t: Target, up_port: int, session, n: int, think: float, seed: int) -> dict:
    r, w = mp.Pipe(duplex=False)
    target = {"mode": t.mode, "port": t.port, "up_port": up_port, "ca": t.ca}
    cpu0 = cpu_seconds(t.pid)
    p = mp.Process(target=agents_main, args=(target, session, n, think, seed, w))
    p.start()
    res = r.recv()
    p.join()
    res["cpu"] = cpu_seconds(t.pid) - cpu0
    res["n"] = n
    answered = res["errors"] == 0 and len(res["added"]) == res["requests"]
    res["ok"] = answered and pct(res["added"], 0.95) * 1000 < ARGS.p95_ms
    res["later"] = [a for turn, a in res["by_turn"] if turn > 0]
    res["ok_later"] = answered and pct(res["later"], 0.95) * 1000 < ARGS.p95_ms
    return res


def capacity(t: Target, up_port: int, session, new_bytes: list[int], seed0: int) -> dict:
    """Rounds of N agents, N doubling while the looser test (continuing turns) holds, then one
    step between; the capacity under each test is the largest N that passed it."""
    rounds: list[dict] = []
    seed = seed0
    if ARGS.warm_up:  # the proxy's first traffic (its one-time costs), not counted
        res = run_round(t, up_port, session, ARGS.warm_up, ARGS.think, seed0 + 50)
        print(
            f"  {t.label}: warm-up round of {ARGS.warm_up} agents (not counted): added p95 {1000 * pct(res['added'], 0.95):.0f} ms",
            flush=True,
        )
    for n in ARGS.agents:  # fixed rounds (--agents): no search
        seed += 1
        rounds.append(run_round(t, up_port, session, n, ARGS.think, seed))
        _say(t, rounds[-1])
    n = ARGS.max_agents + 1 if ARGS.agents else 1
    while n <= ARGS.max_agents:
        seed += 1
        res = run_round(t, up_port, session, n, ARGS.think, seed)
        rounds.append(res)
        _say(t, res)
        if not res["ok_later"]:
            break
        n *= 2
    passed = [r["n"] for r in rounds if r["ok_later"]]
    if not ARGS.agents and rounds and not rounds[-1]["ok_later"] and passed and rounds[-1]["n"] - max(passed) > 1:
        seed += 1
        res = run_round(t, up_port, session, (max(passed) + rounds[-1]["n"]) // 2, ARGS.think, seed)
        rounds.append(res)
        _say(t, res)
    best = max((r["n"] for r in rounds if r["ok"]), default=0)
    best_later = max((r["n"] for r in rounds if r["ok_later"]), default=0)
    capped = all(r["ok_later"] for r in rounds)
    reqs = sum(len(r["total"]) for r in rounds)
    new_mb = sum(sum(new_bytes) * r["n"] for r in rounds) / 1e6
    cpu = sum(r["cpu"] for r in rounds)
    at = next((r for r in rounds if r["n"] == best_later), None)
    return {
        "label": t.label, "capacity": best, "capacity_later": best_later, "limit": " (the most tried)" if capped else "",
        "p95_at": 1000 * pct(at["added"], 0.95) if at else float("nan"), "p95_later_at": 1000 * pct(at["later"], 0.95) if at else float("nan"),
        "p50_at": 1000 * pct(at["added"], 0.5) if at else float("nan"),
        "cpu_per_req": cpu / max(1, reqs), "cpu_per_mb": cpu / new_mb if new_mb else float("nan"),
        "rss_end": rss_mib(t.pid)[0], "requests": reqs, "errors": sum(r["errors"] for r in rounds),
    }  # fmt: skip


def _say(t: Target, res: dict) -> None:
    print(f"  {t.label}: {res['n']} agents: {len(res['added'])}/{res['requests']} answered, {res['errors']} errors, added "
          f"p50 {1000 * pct(res['added'], 0.5):.0f} ms, p95 {1000 * pct(res['added'], 0.95):.0f} ms "
          f"(continuing turns {1000 * pct(res['later'], 0.95):.0f} ms), CPU {res['cpu']:.1f} s", flush=True)  # fmt: skip
    turns: dict[int, list[float]] = {}
    for turn, a in res["by_turn"]:
        turns.setdefault(turn, []).append(a)
    print(
        "    added p95 by turn: "
        + ", ".join(f"{k}: {1000 * pct(v, 0.95):.0f}" for k, v in sorted(turns.items()))
        + " ms",
        flush=True,
    )
    if res["errors"]:
        print(f"    e.g. {res['samples']}", flush=True)


ARGS: argparse.Namespace


def main() -> None:
    global ARGS
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--turns", type=int, default=8, help="requests of session-a each agent sends (default 8, at most 31)"
    )
    ap.add_argument(
        "--think", type=float, default=1.0, help="mean think time between an answer and the next request, seconds"
    )
    ap.add_argument("--ttfb", type=float, default=1.0, help="the upstream's time to the first byte, seconds")
    ap.add_argument("--stream", type=float, default=0.5, help="the upstream's time streaming the events, seconds")
    ap.add_argument(
        "--max-agents", type=int, default=16, help="the most agents tried (default 16: a few minutes in all)"
    )
    ap.add_argument("--p95-ms", type=float, default=100.0)
    ap.add_argument(
        "--warm-up",
        type=int,
        default=1,
        help="agents of a first round not counted: each proxy's first traffic pays its one-time costs there (0: none)",
    )
    ap.add_argument(
        "--agents",
        type=lambda v: [int(x) for x in v.split(",")],
        default=[],
        help="comma list of agent counts: run these rounds only, in order (no search; e.g. for a profiler)",
    )
    ap.add_argument("--only", default="headroom,plain,peer", help="comma list of headroom, plain, peer")
    ap.add_argument(
        "--peer",
        default=str(Path.home() / ".cache" / "headroom-bench" / "peer-venv"),
        help=f"venv of the peer proxy ({PEER_PACKAGE}; installed there on first use), or 'none'",
    )
    ap.add_argument("--quick", action="store_true", help="smoke test: 2 turns, at most 4 agents, short delays")
    ARGS = ap.parse_args()
    if ARGS.quick:
        ARGS.turns, ARGS.max_agents, ARGS.think, ARGS.ttfb, ARGS.stream = 2, 4, 0.3, 0.3, 0.1

    from rich.console import Console
    from rich.table import Table

    from tests.support.proxy import ADDON_SCRIPT

    session = load_session(min(31, ARGS.turns))
    new_bytes = new_tool_bytes(session)
    sizes = [len(_dump(b)) for _, b, _ in session]
    print(f"session-a, {len(session)} turns per agent: bodies {min(sizes) // 1024}-{max(sizes) // 1024} KB, "
          f"{sum(new_bytes) / 1e6:.2f} MB of new tool output per agent; think {ARGS.think} s, upstream {ARGS.ttfb} + {ARGS.stream} s", flush=True)  # fmt: skip
    certdir = tempfile.mkdtemp(prefix="bench-capacity-")
    port_r, port_w = mp.Pipe(duplex=False)
    up = mp.Process(
        target=upstream_main, args=(certdir, [a for _, _, a in session], ARGS.ttfb, ARGS.stream, port_w), daemon=True
    )
    up.start()
    up_port = port_r.recv()
    wanted = ARGS.only.split(",")
    results, skipped = [], []
    try:
        for i, what in enumerate(("headroom", "plain", "peer")):
            if what not in wanted:
                continue
            if what == "peer":
                if ARGS.peer == "none":
                    skipped.append("headroom-ai (peer): --peer none")
                    continue
                exe, why = peer_venv(Path(ARGS.peer))
                t, why = start_peer(exe, up_port, Path(certdir) / "upstream-cert.pem") if exe else (None, why)
                if t is None:
                    skipped.append(f"headroom-ai (peer): {why}")
                    print(f"skipped headroom-ai (peer): {why}", flush=True)
                    continue
            else:
                t = start_mitm(
                    "headroom" if what == "headroom" else "plain mitmdump", ADDON_SCRIPT if what == "headroom" else None
                )
            try:
                results.append(capacity(t, up_port, session, new_bytes, 100 * i))
            finally:
                t.stop()
    finally:
        os.kill(up.pid, signal.SIGTERM)
        up.join(10)
        shutil.rmtree(certdir, ignore_errors=True)

    tab = Table(title=f"Agents one proxy serves: every request answered, added p95 < {ARGS.p95_ms:.0f} ms "
                      f"(session-a x {len(session)} turns per agent, think {ARGS.think} s, model {ARGS.ttfb}+{ARGS.stream} s)", title_justify="left")  # fmt: skip
    tab.add_column("")
    for r in results:
        tab.add_column(r["label"], justify="right")
    row = lambda name, fn: tab.add_row(name, *[fn(r) for r in results])  # noqa: E731
    row("agents: all requests", lambda r: f"{r['capacity']}")
    row("agents: continuing turns", lambda r: f"{r['capacity_later']}{r['limit']}")
    row(
        "  there: added p50 / p95 / p95 continuing",
        lambda r: f"{r['p50_at']:.0f} / {r['p95_at']:.0f} / {r['p95_later_at']:.0f} ms",
    )
    row("CPU per request", lambda r: f"{1000 * r['cpu_per_req']:.0f} ms")
    row("CPU per MB of new tool output", lambda r: f"{r['cpu_per_mb']:.2f} s")
    row("resident memory at the end", lambda r: f"{r['rss_end']:.0f} MiB")
    row("requests (all rounds) / errors", lambda r: f"{r['requests']} / {r['errors']}")
    Console(width=160).print(tab)
    for s in skipped:
        print("skipped", s)


if __name__ == "__main__":
    main()
