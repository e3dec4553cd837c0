"""Benchmark: what the proxy saves and what it costs, through real mitmdump processes.

Replays every request of ``../shared/corpus/anthropic-flows`` (in session order) and the
``../shared/corpus/github-api`` payloads (as tool outputs of an Anthropic request) through
``mitmdump -s addons/headroom.py`` and through the same mitmdump with no addon, against a local
HTTPS upstream. Prints, per request and in total: tokens of the request body before and after
(cl100k_base estimates of the whole JSON body), and the latency the addon adds (median, p95).

Run: ``.venv/bin/python bench/bench_proxy.py``. Not a test: it asserts nothing.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from headroom_core.compress.tokens import TokenCounter  # noqa: E402
from tests.support.clients import http_client  # noqa: E402
from tests.support.proxy import ADDON_SCRIPT, MitmProxy  # noqa: E402
from tests.support.upstream import Upstream  # noqa: E402

CORPUS = REPO.parent / "shared" / "corpus"


def p95(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]


def requests() -> list[tuple[str, str, bytes]]:
    """``(label, path, body bytes)`` for every benchmark request."""
    out = []
    for f in sorted((CORPUS / "anthropic-flows").glob("session-a-*.json")):
        body = json.loads(f.read_text())["request"]["body"]
        path = "/v1/messages" if "max_tokens" in body else "/v1/messages/count_tokens"
        out.append((f.stem, path, json.dumps(dict(body, stream=False) if "stream" in body else body).encode()))
    for f in sorted((CORPUS / "github-api").glob("*.json")):
        data = json.loads(f.read_text())
        pages = [x["response"] for x in data if isinstance(x.get("response"), list)]
        for label, payload in ((f"{f.stem} (page)", max(pages, key=lambda p: len(json.dumps(p))) if pages else None), (f"{f.stem} (scenario)", data)):
            if payload is None:
                continue
            body = {
                "model": "claude-sonnet-4-5",
                "max_tokens": 1024,
                "messages": [
                    {"role": "user", "content": "Which of these need attention?"},
                    {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_b1", "name": "github_api", "input": {}}]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_b1", "content": json.dumps(payload, indent=2)}]},
                ],
            }
            out.append((label, "/v1/messages", json.dumps(body).encode()))
    return out


def main() -> None:
    console = Console()
    counter = TokenCounter(Path.home() / ".headroom")
    reqs = requests()
    with Upstream() as up, MitmProxy(None, options={"stream_large_bodies": "1"}) as plain, MitmProxy(ADDON_SCRIPT) as hr:
        time.sleep(3)  # let the addon's warm-up (database, vocabulary) finish
        rows = []
        with http_client(plain, timeout=120) as cp, http_client(hr, timeout=120) as ch:
            for label, path, body in reqs:
                t0 = time.perf_counter()
                cp.post(up.url + path, content=body, headers={"content-type": "application/json"})
                t_plain = time.perf_counter() - t0
                t0 = time.perf_counter()
                ch.post(up.url + path, content=body, headers={"content-type": "application/json", "user-agent": "bench/1"})
                t_hr = time.perf_counter() - t0
                sent = up.requests[-1].body
                rows.append((label, counter.count(body.decode()), counter.count(sent.decode()), t_plain * 1000, t_hr * 1000))
    t = Table(title="Headroom proxy: tokens per request (cl100k_base estimate of the whole body) and added latency")
    for c in ("request", "tokens before", "tokens after", "saved %", "no addon ms", "addon ms", "added ms"):
        t.add_column(c, justify="left" if c == "request" else "right")
    for label, b, a, tp, th in rows:
        t.add_row(label, f"{b:,}", f"{a:,}", f"{100 * (b - a) / b:.1f}", f"{tp:.1f}", f"{th:.1f}", f"{th - tp:.1f}")
    for group, pred in (("flows total", lambda r: r[0].startswith("session")), ("github-api total", lambda r: not r[0].startswith("session"))):
        sel = [r for r in rows if pred(r)]
        b, a = sum(r[1] for r in sel), sum(r[2] for r in sel)
        t.add_row(f"[bold]{group}[/]", f"{b:,}", f"{a:,}", f"{100 * (b - a) / b:.1f}", "", "", "")
    console.print(t)
    added = [r[4] - r[3] for r in rows]
    lat = Table(title="Latency the addon adds per request (ms), first pass in session order")
    for c in ("requests", "median no addon", "median addon", "median added", "p95 added", "max added"):
        lat.add_column(c, justify="right")
    lat.add_row(str(len(rows)), f"{statistics.median(r[3] for r in rows):.1f}", f"{statistics.median(r[4] for r in rows):.1f}", f"{statistics.median(added):.1f}", f"{p95(added):.1f}", f"{max(added):.1f}")
    console.print(lat)


if __name__ == "__main__":
    main()
