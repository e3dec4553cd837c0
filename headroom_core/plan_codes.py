"""What the request walk decided, as codes: :class:`Action` (what the proxy does with a
request) and :class:`Code` (why). Light to import: the ledger and the addons read plans with
them without importing the walk (:mod:`headroom_core.request_plan`)."""

from __future__ import annotations

from enum import StrEnum


class Action(StrEnum):
    """What the proxy does with a request."""

    PASSTHROUGH = "passthrough"  # send the client's bytes
    REWRITE = "rewrite"  # send the plan's body
    REJECT = "reject"  # answer the plan's status and error body, contact nobody


class Code(StrEnum):
    """Why, as a code (``reason`` says it in words)."""

    NOT_LLM = "not_llm"
    BYPASS = "bypass"  # the client asked (x-headroom-bypass)
    SIGNED = "signed"  # a signed body: forwarded byte-identical
    TOO_LARGE = "too_large"  # over max_body_bytes
    NOT_PARSED = "not_parsed"  # not JSON, not UTF-8, not the dialect's shape
    COMPRESS_OFF = "compress_off"
    PLANNED = "planned"  # the full walk ran
    FALLBACK = "fallback"  # compression failed or timed out: replayed, nothing new compressed
    NOT_COMPRESSED = "not_compressed"  # failed or timed out and the fallback failed too
    NOT_COMPRESSED_TOO_LARGE = "not_compressed_too_large"  # ... and too large to send uncompressed
    ABANDONED = "abandoned"
    DB_BUSY = "db_busy"  # the database was locked past the request's lock-wait budget: fallback or unchanged
    DB_UNAVAILABLE = "db_unavailable"  # the database could not be opened: unchanged
    ORIGINALS_UNSTORED = "originals_unstored"  # planned, but outputs it would shorten went whole or lossless: their originals could not be stored
