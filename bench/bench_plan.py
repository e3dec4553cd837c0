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

A second case (``--cases many``): a long agent session of many tiny tool turns
(:mod:`tests.support.many_messages`: ``tool_use`` / ``tool_result`` messages of ~230 bytes, as
the fresh-user test's 60,000-message, 13.7 MB body), for each of ``--messages`` (default 1,000,
10,000 and 60,000 messages):

* in-process, a warm runtime: the plan (``first``: a session never seen; ``again``: the same
  body once more; ``new session``: the same body under another ``x-headroom-session``) and
  storing the session's state after it (the plan's ``persist``, which the answer waits for);
* through a real ``mitmdump -s addons/headroom.py`` on an Anthropic base-URL port (reverse
  mode, a new home per size, ``compress_timeout_seconds`` as configured: 10 s), against the
  local test upstream answering at once: the client's whole exchange for the same three
  requests, ``x-headroom-bypass`` and the upstream straight; ``to upstream``: from sending to
  the upstream having the whole request (the time the proxy adds before forwarding, with the
  transfer); ``added``: the whole exchange minus the straight one.

Run: ``.venv/bin/python bench/bench_plan.py [--runs 5] [--cases outputs,many] [--messages
1000,10000,60000]``. Not a test: asserts nothing.
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
        (
            "JSON",
            "gh api --paginate repos/octokit-fixture-org/issues",
            (CORPUS / "github-api" / "paginate-issues.json").read_text(),
        ),
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
    calls = [
        {"type": "tool_use", "id": f"toolu_bench_{k}", "name": "Bash", "input": {"command": cmd}}
        for k, (_, cmd, _) in enumerate(outs)
    ]
    results = [
        {"type": "tool_result", "tool_use_id": f"toolu_bench_{k}", "content": text}
        for k, (_, _, text) in enumerate(outs)
    ]
    body = {
        "model": "claude-sonnet-4-20250514",
        "max_tokens": 8192,
        "stream": True,
        "system": [
            {"type": "text", "text": "You are Claude Code, a coding agent.", "cache_control": {"type": "ephemeral"}}
        ],
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


def many_in_process(n: int) -> dict[str, tuple[float, float]]:
    """Wall seconds of the plan and of storing the session's state after it, per request
    (``first``, ``again``, ``new session``) of the body of ``n`` messages (:func:`~tests.support.many_messages.tool_turns_body`), in a warm
    runtime of a new home."""
    from headroom_core.request_plan import plan_request
    from tests.support.many_messages import AGENT_HEADERS, tool_turns_body

    body = tool_turns_body(n)
    home = tempfile.mkdtemp(prefix="headroom-bench-many-")
    rt = runtime(home, warm=True)
    out: dict[str, tuple[float, float]] = {}
    try:
        for case, headers in (
            ("first", AGENT_HEADERS),
            ("again", AGENT_HEADERS),
            ("new session", {**AGENT_HEADERS, "x-headroom-session": "bench-other"}),
        ):
            t0 = time.perf_counter()
            plan = plan_request(rt, "POST", "/v1/messages", headers, body, defer=True)
            t1 = time.perf_counter()
            if plan.persist is not None:
                plan.persist()
            out[case] = (t1 - t0, time.perf_counter() - t1)
    finally:
        if "compress_worker" in rt.__dict__:
            rt.compress_worker.close()
        shutil.rmtree(home, ignore_errors=True)
    return out


def many_through_proxy(n: int) -> dict[str, tuple[float, float]]:
    """Per request of the body of ``n`` messages through a real mitmdump on an Anthropic
    base-URL port (module docstring): ``(whole exchange, to upstream)`` wall seconds."""
    import httpx

    from tests.support.many_messages import AGENT_HEADERS, tool_turns_body
    from tests.support.proxy import ADDON_SCRIPT, MitmProxy, free_port
    from tests.support.upstream import Upstream

    body = tool_turns_body(n)
    out: dict[str, tuple[float, float]] = {}
    with Upstream() as up:
        base = free_port()
        args = [
            "--mode",
            "regular",
            "--mode",
            f"reverse:{up.url}@{base}",
            "--set",
            f"ssl_verify_upstream_trusted_ca={up.cert_path}",
        ]
        with MitmProxy(ADDON_SCRIPT, args=args), httpx.Client(timeout=600) as c:
            url = f"http://127.0.0.1:{base}/v1/messages"
            c.post(
                url, content=tool_turns_body(3, salt="warm"), headers=AGENT_HEADERS
            )  # the proxy's first request: connections
            cases = (
                ("first", AGENT_HEADERS), ("again", AGENT_HEADERS), ("new session", {**AGENT_HEADERS, "x-headroom-session": "bench-other"}),
                ("bypass", {**AGENT_HEADERS, "x-headroom-bypass": "true"}),
            )  # fmt: skip
            for case, headers in cases:
                t0 = time.monotonic()
                c.post(url, content=body, headers=headers)
                out[case] = (time.monotonic() - t0, up.last.received_at - t0)
            with httpx.Client(timeout=600, verify=str(up.ca_path)) as direct:
                for _ in range(3):  # the least of three: the first pays the connection
                    t0 = time.monotonic()
                    direct.post(up.url + "/v1/messages", content=body, headers=AGENT_HEADERS)
                    got = (time.monotonic() - t0, up.last.received_at - t0)
                    out["straight"] = min(out.get("straight", got), got)
    return out


def many(console: Console, sizes: list[int]) -> None:
    """The ``many`` case (module docstring): one table."""
    from tests.support.many_messages import tool_turns_body

    t = Table(title="Many tiny tool turns: plan and added latency (wall seconds)", title_justify="left")
    for c in ("messages", "body", "request", "plan", "state stored", "through the proxy", "to upstream", "added"):
        t.add_column(c, justify="left" if c in ("request",) else "right")
    for n in sizes:
        size = len(tool_turns_body(n))
        inproc = many_in_process(n)
        proxied = many_through_proxy(n)
        straight = proxied["straight"][0]
        for case in ("first", "again", "new session", "bypass", "straight"):
            plan, stored = inproc.get(case, (None, None))
            whole, to_up = proxied[case]
            t.add_row(f"{n:,}", f"{size / 1e6:.1f} MB", case, "" if plan is None else f"{plan:.2f}", "" if stored is None else f"{stored:.2f}",
                      f"{whole:.2f}", f"{to_up:.2f}", "" if case == "straight" else f"{whole - straight:+.2f}")  # fmt: skip
    console.print(t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="runs of each case (default 5)")
    ap.add_argument(
        "--cases",
        default="outputs,many",
        help="which cases: outputs (three new tool outputs), many (many tiny tool turns)",
    )
    ap.add_argument(
        "--messages", default="1000,10000,60000", help="the many case's sizes in messages (default 1000,10000,60000)"
    )
    args = ap.parse_args()
    console = Console(width=150)
    cases = set(args.cases.split(","))
    if "outputs" in cases:
        outputs_case(console, args.runs)
    if "many" in cases:
        many(console, [int(x) for x in args.messages.split(",")])


def outputs_case(console: Console, runs: int) -> None:
    """The three-new-outputs case (module docstring)."""
    outs = outputs()
    body = request(outs)
    console.print(
        f"request: {len(body):,} bytes; outputs: " + ", ".join(f"{k} {len(t.encode()):,} bytes" for k, _, t in outs)
    )

    times: dict[str, list[tuple[float, float]]] = {"warm": [], "cold": [], "again": []}
    sent: dict[str, set[str]] = {k: set() for k in times}
    sizes: dict[str, int] = {}
    last = None
    for run in range(runs + 1):  # run 0: the first cold run (imports), not counted
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

    t = Table(
        title=f"Plan of a {len(body) // 1000} KB request with three new tool outputs (JSON, log, source), {runs} runs",
        title_justify="left",
    )
    for c in ("case", "wall min / median / max", "CPU median", "forwarded bytes", "forwarded sha256"):
        t.add_column(c, justify="left" if c == "case" else "right")
    for case, what in (
        ("warm", "warm: outputs never seen"),
        ("cold", "cold: runtime not warmed"),
        ("again", "again: decisions cached"),
    ):
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
