"""Benchmark: a team of proxies on one PostgreSQL against one proxy on SQLite, same load, same run.

The load is ``tests/support/team_load.py``'s: ``--concurrency`` agents (32), each running coding
sessions whose requests are spread over the proxies request by request (a load balancer), with
JSON, log and test outputs compressed, failures learned from, and a ``headroom_retrieve`` call
answered by the proxy in every session's last turn. The same load goes through:

- plain ``mitmdump`` (no addon), 1 and 3 processes: the baseline the added latency is taken from;
- 1 Headroom proxy on SQLite (the default);
- 1 Headroom proxy on PostgreSQL;
- 3 Headroom proxies on one PostgreSQL (one database, one ``secret_key_file``);
- the same with one of them busy: its every plan times out (issue 33), so what is new in its
  turns goes whole, recorded, and a later turn through another proxy compresses it late where
  that pays.

Prints requests per second, latency (median, p95) and the latency Headroom adds (median and p95
minus those of the same number of plain mitmdump processes), with the errors, the prompt-cache
rule's breaks (requests whose first upstream body changed an earlier part than the client did
against the previous turn of its session: :func:`headroom_core.cache.prefix_check.earlier_break`;
a session's turns go to the proxies in turn, so with three proxies every turn meets another
proxy), and for PostgreSQL the deadlocks and the errors its server logged (its own throwaway
server: ``tests/support/pg_cluster.py``). Memory is on, as a team would run it.

Run: ``.venv/bin/python bench/bench_team.py [--requests 3000] [--concurrency 32]``.
Not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from headroom_core.cache.prefix_check import earlier_break  # noqa: E402
from tests.support.clients import anthropic_client  # noqa: E402
from tests.support.pg_cluster import PgCluster  # noqa: E402
from tests.support.proxy import ADDON_SCRIPT, MitmProxy  # noqa: E402
from tests.support.team_load import TURNS, LoadResult, payloads, run_load  # noqa: E402
from tests.support.upstream import Upstream  # noqa: E402

CORPUS = REPO.parent / "shared" / "corpus"
OPTIONS = {"headroom_memory": "true", "headroom_compress_timeout_seconds": "600"}


@dataclass(frozen=True)
class Row:
    setup: str
    proxies: int
    database: str
    result: LoadResult
    retrieve: str = "-"
    deadlocks: str = "-"
    db_errors: str = "-"
    breaks: str = "-"


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def _bare(v):
    if isinstance(v, dict):
        return {k: _bare(x) for k, x in v.items() if k != "cache_control"}
    return [_bare(x) for x in v] if isinstance(v, list) else v


def prefix_breaks(result: LoadResult, up: Upstream) -> tuple[int, int]:
    """``(breaks, late)``: requests whose first upstream body broke the prompt-cache rule against
    the previous turn of their session (what the test of the team asserts to be none), and those
    whose only such change was a late compression (an earlier message the previous turn sent as
    the client wrote it goes shorter now: issue 33, recorded by the proxy), counted apart."""
    first: dict[str, dict] = {}
    for rec in up.requests:
        first.setdefault(rec.header("x-load-id") or "", rec.json)
    clients = {s.load_id: json.loads(s.body) for s in result.sent if not s.error}
    breaks = late = 0
    for load_id, body in clients.items():
        agent, session, turn = load_id.split("/")
        prev = f"{agent}/{session}/{int(turn) - 1}"
        if turn == "0" or prev not in clients or load_id not in first or prev not in first:
            continue
        b = earlier_break(clients[prev], body, first[prev], first[load_id])
        if b is None:
            continue
        if b[0] == 2:
            was, now, client = (
                first[prev]["messages"][b[1]],
                first[load_id]["messages"][b[1]],
                clients[prev]["messages"][b[1]],
            )
            if _bare(was) == _bare(client) and len(json.dumps(now)) < len(json.dumps(was)):
                late += 1
                continue
        breaks += 1
    return breaks, late


def warm(proxies: list[MitmProxy], up: Upstream, addon: bool) -> None:
    """One request through each proxy; with the addon, wait until its embedding model loaded."""
    for p in proxies:
        anthropic_client(up, p).messages.create(
            model="claude-sonnet-4-5", max_tokens=5, messages=[{"role": "user", "content": "warm up"}]
        )
        if addon:
            p.wait_for_log(r"headroom: embedding model all-MiniLM-L6-v2 loaded", timeout=300)
    up.reset()


def run(
    label: str,
    n: int,
    db: str,
    up: Upstream,
    requests: int,
    concurrency: int,
    pages: list[str],
    cluster: PgCluster | None,
    addon: bool = True,
    busy: bool = False,
) -> Row:
    """One setup under the load; ``busy``: the last proxy's every plan times out (its compression
    budget a microsecond: it sends what was decided before, and what is new goes whole)."""
    env: dict[str, str] = {}
    dbname = ""
    if addon:
        env["HEADROOM_SECRET_KEY_FILE"] = str(Path(tempfile.mkdtemp(prefix="headroom-team-key-")) / "secret.key")
    if db == "PostgreSQL":
        assert cluster is not None
        dbname = f"headroom_bench_{n}_{int(time.time())}"
        env["HEADROOM_DB_URL"] = cluster.create_database(dbname)
    offset = len(cluster.log_text()) if cluster else 0
    options = [OPTIONS if addon else {"stream_large_bodies": "1"} for _ in range(n)]
    if busy:
        options[-1] = {**OPTIONS, "headroom_compress_timeout_seconds": "0.000001"}
    proxies = [MitmProxy(ADDON_SCRIPT if addon else None, options=o, env=env, startup_timeout=120) for o in options]
    try:
        for p in proxies:
            p.start()
        warm(proxies, up, addon)
        result = run_load(proxies, up, requests, concurrency, pages)
        responder = up.responder
        breaks = "{} ({} late)".format(*prefix_breaks(result, up)) if addon else "-"
        up.reset()
    finally:
        for p in proxies:
            p.cleanup()
    retrieve = (
        f"{responder.exact}/{sum(1 for s in result.sent if s.load_id.endswith(f'/{TURNS - 1}'))}" if addon else "-"
    )
    if db == "PostgreSQL" and cluster is not None:
        deadlocks = cluster.query(f"SELECT deadlocks FROM pg_stat_database WHERE datname = '{dbname}'")[0][0]
        return Row(label, n, db, result, retrieve, str(deadlocks), str(len(cluster.errors(offset))), breaks)
    return Row(label, n, db, result, retrieve, breaks=breaks)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=3000, help="requests per setup (default 3000)")
    ap.add_argument("--concurrency", type=int, default=32, help="concurrent agents (default 32)")
    args = ap.parse_args()
    console = Console(width=200)  # the whole table, also when the output is a file
    pages = payloads(CORPUS)
    cluster, why = PgCluster.start_or_skip_reason("headroom_bench")
    if cluster is None:
        console.print(f"[yellow]no PostgreSQL ({why}): only the SQLite and plain rows[/]")
    rows: list[Row] = []
    try:
        with Upstream() as up:
            rows.append(run("plain mitmdump", 1, "-", up, args.requests, args.concurrency, pages, None, addon=False))
            rows.append(run("plain mitmdump", 3, "-", up, args.requests, args.concurrency, pages, None, addon=False))
            rows.append(run("Headroom", 1, "SQLite", up, args.requests, args.concurrency, pages, None))
            if cluster is not None:
                rows.append(run("Headroom", 1, "PostgreSQL", up, args.requests, args.concurrency, pages, cluster))
                rows.append(run("Headroom", 3, "PostgreSQL", up, args.requests, args.concurrency, pages, cluster))
                rows.append(
                    run(
                        "Headroom, 1 busy",
                        3,
                        "PostgreSQL",
                        up,
                        args.requests,
                        args.concurrency,
                        pages,
                        cluster,
                        busy=True,
                    )
                )
    finally:
        if cluster is not None:
            cluster.destroy()

    base = {r.proxies: r.result for r in rows if r.setup == "plain mitmdump"}
    t = Table(title=f"{args.requests} requests from {args.concurrency} concurrent agents per setup (latency in ms)")
    for col in (
        "setup",
        "proxies",
        "database",
        "requests",
        "errors",
        "req/s",
        "p50",
        "p95",
        "added p50",
        "added p95",
        "retrieved exact",
        "earlier breaks",
        "deadlocks",
        "db errors",
    ):
        t.add_column(col, justify="left" if col in ("setup", "database") else "right")
    for r in rows:
        lat = [s.seconds * 1000 for s in r.result.sent]
        b = (
            [s.seconds * 1000 for s in base[r.proxies].sent]
            if r.proxies in base and r.setup != "plain mitmdump"
            else None
        )
        p50, p95 = statistics.median(lat), pct(lat, 0.95)
        added = (f"{p50 - statistics.median(b):.0f}", f"{p95 - pct(b, 0.95):.0f}") if b else ("-", "-")
        t.add_row(
            r.setup,
            str(r.proxies),
            r.database,
            str(len(r.result.sent)),
            str(len(r.result.errors)),
            f"{r.result.per_second:.1f}",
            f"{p50:.0f}",
            f"{p95:.0f}",
            *added,
            r.retrieve,
            r.breaks,
            r.deadlocks,
            r.db_errors,
        )
    console.print(t)
    for r in rows:
        for s in r.result.errors[:3]:
            console.print(f"[red]{r.setup} x{r.proxies} {r.database}: {s.load_id}: {s.error}[/]")


if __name__ == "__main__":
    main()
