"""Benchmark: the content router and each kind's compressor on real inputs.

Run ``python bench/bench_kinds.py [--home DIR] [--per-package N]`` from the project root. Prints
one table per kind, one row per input group: inputs, tokens before and after (cl100k_base
estimates), ratio after/before, retention figures, and milliseconds per 100k input tokens (wall
time of the compressor, token counting inside it included, on this shared 2-core machine).

Inputs (all real, none written for this project):

* code: modules of alembic, mitmproxy and sqlalchemy (``importlib.util.find_spec``), also as
  Claude Code ``Read`` shows them (``     1→``); JavaScript shipped in installed packages; the
  TypeScript/TSX files a real Claude Code session wrote (../shared/corpus/claude-code-sessions).
  Retention: definitions kept (``defined_names`` equal), result parses with the same grammar.
* search: ``grep -rn`` over installed packages with a question; the ``find`` listings of the
  Claude Code sessions. Retention: hits with a query word kept / such hits.
* diff: ``git diff --no-index`` (-U3, -U10) of real modules with edits; the SWE-agent patch.
  Retention: changed and header lines kept.
* test: real pytest -v / unittest -v runs of a generated suite, the sessions' npm outputs, the
  SWE-agent traceback. Retention: failure/summary lines kept.
* json (github-api payloads), log (loghub logs), text and html: with the compressors of those
  kinds when their modules are installed. Retention for logs: lines with an error word kept.
* routing: every tool output of the sessions and the SWE-agent trajectory, by kind.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from headroom_core.compress.code import compress_code, defined_names, language_for_path, parses  # noqa: E402
from headroom_core.compress.numbered import split_numbered  # noqa: E402
from headroom_core.compress.router import Hint, compress_text, compressor_for, route_sections  # noqa: E402
from headroom_core.compress.tokens import TokenCounter  # noqa: E402

CORPUS = ROOT.parent / "shared" / "corpus"
MIN_TOKENS, RATIO = 250, 0.10


class Group:
    """Figures of one row: inputs, tokens before/after, time, and retention counts."""

    def __init__(self, name: str) -> None:
        self.name, self.n, self.changed, self.before, self.after, self.secs = name, 0, 0, 0, 0, 0.0
        self.ret: dict[str, list[int]] = {}

    def add(self, counter: TokenCounter, text: str, fn) -> object:
        t0 = time.perf_counter()
        res = fn(text)
        self.secs += time.perf_counter() - t0
        self.n += 1
        b = counter.count(text)
        self.before += b
        self.after += counter.count(res.text) if res.changed else b
        self.changed += res.changed
        return res

    def keep(self, what: str, ok: int, of: int) -> None:
        r = self.ret.setdefault(what, [0, 0])
        r[0] += ok
        r[1] += of

    def row(self) -> list[str]:
        ratio = f"{self.after / self.before:.2f}" if self.before else "-"
        ms = f"{1000 * self.secs / self.before * 100_000:.0f}" if self.before else "-"
        ret = ", ".join(f"{k} {a}/{b}" for k, (a, b) in self.ret.items()) or "-"
        return [self.name, str(self.n), str(self.changed), f"{self.before:,}", f"{self.after:,}", ratio, ret, ms]


def table(console: Console, title: str, groups: list[Group]) -> None:
    t = Table(title=title)
    for col in (
        "inputs from",
        "inputs",
        "changed",
        "tokens before",
        "tokens after",
        "after/before",
        "retention",
        "ms/100k tok",
    ):
        t.add_column(col, justify="left" if col in ("inputs from", "retention") else "right")
    for g in groups:
        t.add_row(*g.row())
    console.print(t)


def session_outputs() -> list[tuple[dict, str]]:
    out = []
    for f in sorted((CORPUS / "claude-code-sessions").glob("*.jsonl")):
        uses: dict[str, dict] = {}
        for line in f.read_text().splitlines():
            rec = json.loads(line)
            for b in (rec.get("message") or {}).get("content") or []:
                if isinstance(b, dict) and b.get("type") == "tool_use":
                    uses[b["id"]] = b
                elif isinstance(b, dict) and b.get("type") == "tool_result" and b.get("tool_use_id") in uses:
                    c = b.get("content")
                    out.append(
                        (
                            uses[b["tool_use_id"]],
                            c
                            if isinstance(c, str)
                            else "".join(x.get("text", "") for x in c or [] if isinstance(x, dict)),
                        )
                    )
    return out


def pkg_root(name: str) -> Path:
    return Path(importlib.util.find_spec(name).origin).parent


def bench_code(console: Console, counter: TokenCounter, per_package: int) -> None:
    groups = []

    def one(g: Group, text: str, lang: str, numbered: bool = False) -> None:
        res = g.add(
            counter,
            text,
            lambda t: compress_code(t, "", counter, min_tokens=MIN_TOKENS, min_saving_ratio=RATIO, language=lang),
        )
        if res.changed:
            code_in = split_numbered(text).code if numbered else text
            code_out = (
                "\n".join(re.sub(r"^ *\d*→", "", ln, count=1) for ln in res.text.split("\n")) if numbered else res.text
            )
            g.keep("names kept", int(defined_names(code_out, lang) == defined_names(code_in, lang)), 1)
            g.keep("parse OK", int(parses(code_out, lang)), 1)

    for pkg in ("alembic", "mitmproxy", "sqlalchemy"):
        files = sorted(pkg_root(pkg).rglob("*.py"), key=lambda p: (-p.stat().st_size, str(p)))[:per_package]
        g, gn = Group(f"{pkg} modules (python)"), Group(f"{pkg} as Read output")
        for f in files:
            text = f.read_text(encoding="utf-8")
            one(g, text, "python")
            if f in files[:10]:
                one(gn, "\n".join(f"{i:6d}→{ln}" for i, ln in enumerate(text.split("\n"), 1)), "python", numbered=True)
        groups += [g, gn]
    g = Group("installed .js (werkzeug, urwid, torch)")
    for rel in ("werkzeug/debug/shared/debugger.js", "urwid/display/_web.js", "torch/utils/model_dump/code.js"):
        p = pkg_root(rel.split("/")[0]) / Path(*rel.split("/")[1:])
        if p.is_file():
            one(g, p.read_text(), "javascript")
    groups.append(g)
    g = Group("session Write .ts/.tsx")
    for use, _ in session_outputs():
        if use["name"] == "Write" and language_for_path(use["input"]["file_path"]) in ("typescript", "tsx"):
            one(g, use["input"]["content"], language_for_path(use["input"]["file_path"]))
    groups.append(g)
    table(console, "code (tree-sitter outline)", groups)


QUERIES = {
    "alembic": "render foreign key constraint",
    "mitmproxy": "websocket message handling",
    "sqlalchemy": "session flush identity map",
}


def bench_search(console: Console, counter: TokenCounter) -> None:
    from headroom_core.compress.json_select import query_words
    from headroom_core.compress.search import parse_hit

    groups = []
    for pkg, q in QUERIES.items():
        g = Group(f"grep -rn 'def ' {pkg}")
        text = subprocess.run(
            ["grep", "-rn", "--include=*.py", "def ", "."], cwd=pkg_root(pkg), capture_output=True, text=True
        ).stdout
        res = g.add(
            counter, text, lambda t: compress_text(t, q, counter, min_tokens=MIN_TOKENS, min_saving_ratio=RATIO)
        )
        words = query_words(q)
        rel = [ln for ln in text.splitlines() if any(w in ln.lower() for w in words)]
        kept = 0
        for ln in rel:
            h = parse_hit(ln)
            kept += h is not None and f"{h.line}:{h.text}" in res.text
        g.keep("query hits kept", kept, len(rel))
        groups.append(g)
    g = Group("session find listings")
    for use, text in session_outputs():
        if use["name"] == "Bash" and use["input"]["command"].startswith("find "):
            g.add(
                counter,
                text,
                lambda t: compress_text(
                    t, "eslint config", counter, min_tokens=MIN_TOKENS, min_saving_ratio=RATIO, tool_name="Bash"
                ),
            )
    groups.append(g)
    table(console, "search (grouped by file, ranked by the query)", groups)


def bench_diff(console: Console, counter: TokenCounter) -> None:
    groups = []
    with tempfile.TemporaryDirectory() as d:
        for n in (3, 10):
            g = Group(f"git diff -U{n} (alembic, sqlalchemy modules)")
            for p in (
                pkg_root("alembic") / "command.py",
                pkg_root("alembic") / "operations" / "ops.py",
                pkg_root("sqlalchemy") / "orm" / "session.py",
            ):
                src = p.read_text()
                lines = src.split("\n")
                for i in range(40, len(lines), 60):
                    lines[i] = lines[i] + "  # changed"
                (Path(d) / "a.py").write_text(src)
                (Path(d) / "b.py").write_text("\n".join(lines))
                text = subprocess.run(
                    ["git", "diff", "--no-index", f"-U{n}", "a.py", "b.py"], cwd=d, capture_output=True, text=True
                ).stdout
                res = g.add(
                    counter,
                    text,
                    lambda t: compress_text(t, "", counter, min_tokens=MIN_TOKENS, min_saving_ratio=RATIO),
                )
                must = [ln for ln in text.split("\n") if ln.startswith(("diff ", "--- ", "+++ ", "@@ ", "+", "-"))]
                kept = set(res.text.split("\n"))
                g.keep("changed+headers kept", sum(ln in kept for ln in must), len(must))
            groups.append(g)
    g = Group("SWE-agent submit patch")
    traj = json.loads((CORPUS / "swe-agent" / "pydicom-1458.traj").read_text())
    for s in traj["trajectory"]:
        if s["action"].startswith("submit"):
            g.add(
                counter,
                s["observation"],
                lambda t: compress_text(t, "", counter, min_tokens=MIN_TOKENS, min_saving_ratio=RATIO),
            )
    groups.append(g)
    table(console, "diff (context collapsed)", groups)


SUITE = "import warnings, pytest\n\n@pytest.mark.parametrize('n', range(200))\ndef test_ok(n):\n    assert n >= 0\n\n" \
        "def test_bad():\n    assert {'a': 1} == {'a': 2}\n\ndef test_raise():\n    raise ValueError('bad token')\n\n" \
        "def test_warn():\n    warnings.warn('old', DeprecationWarning)\n"  # fmt: skip


def bench_test(console: Console, counter: TokenCounter) -> None:
    groups = []
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "test_s.py").write_text(SUITE)
        runs = {
            "pytest -v (203 tests, 2 failing)": subprocess.run(
                [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "test_s.py"],
                cwd=d,
                capture_output=True,
                text=True,
            ).stdout,
            "pytest -q": subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_s.py"],
                cwd=d,
                capture_output=True,
                text=True,
            ).stdout,
        }
    for name, text in runs.items():
        g = Group(name)
        res = g.add(
            counter,
            text,
            lambda t: compress_text(
                t, "", counter, min_tokens=MIN_TOKENS, min_saving_ratio=RATIO, hint=Hint(command="pytest")
            ),
        )
        must = [ln for ln in text.split("\n") if re.search(r"FAILED|Error|^E |failed|warning", ln)]
        g.keep("failure/summary lines kept", sum(ln in res.text.split("\n") for ln in must), len(must))
        groups.append(g)
    g = Group("session npm/pnpm outputs")
    for use, text in session_outputs():
        if use["name"] == "Bash" and re.search(r"\b(npm|pnpm|npx)\b", use["input"]["command"]):
            g.add(
                counter,
                text,
                lambda t: compress_text(
                    t,
                    "",
                    counter,
                    min_tokens=MIN_TOKENS,
                    min_saving_ratio=RATIO,
                    hint=Hint("Bash", command=use["input"]["command"]),
                ),
            )
    groups.append(g)
    table(console, "test and build output (passing lines collapsed)", groups)


def bench_other(console: Console, counter: TokenCounter) -> None:
    groups = []
    g = Group("github-api payloads (json)")
    for f in sorted((CORPUS / "github-api").glob("*.json")):
        g.add(
            counter,
            json.dumps(json.loads(f.read_text()), indent=2),
            lambda t: compress_text(t, "open issues", counter, min_tokens=MIN_TOKENS, min_saving_ratio=RATIO),
        )
    groups.append(g)
    if compressor_for("log") is not None:
        g = Group("loghub logs (log)")
        for f in sorted((CORPUS / "logs").glob("*_2k.log")):
            text = f.read_text(errors="replace")
            res = g.add(
                counter,
                text,
                lambda t: compress_text(t, "error", counter, min_tokens=MIN_TOKENS, min_saving_ratio=RATIO),
            )
            errs = {ln for ln in text.split("\n") if re.search(r"(?i)\b(error|fatal|exception|fail(ed|ure)?)\b", ln)}
            g.keep("error lines kept", sum(ln in res.text for ln in errs), len(errs))
        groups.append(g)
    if compressor_for("text") is not None:
        g = Group("session Task reports (text)")
        for use, text in session_outputs():
            if use["name"] == "Task":
                g.add(
                    counter,
                    text,
                    lambda t: compress_text(t, "", counter, min_tokens=MIN_TOKENS, min_saving_ratio=RATIO),
                )
        groups.append(g)
    if compressor_for("html") is not None:
        g = Group("installed .html pages (html)")
        for p in sorted(pkg_root("mitmproxy").rglob("*.html"))[:10]:
            g.add(
                counter,
                p.read_text(errors="replace"),
                lambda t: compress_text(t, "", counter, min_tokens=MIN_TOKENS, min_saving_ratio=RATIO),
            )
        groups.append(g)
    table(console, "other kinds (json; log/text/html when their modules are installed)", groups)


def bench_routing(console: Console) -> None:
    kinds: Counter[str] = Counter()
    for use, text in session_outputs():
        inp = use.get("input") or {}
        for sec, kind in route_sections(text, Hint(use["name"], inp.get("file_path", ""), inp.get("command", ""))):
            if kind is not None and len(sec.text) >= 200:
                kinds[(f"session {use['name']}", str(kind))] += 1
    traj = json.loads((CORPUS / "swe-agent" / "pydicom-1458.traj").read_text())
    for s in traj["trajectory"]:
        for sec, kind in route_sections(s["observation"], Hint(command=s["action"])):
            if kind is not None and len(sec.text) >= 200:
                kinds[(f"swe-agent {s['action'].split()[0]}", str(kind))] += 1
    t = Table(title="routing of real tool outputs (sections of 200+ characters)")
    for col in ("tool", "kind", "sections"):
        t.add_column(col, justify="right" if col == "sections" else "left")
    for (tool, kind), n in sorted(kinds.items()):
        t.add_row(tool, kind, str(n))
    console.print(t)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", default=str(Path.home() / ".headroom"), help="where the tokenizer is cached")
    ap.add_argument("--per-package", type=int, default=60, help="largest modules per package for the code table")
    args = ap.parse_args()
    if not CORPUS.is_dir():
        print(f"corpus not found: {CORPUS} (the ../shared/corpus folder beside the repo)", file=sys.stderr)
        return 2
    counter = TokenCounter(args.home)
    console = Console(width=170)
    bench_routing(console)
    bench_code(console, counter, args.per_package)
    bench_search(console, counter)
    bench_diff(console, counter)
    bench_test(console, counter)
    bench_other(console, counter)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
