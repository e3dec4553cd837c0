"""An upstream the proxy could not reach, answered in the request's own API dialect (issue 34,
item 6): the connection was refused, the name did not resolve, the TLS handshake failed, or the
connection timed out. Without this the client got mitmproxy's HTML 502 page (proxy port) or an
empty reply (base-URL port), in no provider's error shape, and the ledger never saw the request.

Pure: :func:`classify` reads the connection error's text (mitmproxy's ``flow.error.msg``: the
operating system's and the TLS library's words, which are stable across releases: errno names
and OpenSSL reasons) into a :class:`Failure`; :func:`error_answer` builds the status and body.

Statuses are the ones a provider's gateway gives and every SDK retries (Anthropic's and
OpenAI's retry 408, 409, 429 and 5xx; Google's clients retry 502-504): 502 for a refused, unresolved or
broken connection, 504 for a timeout.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from headroom_core.wire.dialects import WireDialect

#: Gateway statuses: a failed connection, and one that timed out.
BAD_GATEWAY = 502
GATEWAY_TIMEOUT = 504

#: (class, words any of which in the error text say it, what it means for the user). Checked in
#: order: a TLS error naming a timeout is a TLS failure.
_KINDS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("tls", ("tls", "ssl", "certificate", "handshake"), "the TLS handshake failed"),
    (
        "dns",
        (
            "name or service not known",
            "nodename nor servname",
            "getaddrinfo",
            "name resolution",
            "no address associated",
            "errno -2",
            "errno -3",
            "errno -5",
            "errno 11001",
        ),
        "its name did not resolve",
    ),  # fmt: skip
    (
        "refused",
        ("refused", "connect call failed", "errno 111", "errno 61", "errno 10061"),
        "the connection was refused",
    ),
    ("timeout", ("timed out", "timeout"), "the connection timed out"),
    ("unreachable", ("unreachable", "no route"), "the network is unreachable"),
    ("closed", ("disconnected", "closed", "reset", "eof"), "it closed the connection without an answer"),
)


@dataclass(frozen=True)
class Failure:
    """Why the upstream could not be reached: ``kind`` (``tls``, ``dns``, ``refused``,
    ``timeout``, ``unreachable``, ``closed`` or ``other``), ``why`` in words, ``detail`` (the
    error text as reported, one line, at most 300 characters) and the HTTP ``status`` to
    answer."""

    kind: str
    why: str
    detail: str
    status: int


def classify(error: str) -> Failure:
    """The :class:`Failure` an error text describes (never raises; an unknown text is
    ``other``, status 502)."""
    detail = " ".join(str(error).split())[:300]
    low = detail.lower()
    for kind, words, why in _KINDS:
        if any(w in low for w in words):
            return Failure(kind, why, detail, GATEWAY_TIMEOUT if kind == "timeout" else BAD_GATEWAY)
    return Failure("other", "the connection failed", detail, BAD_GATEWAY)


def message(host: str, failure: Failure) -> str:
    """What the client reads: the proxy could not reach ``host`` and why, and what to do."""
    return (
        f"headroom proxy: could not reach the upstream {host}: {failure.why} ({failure.detail}). "
        "The request was not sent to the model. Check the network, the upstream URL and any corporate proxy "
        "(headroom doctor), then retry."
    )


#: Per dialect family, the members of its error object a gateway failure sets (the provider's
#: own words for a server-side error: Anthropic ``api_error``, OpenAI ``server_error``, Google
#: ``UNAVAILABLE``/``DEADLINE_EXCEEDED`` with the numeric code).
def _as_gateway(body: dict[str, Any], status: int) -> dict[str, Any]:
    err = body.get("error")
    if not isinstance(err, dict):
        return body
    if body.get("type") == "error":  # Anthropic: {"type": "error", "error": {"type", "message"}}
        err["type"] = "api_error"
    elif "status" in err and "code" in err:  # Google: {"error": {"code", "message", "status"}}
        err["code"] = status
        err["status"] = "DEADLINE_EXCEEDED" if status == GATEWAY_TIMEOUT else "UNAVAILABLE"
    elif "type" in err:  # OpenAI: {"error": {"message", "type", "param", "code"}}
        err["type"] = "server_error"
        err["code"] = "upstream_unreachable"
    return body


def gateway_body(wire: WireDialect, message: str, status: int) -> dict[str, Any]:
    """The error body of ``wire``'s dialect saying ``message`` for a gateway failure with
    ``status`` (502, 504): its own error shape marked as a server-side error."""
    return _as_gateway(wire.error_body(message), status)


def error_answer(wire: WireDialect, host: str, failure: Failure) -> tuple[int, bytes]:
    """``(status, JSON body)`` answering a request of ``wire``'s dialect whose upstream ``host``
    could not be reached: the dialect's own error shape (:meth:`WireDialect.error_body`) marked
    as a server-side error, with :func:`message`."""
    body = _as_gateway(wire.error_body(message(host, failure)), failure.status)
    return failure.status, json.dumps(body).encode()
