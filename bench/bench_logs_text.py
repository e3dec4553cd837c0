"""Benchmark: log, prose and HTML compression on real inputs, one table per kind.

Run ``python bench/bench_logs_text.py [--home DIR]`` from the project root.

* **logs**: the eight loghub logs of ``../shared/corpus/logs`` (2,000 lines each), then the
  generated logs of systems the corpus does not hold (``tests/support/log_variants.py``: Blue
  Gene/L RAS, Thunderbird, Android, a health app's ``|`` log, a proxy client, macOS, HPC,
  Windows CBS, klog, logfmt, Python logging, nginx, PostgreSQL), no query. Retention:
  ground-truth templates (``<*>`` a wildcard) still found in the output (a kept line or a
  template/count line), and lines holding an error word (error, fatal, severe, critical,
  exception, fail…, panic, denied, any case) or a stack frame kept verbatim. Each log goes
  through the content router (``compress_text``), as a tool output would.
* **repetition**: 160 KB of one line (or one 3-line block) repeated, per kind, through the router.
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

from headroom_core.compress import embeddings  # noqa: E402
from headroom_core.compress.html import compress_html, readable_text  # noqa: E402
from headroom_core.compress.json_select import query_words  # noqa: E402
from headroom_core.compress.markers import MARKER_RE  # noqa: E402
from headroom_core.compress.router import compress_text  # noqa: E402
from headroom_core.compress.text import QUERY_MAX_SHARE, compress_prose, segment  # noqa: E402
from headroom_core.compress.tokens import TokenCounter  # noqa: E402
from tests.support.log_variants import VARIANTS, retention, variant  # noqa: E402

LOGS = ROOT.parent / "shared" / "corpus" / "logs"

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


def _log_row(
    t: Table, name: str, text: str, lines: list[str], templates: list[str], counter: TokenCounter
) -> tuple[int, int, float]:
    before = counter.count(text)
    t0 = time.perf_counter()
    res = compress_text(text, "", counter, min_tokens=250, min_saving_ratio=0.1)
    secs = time.perf_counter() - t0
    after = counter.count(res.text)
    r = retention(res.text, lines, templates)
    out = set(res.text.split("\n"))
    shown = sum(1 for ln in lines if ln in out)
    t.add_row(
        name,
        res.kind,
        f"{len(lines):,}",
        f"{shown:,}",
        f"{r.templates}/{r.templates_total}",
        f"{r.errors}/{r.errors_total}",
        f"{before:,}",
        f"{after:,}",
        f"{before - after:,}",
        _pct(before, after),
        _ms_per_100k(secs, before),
    )
    return before, after, secs, r.templates, r.templates_total, r.errors, r.errors_total


def _pct(before: int, after: int) -> str:
    return f"{100 * (before - after) / before:.1f}%" if before else "-"


def bench_logs(counter: TokenCounter) -> Table:
    """Per log: lines, lines shown verbatim, ground-truth templates still represented, error-word
    lines kept verbatim, tokens before/after/saved; corpus logs, then generated logs of systems
    the corpus does not hold (tests/support/log_variants.py), each with its total."""
    t = Table(
        title="Logs: loghub samples (corpus) and generated logs of other systems, Drain3 templates (cl100k_base tokens)"
    )
    for col in (
        "log",
        "routed as",
        "lines",
        "shown",
        "templates kept",
        "error lines kept",
        "tokens before",
        "after",
        "saved",
        "saved %",
        "ms/100k tok",
    ):
        t.add_column(col, justify="left" if col in ("log", "routed as") else "right")
    groups = []
    if LOGS.is_dir():
        corpus = []
        for path in sorted(LOGS.glob("*_2k.log")):
            text = path.read_text(encoding="utf-8")
            with open(f"{path}_templates.csv", newline="", encoding="utf-8") as f:
                templates = [r["EventTemplate"] for r in csv.DictReader(f)]
            corpus.append((path.name.replace("_2k.log", ""), text, templates))
        groups.append(("corpus", corpus))
    else:
        print(f"corpus not found: {LOGS} (the ../shared/corpus folder beside the repo)", file=sys.stderr)
    groups.append(("generated", [(n, v.text, list(v.templates)) for n, v in ((n, variant(n)) for n in VARIANTS)]))
    for label, logs in groups:
        tb = ta = kt = kn = ke = en = 0
        ts = 0.0
        for name, text, templates in logs:
            lines = text.split("\n")
            if lines and lines[-1] == "":
                lines.pop()
            b, a, s, t1, t2, e1, e2 = _log_row(t, name, text, lines, templates, counter)
            tb, ta, ts, kt, kn, ke, en = tb + b, ta + a, ts + s, kt + t1, kn + t2, ke + e1, en + e2
        t.add_row(
            f"total ({label})",
            "",
            "",
            "",
            f"{kt}/{kn}",
            f"{ke}/{en}",
            f"{tb:,}",
            f"{ta:,}",
            f"{tb - ta:,}",
            _pct(tb, ta),
            _ms_per_100k(ts, tb),
            end_section=True,
        )
    return t


REPEATED = (
    ("prose", "Waiting for the database lock to be released\n"),
    ("log", "2024-03-04 10:00:00,123 WARN pool: connection slow, retrying\n"),
    ("test output", "tests/test_api.py::test_get_item PASSED\n"),
    ("code", "    assert response.status_code == 200  # check\n"),
    ("block of 3", "Downloading core-utils (1.2 MB)\nVerifying checksum\nChecksum mismatch, retrying\n"),
)


def bench_repeats(counter: TokenCounter) -> Table:
    """160 KB of one line (or one block) repeated, per kind, through the content router."""
    t = Table(title="Repetition: 160 KB of one line or block repeated, through the content router (cl100k_base tokens)")
    for col in ("content", "routed as", "strategy", "KB", "lines", "tokens before", "after", "saved %", "ms"):
        t.add_column(col, justify="left" if col in ("content", "routed as", "strategy") else "right")
    for name, unit in REPEATED:
        text = unit * (160 * 1024 // len(unit))
        before = counter.count(text)
        t0 = time.perf_counter()
        res = compress_text(text, "", counter, min_tokens=250, min_saving_ratio=0.1)
        secs = time.perf_counter() - t0
        after = counter.count(res.text)
        t.add_row(
            name,
            res.kind,
            res.strategy,
            f"{len(text.encode()) / 1024:.0f}",
            f"{text.count(chr(10)):,}",
            f"{before:,}",
            f"{after:,}",
            _pct(before, after),
            f"{secs * 1000:,.0f}",
        )
    return t


def _readme(dist: str) -> str | None:
    try:
        meta = md.distribution(dist).read_text("METADATA") or ""
    except md.PackageNotFoundError:
        return None
    return meta[meta.index("\n\n") + 2 :] if "\n\n" in meta else None


def bench_text(counter: TokenCounter) -> Table:
    t = Table(title="Text: package READMEs (METADATA), extractive, embedding-ranked (cl100k_base tokens)")
    for col in (
        "document",
        "query",
        "passages",
        "tokens before",
        "after",
        "ratio",
        "query passages kept",
        "headings kept",
        "ms/100k tok",
    ):
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
        t.add_row(
            dist,
            query[:40] or "(none)",
            f"{len(passages):,}",
            f"{before:,}",
            f"{after:,}",
            _ratio(before, after),
            f"{q_kept}/{len(qhits)}",
            f"{h_kept}/{len(heads)}",
            _ms_per_100k(secs, before),
        )
        tot_b, tot_a, tot_s = tot_b + before, tot_a + after, tot_s + secs
    t.add_row("total", "", "", f"{tot_b:,}", f"{tot_a:,}", _ratio(tot_b, tot_a), "", "", _ms_per_100k(tot_s, tot_b))
    return t


def bench_html(counter: TokenCounter) -> Table:
    t = Table(title="HTML: pydoc pages of standard-library modules (cl100k_base tokens)")
    for col in (
        "page",
        "query",
        "KB",
        "tokens before",
        "readable",
        "after",
        "ratio",
        "strategy",
        "identifier kept",
        "ms/100k tok",
    ):
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
        t.add_row(
            name,
            query[:36] or "(none)",
            f"{len(html.encode()) / 1024:.0f}",
            f"{before:,}",
            f"{readable:,}",
            f"{after:,}",
            _ratio(before, after),
            res.strategy,
            ("yes" if ident in res.text else "NO") if ident else "-",
            _ms_per_100k(secs, before),
        )
        tot_b, tot_a, tot_s = tot_b + before, tot_a + after, tot_s + secs
    t.add_row("total", "", "", f"{tot_b:,}", "", f"{tot_a:,}", _ratio(tot_b, tot_a), "", "", _ms_per_100k(tot_s, tot_b))
    return t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", default=str(Path.home() / ".headroom"), help="where the tokenizer is cached")
    ap.add_argument("--logs-only", action="store_true", help="only the log and repetition tables")
    args = ap.parse_args()
    console = Console(width=200)
    counter = TokenCounter(args.home)
    counter.count("warm up")
    embeddings.get_model()  # a log the router does not recognise goes to the prose compressor
    console.print(bench_logs(counter))
    console.print(bench_repeats(counter))
    if args.logs_only:
        return 0
    t0 = time.perf_counter()
    embeddings.get_model()
    console.print(f"embedding model loaded in {time.perf_counter() - t0:.1f} s (off the timings below)")
    console.print(bench_text(counter))
    console.print(bench_html(counter))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
