"""Pure decisions of the memory: relevance score, value decay and gain, archiving, text search.

The retrieval score follows the Generative Agents paper (Park et al., 2023, "Generative Agents:
Interactive Simulacra of Human Behavior", §4.1: score = relevance + recency + importance, with an
exponential recency decay): ``score = similarity + w_recency * recency + w_value * value``, where
similarity is the cosine of the sentence embeddings (or, before the model is loaded, the
cosine of word-prefix sets, :func:`text_similarity`), recency ``0.5 ** (age / half_life)`` of the
last time the memory was used or updated, and value its decayed usefulness in [0, 1]. A
similarity floor applies to the similarity alone, so recency never brings an unrelated memory in.

Value: starts at :data:`INITIAL_VALUE`; every use (injected, or returned by ``memory_search``) and
every repeated save moves it a fraction :data:`GAIN` of the way to 1; between uses it halves every
``half_life_days`` (the same exponential forgetting, applied lazily from the stored time). Memories
whose decayed value fell below a threshold and that are older than a minimum age are archived.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime

INITIAL_VALUE = 0.5
GAIN = 0.2
W_RECENCY = 0.10
W_VALUE = 0.10

_WORD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_\-./:]*[A-Za-z0-9_]|[A-Za-z0-9]")
_STOP = frozenset(
    "a an and are as at be but by can do does for from has have how i if in into is it its me my no not of on "
    "or our please so than that the their then there these this to us was we what when where which who why will "
    "with you your should would could about after all also any just use used using".split()
)
PREFIX = 5  # "migration" and "migrate" share "migra": a crude, language-agnostic stemmer


def days_between(earlier: datetime | None, now: datetime) -> float:
    """Days from ``earlier`` to ``now`` (0 when ``earlier`` is None or in the future)."""
    if earlier is None:
        return 0.0
    return max(0.0, (now - earlier).total_seconds() / 86400.0)


def recency(last_touched: datetime | None, now: datetime, half_life_days: float) -> float:
    """``0.5 ** (age_days / half_life_days)``, in (0, 1]."""
    if half_life_days <= 0:
        return 1.0
    return 0.5 ** (days_between(last_touched, now) / half_life_days)


def decayed_value(value: float, last_touched: datetime | None, now: datetime, half_life_days: float) -> float:
    """The stored ``value`` decayed from ``last_touched`` to ``now`` (halves every half-life)."""
    return value * recency(last_touched, now, half_life_days)


def gained(value_now: float, times: int = 1) -> float:
    """The value after ``times`` uses: each moves it :data:`GAIN` of the way to 1."""
    v = value_now
    for _ in range(max(0, times)):
        v += (1.0 - v) * GAIN
    return min(1.0, v)


def score(similarity: float, recency_: float, value: float) -> float:
    """The ranking score (see the module docstring)."""
    return similarity + W_RECENCY * recency_ + W_VALUE * value


def should_archive(value_now: float, created_at: datetime, now: datetime, below: float, min_age_days: float) -> bool:
    """Archive when the decayed value is under ``below`` and the memory is old enough."""
    return value_now < below and days_between(created_at, now) >= min_age_days


def terms(text: str) -> frozenset[str]:
    """The word prefixes text search compares: lowercase words of 2+ characters, stop words out,
    cut to :data:`PREFIX` characters (identifiers such as ``db:migrate`` stay one word)."""
    out = set()
    for w in _WORD.findall(text.lower()):
        if len(w) < 2 or w in _STOP:
            continue
        out.add(w[:PREFIX])
        for part in re.split(r"[\-./:_]", w):
            if len(part) >= 3 and part not in _STOP:
                out.add(part[:PREFIX])
    return frozenset(out)


def text_similarity(query_terms: frozenset[str], text_terms: frozenset[str]) -> float:
    """Cosine of two term sets (``|A & B| / sqrt(|A| * |B|)``), in [0, 1]."""
    if not query_terms or not text_terms:
        return 0.0
    return len(query_terms & text_terms) / math.sqrt(len(query_terms) * len(text_terms))


@dataclass(frozen=True)
class Scored:
    """A candidate: memory id, similarity (cosine, or text cosine in text mode) and final score."""

    id: str
    similarity: float
    score: float
