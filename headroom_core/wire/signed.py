"""Requests signed over their body, which the proxy must forward byte for byte.

AWS Signature Version 4 (used by Amazon Bedrock, also for Anthropic and OpenAI models, and by
gateways in front of them) puts the SHA-256 of the payload into the canonical request it signs,
unless the client declares the payload unsigned. So any change to the body, or to a header the
signature covers, makes the provider refuse the request. Sources: AWS, "Create a signed AWS API
request" (SigV4: ``Authorization: AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…,
Signature=…``; SigV4a: ``AWS4-ECDSA-P256-SHA256``; presigned URLs: ``X-Amz-Algorithm`` and
``X-Amz-Signature`` in the query) and "Signature calculations for the Authorization header"
(``x-amz-content-sha256``: the payload hash, or ``UNSIGNED-PAYLOAD`` /
``STREAMING-UNSIGNED-PAYLOAD-TRAILER`` when the body is not signed).

Opt-in, a SigV4 request signed with the user's own AWS key may be compressed and signed again
(``bedrock_resign``: :mod:`headroom_core.wire.sigv4`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping
from urllib.parse import parse_qsl

_ALGORITHMS = ("AWS4-HMAC-SHA256", "AWS4-ECDSA-P256-SHA256")
_UNSIGNED = ("UNSIGNED-PAYLOAD", "STREAMING-UNSIGNED-PAYLOAD-TRAILER")
_SIGNED_HEADERS = re.compile(r"SignedHeaders=([^,\s]+)", re.IGNORECASE)


@dataclass(frozen=True)
class Signature:
    """A body signature on a request: ``scheme`` names it (for logs and the ledger's reason);
    ``signed_headers`` are the lowercase header names it covers (empty when unknown, e.g. a
    presigned URL lists them in the query)."""

    scheme: str
    signed_headers: frozenset[str]


def body_signature(headers: Mapping[str, str], path: str = "") -> Signature | None:
    """The signature covering the body of a request with ``headers`` (lowercase names) and
    ``path`` (query included), or None when the body is not signed."""
    payload = headers.get("x-amz-content-sha256", "").strip().upper()
    if payload in _UNSIGNED:
        return None
    auth = headers.get("authorization", "").strip()
    for algo in _ALGORITHMS:
        if auth.upper().startswith(algo):
            m = _SIGNED_HEADERS.search(auth)
            names = frozenset(h.strip().lower() for h in m.group(1).split(";")) if m else frozenset()
            return Signature("AWS SigV4" if algo == _ALGORITHMS[0] else "AWS SigV4a", names)
    if "?" in path:
        query = {k.lower(): v for k, v in parse_qsl(path.split("?", 1)[1], keep_blank_values=True)}
        if query.get("x-amz-algorithm", "").upper() in _ALGORITHMS and "x-amz-signature" in query:
            names = frozenset(h.lower() for h in query.get("x-amz-signedheaders", "").split(";") if h)
            return Signature("AWS SigV4 (presigned URL)", names)
    return None
