"""Benchmark: the plan of one large request with three new tool outputs (issue 33).

The request (Messages API, ~658 KB) carries three tool results the proxy has never seen, each a
real text of its kind and size:

* JSON, 144 KB: ``../shared/corpus/github-api/paginate-issues.json`` as a tool prints it (the
  recorded GitHub REST exchanges: arrays of similar nested objects);
* log, 286 KB: ``../shared/corpus/logs/HDFS_2k.log`` (2,000 real HDFS lines, loghub);
* source, 207 KB: ``sqlalchemy/orm/session.py`` of the installed SQLAlchemy 2 (found with
  ``importlib.util.find_spec``; a real, large module already on disk), shown by ``git show``
  (not a read of a file the agent may edit, so it may be compressed).

Each is the result of a ``Bash`` call of a Claude Code-like request (its user agent: the model
may call ``headroom_retrieve``, so compression may drop what it keeps retrievable).
:func:`headroom_core.request_plan.plan_request` is timed as the proxy calls it (``defer=True``;
the session's state stored after, untimed), in these cases:

* ``warm``: a runtime in a new home, warmed as the proxy warms it before it lets requests in
  (database, secret key, vocabulary, compressors, the compression worker), meeting the outputs
  for the first time (nothing decided or counted before: a new runtime each run);
* ``cold``: a runtime in a new home that was not warmed (the plan opens the database, loads the
  vocabulary and starts the compression worker itself), in this process after a first ``cold``
  run: Python modules stay imported;
* ``again``: the same request once more in the warm runtime (every decision cached).

Printed: wall and this thread's CPU seconds, min / median / max of ``--runs``; the forwarded
size and the SHA-256 prefix of the forwarded bytes (equal in every case and run, or a change of
output shows); then each output's kind, strategy and tokens before and after (cl100k_base).

Run: ``.venv/bin/python bench/bench_plan.py [--runs 5]``. Not a test: asserts nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

CORPUS = ROOT.parent / "shared" / "corpus"
QUERY = "The datanode keeps dropping blocks: find where the session commits and which issues mention it."
HEADERS = {
    "content-type": "application/json",
    "anthropic-version": "2023-06-01",
    "user-agent": "claude-cli/1.0.62 (external, cli)",
    "x-api-key": "bench-plan",
}


def outputs() -> list[tuple[str, str, str]]:
    """``(kind, command, text)`` of the three tool outputs (module docstring)."""
    spec = importlib.util.find_spec("sqlalchemy.orm.session")
    if spec is None or spec.origin is None:
        raise SystemExit("sqlalchemy is not installed: run scripts/setup")
    return [
        ("JSON", "gh api --paginate repos/octokit-fixture-org/issues", (CORPUS / "github-api" / "paginate-issues.json").read_text()),
        ("log", "journalctl -u hadoop-hdfs-datanode --no-pager", (CORPUS / "logs" / "HDFS_2k.log").read_text()),
        ("source", "git show HEAD:lib/sqlalchemy/orm/session.py", Path(spec.origin).read_text()),
    ]


def request(outs: list[tuple[str, str, str]]) -> bytes:
    """The Messages API body: the user's question, one assistant turn calling ``Bash`` three
    times, and the three results (compact JSON, as Claude Code sends it)."""
    bash = {
        "name": "Bash",
        "description": "Executes a given bash command and returns its output.",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
    }
    calls = [{"type": "tool_use", "id": f"toolu_bench_{k}", "name": "Bash", "input": {"command": cmd}} for k, (_, cmd, _) in enumerate(outs)]
    results = [{"type": "tool_result", "tool_use_id": f"toolu_bench_{k}", "content": text} for k, (_, _, text) in enumerate(outs)]
    body = {
        "model": "claude-sonnet-4-20250514",
        "max_tokens": 8192,
        "stream": True,
        "system": [{"type": "text", "text": "You are Claude Code, a coding agent.", "cache_control": {"type": "ephemeral"}}],
        "tools": [bash],
        "messages": [
            {"role": "user", "content": QUERY},
            {"role": "assistant", "content": calls},
            {"role": "user", "content": results},
        ],
    }
    return json.dumps(body, separators=(",", ":")).encode()


def runtime(home: str, warm: bool):
    """A runtime in ``home``; ``warm``: warmed as the proxy's warm-up does it
    (``addons/headroom_options.py``)."""
    from headroom_core.compress.worker import warm_compressors
    from headroom_core.runtime import Runtime
    from headroom_core.settings import load_settings

    rt = Runtime(load_settings({"home": home}, env={}))
    if warm:
        rt.sessions
        rt.sealer
        rt.extensions
        warm_compressors(rt.counter)
        rt.compress_worker.warm(60)
    return rt


def timed(rt, body: bytes) -> tuple[float, float, object]:
    """Wall and this thread's CPU seconds of one plan, and the plan (its state stored after)."""
    from headroom_core.request_plan import plan_request

    w0, c0 = time.perf_counter(), time.thread_time()
    plan = plan_request(rt, "POST", "/v1/messages", HEADERS, body, defer=True)
    w, c = time.perf_counter() - w0, time.thread_time() - c0
    if plan.persist is not None:
        plan.persist()
    return w, c, plan


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="runs of each case (default 5)")
    args = ap.parse_args()
    outs = outputs()
    body = request(outs)
    console = Console(width=150)
    console.print(f"request: {len(body):,} bytes; outputs: " + ", ".join(f"{k} {len(t.encode()):,} bytes" for k, _, t in outs))

    times: dict[str, list[tuple[float, float]]] = {"warm": [], "cold": [], "again": []}
    sent: dict[str, set[str]] = {k: set() for k in times}
    sizes: dict[str, int] = {}
    last = None
    for run in range(args.runs + 1):  # run 0: the first cold run (imports), not counted
        for case in ("cold", "warm"):
            home = tempfile.mkdtemp(prefix="headroom-bench-plan-")
            rt = runtime(home, warm=case == "warm")
            try:
                w, c, plan = timed(rt, body)
                if run:
                    times[case].append((w, c))
                    sent[case].add(hashlib.sha256(plan.body or body).hexdigest()[:12])
                    sizes[case] = plan.bytes_after
                if case == "warm":
                    w, c, again = timed(rt, body)
                    if run:
                        times["again"].append((w, c))
                        sent["again"].add(hashlib.sha256(again.body or body).hexdigest()[:12])
                        sizes["again"] = again.bytes_after
                    last = plan
            finally:
                if "compress_worker" in rt.__dict__:
                    rt.compress_worker.close()
                shutil.rmtree(home, ignore_errors=True)

    t = Table(title=f"Plan of a {len(body) // 1000} KB request with three new tool outputs (JSON, log, source), {args.runs} runs", title_justify="left")
    for c in ("case", "wall min / median / max", "CPU median", "forwarded bytes", "forwarded sha256"):
        t.add_column(c, justify="left" if c == "case" else "right")
    for case, what in (("warm", "warm: outputs never seen"), ("cold", "cold: runtime not warmed"), ("again", "again: decisions cached")):
        ws = [w for w, _ in times[case]]
        t.add_row(what, f"{min(ws):.3f} / {statistics.median(ws):.3f} / {max(ws):.3f} s", f"{statistics.median(c for _, c in times[case]):.3f} s",
                  f"{sizes[case]:,}", ", ".join(sorted(sent[case])))  # fmt: skip
    console.print(t)
    if last is not None and last.pipeline is not None:
        o = Table(title="Each output (the warm plan)", title_justify="left")
        for c in ("output", "kind", "strategy", "tokens before", "tokens after"):
            o.add_column(c, justify="left" if c in ("output", "kind", "strategy") else "right")
        for (name, _, _), b in zip(outs, last.pipeline.blocks):
            o.add_row(name, b.kind, b.strategy, f"{b.tokens_before:,}", f"{b.tokens_after:,}")
        console.print(o)


if __name__ == "__main__":
    main()
