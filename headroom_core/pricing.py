"""Prices of LLM tokens, to show the savings ledger in money: a documented price table per
model family, overridable by the user (setting ``prices``).

Prices are USD per million tokens (MTok), standard (not batch) tier, as published on the
providers' pricing pages:

- Anthropic, https://docs.anthropic.com/en/docs/about-claude/pricing ("Model pricing" and
  "Prompt caching"): a 5-minute cache write costs 1.25x the base input price, a cache read
  (hit or refresh) 0.1x. 1-hour cache writes (2x) are not told apart in ``usage`` as the ledger
  keeps it, so every write is priced at the 5-minute rate (an under-estimate for 1-hour writes).
- OpenAI, https://platform.openai.com/docs/pricing ("Text tokens", Standard): cached input has
  its own price per model family (GPT-4o and o1/o3-mini: 50% of input; GPT-4.1, o3 and o4-mini:
  25%; GPT-5: 10%). OpenAI writes no cache entries at a price: ``cache_write`` is the input price.
- Google Gemini (Gemini API and Vertex AI), https://ai.google.dev/gemini-api/docs/pricing (standard
  tier, prompts up to 200k tokens; text/image/video input), as published in 2026 (read through
  dated copies of that page of 2026-03 and 2026-07): "Context caching price" is the cache read
  (Gemini 2.5 and 3: 10% of input; 2.0 Flash: 25%). ``usageMetadata.promptTokenCount`` includes
  ``cachedContentTokenCount`` (the OpenAI way). Gemini charges no cache-write premium (implicit
  caching writes nothing at a price; an explicit cache's tokens are input when it is created), so
  ``cache_write`` is the input price; the storage of an explicit cache (USD 4.50 per MTok per hour
  for Pro models, 1.00 for Flash and Flash-Lite) is billed by time, which no usage figure carries,
  and is left out. The Pro models' higher rates above 200k prompt tokens are not modelled (an
  under-estimate for such prompts).

Figures as of 2025-11 (Google's: 2026); providers change them, so the table is a default, not a bill. A user
replaces or adds entries with ``prices`` (``config.toml``, ``HEADROOM_PRICES``, or ``--set
headroom_prices=…``): each entry is ``"<model glob>=<input>/<output>[/<cache read>[/<cache
write>]]"`` in USD per MTok, e.g. ``"claude-sonnet-4*=3/15/0.30/3.75"``; a missing cache price
follows the provider's rule for the dialect (Anthropic 0.1x / 1.25x, Gemini 0.1x / 1x, OpenAI
0.5x / 1x). User
entries are tried before the table; the first glob that matches the model name wins
(:func:`fnmatch.fnmatchcase`, lower-cased name).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from headroom_core.errors import UsageError

#: Anthropic prompt caching: cache read and 5-minute cache write as multiples of base input.
ANTHROPIC_CACHE_READ = 0.10
ANTHROPIC_CACHE_WRITE = 1.25
#: OpenAI's cached-input discount when a user entry names none (the GPT-4o family's 50%).
OPENAI_CACHE_READ = 0.50
#: Gemini's cache read as a multiple of input when a user entry names none (Gemini 2.5 and 3).
GEMINI_CACHE_READ = 0.10


class PriceError(ValueError, UsageError):
    """A ``prices`` entry could not be parsed; the message names it and shows the form."""


@dataclass(frozen=True)
class Price:
    """USD per million tokens for one model family: ``input`` (uncached), ``output``,
    ``cache_read`` (Anthropic cache hit / OpenAI cached input) and ``cache_write`` (Anthropic
    cache write, 5-minute)."""

    input: float
    output: float
    cache_read: float
    cache_write: float


def anthropic(input: float, output: float) -> Price:
    """An Anthropic price from base input and output: cache read 0.1x, write 1.25x input."""
    return Price(input, output, round(input * ANTHROPIC_CACHE_READ, 6), round(input * ANTHROPIC_CACHE_WRITE, 6))


def openai(input: float, cached: float, output: float) -> Price:
    """An OpenAI price: input, cached input and output (no separate cache-write price)."""
    return Price(input, output, cached, input)


def gemini(input: float, output: float, cached: float) -> Price:
    """A Gemini price: input, output and context caching (cache read); no cache-write price."""
    return Price(input, output, cached, input)


#: The default table, most specific globs first. ``*`` before a name also matches provider
#: prefixes (Bedrock ``anthropic.claude-…``, Vertex ``…@date``, OpenRouter ``openai/gpt-…``).
DEFAULT_TABLE: tuple[tuple[str, Price], ...] = (
    # Anthropic (base input, output)
    ("*claude-opus-4-[5-9]*", anthropic(5.0, 25.0)),
    ("*claude-opus-4*", anthropic(15.0, 75.0)),
    ("*claude-3-opus*", anthropic(15.0, 75.0)),
    ("*claude-sonnet-4*", anthropic(3.0, 15.0)),
    ("*claude-3-7-sonnet*", anthropic(3.0, 15.0)),
    ("*claude-3-5-sonnet*", anthropic(3.0, 15.0)),
    ("*claude-haiku-4*", anthropic(1.0, 5.0)),
    ("*claude-3-5-haiku*", anthropic(0.80, 4.0)),
    ("*claude-3-haiku*", anthropic(0.25, 1.25)),
    ("*opus*", anthropic(5.0, 25.0)),
    ("*sonnet*", anthropic(3.0, 15.0)),
    ("*haiku*", anthropic(1.0, 5.0)),
    # OpenAI (input, cached input, output)
    ("*gpt-5*-nano*", openai(0.05, 0.005, 0.40)),
    ("*gpt-5*-mini*", openai(0.25, 0.025, 2.00)),
    ("*gpt-5*", openai(1.25, 0.125, 10.0)),
    ("*gpt-4.1-nano*", openai(0.10, 0.025, 0.40)),
    ("*gpt-4.1-mini*", openai(0.40, 0.10, 1.60)),
    ("*gpt-4.1*", openai(2.00, 0.50, 8.00)),
    ("*gpt-4o-mini*", openai(0.15, 0.075, 0.60)),
    ("*gpt-4o*", openai(2.50, 1.25, 10.0)),
    ("*o4-mini*", openai(1.10, 0.275, 4.40)),
    ("*o3-mini*", openai(1.10, 0.55, 4.40)),
    ("*o3*", openai(2.00, 0.50, 8.00)),
    ("*o1-mini*", openai(1.10, 0.55, 4.40)),
    ("*o1*", openai(15.0, 7.50, 60.0)),
    ("*codex-mini*", openai(1.50, 0.375, 6.00)),
    # Google Gemini (input, output, context caching), prompts up to 200k tokens
    ("*gemini-3*-pro*", gemini(2.00, 12.00, 0.20)),
    ("*gemini-3*-flash*", gemini(0.50, 3.00, 0.05)),
    ("*gemini-2.5-pro*", gemini(1.25, 10.00, 0.125)),
    ("*gemini-2.5-flash-lite*", gemini(0.10, 0.40, 0.01)),
    ("*gemini-2.5-flash*", gemini(0.30, 2.50, 0.03)),
    ("*gemini-2.0-flash-lite*", gemini(0.075, 0.30, 0.075)),
    ("*gemini-2.0-flash*", gemini(0.10, 0.40, 0.025)),
)


def parse_entry(entry: str, dialect_hint: str = "") -> tuple[str, Price]:
    """``"glob=input/output[/cache_read[/cache_write]]"`` (USD per MTok) as ``(glob, Price)``.

    A missing cache price follows the provider's rule, chosen by the glob (``claude`` or an
    Anthropic family name: 0.1x / 1.25x; ``gemini``: 0.1x / 1x; otherwise OpenAI's 0.5x / 1x). Raises
    :class:`PriceError` naming the entry when it does not have that form or a price is negative.
    """
    glob, sep, rest = entry.partition("=")
    glob = glob.strip().lower()
    parts = [p.strip() for p in rest.split("/")] if sep else []
    try:
        nums = [float(p) for p in parts]
    except ValueError:
        nums = []
    if not glob or not 2 <= len(nums) <= 4 or any(n < 0 for n in nums):
        raise PriceError(
            f"price entry {entry!r}: expected '<model glob>=<input>/<output>[/<cache read>[/<cache write>]]' in USD per million tokens, e.g. 'claude-sonnet-4*=3/15/0.3/3.75'"
        )
    inp, out = nums[0], nums[1]
    is_anthropic = any(w in (glob + dialect_hint) for w in ("claude", "opus", "sonnet", "haiku", "anthropic"))
    is_gemini = "gemini" in (glob + dialect_hint)
    read = (
        nums[2]
        if len(nums) > 2
        else inp * (ANTHROPIC_CACHE_READ if is_anthropic else GEMINI_CACHE_READ if is_gemini else OPENAI_CACHE_READ)
    )
    write = nums[3] if len(nums) > 3 else inp * (ANTHROPIC_CACHE_WRITE if is_anthropic else 1.0)
    return glob, Price(inp, out, read, write)


class PriceTable:
    """Looks up the :class:`Price` of a model name: the user's entries first, then
    :data:`DEFAULT_TABLE`. Unknown models have no price (None): their cost is left out and
    counted as unpriced, never guessed."""

    def __init__(self, entries: Sequence[tuple[str, Price]] = DEFAULT_TABLE, user: Iterable[str] = ()) -> None:
        self.entries: tuple[tuple[str, Price], ...] = tuple(parse_entry(e) for e in user) + tuple(entries)
        self._cache: dict[str, Price | None] = {}

    def price(self, model: str) -> Price | None:
        """The price of ``model`` (matched lower-cased), or None when no glob matches."""
        m = (model or "").lower()
        if m not in self._cache:
            self._cache[m] = next((p for g, p in self.entries if m and fnmatch.fnmatchcase(m, g)), None)
        return self._cache[m]


@dataclass(frozen=True)
class RequestCost:
    """One request in USD: ``prompt`` what its prompt cost as the provider's ``usage`` says
    (uncached input, cache reads and writes, each at its price), ``output`` its output,
    ``saved`` the estimated saving: the tokens the proxy removed, priced at the request's own
    average prompt rate (``prompt`` / prompt tokens)."""

    prompt: float
    output: float
    saved: float


def request_cost(
    price: Price,
    *,
    separate_cache: bool,
    input_tokens: int,
    cache_read: int,
    cache_write: int,
    output_tokens: int,
    tokens_saved: int,
) -> RequestCost:
    """Price one request's ``usage`` (tokens) with ``price`` (USD per MTok).

    ``separate_cache`` is True for Anthropic (``input_tokens`` excludes cache reads and writes)
    and False for OpenAI (its input figure includes ``cached_tokens``). The saving is
    ``tokens_saved`` x the request's average prompt rate; a request whose usage reports no prompt
    tokens saves at the uncached input price.
    """
    if separate_cache:
        uncached, prompt_tokens = input_tokens, input_tokens + cache_read + cache_write
    else:
        uncached, prompt_tokens = max(input_tokens - cache_read - cache_write, 0), input_tokens
    prompt = (uncached * price.input + cache_read * price.cache_read + cache_write * price.cache_write) / 1e6
    rate = prompt / prompt_tokens if prompt_tokens else price.input / 1e6
    return RequestCost(prompt, output_tokens * price.output / 1e6, tokens_saved * rate)
