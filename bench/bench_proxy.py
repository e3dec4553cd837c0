"""Benchmark: the latency and throughput the addon costs, against plain mitmdump, in one run.

Run ``.venv/bin/python bench/bench_proxy.py [--passes N] [--throughput-requests N]`` from the
project root. Not a test: it asserts nothing, it prints tables.

1. **Added latency, real sessions.** Every session of ``../shared/corpus/anthropic-flows``
   (``session-<name>-NN.json``, in order) is replayed through four paths, interleaved request by
   request (the order rotates): direct to a local HTTPS upstream that answers with the recorded
   response, through a plain ``mitmdump`` on its defaults (each body read whole before it is
   forwarded, as the addon must read an LLM request to compress it), through a plain
   ``mitmdump`` streaming every body (``stream_large_bodies=1``: the request reaches the
   upstream while the client is still sending it), and through ``mitmdump -s
   addons/headroom.py``. Each pass starts the proxies afresh (a new Headroom home), so every
   pass sees the session as the proxy first does. Reported: the addon's added latency (addon
   minus each plain mitmdump, per request, whole exchange as the client sees it) as median / p95 /
   max, for the first request of each session and for the requests after it separately, and for
   passthrough requests (not LLM calls: ``GET /v1/models``). Measured twice: with an upstream
   that answers at once (the worst case: nothing the proxy does after forwarding can overlap
   the model), and with one that answers after ``--first-byte-ms`` (default 500 ms, a model's
   time to first byte: the proxy's work after forwarding overlaps it, as against a real
   provider).
2. **Where the time goes.** The same requests planned in-process
   (:func:`headroom_core.request_plan.plan_request` as the addon calls it, storing deferred as
   in the proxy) under ``cProfile`` with the thread's CPU time as its clock (steady on a busy
   machine; the plan runs in one thread): median milliseconds per request of each step.
3. **Throughput.** Small Messages requests (a 1 KB body) at concurrency 32 (32 agents, each
   its own key and conversation) through plain mitmdump (its defaults, and with every body
   streamed) and through the addon: requests per second, the ratios, and the proxy's CPU
   milliseconds per request (steadier than req/s on a shared machine). For scale, mitmdump with
   two reference addons (``bench/reference_addons/``): an empty async hook, and one thread hop.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from tests.support.clients import direct_http_client, http_client  # noqa: E402
from tests.support.proxy import ADDON_SCRIPT, MitmProxy  # noqa: E402
from tests.support.upstream import Upstream  # noqa: E402

CORPUS = REPO.parent / "shared" / "corpus"
#: The walk's steps, as functions of headroom_core.request_plan (and what they call).
STEPS = ("_classify", "load", "_replay_messages", "_decide_proxy_tools", "_tools_step", "_compress_step", "plan_images",
         "past_failures", "inject_memories", "apply_spliced", "_check_messages", "_check_markers")  # fmt: skip


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))] if xs else float("nan")


def sessions() -> dict[str, list[tuple[str, str, bytes, dict]]]:
    """``name -> [(request name, path, body, flow)]`` in session order."""
    out: dict[str, list] = defaultdict(list)
    for f in sorted((CORPUS / "anthropic-flows").glob("session-*.json")):
        flow = json.loads(f.read_text())
        body = flow["request"]["body"]
        path = "/v1/messages" if "max_tokens" in body else "/v1/messages/count_tokens"
        out[f.stem.rsplit("-", 1)[0]].append((f.stem, path, json.dumps(body).encode(), flow))
    return out


def recorded(flow: dict) -> tuple[bytes, dict[str, str]]:
    body = flow["response"]["body"]
    if isinstance(body, str):
        return body.encode(), {"content-type": "text/event-stream"}
    return json.dumps(body).encode(), {"content-type": "application/json"}


def exchange(
    client: httpx.Client,
    up: Upstream,
    url: str,
    path: str,
    body: bytes,
    reply: tuple[bytes, dict[str, str]],
    ua: str,
    wait: float = 0.0,
) -> float:
    """Milliseconds for one whole exchange (the response read to its end); the upstream waits
    ``wait`` seconds before answering."""
    up.raw(200, reply[0], reply[1], wait=wait)
    t0 = time.perf_counter()
    with client.stream(
        "POST", url + path, content=body, headers={"content-type": "application/json", "user-agent": ua}
    ) as r:
        for _ in r.iter_raw():
            pass
    return (time.perf_counter() - t0) * 1000


def passthrough(client: httpx.Client, up: Upstream, url: str) -> float:
    up.raw(200, b'{"data": []}', {"content-type": "application/json"})
    t0 = time.perf_counter()
    client.get(url + "/v1/models")
    return (time.perf_counter() - t0) * 1000


def latency(passes: int, console: Console, wait: float = 0.0) -> None:
    all_sessions = sessions()
    #: added latency per baseline ("plain": mitmdump on its defaults, bodies read whole, as the
    #: addon reads an LLM request; "streamed": mitmdump streaming every body, the faster one)
    first: dict[str, list[float]] = defaultdict(list)
    later: dict[str, list[float]] = defaultdict(list)
    through: dict[str, list[float]] = defaultdict(list)
    ms: dict[str, list[float]] = defaultdict(list)
    with Upstream() as up:
        for p in range(passes):
            with (
                MitmProxy(None) as plain,
                MitmProxy(None, options={"stream_large_bodies": "1"}) as streamed,
                MitmProxy(ADDON_SCRIPT) as hr,
            ):
                hr.wait_for_log(r"headroom: database", timeout=120)
                _wait_warm(hr)
                time.sleep(5)  # the addon's warm-up (database, vocabulary, model) settles
                with (
                    direct_http_client(up, timeout=300) as cd,
                    http_client(plain, timeout=300) as cp,
                    http_client(streamed, timeout=300) as cs,
                    http_client(hr, timeout=300) as ch,
                ):
                    paths = {"direct": cd, "plain": cp, "streamed": cs, "addon": ch}
                    for _name, reqs in all_sessions.items():
                        for n, (_req, path, body, flow) in enumerate(reqs):
                            reply = recorded(flow)
                            ua = flow["request"]["headers"].get("user-agent", "bench")
                            order = list(paths)
                            k0 = (n + p) % len(order)
                            order = order[k0:] + order[:k0]
                            t = {k: exchange(paths[k], up, up.url, path, body, reply, ua, wait) for k in order}
                            for k, v in t.items():
                                ms[k].append(v)
                            tp = {k: passthrough(paths[k], up, up.url) for k in ("plain", "streamed", "addon")}
                            for base in ("plain", "streamed"):
                                (first if n == 0 else later)[base].append(t["addon"] - t[base])
                                through[base].append(tp["addon"] - tp[base])
    when = (
        f"an upstream answering after {wait * 1000:.0f} ms, as a model's time to first byte"
        if wait
        else "an upstream answering at once"
    )
    t = Table(
        title=f"Latency the addon adds over plain mitmdump (ms; whole exchange; {passes} passes, interleaved; {when})"
    )
    for c in ("requests", "over", "n", "median", "p95", "max"):
        t.add_column(c, justify="left" if c in ("requests", "over") else "right")
    for label, per in (
        ("LLM calls after the first of a session", later),
        ("first request of a session", first),
        ("passthrough (GET /v1/models)", through),
    ):
        for base, over in (("plain", "mitmdump"), ("streamed", "mitmdump, bodies streamed")):
            xs = per[base]
            t.add_row(
                label if base == "plain" else "",
                over,
                str(len(xs)),
                f"{statistics.median(xs):.1f}",
                f"{pct(xs, 0.95):.1f}",
                f"{max(xs):.1f}",
            )
    console.print(t)
    console.print(
        "for scale: median exchange "
        + ", ".join(f"{k} {statistics.median(ms[k]):.1f} ms" for k in ("direct", "plain", "streamed", "addon"))
        + " (plain: mitmdump on its defaults; streamed: with stream_large_bodies=1)"
    )


def profile(console: Console) -> None:
    from headroom_core.compress.tokens import TokenCounter
    from headroom_core.request_plan import plan_request
    from headroom_core.runtime import Runtime
    from headroom_core.settings import load_settings

    per_step: dict[str, list[float]] = defaultdict(list)
    totals: list[float] = []
    for _name, reqs in sessions().items():
        with tempfile.TemporaryDirectory(prefix="headroom-bench-proxy-") as home:
            rt = Runtime(load_settings({"home": home}, env={}))
            rt.__dict__["counter"] = TokenCounter(Path.home() / ".headroom")
            for n, (_req, path, body, flow) in enumerate(reqs):
                headers = {"user-agent": flow["request"]["headers"].get("user-agent", "")}
                pr = cProfile.Profile(time.thread_time)  # CPU time of this thread: steady on a busy machine
                t0 = time.thread_time()
                pr.enable()
                plan = plan_request(rt, "POST", path, headers, body, defer=True)
                pr.disable()
                totals_ms = (time.thread_time() - t0) * 1000
                if plan.persist is not None:
                    plan.persist()  # after forwarding, as the proxy does
                if n == 0:
                    continue
                totals.append(totals_ms)
                st = pstats.Stats(pr).stats  # type: ignore[attr-defined]
                seen: dict[str, float] = defaultdict(float)
                for (fn, _line, name), (_cc, _nc, _tt, ct, _callers) in st.items():
                    if "headroom_core" in fn and name in STEPS:
                        seen[name] += ct * 1000
                for s in STEPS:
                    per_step[s].append(seen.get(s, 0.0))
    t = Table(
        title="Where the time goes: the request walk in-process (CPU ms per request, requests after the first of a session, profiled)"
    )
    for c in ("step", "median", "p95", "max"):
        t.add_column(c, justify="left" if c == "step" else "right")
    for s in STEPS:
        xs = per_step[s]
        if any(xs):
            t.add_row(s, f"{statistics.median(xs):.2f}", f"{pct(xs, 0.95):.2f}", f"{max(xs):.2f}")
    t.add_row(
        "[bold]whole plan[/]", f"{statistics.median(totals):.2f}", f"{pct(totals, 0.95):.2f}", f"{max(totals):.2f}"
    )
    console.print(t)


def _wait_warm(px: MitmProxy) -> None:
    """Wait until the proxy's warm-up is over (database, secret key and vocabulary loaded: the
    log says ``headroom: ready``), then a little more. The embedding model is not loaded at
    start (only once prose or memory needs it), so there is nothing else to wait for."""
    try:
        px.wait_for_log(r"headroom: ready", timeout=120)
    except Exception:  # noqa: BLE001 - an older proxy without the line: measured as it is
        pass
    time.sleep(2)


def _cpu_seconds(pid: int) -> float:
    """CPU time (user + system, seconds) process ``pid`` used so far, all its threads (Linux
    ``/proc/<pid>/stat`` fields 14 and 15, in clock ticks; proc(5))."""
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


#: The throughput runs: label, addon script (None: plain mitmdump), mitmdump options.
_PLAIN = ("plain mitmdump", None, None)
_PLAIN_STREAM = ("plain mitmdump, bodies streamed", None, {"stream_large_bodies": "1"})
_ADDON = ("mitmdump -s headroom", ADDON_SCRIPT, None)
_REFERENCE = REPO / "bench" / "reference_addons"
#: What any addon pays, for scale: an async hook that does nothing, and one that awaits a thread
_EMPTY_ASYNC = ("plain mitmdump + an empty async hook", str(_REFERENCE / "empty_async_hook.py"), None)
_ONE_HOP = ("plain mitmdump + one thread hop", str(_REFERENCE / "one_thread_hop.py"), None)


def throughput(n: int, console: Console) -> None:
    """Requests per second at concurrency 32 on small Messages requests: plain mitmdump (its
    defaults, and with every body streamed), the addon, twice each, interleaved. Each of the 32
    clients is its own agent (its own API key and conversation), sending its request again and
    again. Also the proxy's CPU milliseconds per request: on a shared machine req/s swings with
    the neighbours, CPU per request much less. For scale, two reference addons run too: an async
    request hook that does nothing, and one that awaits a call that does nothing in a worker
    thread (the least an addon pays that keeps blocking work off the event loop)."""
    rows = []
    with Upstream() as up:
        runs = (_PLAIN, _ADDON, _PLAIN_STREAM, _EMPTY_ASYNC, _ONE_HOP)
        for label, script, options in runs + runs:
            with MitmProxy(script, options=options) as px:
                if script == ADDON_SCRIPT:
                    px.wait_for_log(r"headroom: database", timeout=120)
                    _wait_warm(px)
                errors = 0
                lock = threading.Lock()
                local = threading.local()
                agents = iter(range(10**6))

                def one(_i: int) -> None:
                    nonlocal errors
                    c = getattr(local, "c", None)
                    if c is None:
                        with lock:
                            a = next(agents)
                        c = local.c = http_client(px, timeout=120)
                        local.body = json.dumps(
                            {
                                "model": "claude-sonnet-4-5",
                                "max_tokens": 100,
                                "messages": [{"role": "user", "content": f"Summarise this ({a}). " + "word " * 150}],
                            }
                        ).encode()
                        local.headers = {"content-type": "application/json", "x-api-key": f"key-{a}"}
                    r = c.post(up.url + "/v1/messages", content=local.body, headers=local.headers)
                    if r.status_code != 200:
                        with lock:
                            errors += 1

                with ThreadPoolExecutor(32) as pool:
                    list(pool.map(one, range(32)))  # connections up
                    cpu0 = _cpu_seconds(px.process.pid)
                    t0 = time.perf_counter()
                    list(pool.map(one, range(n)))
                    dt = time.perf_counter() - t0
                    cpu = _cpu_seconds(px.process.pid) - cpu0
                rows.append((label, n / dt, 1000 * cpu / n, errors))
    t = Table(title=f"Throughput at concurrency 32 ({n} small Messages requests per run, two runs each, interleaved)")
    for c in ("proxy", "requests/s", "proxy CPU ms/request", "errors", "req/s vs plain", "req/s vs plain streamed"):
        t.add_column(c, justify="left" if c == "proxy" else "right")
    plain = statistics.mean(r[1] for r in rows if r[0] == _PLAIN[0])
    streamed = statistics.mean(r[1] for r in rows if r[0] == _PLAIN_STREAM[0])
    for label, rate, cpu_ms, errors in sorted(rows, key=lambda r: r[0]):
        t.add_row(label, f"{rate:.0f}", f"{cpu_ms:.2f}", str(errors), f"{rate / plain:.2f}", f"{rate / streamed:.2f}")
    console.print(t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--throughput-requests", type=int, default=2000)
    ap.add_argument(
        "--first-byte-ms",
        type=float,
        default=500.0,
        help="also measure the latency with an upstream that answers after this many ms (a model's time to first byte); 0: not",
    )
    ap.add_argument("--skip", choices=("latency", "profile", "throughput"), action="append", default=[])
    args = ap.parse_args()
    console = Console(width=160)
    if "profile" not in args.skip:
        profile(console)
    if "latency" not in args.skip:
        latency(args.passes, console)
        if args.first_byte_ms > 0:
            latency(args.passes, console, args.first_byte_ms / 1000)
    if "throughput" not in args.skip:
        throughput(args.throughput_requests, console)


if __name__ == "__main__":
    main()
