"""``max_body_bytes`` decided from a request's head, before its body is read (issue 36).

The size limit fails closed (docs/architecture.md): an LLM request over ``max_body_bytes`` gets
413 in its provider's error shape and goes nowhere. Deciding that on the whole body means
holding the whole body first: a client announcing 2 GB made the proxy read 1.9 GB into memory
before it answered. Here the limit is read from what arrives first:

- the head: a ``Content-Length`` over the limit is refused at once, no body byte read;
- then the bytes read so far, for a body without a length (HTTP/1 ``Transfer-Encoding:
  chunked``, HTTP/2 without ``content-length``): refused as soon as they pass the limit.

The head limit applies to what the whole-body check (``request_plan._classify``) would refuse
for its size: an LLM API call (:func:`~headroom_core.wire.dialects.route`) that is not a token
count (those go on whatever their size, as the provider answers them), has no
``x-headroom-bypass`` header and is not signed over its bytes (a SigV4 body is judged whole,
:mod:`headroom_core.wire.sigv4`). The bytes counted are the body as sent (content-encoded or
not); a decoded body is still checked while it is decoded (``wire/decode.decode_limited``).

The addon that carries this out is ``addons/headroom_body_limit.py``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from headroom_core.plan_codes import Action, Code
from headroom_core.request_plan import BYPASS_HEADER, RequestPlan
from headroom_core.too_large import too_large_message
from headroom_core.wire.dialects import Route, route
from headroom_core.wire.signed import body_signature


def declared_length(headers: Mapping[str, str]) -> int | None:
    """The body length (bytes) a request head declares: its ``content-length`` (lowercase
    names), or None when there is none, it is not a single non-negative integer (RFC 9110
    §8.6; mitmproxy refuses such a head itself), or ``transfer-encoding`` is present (it
    overrides the length, RFC 9112 §6.3)."""
    if "transfer-encoding" in headers:
        return None
    raw = headers.get("content-length", "").strip()
    return int(raw) if raw.isdigit() else None


@dataclass(frozen=True)
class BodyLimit:
    """The size limit of one request, from its head.

    ``route``: the request's dialect (an LLM API call); ``limit``: ``max_body_bytes`` (bytes);
    ``declared``: the length its head declares (bytes), None when it declares none."""

    route: Route
    limit: int
    declared: int | None

    @property
    def over_at_once(self) -> bool:
        """Whether the head alone declares more than :attr:`limit`."""
        return self.declared is not None and self.declared > self.limit

    def passed(self, read: int) -> bool:
        """Whether ``read`` bytes of the body (so far) are over :attr:`limit`."""
        return read > self.limit

    def refusal(self, size: int, *, declared: bool) -> RequestPlan:
        """The plan that refuses the request: 413 with an error body in its dialect's shape
        (``WireDialect.error_body(..., too_large=True)``), code ``TOO_LARGE``. ``size``: the
        declared length (``declared``) or the bytes read when the limit was passed (bytes)."""
        if declared:
            msg = too_large_message(size, self.limit, declared=True)
        else:
            msg = too_large_message(size, self.limit, passed="read")
        body = json.dumps(self.route.wire.error_body(msg, too_large=True)).encode()
        return RequestPlan(
            Action.REJECT,
            "body over max_body_bytes",
            self.route.dialect,
            status=413,
            error_body=body,
            bytes_before=size,
            code=Code.TOO_LARGE,
        )


def body_limit(method: str, path: str, headers: Mapping[str, str], limit: int) -> BodyLimit | None:
    """The limit of the request with ``method``, ``path`` (query included) and ``headers``
    (lowercase names), or None when the limit is not decided from its head (the module: not an
    LLM API call, a token count, a bypass header, a body signed over its bytes). ``limit``:
    ``max_body_bytes`` (bytes, at least 1)."""
    r = route(method, path)
    if r.dialect is None or r.counting:
        return None
    if headers.get(BYPASS_HEADER, "").strip().lower() in ("1", "true", "yes"):
        return None
    if body_signature(headers, path) is not None:
        return None
    return BodyLimit(r, limit, declared_length(headers))
