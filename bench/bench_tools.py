"""Benchmark: tool-definition minification on the real Claude Code session.

Run ``python bench/bench_tools.py [--home DIR]`` from the project root. For every request of
``../shared/corpus/anthropic-flows`` it prints the number of tools, the tokens of ``tools``
before, after minification alone and after minification plus dedupe, the whole request's
tokens before and after, and the share of the whole request saved; then a total row.

Tokens are cl100k_base counts (:class:`headroom_core.compress.tokens.TokenCounter`); Claude's
tokenizer is not public, so they are estimates. Two serialisations are measured:

* compact (``json.dumps(..., ensure_ascii=False, separators=(",", ":"))``), which is what
  Claude Code (Node's ``JSON.stringify``) sends;
* Python's default ``json.dumps`` (``", "``/``": "`` separators, ``ensure_ascii=True``), which is
  what a Python client using httpx's ``json=`` sends.

Then **tools on demand** (setting ``tools_on_demand``, :mod:`headroom_core.tools.on_demand`):
every request of the corpus is planned by the core walk (:func:`headroom_core.request_plan.plan_request`,
a fresh runtime in a temporary home) with the setting off and on (for each ``--idle`` threshold),
and the bodies as forwarded are priced under Anthropic's prompt caching
(:mod:`headroom_core.cache.cost_model`, one cache per group of files as in
``bench/bench_cache_cost.py``; token-counting requests are planned but not priced). One row per
proxy session (conversation): requests, estimated prompt tokens, cache-priced input cost
(USD) off and on, the saving, the tools sent as skeletons, the prompt-cache rule's breaks
(:func:`headroom_core.cache.prefix_check.earlier_break`; must be 0), and how many
``headroom_tool_docs`` calls would cancel the saving (each estimated as one follow-up request:
the session's average prompt read from the cache at 0.1x, plus the average full definition of a
skeleton tool written at 1.25x).

Evidence: the ledger's ``tool_usage`` is seeded from the corpus itself. Every replay records,
after each request, the tools it offered (the forwarded ``tools`` less the proxy's own) and the
tools the model called (the ``tool_use`` blocks of the recorded response) with
:func:`headroom_core.ledger.record`, as the proxy's addon does. The corpus is first replayed
``--seed-passes`` times (default 2: the project's earlier sessions, each a day before the next;
one pass gives the never-called tools 29 idle requests, the MCP tools 25), then once more,
measured, on a fresh database that holds only those ``tool_usage`` rows, dated a day back (a
later day: the provider's cache is cold, so the first request decides afresh). Within the
measured replay the ledger keeps growing and the scope's cache is warm (the corpus's own gaps
are under 5 minutes), so later sessions take the first one's statuses (skeletons the model
called since included). Breaks are counted as ``bench/bench_cache_cost.py`` counts them, each
request against the earlier request it continues; those within one proxy session must be 0,
and those against an earlier session of the same warm stretch should be 0 too.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from headroom_core.compress.tokens import TokenCounter  # noqa: E402
from headroom_core.settings import Settings  # noqa: E402
from headroom_core.tools.minify import minify_tools  # noqa: E402

FLOWS = ROOT.parent / "shared" / "corpus" / "anthropic-flows"
MCP = re.compile(r"^mcp__(.+?)__")


def compact(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def pydefault(obj) -> str:
    return json.dumps(obj)


def pct(saved: int, whole: int) -> str:
    return f"{100.0 * saved / whole:.1f}%" if whole else "-"


# ---------------------------------------------------------------------------------------------
# tools on demand


def called_tools(response_body) -> list[str]:
    """Names of the tools the model called in a recorded Anthropic response (SSE text or JSON)."""
    if isinstance(response_body, dict):
        return [
            b.get("name", "")
            for b in response_body.get("content") or []
            if isinstance(b, dict) and b.get("type") == "tool_use"
        ]
    names = []
    for line in str(response_body or "").splitlines():
        if line.startswith("data:"):
            try:
                data = json.loads(line[5:])
            except ValueError:
                continue
            block = (
                data.get("content_block")
                if isinstance(data, dict) and data.get("type") == "content_block_start"
                else None
            )
            if isinstance(block, dict) and block.get("type") == "tool_use":
                names.append(str(block.get("name", "")))
    return names


@dataclass
class SessionRow:
    """One proxy session of a replay: its files, priced costs off and on, skeletons, breaks."""

    files: list[str] = field(default_factory=list)
    requests: int = 0
    tokens_off: int = 0
    tokens_on: int = 0
    usd_off: float = 0.0
    usd_on: float = 0.0
    prompt_tokens_on: int = 0
    skeletons: tuple[str, ...] = ()
    full_def_tokens: int = 0  # sum over the skeleton tools of their full definitions' tokens
    breaks: int = 0  # within the session: must be 0
    cross_breaks: int = 0  # against an earlier session the request continues
    model: str = ""


def replay(
    counter: TokenCounter, overrides: dict, usage: list[dict] | None = None
) -> tuple[dict[str, list], list[dict]]:
    """Plan every corpus request in order (a fresh runtime with ``overrides`` whose ledger
    starts with the ``usage`` rows of ``tool_usage``, dated a day back: a later day, the prompt
    cache cold), recording the ledger after each request as the proxy's addon does. Returns
    ``{session_key: [(group, request, sent body, plan)]}`` in file order, and the ``tool_usage``
    rows at the end."""
    from bench_cache_cost import anthropic_sessions  # noqa: E402 - beside this file
    from sqlalchemy import select

    from headroom_core import ledger
    from headroom_core.db.models import ToolUsage
    from headroom_core.request_plan import plan_request
    from headroom_core.runtime import Runtime
    from headroom_core.settings import load_settings
    from headroom_core.wire.blocks import Usage

    out: dict[str, list] = {}
    with tempfile.TemporaryDirectory(prefix="headroom-bench-tools-") as home:
        rt = Runtime(load_settings({"home": home, **overrides}, env={}))
        rt.__dict__["counter"] = counter
        if usage:
            with rt.sessions.begin() as s:
                for row in usage:
                    s.add(ToolUsage(**dict(row, last_seen_at=row["last_seen_at"] - timedelta(days=1))))
        for group, reqs in anthropic_sessions(FLOWS).items():
            for r in reqs:
                flow = json.loads((FLOWS / f"{r.name}.json").read_text(encoding="utf-8"))
                plan = plan_request(rt, "POST", r.path, r.headers, json.dumps(r.body).encode())
                sent = json.loads(plan.body) if plan.action == "rewrite" and plan.body else r.body
                out.setdefault(plan.session_key or r.name, []).append((group, r, sent, plan))
                if plan.dry_run:
                    continue
                offered = [
                    t.get("name", "")
                    for t in sent.get("tools") or []
                    if isinstance(t, dict) and t.get("name") not in plan.hidden_tools
                ]
                ledger.record(rt.sessions, plan, user_agent=r.headers.get("user-agent", ""), model=str(r.body.get("model", "")), status_code=200,
                              usage=Usage(), rounds=0, offered=offered, called=called_tools(flow["response"]["body"]))  # fmt: skip
        with rt.sessions() as s:
            rows = [{c: getattr(u, c) for c in ("client", "project", "tool_name", "offered", "called", "offered_since_called", "last_seen_at")}
                    for u in s.scalars(select(ToolUsage))]  # fmt: skip
    return out, rows


def seed_usage(counter: TokenCounter, passes: int) -> list[dict]:
    """The ``tool_usage`` rows after replaying the corpus ``passes`` times (the earlier sessions
    of the project, each pass a day before the next)."""
    rows: list[dict] = []
    for _ in range(passes):
        _, rows = replay(counter, {"tools_on_demand": False}, rows)
    return rows


def priced(counter: TokenCounter, off: dict[str, list], on: dict[str, list]) -> list[SessionRow]:
    """Two :func:`replay` results (the setting off and on) priced session by session under
    Anthropic's prompt caching (one cache per group of files, both in file order). Breaks are
    counted as ``bench/bench_cache_cost.py`` does: each request against the earlier request of
    its group it continues, whichever session that was."""
    from bench_cache_cost import predecessor  # noqa: E402

    from headroom_core.cache.cost_model import AnthropicCache, Blocks
    from headroom_core.cache.prefix_check import earlier_break
    from headroom_core.tools.on_demand import NOTE

    cutter = Blocks(counter.count)
    caches: dict[str, tuple[AnthropicCache, AnthropicCache]] = {}
    rows: dict[str, SessionRow] = {}
    history: dict[str, list] = {}
    seq_off = sorted(
        ((r.name, g, r, sent) for items in off.values() for g, r, sent, p in items if not p.dry_run), key=lambda x: x[0]
    )
    by_name_on = {r.name: (key, sent) for key, items in on.items() for g, r, sent, p in items}
    for name, group, r, sent_off in seq_off:
        key_on, sent_on = by_name_on[name]
        c_off, c_on = caches.setdefault(group, (AnthropicCache(), AnthropicCache()))
        model = str(r.body.get("model", ""))
        a, b = c_off.request(model, cutter.of(sent_off)), c_on.request(model, cutter.of(sent_on))
        row = rows.setdefault(key_on, SessionRow(model=model))
        row.files.append(name)
        row.requests += 1
        row.tokens_off += a.tokens
        row.tokens_on += b.tokens
        row.usd_off += a.usd
        row.usd_on += b.usd
        row.prompt_tokens_on += b.tokens
        shells = tuple(
            t.get("name", "")
            for t in sent_on.get("tools") or []
            if isinstance(t, dict) and str(t.get("description", "")).endswith(NOTE)
        )
        if len(shells) > len(row.skeletons):
            row.skeletons = shells
            full = {t.get("name"): t for t in r.body.get("tools") or [] if isinstance(t, dict)}
            row.full_def_tokens = sum(counter.count(compact(full[n])) for n in shells if n in full)
        hist = history.setdefault(group, [])
        prev = predecessor([(c, snt) for c, snt, _ in hist], r.body)
        if prev is not None and earlier_break(prev[0], r.body, prev[1], sent_on) is not None:
            same = next(k for c, snt, k in hist if c is prev[0] and snt is prev[1]) == key_on
            row.breaks += same
            row.cross_breaks += not same
        hist.append((r.body, sent_on, key_on))
    return list(rows.values())


def break_even_calls(row: SessionRow) -> float | None:
    """``headroom_tool_docs`` calls that would cancel the session's saving, each estimated as one
    follow-up request: the session's average prompt read from the cache (0.1x) plus an average
    skeleton tool's full definition written (1.25x); None without skeletons or saving."""
    from headroom_core.cache.cost_model import ANTHROPIC_READ_RATIO, ANTHROPIC_WRITE_RATIO, base_price

    if not row.skeletons or row.usd_off <= row.usd_on:
        return None
    avg_prompt = row.prompt_tokens_on / max(row.requests, 1)
    avg_def = row.full_def_tokens / len(row.skeletons)
    per_call = (avg_prompt * ANTHROPIC_READ_RATIO + avg_def * ANTHROPIC_WRITE_RATIO) * base_price(row.model) / 1e6
    return (row.usd_off - row.usd_on) / per_call if per_call else None


def on_demand_report(
    console: Console, counter: TokenCounter, thresholds: list[int], min_bytes: int, list_all: bool, passes: int
) -> None:
    """Print the tools-on-demand tables (see the module docstring)."""
    t0 = time.perf_counter()
    usage = seed_usage(counter, passes)
    off, _ = replay(counter, {"tools_on_demand": False}, usage)
    console.print(f"(evidence: {passes} earlier replays of the corpus recorded in tool_usage, then one measured replay per setting; "
                  f"seeding and the replay without tools on demand took {time.perf_counter() - t0:.0f} s)")  # fmt: skip
    for idle in thresholds:
        t0 = time.perf_counter()
        on, _ = replay(
            counter,
            {"tools_on_demand": True, "tools_on_demand_idle_requests": idle, "tools_on_demand_min_bytes": min_bytes},
            usage,
        )
        rows = priced(counter, off, on)
        took = time.perf_counter() - t0
        table = Table(title=f"Tools on demand, tools_on_demand_idle_requests={idle}, tools_on_demand_min_bytes={min_bytes}, evidence of {passes} earlier "
                            "replays (prompt tokens: cl100k_base estimates; USD: input, Anthropic cache-priced)")  # fmt: skip
        for col in ("session (files)", "requests", "tokens off", "tokens on", "USD off", "USD on", "cost saved", "skeletons",
                    "docs calls to break even", "breaks in session", "breaks across sessions"):  # fmt: skip
            table.add_column(col, justify="left" if col.startswith("session") else "right", no_wrap=True)
        tot = SessionRow()
        for row in rows:
            files = f"{row.files[0]}…{row.files[-1].rsplit('-', 1)[-1]}" if len(row.files) > 1 else row.files[0]
            be = break_even_calls(row)
            table.add_row(files, str(row.requests), f"{row.tokens_off:,}", f"{row.tokens_on:,}", f"{row.usd_off:.4f}", f"{row.usd_on:.4f}",
                          pct(round(1e6 * (row.usd_off - row.usd_on)), round(1e6 * row.usd_off)), str(len(row.skeletons)),
                          f"{be:.0f}" if be is not None else "-", str(row.breaks), str(row.cross_breaks))  # fmt: skip
            for k in ("requests", "tokens_off", "tokens_on", "usd_off", "usd_on", "breaks", "cross_breaks"):
                setattr(tot, k, getattr(tot, k) + getattr(row, k))
        table.add_section()
        table.add_row("total", str(tot.requests), f"{tot.tokens_off:,}", f"{tot.tokens_on:,}", f"{tot.usd_off:.4f}", f"{tot.usd_on:.4f}",
                      pct(round(1e6 * (tot.usd_off - tot.usd_on)), round(1e6 * tot.usd_off)), "", "", str(tot.breaks), str(tot.cross_breaks))  # fmt: skip
        console.print(table)
        console.print(f"(replay with tools on demand and pricing: {took:.0f} s)")
        shown: set[tuple[str, ...]] = set()
        for row in rows:
            if not row.skeletons or row.skeletons in shown:
                continue
            shown.add(row.skeletons)
            groups: dict[str, list[str]] = {}
            for n in row.skeletons:
                m = MCP.match(n)
                groups.setdefault(f"mcp__{m.group(1)}" if m else "built-in", []).append(n[m.end() :] if m else n)
            console.print(f"[bold]{row.files[0]}…[/bold]: {len(row.skeletons)} tools sent as skeletons")
            for g, names in sorted(groups.items(), key=lambda kv: (kv[0] != "built-in", kv[0])):
                listed = names if list_all or len(names) <= 8 else names[:8] + [f"… {len(names) - 8} more (--list)"]
                console.print(f"  {g} ({len(names)}): {', '.join(listed)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", default=str(Path.home() / ".headroom"), help="where the tokenizer is cached")
    ap.add_argument(
        "--idle",
        default=f"10,20,{Settings().tools_on_demand_idle_requests}",
        help="tools on demand: comma-separated tools_on_demand_idle_requests thresholds to measure",
    )
    ap.add_argument(
        "--min-bytes",
        type=int,
        default=Settings().tools_on_demand_min_bytes,
        help="tools on demand: tools_on_demand_min_bytes",
    )
    ap.add_argument("--list", action="store_true", help="tools on demand: list every tool sent as a skeleton")
    ap.add_argument(
        "--seed-passes", type=int, default=2, help="tools on demand: earlier replays of the corpus recorded as evidence"
    )
    ap.add_argument("--no-on-demand", action="store_true", help="only the minification table")
    args = ap.parse_args()
    if not FLOWS.is_dir():
        print(f"corpus not found: {FLOWS} (the ../shared/corpus folder beside the repo)", file=sys.stderr)
        return 2
    counter = TokenCounter(args.home)
    console = Console()

    table = Table(title="Tool-definition minification, Claude Code session (cl100k_base tokens, compact JSON)")
    for col in (
        "file",
        "tools",
        "tools before",
        "minified",
        "+dedupe",
        "tools saved",
        "request before",
        "request after",
        "request saved",
        "py-json tools before→after",
    ):
        table.add_column(col, justify="left" if col == "file" else "right")

    tot = dict(tb=0, tm=0, td=0, rb=0, ra=0, pb=0, pa=0, n=0)
    elapsed = 0.0
    for path in sorted(FLOWS.glob("session-a-*.json")):
        body = json.loads(path.read_text(encoding="utf-8"))["request"]["body"]
        tools = body.get("tools") if isinstance(body, dict) else None
        if not isinstance(tools, list) or not tools:
            table.add_row(path.name, "0", *["-"] * 8)
            continue
        t0 = time.perf_counter()
        plain = minify_tools(tools, dedupe=False).tools
        deduped = minify_tools(tools).tools
        elapsed += time.perf_counter() - t0
        tb, tm, td = (counter.count(compact(x)) for x in (tools, plain, deduped))
        new_body = dict(body, tools=deduped)
        rb, ra = counter.count(compact(body)), counter.count(compact(new_body))
        pb, pa = counter.count(pydefault(tools)), counter.count(pydefault(deduped))
        table.add_row(
            path.name,
            str(len(tools)),
            f"{tb:,}",
            f"{tm:,}",
            f"{td:,}",
            pct(tb - td, tb),
            f"{rb:,}",
            f"{ra:,}",
            pct(rb - ra, rb),
            f"{pb:,} → {pa:,} ({pct(pb - pa, pb)})",
        )
        for k, v in dict(tb=tb, tm=tm, td=td, rb=rb, ra=ra, pb=pb, pa=pa, n=1).items():
            tot[k] += v
    table.add_section()
    table.add_row(
        "total",
        f"{tot['n']} req",
        f"{tot['tb']:,}",
        f"{tot['tm']:,}",
        f"{tot['td']:,}",
        pct(tot["tb"] - tot["td"], tot["tb"]),
        f"{tot['rb']:,}",
        f"{tot['ra']:,}",
        pct(tot["rb"] - tot["ra"], tot["rb"]),
        f"{tot['pb']:,} → {tot['pa']:,} ({pct(tot['pb'] - tot['pa'], tot['pb'])})",
    )
    console.print(table)
    console.print(
        f"minify_tools time: {1000 * elapsed / max(tot['n'], 1) / 2:.1f} ms per call "
        f"(average over {2 * tot['n']} calls)"
    )
    if not args.no_on_demand:
        on_demand_report(
            console,
            counter,
            [int(x) for x in args.idle.split(",") if x.strip()],
            args.min_bytes,
            args.list,
            args.seed_passes,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
