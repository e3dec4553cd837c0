"""Benchmark: what the failure learner finds and what it costs.

1. Truth table: every log of ``../shared/corpus`` (Claude Code sessions, SWE-agent), every case of
   ``../shared/cases/learn`` and every hand-made log of ``tests/learn_logs`` (Codex rollouts of
   both eras, Claude Code 1.x/2.x with sub-agents, SWE-agent 1.x, its retry loop, EnIGMA): per
   log, failed calls found vs the hand-checked count, pairs found vs hand-checked, lessons found
   vs expected, malformed records, rules with their verdict (``tests/learn_logs/truth.json``; a
   rule with no verdict is shown as ``UNJUDGED``), known problems. ``tests/unit/test_learn_truth.py``
   holds the same table.
2. Live: replays every request of ``../shared/corpus/anthropic-flows`` through
   :func:`headroom_core.request_plan.plan_request` (a fresh SQLite database), then times the
   learner's two extensions on each request's context: the observer (steps, pairing, evidence,
   failures) and the injector (the past-failures block), in milliseconds.
3. Offline: times reading and ``learn_from_logs`` per corpus folder.

Run: ``.venv/bin/python bench/bench_learn.py``. Not a test: it asserts nothing.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rich.console import Console  # noqa: E402
from rich.markup import escape  # noqa: E402
from rich.table import Table  # noqa: E402

from headroom_core.compress.tokens import TokenCounter  # noqa: E402
from headroom_core.learn.live import observe, past_failures, steps_of  # noqa: E402
from headroom_core.learn.offline import learn_from_logs  # noqa: E402
from headroom_core.learn.readers import read_log  # noqa: E402
from headroom_core.learn.readers.claude_code import is_subagent_file  # noqa: E402
from headroom_core.request_plan import plan_request  # noqa: E402
from headroom_core.runtime import Runtime  # noqa: E402
from headroom_core.settings import load_settings  # noqa: E402
from tests.learn_truth import load_truth, log_path, measure  # noqa: E402

CORPUS = REPO.parent / "shared" / "corpus"


def _found(got, want) -> str:
    return f"{got}" if got == want else f"[red]{got} (hand {want})[/]"


def truth_table(console: Console) -> None:
    truth = load_truth()
    t = Table(title="headroom learn per log: found vs hand-checked (threshold 1, generic rules included)")
    for col in (
        "log",
        "agent",
        "records",
        "malformed",
        "failures",
        "pairs",
        "lessons",
        "rules: right / generic / wrong / unjudged",
        "known problems",
    ):
        t.add_column(col, justify="left" if col in ("log", "agent") else "right", overflow="fold")
    verdict_rows: list[tuple[str, str, str, int]] = []
    totals: Counter = Counter()
    for label, want in truth["logs"].items():
        if not log_path(label).exists():
            t.add_row(escape(label), "-", "absent", "", "", "", "", "", "")
            continue
        m = measure(label)
        verdicts = Counter()
        for kind, text, evidence in m.rules:
            v = truth["verdicts"].get(text, "UNJUDGED")
            verdicts[v] += 1
            verdict_rows.append((label.rsplit("/", 1)[-1], v, text, evidence))
        totals.update(verdicts)
        totals["failures found"] += m.failures
        totals["failures hand"] += want["failures"]
        totals["lessons found"] += sum(1 for x in m.lessons if list(x) in want["lessons"])
        totals["lessons hand"] += len(want["lessons"])
        totals["malformed"] += m.malformed
        lessons_ok = sum(1 for x in m.lessons if list(x) in want["lessons"])
        t.add_row(
            escape(label),
            m.agent,
            str(m.records),
            _found(m.malformed, want["malformed"]),
            _found(m.failures, want["failures"]),
            _found(m.pairs, want["pairs"]),
            _found(f"{lessons_ok}/{len(m.lessons)}", f"{len(want['lessons'])}/{len(want['lessons'])}"),
            f"{verdicts['right']} / {verdicts['generic']} / {verdicts['wrong']} / {verdicts['UNJUDGED']}",
            _found(len(m.problems), len(want["problems"])),
        )
    t.add_row(
        "total",
        "",
        "",
        str(totals["malformed"]),
        f"{totals['failures found']} / {totals['failures hand']}",
        "",
        f"{totals['lessons found']} / {totals['lessons hand']}",
        f"{totals['right']} / {totals['generic']} / {totals['wrong']} / {totals['UNJUDGED']}",
        "",
        style="bold",
    )
    console.print(t)
    v = Table(title="Every rule and its verdict")
    for col in ("log", "verdict", "evidence", "rule"):
        v.add_column(col, overflow="fold", justify="right" if col == "evidence" else "left")
    for name, verdict, text, evidence in verdict_rows:
        style = "red" if verdict in ("wrong", "UNJUDGED") else ("dim" if verdict == "generic" else None)
        v.add_row(escape(name), verdict, str(evidence), escape(text), style=style)
    console.print(v)


def live(console: Console) -> None:
    rt = Runtime(load_settings({"home": tempfile.mkdtemp(prefix="headroom-bench-learn-")}, env={}))
    rt.__dict__["counter"] = TokenCounter(Path.home() / ".headroom")
    t = Table(title="Live learner per request (anthropic-flows)")
    for col in ("request", "tool results", "built (new + 10 before)", "observe ms", "inject ms"):
        t.add_column(col, justify="left" if col == "request" else "right")
    obs_ms, inj_ms = [], []
    for f in sorted((CORPUS / "anthropic-flows").glob("session-a-*.json")):
        req = json.loads(f.read_text())["request"]
        plan = plan_request(
            rt,
            "POST",
            "/v1/messages",
            {k.lower(): v for k, v in req["headers"].items()},
            json.dumps(req["body"]).encode(),
        )
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
        t.add_row(
            f.name,
            str(len(steps_of(ctx))),
            str(len(steps_of(ctx, ctx.live_from))),
            f"{obs_ms[-1]:.1f}",
            f"{inj_ms[-1]:.1f}",
        )
    t.add_row("median", "", "", f"{statistics.median(obs_ms):.1f}", f"{statistics.median(inj_ms):.1f}", style="bold")
    t.add_row("max", "", "", f"{max(obs_ms):.1f}", f"{max(inj_ms):.1f}", style="bold")
    console.print(t)


def offline(console: Console) -> None:
    t = Table(title="headroom learn (offline) per corpus")
    for col in ("corpus", "files", "records", "read ms", "learn ms", "pairs", "rules", "generic", "known problems"):
        t.add_column(col, justify="left" if col == "corpus" else "right")
    folders = [
        ("claude-code-sessions", CORPUS / "claude-code-sessions", "*.jsonl"),
        ("swe-agent", CORPUS / "swe-agent", "*.traj"),
        ("tests/learn_logs", REPO / "tests" / "learn_logs", "*.*"),
    ]
    for name, folder, pattern in folders:
        paths = sorted(p for p in folder.rglob(pattern) if p.suffix in (".jsonl", ".traj") and not is_subagent_file(p))
        a = time.perf_counter()
        sessions = [read_log(p) for p in paths]
        b = time.perf_counter()
        res = learn_from_logs(sessions, min_evidence=1)
        c = time.perf_counter()
        t.add_row(
            name,
            str(len(paths)),
            str(sum(s.records for s in sessions)),
            f"{1000 * (b - a):.0f}",
            f"{1000 * (c - b):.0f}",
            str(len(res.pairs)),
            str(len(res.rules)),
            str(len(res.generic)),
            str(len(res.problems)),
        )
    console.print(t)


def main() -> None:
    console = Console(width=200)
    truth_table(console)
    if not CORPUS.is_dir():
        console.print(f"corpus {CORPUS} is absent: timings skipped")
        return
    offline(console)
    live(console)


if __name__ == "__main__":
    main()
