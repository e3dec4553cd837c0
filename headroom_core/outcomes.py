"""Why a request went out as it did, as a class the ledger stores (``request_outcomes.outcome``)
and ``headroom stats`` and the stats page count: how many requests went out uncompressed, and
why (issue 34, item 10).

Pure: a class from a plan's :class:`~headroom_core.plan_codes.Code`, its ``internal_error``
flag and whether a compression timeout started it; labels for people.
"""

from __future__ import annotations

from headroom_core.plan_codes import Code

#: The classes of a request that went out as the proxy planned it (not "uncompressed").
PLANNED = ("compressed", "unchanged")

#: Every uncompressed class, in the order reports list them, with its label.
LABELS: dict[str, str] = {
    "timeout": "compression timed out",
    "fallback": "fallback (nothing new compressed)",
    "internal_error": "internal error",
    "not_parsed": "not parsed (not JSON or not the API's shape)",
    "too_large": "too large",
    "bypass": "bypass (x-headroom-bypass)",
    "compress_off": "compression off",
    "signed": "signed body",
    "not_ready": "proxy not ready",
    "unreachable": "upstream unreachable",
    "db_busy": "database locked by another process",
    "db_unavailable": "database could not be opened",
    "originals_unstored": "originals could not be stored (outputs sent whole or lossless)",
}

_BY_CODE = {
    Code.BYPASS: "bypass",
    Code.SIGNED: "signed",
    Code.TOO_LARGE: "too_large",
    Code.NOT_PARSED: "not_parsed",
    Code.COMPRESS_OFF: "compress_off",
    Code.NOT_COMPRESSED_TOO_LARGE: "too_large",
    Code.DB_BUSY: "db_busy",
    Code.DB_UNAVAILABLE: "db_unavailable",
    Code.ORIGINALS_UNSTORED: "originals_unstored",
}

#: Words of the reasons :mod:`headroom_core.request_plan` writes for a compression timeout and
#: for a request that arrived before the proxy was ready (its own texts, not a provider's).
_TIMEOUT_WORDS = "timed out"
_NOT_READY_WORDS = "was not ready"


def outcome_of(code: Code, reason: str, *, internal_error: bool = False, rewritten: bool = False) -> str:
    """The outcome class of a plan: ``code`` (why), ``reason`` (its words, read only to tell a
    timeout and a start-up wait from other fallbacks: the walk writes them), ``internal_error``
    (the walk raised) and ``rewritten`` (the body sent is not the client's). A planned request is
    ``compressed`` or ``unchanged``; anything else is a key of :data:`LABELS`."""
    if code in _BY_CODE:
        return _BY_CODE[code]
    if internal_error:
        return "internal_error"
    if code in (Code.FALLBACK, Code.NOT_COMPRESSED, Code.ABANDONED):
        if _NOT_READY_WORDS in reason:
            return "not_ready"
        return "timeout" if _TIMEOUT_WORDS in reason else "fallback"
    return "compressed" if rewritten else "unchanged"


def label(outcome: str) -> str:
    """The words for an outcome class (the class itself when unknown)."""
    return LABELS.get(outcome, outcome)
