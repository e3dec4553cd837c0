"""What a follow-up the provider failed becomes for the client (issue 36, item 4). Pure.

Before, a provider's 429, 529 or 500 on the proxy's follow-up became a finished ``200`` answer
ending with a notice, ``retry-after`` dropped: the agent ended its turn instead of retrying. Now
a failure the client would retry had it met it itself reaches it as an error it retries:

- :func:`retryable`: the statuses the providers' SDKs retry (Anthropic's and OpenAI's
  ``_should_retry``: 408, 409, 429 and every 5xx, the provider's ``x-should-retry: true|false``
  deciding first). Other refusals (a 400, 401, 404, 413 …: retrying cannot help) still end the
  answer with the text so far and :data:`~headroom_core.ccr.loop.NOTICE_FAILED`.
- :func:`refused`: the :class:`~headroom_core.wire.provider_error.ProviderError` of a refused
  follow-up, or None when it is not one to retry; :func:`lost`: one for a follow-up whose
  connection failed, timed out or was cut (502 / 504, as a gateway answers).
- :func:`json_answer`: the non-streamed answer for it: the provider's status, its headers
  (``retry-after``, ``retry-after-ms``, ``x-should-retry``, rate-limit figures, request id; not
  the hop-by-hop and framing ones) and its error body as sent; for a lost connection the
  dialect's own error shape marked as a gateway failure
  (:func:`headroom_core.upstream_failure.gateway_body`). A streamed answer already sent its
  status: the reply side ends it with the dialect's error event instead
  (:meth:`~headroom_core.wire.protocol.ReplyStream.failure`).
"""

from __future__ import annotations

import json

from headroom_core.errors import EnvironmentProblem
from headroom_core.wire.protocol import WireDialect
from headroom_core.wire.provider_error import BAD_GATEWAY, GATEWAY_TIMEOUT, ProviderError

#: Statuses a client retries below 500 (the SDKs' ``_should_retry``: request timeout, conflict
#: (a lock), rate limit); every 5xx is retried too (529: Anthropic's "overloaded").
RETRY_BELOW_500 = frozenset({408, 409, 429})
#: Headers of the provider's error answer that never pass to the client: hop-by-hop (RFC 9110,
#: section 7.6.1) and the framing of a body the proxy read and decoded.
_NOT_PASSED = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "content-encoding",
    }
)


class FollowUpLost(ConnectionError, EnvironmentProblem):
    """Raised by a follow-up's sender when its connection failed, timed out or was cut before
    an answer (``timed_out``: it timed out); :func:`~headroom_core.ccr.loop.complete_json`
    makes it a :func:`lost` error for the client."""

    def __init__(self, why: str, timed_out: bool = False) -> None:
        super().__init__(why)
        self.timed_out = timed_out


def retryable(status: int, headers: tuple[tuple[str, str], ...] = ()) -> bool:
    """Whether a client retries an answer with ``status`` and ``headers``: the provider's
    ``x-should-retry`` (``true``/``false``) when it sent one, else 408, 409, 429 and 5xx."""
    said = {k.lower(): v.strip().lower() for k, v in headers}.get("x-should-retry")
    if said in ("true", "false"):
        return said == "true"
    return status in RETRY_BELOW_500 or status >= 500


def refused(status: int, headers: tuple[tuple[str, str], ...], body: bytes) -> ProviderError | None:
    """The error a client may retry for a follow-up the provider answered with ``status``
    (not 200), ``headers`` and ``body``; None when retrying cannot help (:func:`retryable`)."""
    if not retryable(status, headers):
        return None
    return ProviderError(status, body, tuple(headers))


def lost(why: str, timed_out: bool = False) -> ProviderError:
    """The error for a follow-up whose connection failed or was cut (``why``: the proxy's
    words), 504 when it timed out, else 502."""
    return ProviderError(GATEWAY_TIMEOUT if timed_out else BAD_GATEWAY, why=f"headroom proxy: {why}; retry the request")


def passed_headers(headers: tuple[tuple[str, str], ...]) -> list[tuple[str, str]]:
    """The provider's headers the client gets with its error (all but :data:`_NOT_PASSED`)."""
    return [(k, v) for k, v in headers if k.lower() not in _NOT_PASSED]


def json_answer(wire: WireDialect, err: ProviderError) -> tuple[int, list[tuple[str, str]], bytes]:
    """``(status, headers, body)`` of the non-streamed answer for ``err`` (module docstring)."""
    if err.body:
        return err.status, passed_headers(err.headers), err.body
    from headroom_core.upstream_failure import gateway_body

    return (
        err.status,
        [("content-type", "application/json")],
        json.dumps(gateway_body(wire, err.message, err.status)).encode(),
    )
