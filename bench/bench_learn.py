"""Benchmark: what the failure learner costs.

1. Live: replays every request of ``../shared/corpus/anthropic-flows`` through
   :func:`headroom_core.request_plan.plan_request` (a fresh SQLite database), then times the
   learner's two extensions on each request's context: the observer (steps, pairing, evidence,
   failures) and the injector (the past-failures block), in milliseconds.
2. Offline: times ``learn_from_logs`` over ``../shared/corpus/claude-code-sessions`` and
   ``../shared/corpus/swe-agent`` (reading, pairing, rules), per corpus.

Run: ``.venv/bin/python bench/bench_learn.py``. Not a test: it asserts nothing.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from headroom_core.compress.tokens import TokenCounter  # noqa: E402
from headroom_core.learn.live import observe, past_failures, steps_of  # noqa: E402
from headroom_core.learn.readers import read_log  # noqa: E402
from headroom_core.learn.rules import learn_from_logs  # noqa: E402
from headroom_core.request_plan import plan_request  # noqa: E402
from headroom_core.runtime import Runtime  # noqa: E402
from headroom_core.settings import load_settings  # noqa: E402

CORPUS = REPO.parent / "shared" / "corpus"


def live(console: Console) -> None:
    rt = Runtime(load_settings({"home": tempfile.mkdtemp(prefix="headroom-bench-learn-")}, env={}))
    rt.__dict__["counter"] = TokenCounter(Path.home() / ".headroom")
    t = Table(title="Live learner per request (anthropic-flows)")
    for col in ("request", "tool results", "built (new + 5 before)", "observe ms", "inject ms"):
        t.add_column(col, justify="left" if col == "request" else "right")
    obs_ms, inj_ms = [], []
    for f in sorted((CORPUS / "anthropic-flows").glob("session-a-*.json")):
        req = json.loads(f.read_text())["request"]
        plan = plan_request(rt, "POST", "/v1/messages", {k.lower(): v for k, v in req["headers"].items()}, json.dumps(req["body"]).encode())
        ctx = plan.context
        if ctx is None:
            continue
        a = time.perf_counter()
        observe(rt, ctx)
        b = time.perf_counter()
        past_failures(rt, ctx)
        c = time.perf_counter()
        obs_ms.append(1000 * (b - a))
        inj_ms.append(1000 * (c - b))
        t.add_row(f.name, str(len(steps_of(ctx))), str(len(steps_of(ctx, ctx.live_from))), f"{obs_ms[-1]:.1f}", f"{inj_ms[-1]:.1f}")
    t.add_row("median", "", "", f"{statistics.median(obs_ms):.1f}", f"{statistics.median(inj_ms):.1f}", style="bold")
    t.add_row("max", "", "", f"{max(obs_ms):.1f}", f"{max(inj_ms):.1f}", style="bold")
    console.print(t)


def offline(console: Console) -> None:
    t = Table(title="headroom learn (offline) per corpus")
    for col in ("corpus", "files", "records", "read ms", "learn ms", "pairs", "rules"):
        t.add_column(col, justify="left" if col == "corpus" else "right")
    for name, pattern in (("claude-code-sessions", "*.jsonl"), ("swe-agent", "*.traj")):
        paths = sorted((CORPUS / name).glob(pattern))
        a = time.perf_counter()
        sessions = [read_log(p) for p in paths]
        b = time.perf_counter()
        res = learn_from_logs(sessions)
        c = time.perf_counter()
        t.add_row(name, str(len(paths)), str(sum(s.records for s in sessions)), f"{1000 * (b - a):.0f}", f"{1000 * (c - b):.0f}",
                  str(len(res.pairs)), str(len(res.rules)))
    console.print(t)


def main() -> None:
    console = Console()
    if not CORPUS.is_dir():
        console.print(f"corpus {CORPUS} is absent")
        return
    offline(console)
    live(console)


if __name__ == "__main__":
    main()
