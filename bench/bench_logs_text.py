"""Benchmark: log, prose and HTML compression on real inputs, one table per kind.

Run ``python bench/bench_logs_text.py [--home DIR]`` from the project root.

* **logs**: the eight loghub logs of ``../shared/corpus/logs`` (2,000 lines each), no query.
  Retention: ground-truth templates (``*_templates.csv``, ``<*>`` a wildcard) still found in
  the output (a kept line or a template/count line), and error-level lines (the log's level
  field ERROR/FATAL/error…, or an exception in the content) kept verbatim.
* **text**: the README that installed packages ship in their METADATA, with a question a
  developer could ask about each (or none). Retention: passages holding a discriminating query
  word that are kept, headings kept.
* **html**: pages ``pydoc`` renders for standard-library modules, with a question naming an
  identifier. Retention: that identifier still in the output; readable-text tokens shown.

Tokens are cl100k_base counts (:class:`headroom_core.compress.tokens.TokenCounter`).
"ms/100k tok" is the compressor's wall time (first call for that input, tokenizer and
embedding model already loaded) per 100,000 input tokens; it depends on the machine's load.
"""

from __future__ import annotations

import argparse
import csv
import importlib
import importlib.metadata as md
import pydoc
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from headroom_core.ccr.markers import MARKER_RE  # noqa: E402
from headroom_core.compress import embeddings  # noqa: E402
from headroom_core.compress.html import compress_html, readable_text  # noqa: E402
from headroom_core.compress.json_select import query_words  # noqa: E402
from headroom_core.compress.logs import compress_logs  # noqa: E402
from headroom_core.compress.text import QUERY_MAX_SHARE, compress_prose, segment  # noqa: E402
from headroom_core.compress.tokens import TokenCounter  # noqa: E402

LOGS = ROOT.parent / "shared" / "corpus" / "logs"
ERROR_LEVELS = {"ERROR", "FATAL", "SEVERE", "CRITICAL", "error", "crit", "fatal", "emerg", "alert"}

PROSE = (
    ("openai", "How do I configure retries and timeouts for requests?"),
    ("tqdm", "show a progress bar for pandas dataframes"),
    ("pydantic", "how do validators work"),
    ("transformers", ""),
    ("torch", "build from source with CUDA"),
    ("scipy", ""),
    ("regex", "fuzzy matching"),
    ("charset-normalizer", "detect the encoding of a file"),
)
PAGES = (
    ("argparse", "how does parse_known_args handle unknown options", "parse_known_args"),
    ("json", "what does object_pairs_hook do", "object_pairs_hook"),
    ("email.message", "how to read a header with get_all", "get_all"),
    ("collections", "OrderedDict move_to_end", "move_to_end"),
    ("typing", "", ""),
    ("http.client", "HTTPConnection set_tunnel", "set_tunnel"),
)


def _ratio(before: int, after: int) -> str:
    return f"{before / after:.1f}x" if after else "-"


def _ms_per_100k(seconds: float, tokens: int) -> str:
    return f"{seconds * 1000 * 100_000 / tokens:,.0f}" if tokens else "-"


def _kept_lines(out: str) -> set[str]:
    return {ln.rstrip("\r") for ln in out.split("\n") if not MARKER_RE.fullmatch(ln)}


def bench_logs(counter: TokenCounter) -> Table:
    t = Table(title="Logs: loghub 2k-line samples, Drain3 templates (cl100k_base tokens)")
    for col in ("log", "lines", "tokens before", "after", "ratio", "lines kept", "templates kept",
                "error lines kept", "ms/100k tok"):
        t.add_column(col, justify="left" if col == "log" else "right")
    tot_b = tot_a = 0
    tot_s = 0.0
    for path in sorted(LOGS.glob("*_2k.log")):
        text = path.read_text(encoding="utf-8")
        lines = text.split("\n")
        with open(f"{path}_templates.csv", newline="", encoding="utf-8") as f:
            templates = [r["EventTemplate"] for r in csv.DictReader(f)]
        with open(f"{path}_structured.csv", newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        before = counter.count(text)
        t0 = time.perf_counter()
        res = compress_logs(text, "", counter)
        secs = time.perf_counter() - t0
        after = counter.count(res.text)
        out_lines = res.text.split("\n")
        found = sum(
            1 for tpl in templates
            if any(re.search(".*?".join(re.escape(p) for p in tpl.split("<*>")), ln) for ln in out_lines)
        )
        kept = _kept_lines(res.text)
        errors = [lines[int(r["LineId"]) - 1] for r in rows
                  if r.get("Level", "") in ERROR_LEVELS or re.search(r"Exception|Traceback", r["Content"])]
        err_kept = sum(1 for e in errors if e in kept)
        shown = sum(1 for ln in out_lines if ln in set(lines))
        t.add_row(path.name.replace("_2k.log", ""), f"{len(rows):,}", f"{before:,}", f"{after:,}",
                  _ratio(before, after), f"{shown:,}", f"{found}/{len(templates)}",
                  f"{err_kept}/{len(errors)}", _ms_per_100k(secs, before))
        tot_b, tot_a, tot_s = tot_b + before, tot_a + after, tot_s + secs
    t.add_row("total", "", f"{tot_b:,}", f"{tot_a:,}", _ratio(tot_b, tot_a), "", "", "", _ms_per_100k(tot_s, tot_b))
    return t


def _readme(dist: str) -> str | None:
    try:
        meta = md.distribution(dist).read_text("METADATA") or ""
    except md.PackageNotFoundError:
        return None
    return meta[meta.index("\n\n") + 2 :] if "\n\n" in meta else None


def bench_text(counter: TokenCounter) -> Table:
    t = Table(title="Text: package READMEs (METADATA), extractive, embedding-ranked (cl100k_base tokens)")
    for col in ("document", "query", "passages", "tokens before", "after", "ratio",
                "query passages kept", "headings kept", "ms/100k tok"):
        t.add_column(col, justify="left" if col in ("document", "query") else "right")
    tot_b = tot_a = 0
    tot_s = 0.0
    for dist, query in PROSE:
        text = _readme(dist)
        if not text:
            continue
        before = counter.count(text)
        t0 = time.perf_counter()
        res = compress_prose(text, query, counter, wait_for_model=True)
        secs = time.perf_counter() - t0
        after = counter.count(res.text)
        passages = segment(text)
        ptexts = [text[p.start : p.end] for p in passages]
        qhits: set[int] = set()
        for w in query_words(query):
            rx = re.compile(r"(?<![^\W_])" + re.escape(w), re.IGNORECASE)
            hits = {i for i, p in enumerate(ptexts) if rx.search(p)}
            if 0 < len(hits) <= QUERY_MAX_SHARE * len(ptexts):
                qhits |= hits
        q_kept = sum(1 for i in qhits if ptexts[i] in res.text)
        heads = [i for i, p in enumerate(passages) if p.kind == "heading"]
        h_kept = sum(1 for i in heads if ptexts[i] in res.text)
        t.add_row(dist, query[:40] or "(none)", f"{len(passages):,}", f"{before:,}", f"{after:,}",
                  _ratio(before, after), f"{q_kept}/{len(qhits)}", f"{h_kept}/{len(heads)}",
                  _ms_per_100k(secs, before))
        tot_b, tot_a, tot_s = tot_b + before, tot_a + after, tot_s + secs
    t.add_row("total", "", "", f"{tot_b:,}", f"{tot_a:,}", _ratio(tot_b, tot_a), "", "", _ms_per_100k(tot_s, tot_b))
    return t


def bench_html(counter: TokenCounter) -> Table:
    t = Table(title="HTML: pydoc pages of standard-library modules (cl100k_base tokens)")
    for col in ("page", "query", "KB", "tokens before", "readable", "after", "ratio", "strategy",
                "identifier kept", "ms/100k tok"):
        t.add_column(col, justify="left" if col in ("page", "query", "strategy") else "right")
    tot_b = tot_a = 0
    tot_s = 0.0
    for name, query, ident in PAGES:
        mod = importlib.import_module(name)
        html = pydoc.html.page(pydoc.describe(mod), pydoc.html.document(mod, name))
        before = counter.count(html)
        t0 = time.perf_counter()
        res = compress_html(html, query, counter, wait_for_model=True)
        secs = time.perf_counter() - t0
        after = counter.count(res.text)
        readable = counter.count(readable_text(html))
        t.add_row(name, query[:36] or "(none)", f"{len(html.encode()) / 1024:.0f}", f"{before:,}",
                  f"{readable:,}", f"{after:,}", _ratio(before, after), res.strategy,
                  ("yes" if ident in res.text else "NO") if ident else "-", _ms_per_100k(secs, before))
        tot_b, tot_a, tot_s = tot_b + before, tot_a + after, tot_s + secs
    t.add_row("total", "", "", f"{tot_b:,}", "", f"{tot_a:,}", _ratio(tot_b, tot_a), "", "", _ms_per_100k(tot_s, tot_b))
    return t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", default=str(Path.home() / ".headroom"), help="where the tokenizer is cached")
    args = ap.parse_args()
    console = Console(width=200)
    counter = TokenCounter(args.home)
    counter.count("warm up")
    if LOGS.is_dir():
        console.print(bench_logs(counter))
    else:
        print(f"corpus not found: {LOGS} (the ../shared/corpus folder beside the repo)", file=sys.stderr)
    t0 = time.perf_counter()
    embeddings.get_model()
    console.print(f"embedding model loaded in {time.perf_counter() - t0:.1f} s (off the timings below)")
    console.print(bench_text(counter))
    console.print(bench_html(counter))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
