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
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from headroom_core.compress.tokens import TokenCounter  # noqa: E402
from headroom_core.compress.tool_defs import minify_tools  # noqa: E402

FLOWS = ROOT.parent / "shared" / "corpus" / "anthropic-flows"


def compact(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def pydefault(obj) -> str:
    return json.dumps(obj)


def pct(saved: int, whole: int) -> str:
    return f"{100.0 * saved / whole:.1f}%" if whole else "-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", default=str(Path.home() / ".headroom"), help="where the tokenizer is cached")
    args = ap.parse_args()
    if not FLOWS.is_dir():
        print(f"corpus not found: {FLOWS} (the ../shared/corpus folder beside the repo)", file=sys.stderr)
        return 2
    counter = TokenCounter(args.home)
    console = Console()

    table = Table(title="Tool-definition minification, Claude Code session (cl100k_base tokens, compact JSON)")
    for col in ("file", "tools", "tools before", "minified", "+dedupe", "tools saved",
                "request before", "request after", "request saved", "py-json tools before→after"):
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
        table.add_row(path.name, str(len(tools)), f"{tb:,}", f"{tm:,}", f"{td:,}", pct(tb - td, tb),
                      f"{rb:,}", f"{ra:,}", pct(rb - ra, rb), f"{pb:,} → {pa:,} ({pct(pb - pa, pb)})")
        for k, v in dict(tb=tb, tm=tm, td=td, rb=rb, ra=ra, pb=pb, pa=pa, n=1).items():
            tot[k] += v
    table.add_section()
    table.add_row("total", f"{tot['n']} req", f"{tot['tb']:,}", f"{tot['tm']:,}", f"{tot['td']:,}",
                  pct(tot["tb"] - tot["td"], tot["tb"]), f"{tot['rb']:,}", f"{tot['ra']:,}",
                  pct(tot["rb"] - tot["ra"], tot["rb"]),
                  f"{tot['pb']:,} → {tot['pa']:,} ({pct(tot['pb'] - tot['pa'], tot['pb'])})")
    console.print(table)
    console.print(f"minify_tools time: {1000 * elapsed / max(tot['n'], 1) / 2:.1f} ms per call "
                  f"(average over {2 * tot['n']} calls)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
