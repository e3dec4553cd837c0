"""Benchmark: the long fuzz run, the same bodies and oracle as ``tests/e2e/test_fuzz_e2e.py``.

Sends ``--examples`` hypothesis-generated request bodies (default 2,000; seed ``--seed``) of the
three dialects through a real ``mitmdump -s addons/headroom.py`` to a local upstream, and checks
each with :func:`tests.support.fuzz.check` (byte-identical, or parses and keeps every value
except compressed tool-output text) and for a 5xx of the proxy's own. Unlike the test it does
not stop at the first failure: it prints a table of outcomes per dialect and kind, every
failure (up to ``--show``), and the proxy log's tracebacks.

Run: ``.venv/bin/python bench/bench_fuzz.py [--examples 2000] [--seed 1]``. Not a test.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--show", type=int, default=10, help="failures to print in full")
    args = ap.parse_args()

    from hypothesis import HealthCheck, Phase, given, seed, settings
    from rich.console import Console
    from rich.table import Table

    from tests.e2e.test_fuzz_e2e import log_failures, run_case
    from tests.support import fuzz
    from tests.support.clients import http_client
    from tests.support.proxy import ADDON_SCRIPT, MitmProxy
    from tests.support.upstream import Upstream

    outcomes: Counter[str] = Counter()
    failures: list[tuple[fuzz.Case, list[str]]] = []
    t0 = time.monotonic()
    with (
        Upstream() as up,
        MitmProxy(ADDON_SCRIPT, options={"headroom_compress_timeout_seconds": "120"}) as px,
        http_client(px, timeout=300) as client,
    ):

        @seed(args.seed)
        @settings(
            max_examples=args.examples,
            deadline=None,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=fuzz.cases())
        def one(case: fuzz.Case) -> None:
            problems = run_case(case, client, up)
            outcomes[f"{case.dialect}\t{case.kind}\t{'FAIL' if problems else 'ok'}"] += 1
            if problems:
                failures.append((case, problems))

        one()
        log = log_failures(px.log_text())
    seconds = time.monotonic() - t0

    t = Table(title=f"fuzz: {sum(outcomes.values())} bodies, seed {args.seed}, {seconds:.0f} s", title_justify="left")
    for col in ("dialect", "kind", "result", "bodies"):
        t.add_column(col, justify="right" if col == "bodies" else "left")
    for key, n in sorted(outcomes.items()):
        t.add_row(*key.split("\t"), str(n))
    console = Console()
    console.print(t)
    print(f"failures: {len(failures)}; proxy log tracebacks: {len(log)}")
    for case, problems in failures[: args.show]:
        print(case, problems[:5])
    for line in log[: args.show]:
        print(line)


if __name__ == "__main__":
    main()
