"""Benchmark: the prompt-cache cost of the real Claude Code session with the proxy and without it.

Run ``python bench/bench_cache_cost.py [--flows DIR] [--timeout-after N]`` from the project root.
Every request of ``../shared/corpus/anthropic-flows`` is planned by the core
(:func:`headroom_core.request_plan.plan_request`, a fresh runtime in a temporary home, the same
walk the proxy runs); the bodies as the client sent them ("without") and as the proxy would
forward them ("with") each go through a simulation of Anthropic's prompt cache, and the table
shows per request the uncached input, cache-write and cache-read tokens and the input cost.

Simulated cache (Anthropic, "Prompt caching", docs.anthropic.com/en/docs/build-with-claude/
prompt-caching): the prompt is ``tools``, then ``system``, then ``messages``, cut into blocks
(one per tool, system block, and message content block). Blocks carrying ``cache_control`` are
breakpoints; at each breakpoint the prefix up to it is written to the cache (when it is at least
1024 tokens, the minimum for Opus 4 and Sonnet 4). A request reads the longest previously
written prefix that matches its own, found at one of its breakpoints or up to 20 blocks before
one ("the system automatically checks for cache hits at all previous content block boundaries
(up to approximately 20 blocks before your explicit breakpoint)"); the prefix hash covers the
model (caches are per model) and leaves out the ``cache_control`` markers themselves (clients
move them every turn and still hit). Everything between the read prefix and the last
breakpoint is a cache write; the rest is uncached input. The cache is shared by all requests
(the provider caches per organisation, not per conversation: a new conversation with the same
tools and system prompt reads them), and every request is assumed within the 5-minute lifetime
of the previous one (the corpus has no timestamps).

Prices (Anthropic pricing page, docs.anthropic.com/en/docs/about-claude/pricing): base input
$15 per million tokens for Claude Opus 4, $3 for Claude Sonnet 4; 5-minute cache writes cost
1.25x the base input price, cache reads (hits) 0.1x. Output tokens are the same either way and
are left out. Token counts are cl100k_base estimates (Claude's tokenizer is not public); the
provider's own figures recorded in the corpus are shown beside the simulated "without" row as
a calibration.

``--timeout-after N``: from the N-th request on, every plan times out (the proxy then forwards
the client's bytes), to show what a compression timeout costs in cache writes.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import math
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from headroom_core.compress.tokens import TokenCounter  # noqa: E402
from headroom_core.request_plan import plan_request  # noqa: E402
from headroom_core.runtime import Runtime  # noqa: E402
from headroom_core.settings import load_settings  # noqa: E402

FLOWS = ROOT.parent / "shared" / "corpus" / "anthropic-flows"
#: USD per million base input tokens (Anthropic pricing page), by model-name fragment.
BASE_PRICE = {"opus-4": 15.0, "sonnet-4": 3.0, "haiku-3-5": 0.8}
WRITE_RATIO = 1.25  # 5-minute cache write
READ_RATIO = 0.10  # cache hit
MIN_CACHEABLE = 1024  # tokens, Opus 4 / Sonnet 4
LOOKBACK_BLOCKS = 20


@dataclass(frozen=True)
class Block:
    """One cacheable block: digest of its content (cache_control left out), tokens, breakpoint."""

    digest: str
    tokens: int
    breakpoint: bool


@dataclass(frozen=True)
class Cost:
    """Tokens of one request by billing class, and its input cost in USD."""

    uncached: int
    write: int
    read: int
    usd: float


def image_tokens(block: dict) -> int | None:
    """Anthropic's estimate for an image block: width x height / 750 tokens after scaling the long
    edge down to 1568 px ("Vision" docs); PNG sizes are read from the IHDR header, other
    formats count as the 1,600-token maximum. None when ``block`` is not a base64 image."""
    src = block.get("source") if block.get("type") == "image" else None
    if not isinstance(src, dict) or src.get("type") != "base64":
        return None
    head = base64.b64decode(str(src.get("data", ""))[:64] + "==", validate=False)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or len(head) < 24:
        return 1600
    w, h = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    scale = min(1.0, 1568 / max(w, h, 1))
    return max(1, math.ceil(w * scale * h * scale / 750))


def _strip_cc(v):
    if isinstance(v, dict):
        return {k: _strip_cc(x) for k, x in v.items() if k != "cache_control"}
    if isinstance(v, list):
        return [_strip_cc(x) for x in v]
    return v


class Blocks:
    """Cuts bodies into :class:`Block` lists, counting each distinct block's tokens once."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self._tokens: dict[str, int] = {}

    def _block(self, value, role: str = "") -> Block:
        text = role + json.dumps(_strip_cc(value), ensure_ascii=False, separators=(",", ":"))
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        if digest not in self._tokens:
            img = image_tokens(value) if isinstance(value, dict) else None
            self._tokens[digest] = img if img is not None else self.counter.count(text)
        return Block(digest, self._tokens[digest], isinstance(value, dict) and "cache_control" in value)

    def of(self, body: dict) -> list[Block]:
        out = [self._block(t) for t in body.get("tools") or []]
        system = body.get("system")
        if isinstance(system, list):
            out += [self._block(b) for b in system]
        elif system:
            out.append(self._block(system))
        for m in body.get("messages") or []:
            content = m.get("content")
            if isinstance(content, list):
                out += [self._block(b, m.get("role", "") if i == 0 else "") for i, b in enumerate(content)]
            else:
                out.append(self._block(content, m.get("role", "")))
        return out


class PromptCache:
    """The simulated provider cache (see the module docstring)."""

    def __init__(self) -> None:
        self.written: set[str] = set()

    def request(self, model: str, blocks: list[Block]) -> Cost:
        h = hashlib.sha256(model.encode())
        chain, cum, total = [], [], 0
        for b in blocks:
            h.update(b.digest.encode())
            chain.append(h.copy().hexdigest())
            total += b.tokens
            cum.append(total)
        bps = [i for i, b in enumerate(blocks) if b.breakpoint]
        base = next((p for k, p in BASE_PRICE.items() if k in model), 15.0)
        if not bps:
            return Cost(total, 0, 0, total * base / 1e6)
        hit = -1
        for b in bps:
            for i in range(b, max(-1, b - LOOKBACK_BLOCKS - 1), -1):
                if chain[i] in self.written:
                    hit = max(hit, i)
                    break
        read = cum[hit] if hit >= 0 else 0
        last = bps[-1]
        write = cum[last] - read if cum[last] >= MIN_CACHEABLE and last > hit else 0
        for b in bps:
            if cum[b] >= MIN_CACHEABLE:
                self.written.add(chain[b])
        uncached = total - read - write
        return Cost(uncached, write, read, (uncached + WRITE_RATIO * write + READ_RATIO * read) * base / 1e6)


def recorded(flow: dict) -> tuple[int, int, int] | None:
    """The provider's (input, cache write, cache read) from the recorded ``message_start``."""
    body = flow["response"]["body"]
    if not isinstance(body, str):
        return None
    for line in body.splitlines():
        if line.startswith("data:") and '"message_start"' in line:
            u = json.loads(line[5:])["message"]["usage"]
            return u["input_tokens"], u["cache_creation_input_tokens"], u["cache_read_input_tokens"]
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flows", type=Path, default=FLOWS)
    ap.add_argument("--timeout-after", type=int, default=0, help="from this request number on, plans time out (0: never)")
    args = ap.parse_args()
    files = sorted(args.flows.glob("session-a-*.json"))
    if not files:
        sys.exit(f"no flows in {args.flows} (the corpus sits beside the repository as ../shared/corpus)")
    console = Console(width=200)
    counter = TokenCounter(Path.home() / ".headroom")
    cutter = Blocks(counter)
    without, with_proxy = PromptCache(), PromptCache()
    t = Table(title="Simulated Anthropic prompt cache: the flows session without / with the proxy (tokens: cl100k_base estimates)")
    for col in ("req", "model", "w/o uncached", "w/o write", "w/o read", "w/o USD", "with uncached", "with write", "with read", "with USD", "saved USD", "recorded in/write/read"):
        t.add_column(col, justify="left" if col in ("req", "model") else "right", no_wrap=True)
    tot = {"wo": [0, 0, 0, 0.0], "w": [0, 0, 0, 0.0], "rec": [0, 0, 0]}
    with tempfile.TemporaryDirectory(prefix="headroom-bench-cache-") as home:
        rt = Runtime(load_settings({"home": home}, env={}))
        rt.__dict__["counter"] = counter
        for n, f in enumerate(files, 1):
            flow = json.loads(f.read_text())
            body = flow["request"]["body"]
            if "max_tokens" not in body:  # count_tokens: free, never cached
                continue
            raw = json.dumps(body).encode()
            if args.timeout_after and n >= args.timeout_after:
                sent = body
            else:
                plan = plan_request(rt, "POST", "/v1/messages", {"user-agent": flow["request"]["headers"].get("user-agent", "")}, raw)
                sent = json.loads(plan.body) if plan.action == "rewrite" and plan.body else body
            model = body.get("model", "")
            a = without.request(model, cutter.of(body))
            b = with_proxy.request(model, cutter.of(sent))
            rec = recorded(flow)
            for key, c in (("wo", a), ("w", b)):
                tot[key] = [tot[key][0] + c.uncached, tot[key][1] + c.write, tot[key][2] + c.read, tot[key][3] + c.usd]
            if rec:
                tot["rec"] = [x + y for x, y in zip(tot["rec"], rec)]
            t.add_row(f.stem.removeprefix("session-a-"), model.replace("claude-", "").split("-2025")[0],
                      f"{a.uncached:,}", f"{a.write:,}", f"{a.read:,}", f"{a.usd:.4f}",
                      f"{b.uncached:,}", f"{b.write:,}", f"{b.read:,}", f"{b.usd:.4f}", f"{a.usd - b.usd:+.4f}",
                      "/".join(f"{x:,}" for x in rec) if rec else "-")
    wo, w, r = tot["wo"], tot["w"], tot["rec"]
    t.add_row("total", "", f"{wo[0]:,}", f"{wo[1]:,}", f"{wo[2]:,}", f"{wo[3]:.4f}", f"{w[0]:,}", f"{w[1]:,}", f"{w[2]:,}", f"{w[3]:.4f}",
              f"{wo[3] - w[3]:+.4f}", "/".join(f"{x:,}" for x in r), style="bold")
    console.print(t)

    def rate(x) -> str:
        return f"{100 * x[2] / max(1, x[0] + x[1] + x[2]):.1f}%"

    console.print(f"hit rate (read / all prompt tokens): without {rate(wo)}, with {rate(w)}, provider recorded {rate(r)}; "
                  f"input cost {wo[3]:.4f} -> {w[3]:.4f} USD ({100 * (wo[3] - w[3]) / wo[3]:+.1f}% saved)")


if __name__ == "__main__":
    main()
