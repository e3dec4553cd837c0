"""How long the stats page, /stats and /metrics take to read a large ledger.

Fills a fresh SQLite ledger with N synthetic request outcomes (3 tool outputs each in
``detail``, four agents, ten projects, thirty days) and times ``ledger.snapshot`` (what /stats
and the page read), ``metrics.render`` (/metrics) and ``ledger.totals`` alone.

    .venv/bin/python bench/bench_ledger.py [N ...]      (default: 10000 100000)
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

from rich.console import Console
from rich.table import Table
from sqlalchemy import insert

from headroom_core import ledger
from headroom_core.db.engine import open_database
from headroom_core.db.models import RequestOutcome
from headroom_core.web import metrics

KINDS = ("json", "logs", "code", "search", "diff", "text")


def fill(url: str, n: int):
    sessions = open_database(url)
    t0 = datetime(2026, 1, 1)
    rows = []
    for i in range(n):
        detail = [
            {
                "kind": KINDS[(i + j) % len(KINDS)],
                "changed": j != 2,
                "cached": i % 3 == 0,
                "tokens_before": 2000 + j,
                "tokens_after": 600 + j,
            }
            for j in range(3)
        ]
        rows.append(dict(created_at=t0 + timedelta(minutes=43 * i % (30 * 24 * 60)), dialect="anthropic-messages" if i % 2 else "openai-chat", client=f"agent-{i % 4}",
                         model="m", session_key=f"s{i % 500}", project=f"/p/{i % 10}", action="compressed", reason="r", body_bytes_before=40000, body_bytes_after=15000,
                         tokens_before=6003, tokens_after=2403, blocks_compressed=2, tools_tokens_before=9000, tools_tokens_after=7000, retrieve_rounds=i % 2,
                         status_code=200, usage_input_tokens=5000, usage_output_tokens=300, usage_cache_read_tokens=20000, usage_cache_write_tokens=1000,
                         detail=json.dumps(detail)))  # fmt: skip
    with sessions.begin() as s:
        for k in range(0, n, 5000):
            s.execute(insert(RequestOutcome), rows[k : k + 5000])
    return sessions


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main(sizes: list[int]) -> None:
    table = Table(title="Reading the savings ledger (SQLite, WAL)")
    for c in ("requests", "totals (s)", "snapshot: /stats, page (s)", "metrics.render: /metrics (s)", "db size (MB)"):
        table.add_column(c, justify="right")
    for n in sizes:
        with tempfile.TemporaryDirectory() as d:
            url = f"sqlite:///{Path(d) / 'bench.db'}"
            sessions = fill(url, n)
            table.add_row(
                f"{n:,}",
                f"{timed(lambda: ledger.totals(sessions)):.3f}",
                f"{timed(lambda: ledger.snapshot(sessions)):.3f}",
                f"{timed(lambda: metrics.render(lambda: sessions)):.3f}",
                f"{sum(p.stat().st_size for p in Path(d).iterdir()) / 1e6:.1f}",
            )
    Console().print(table)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [10_000, 100_000])
