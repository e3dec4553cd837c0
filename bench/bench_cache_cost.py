"""Benchmark: the prompt-cache cost of whole real sessions with the proxy and without it.

Run ``python bench/bench_cache_cost.py [--flows DIR] [--openai DIR] [--per-request]
[--timeout-after N]`` from the project root.

Every request of every session in ``../shared/corpus/anthropic-flows`` (files
``session-<name>-NN.json``, in order) and of the OpenAI Responses sessions in
``../shared/corpus/openai-flows`` is planned by the core (:func:`headroom_core.request_plan.plan_request`,
a fresh runtime in a temporary home: the same walk the proxy runs), and the bodies as the client
sent them ("without") and as the proxy would forward them ("with") each go through a simulation
of the provider's prompt cache (:mod:`headroom_core.cache.cost_model`: Anthropic's breakpoints,
20-block look-back, 1.25× writes and 0.1× reads; OpenAI's automatic prefix caching, 1,024-token
minimum, 128-token steps, cached-input price per model family). Token-counting requests are
free and never cached: they are planned but not priced.

Columns: requests, estimated tokens before/after (cl100k_base), cache reads and writes with the
proxy, input cost without / with and the saving, and the prompt-cache rule's breaks: requests
where the forwarded body changed a part earlier than the client did
(:func:`headroom_core.cache.prefix_check.earlier_break`, each request against the earlier
request of its session it continues; must be 0; a late compression the plan records, issue 33,
is counted apart). ``--per-request`` adds a row per request.
``--timeout-after N``: from the N-th request of a session on, every plan times out (the proxy
then replays what it sent before and compresses nothing new). ``--timeout-at N``: only the N-th
request of each session times out (one slow moment); what was new in it goes whole, and the
next request may compress it late (issue 33): the count of late compressions is printed below
the table. ``--json-output``: session-a's first ``Grep`` output is a GitHub API listing instead
(``../shared/corpus/github-api/paginate-issues.json``, indented as a tool prints it, wherever the
client re-sends it, as ``tests/e2e/test_cache_prefix_e2e.py`` does): one large output to compress.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from headroom_core.cache.cost_model import ZERO, AnthropicCache, Blocks, Cost, OpenAICache  # noqa: E402
from headroom_core.cache.prefix_check import _parts, earlier_break  # noqa: E402
from headroom_core.compress.tokens import TokenCounter  # noqa: E402
from headroom_core.request_plan import plan_request, replay_only  # noqa: E402
from headroom_core.runtime import Runtime  # noqa: E402
from headroom_core.settings import load_settings  # noqa: E402

CORPUS = ROOT.parent / "shared" / "corpus"


@dataclass
class Req:
    """One request of a session: where it goes, its body, and its headers."""

    name: str
    path: str
    body: dict
    headers: dict


@dataclass
class Totals:
    requests: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    without: Cost = ZERO
    with_proxy: Cost = ZERO
    breaks: int = 0
    late: int = 0
    rows: list = field(default_factory=list)


def anthropic_sessions(folder: Path) -> dict[str, list[Req]]:
    """``session-<name>-NN.json`` files grouped by ``<name>``, in order."""
    out: dict[str, list[Req]] = defaultdict(list)
    for f in sorted(folder.glob("session-*.json")):
        flow = json.loads(f.read_text())
        name = f.stem.rsplit("-", 1)[0]
        body = flow["request"]["body"]
        path = "/v1/messages" if "max_tokens" in body else "/v1/messages/count_tokens"
        out[name].append(Req(f.stem, path, body, {"user-agent": flow["request"]["headers"].get("user-agent", "")}))
    return out


def with_json_output(reqs: list[Req], payload: str) -> list[Req]:
    """``reqs`` with the first ``Grep`` tool output replaced by ``payload`` wherever the client
    re-sends it (the same ``tool_use_id``)."""
    calls = [
        b
        for r in reqs
        for m in r.body.get("messages", [])
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_use" and b.get("name") == "Grep"
    ]
    if not calls:
        return reqs
    out = []
    for r in reqs:
        body = json.loads(json.dumps(r.body))
        for m in body.get("messages", []):
            for b in m["content"] if isinstance(m["content"], list) else []:
                if b.get("type") == "tool_result" and b.get("tool_use_id") == calls[0]["id"]:
                    b["content"] = payload
        out.append(Req(r.name, r.path, body, r.headers))
    return out


def openai_sessions(folder: Path) -> dict[str, list[Req]]:
    """Each recorder's cassettes (``openai-flows/<name>/NNN.json``) as one sequence."""
    out: dict[str, list[Req]] = {}
    for d in sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []:
        reqs = []
        for f in sorted(d.glob("*.json")):
            flow = json.loads(f.read_text())
            body = flow.get("request")
            if isinstance(body, dict) and "input" in body:
                reqs.append(Req(f"{d.name}/{f.stem}", flow.get("path", "/v1/responses"), body, {}))
        if reqs:
            out[d.name] = reqs
    return out


def predecessor(history: list[tuple[dict, dict]], body: dict) -> tuple[dict, dict] | None:
    """The earlier (client, forwarded) pair this body continues: the one sharing most leading parts."""
    best, n_best = None, 0
    mine = _parts(body, True)
    for client, sent in history:
        n = 0
        for (pa, ha), (pb, hb) in zip(_parts(client, True), mine):
            if pa != pb or ha != hb:
                break
            n += 1
        if n > n_best:
            best, n_best = (client, sent), n
    return best


def run(
    sessions: dict[str, list[Req]], cache_cls, counter: TokenCounter, timeout_after: int, timeout_at: int = 0
) -> dict[str, Totals]:
    cutter = Blocks(counter.count)
    out: dict[str, Totals] = {}
    for name, reqs in sessions.items():
        without, with_proxy = cache_cls(), cache_cls()
        tot = Totals()
        history: list[tuple[dict, dict]] = []
        with tempfile.TemporaryDirectory(prefix="headroom-bench-cache-") as home:
            rt = Runtime(load_settings({"home": home}, env={}))
            rt.__dict__["counter"] = counter
            for n, r in enumerate(reqs, 1):
                raw = json.dumps(r.body).encode()
                if (timeout_after and n >= timeout_after) or n == timeout_at:
                    plan = replay_only(rt, "POST", r.path, r.headers, raw, "simulated timeout")
                else:
                    plan = plan_request(rt, "POST", r.path, r.headers, raw)
                sent = json.loads(plan.body) if plan.action == "rewrite" and plan.body else r.body
                if plan.dry_run:
                    continue
                model = str(r.body.get("model", ""))
                a = without.request(model, cutter.of(r.body))
                b = with_proxy.request(model, cutter.of(sent))
                prev = predecessor(history, r.body)
                broke = earlier_break(prev[0], r.body, prev[1], sent) if prev else None
                history.append((r.body, sent))
                tot.requests += 1
                tot.tokens_before += a.tokens
                tot.tokens_after += b.tokens
                tot.without += a
                tot.with_proxy += b
                late = getattr(plan, "late", None)  # (a proxy before issue 33 has none)
                if broke is not None and late is not None and broke[0] == 2 and broke[1] in late.messages:
                    broke = None  # the recorded late compression: counted apart
                tot.breaks += broke is not None
                tot.late += late.outputs if late is not None else 0
                tot.rows.append((r.name, model, a, b, broke))
        out[name] = tot
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flows", type=Path, default=CORPUS / "anthropic-flows")
    ap.add_argument("--openai", type=Path, default=CORPUS / "openai-flows")
    ap.add_argument("--per-request", action="store_true", help="a row per request")
    ap.add_argument(
        "--timeout-after",
        type=int,
        default=0,
        help="from this request number of a session on, plans time out (0: never)",
    )
    ap.add_argument(
        "--timeout-at", type=int, default=0, help="only this request number of each session times out (0: none)"
    )
    ap.add_argument(
        "--json-output", action="store_true", help="session-a's first Grep output is a large GitHub API listing"
    )
    args = ap.parse_args()
    anth = anthropic_sessions(args.flows) if args.flows.is_dir() else {}
    if args.json_output and "session-a" in anth:
        page = json.dumps(json.loads((CORPUS / "github-api" / "paginate-issues.json").read_text()), indent=2)
        anth["session-a"] = with_json_output(anth["session-a"], page)
    oai = openai_sessions(args.openai)
    if not anth and not oai:
        sys.exit(
            f"no sessions in {args.flows} or {args.openai} (the corpus sits beside the repository as ../shared/corpus)"
        )
    counter = TokenCounter(Path.home() / ".headroom")
    console = Console(width=200)
    results = [
        ("anthropic", k, v) for k, v in run(anth, AnthropicCache, counter, args.timeout_after, args.timeout_at).items()
    ]
    results += [
        ("openai", k, v) for k, v in run(oai, OpenAICache, counter, args.timeout_after, args.timeout_at).items()
    ]
    t = Table(title="Prompt-cache cost of whole sessions without / with the proxy (tokens: cl100k_base estimates)")
    for col in ("provider", "session", "requests", "tokens before", "tokens after", "saved", "reads (with)", "writes (with)",
                "USD without", "USD with", "cost saved", "earlier breaks"):  # fmt: skip
        t.add_column(col, justify="left" if col in ("provider", "session") else "right", no_wrap=True)
    for provider, name, r in results:
        pct = 100 * (r.without.usd - r.with_proxy.usd) / r.without.usd if r.without.usd else 0.0
        t.add_row(provider, name, str(r.requests), f"{r.tokens_before:,}", f"{r.tokens_after:,}",
                  f"{100 * (r.tokens_before - r.tokens_after) / max(1, r.tokens_before):.1f}%",
                  f"{r.with_proxy.read:,}", f"{r.with_proxy.write:,}", f"{r.without.usd:.4f}", f"{r.with_proxy.usd:.4f}",
                  f"{pct:+.1f}%", str(r.breaks))  # fmt: skip
    console.print(t)
    if args.timeout_at or args.timeout_after:
        console.print("late compressions (earlier outputs a timeout sent whole, compressed in a later request): "
                      + ", ".join(f"{name} {r.late}" for _, name, r in results))  # fmt: skip
    if args.per_request:
        for provider, name, r in results:
            pt = Table(title=f"{provider} {name}: per request")
            for col in (
                "request",
                "model",
                "w/o uncached",
                "w/o write",
                "w/o read",
                "w/o USD",
                "with uncached",
                "with write",
                "with read",
                "with USD",
                "break",
            ):
                pt.add_column(col, justify="left" if col in ("request", "model", "break") else "right", no_wrap=True)
            for req, model, a, b, broke in r.rows:
                pt.add_row(req, model, f"{a.uncached:,}", f"{a.write:,}", f"{a.read:,}", f"{a.usd:.4f}",
                           f"{b.uncached:,}", f"{b.write:,}", f"{b.read:,}", f"{b.usd:.4f}", str(broke or ""))  # fmt: skip
            console.print(pt)


if __name__ == "__main__":
    main()
