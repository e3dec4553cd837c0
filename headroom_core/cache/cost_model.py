"""What a sequence of requests costs under the providers' prompt caching: the yardstick for
everything the proxy changes (benchmarks, end-to-end tests, the stats' cost figures).

**Anthropic** ("Prompt caching", docs.anthropic.com/en/docs/build-with-claude/prompt-caching):
the prompt is ``tools``, then ``system``, then ``messages``, cut into blocks (one per tool,
system block, and message content block). Blocks carrying ``cache_control`` are breakpoints;
at each breakpoint the prefix up to it is written to the cache (when it is at least
:data:`ANTHROPIC_MIN_CACHEABLE` tokens). A request reads the longest previously written prefix
that matches its own, found at one of its breakpoints or up to :data:`LOOKBACK_BLOCKS` blocks
before one ("the system automatically checks for cache hits at all previous content block
boundaries (up to approximately 20 blocks before your explicit breakpoint)"); the prefix hash
covers the model and leaves out the ``cache_control`` markers themselves. Everything between
the read prefix and the last breakpoint is a cache write (1.25× the base input price for the
5-minute lifetime), reads cost 0.1×, the rest is uncached input (1×). Entries live 5 minutes
after their last use (:data:`ANTHROPIC_TTL_SECONDS`).

**OpenAI** ("Prompt caching", platform.openai.com/docs/guides/prompt-caching): automatic for
prompts of at least 1,024 tokens; the longest previously seen prefix is read, counted in steps
of 128 tokens (1,024, 1,152, …); no write premium; cached input is billed at the model family's
cached-input price (:data:`OPENAI_CACHED_RATIO`, from platform.openai.com/docs/pricing). The
prompt order is ``tools``, ``instructions`` (or system messages), then the conversation items.

Token counts are estimates (cl100k_base unless the caller's counter says otherwise); images
are counted as Anthropic's width × height / 750 (docs.anthropic.com, "Vision"), after scaling
the long edge to 1,568 px. Output tokens are the same with or without the proxy and left out.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from headroom_core.wire.dialects import WireDialect, for_body

#: USD per million base input tokens, by model-name fragment (first match wins).
#: Anthropic: docs.anthropic.com/en/docs/about-claude/pricing; OpenAI: platform.openai.com/docs/pricing.
BASE_PRICE: tuple[tuple[str, float], ...] = (
    ("opus-4", 15.0), ("opus", 15.0), ("sonnet", 3.0), ("haiku-3-5", 0.8), ("haiku-4", 1.0), ("haiku", 0.25),
    ("gpt-5-nano", 0.05), ("gpt-5-mini", 0.25), ("gpt-5", 1.25), ("gpt-4.1-nano", 0.10), ("gpt-4.1-mini", 0.40),
    ("gpt-4.1", 2.0), ("gpt-4o-mini", 0.15), ("gpt-4o", 2.5), ("o4-mini", 1.10), ("o3", 2.0), ("o1", 15.0),
)  # fmt: skip
#: Cached input as a share of base input, OpenAI, by model family (same pricing page).
OPENAI_CACHED_RATIO: tuple[tuple[str, float], ...] = (
    ("gpt-5", 0.10), ("gpt-4.1", 0.25), ("gpt-4o", 0.50), ("o4-mini", 0.25), ("o3", 0.25), ("o1", 0.50),
)  # fmt: skip
ANTHROPIC_WRITE_RATIO = 1.25  # 5-minute cache write
ANTHROPIC_READ_RATIO = 0.10
ANTHROPIC_MIN_CACHEABLE = 1024  # tokens (Opus 4 / Sonnet 4)
ANTHROPIC_TTL_SECONDS = 300
LOOKBACK_BLOCKS = 20
OPENAI_MIN_CACHEABLE = 1024
OPENAI_STEP = 128


def base_price(model: str) -> float:
    """USD per million base input tokens for ``model`` (15.0 when unknown: the dearest)."""
    return next((p for k, p in BASE_PRICE if k in model), 15.0)


def openai_cached_ratio(model: str) -> float:
    """Cached-input price over base input price for an OpenAI ``model`` (0.5 when unknown)."""
    return next((r for k, r in OPENAI_CACHED_RATIO if k in model), 0.5)


@dataclass(frozen=True)
class Block:
    """One cacheable block: digest of its content (``cache_control`` left out), tokens, and
    whether it is a breakpoint."""

    digest: str
    tokens: int
    breakpoint: bool = False


@dataclass(frozen=True)
class Cost:
    """Tokens of one request by billing class, and its input cost in USD."""

    uncached: int
    write: int
    read: int
    usd: float

    def __add__(self, other: "Cost") -> "Cost":
        return Cost(
            self.uncached + other.uncached, self.write + other.write, self.read + other.read, self.usd + other.usd
        )

    @property
    def tokens(self) -> int:
        return self.uncached + self.write + self.read


ZERO = Cost(0, 0, 0, 0.0)


def image_tokens(block: dict) -> int | None:
    """Anthropic's estimate for an image block: width × height / 750 tokens after scaling the
    long edge down to 1,568 px; PNG sizes are read from the IHDR header, other formats count as
    the 1,600-token maximum. None when ``block`` is not a base64 image."""
    src = block.get("source") if block.get("type") == "image" else None
    if not isinstance(src, dict) or src.get("type") != "base64":
        return None
    head = base64.b64decode(str(src.get("data", ""))[:64] + "==", validate=False)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or len(head) < 24:
        return 1600
    w, h = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    scale = min(1.0, 1568 / max(w, h, 1))
    return max(1, math.ceil(w * scale * h * scale / 750))


def _strip_cc(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _strip_cc(x) for k, x in v.items() if k != "cache_control"}
    if isinstance(v, list):
        return [_strip_cc(x) for x in v]
    return v


class Blocks:
    """Cuts request bodies into :class:`Block` lists, counting each distinct block once with
    ``count`` (text → tokens)."""

    def __init__(self, count: Callable[[str], int]) -> None:
        self._count = count
        self._tokens: dict[str, int] = {}

    def block(self, value: Any, role: str = "") -> Block:
        text = role + json.dumps(_strip_cc(value), ensure_ascii=False, separators=(",", ":"))
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        if digest not in self._tokens:
            img = image_tokens(value) if isinstance(value, dict) else None
            self._tokens[digest] = img if img is not None else self._count(text)
        return Block(digest, self._tokens[digest], isinstance(value, dict) and "cache_control" in value)

    def of(self, body: dict, d: WireDialect | None = None) -> list[Block]:
        """The blocks of a request body in prompt order, as its dialect cuts its prompt
        (``d``'s ``prompt_parts``; ``d`` defaults to the dialect the body reads as)."""
        return [self.block(v, role) for v, role in (d or for_body(body)).prompt_parts(body)]


class AnthropicCache:
    """The simulated Anthropic prompt cache, shared by every request given to it (the provider
    caches per organisation, not per conversation). Times in seconds; ``None``: every request
    within the lifetime of the previous one."""

    def __init__(self) -> None:
        self._written: dict[str, float] = {}

    def request(self, model: str, blocks: list[Block], at: float | None = None) -> Cost:
        """The cost of one request's input; writes its breakpoints' prefixes to the cache."""
        now = at if at is not None else 0.0
        alive = (
            (lambda h: h in self._written)
            if at is None
            else (lambda h: h in self._written and now - self._written[h] <= ANTHROPIC_TTL_SECONDS)
        )
        h = hashlib.sha256(model.encode())
        chain, cum, total = [], [], 0
        for b in blocks:
            h.update(b.digest.encode())
            chain.append(h.copy().hexdigest())
            total += b.tokens
            cum.append(total)
        bps = [i for i, b in enumerate(blocks) if b.breakpoint]
        base = base_price(model)
        if not bps:
            return Cost(total, 0, 0, total * base / 1e6)
        hit = -1
        for bp in bps:
            for i in range(bp, max(-1, bp - LOOKBACK_BLOCKS - 1), -1):
                if alive(chain[i]):
                    hit = max(hit, i)
                    break
        if hit >= 0:
            self._written[chain[hit]] = now  # a read refreshes the entry's lifetime
        read = cum[hit] if hit >= 0 else 0
        last = bps[-1]
        write = cum[last] - read if cum[last] >= ANTHROPIC_MIN_CACHEABLE and last > hit else 0
        for bp in bps:
            if cum[bp] >= ANTHROPIC_MIN_CACHEABLE:
                self._written[chain[bp]] = now
        uncached = total - read - write
        usd = (uncached + ANTHROPIC_WRITE_RATIO * write + ANTHROPIC_READ_RATIO * read) * base / 1e6
        return Cost(uncached, write, read, usd)


class OpenAICache:
    """The simulated OpenAI automatic prefix cache (shared by every request given to it)."""

    def __init__(self) -> None:
        self._prefixes: set[str] = set()

    def request(self, model: str, blocks: list[Block]) -> Cost:
        """The cost of one request's input; remembers its prefixes."""
        h = hashlib.sha256(model.encode())
        total = 0
        cached = 0
        chain: list[str] = []
        for b in blocks:
            h.update(b.digest.encode())
            total += b.tokens
            d = h.copy().hexdigest()
            chain.append(d)
            if d in self._prefixes:
                cached = total
        self._prefixes.update(chain)
        if total < OPENAI_MIN_CACHEABLE or cached < OPENAI_MIN_CACHEABLE:
            cached = 0
        else:
            cached = OPENAI_MIN_CACHEABLE + (cached - OPENAI_MIN_CACHEABLE) // OPENAI_STEP * OPENAI_STEP
        base = base_price(model)
        uncached = total - cached
        return Cost(uncached, 0, cached, (uncached + openai_cached_ratio(model) * cached) * base / 1e6)


@dataclass(frozen=True)
class LateCost:
    """Compressing, in this turn, a tool output the session's cached prefix holds whole (a late
    compression, issue 33), against keeping it whole. Prices are multiples of the base input
    price (``write_ratio``: a cache write, Anthropic 1.25, OpenAI and Gemini 1.0 (no premium: the
    changed part is uncached input once); ``read_ratio``: a cache read, Anthropic 0.1, OpenAI
    and Gemini their cached-input share), figures in base-input token equivalents.

    ``tokens_before``/``tokens_after``: the output whole and compressed; ``tail_tokens``: what the
    previous turn's prompt held after the output (read from the cache if nothing changes, written
    again if the output does); ``remaining``: the requests the session is expected to make after
    this one (:func:`expected_remaining`)."""

    tokens_before: int
    tokens_after: int
    tail_tokens: int
    remaining: int
    write_ratio: float = ANTHROPIC_WRITE_RATIO
    read_ratio: float = ANTHROPIC_READ_RATIO

    @property
    def extra_now(self) -> float:
        """What this turn pays more: the compressed output and the tail written to the cache
        instead of the whole output and the tail read from it."""
        return self.write_ratio * (self.tokens_after + self.tail_tokens) - self.read_ratio * (
            self.tokens_before + self.tail_tokens
        )

    @property
    def saved_per_turn(self) -> float:
        """What every later turn pays less: the cached prefix is shorter by the saving."""
        return self.read_ratio * (self.tokens_before - self.tokens_after)

    @property
    def pays(self) -> bool:
        """Whether the session's expected later turns save more than this turn pays more."""
        return self.tokens_after < self.tokens_before and self.saved_per_turn * self.remaining > self.extra_now

    @property
    def turns_to_pay(self) -> float | None:
        """Later turns until the saving has paid for the extra write (None: it never does)."""
        if self.saved_per_turn <= 0:
            return None
        return max(0.0, self.extra_now / self.saved_per_turn)


#: Sessions longer than the current one needed to estimate its remainder from history.
MIN_HISTORY = 3


def expected_remaining(requests_so_far: int, lengths: Sequence[int] = ()) -> int:
    """The requests a session that has made ``requests_so_far`` is expected to make still.

    From history when there is enough: the mean residual life of the sessions in ``lengths``
    (their requests each; e.g. the project's recent sessions) that went longer than this one
    so far, ``mean(L - t for L > t)`` (at least :data:`MIN_HISTORY` of them). Else as many
    again as so far (the Lindy estimate: for a lifetime of no known scale the expected remainder
    of what has lasted ``t`` is ``t``; J. R. Gott, "Implications of the Copernican principle for
    our future prospects", Nature 363, 1993). At least 1."""
    longer = [n - requests_so_far for n in lengths if n > requests_so_far]
    if len(longer) >= MIN_HISTORY:
        return max(1, round(sum(longer) / len(longer)))
    return max(1, requests_so_far)
