"""Re-signing AWS SigV4 requests with the user's own AWS credentials (opt-in: ``bedrock_resign``).

A SigV4 signature covers the body (:mod:`headroom_core.wire.signed`), so a body the proxy
compresses must be signed again, with the secret of the access key the client signed with. The
proxy reads the user's credentials from botocore's standard chain (environment, shared
credentials and config files with their profile, SSO, web identity, container and instance
roles: ``botocore.session.Session().get_credentials()``) and re-signs a request only when all
of these hold (:func:`decide`):

1. ``bedrock_resign`` is on;
2. the request is signed in an ``Authorization: AWS4-HMAC-SHA256`` header over a payload hash
   (not SigV4a, whose ECDSA key the chain does not give; not a presigned URL; not a payload
   signed chunk by chunk);
3. the chain's access key id is the one in the request's ``Credential`` scope: the proxy never
   signs as another identity than the one the client chose;
4. the client's own signature verifies with that key's secret (so the client holds the secret:
   a request that merely names the key id is never signed with it), and its ``x-amz-date`` is
   within :data:`MAX_SKEW_SECONDS` of the proxy's clock (a captured request cannot be replayed
   freshly signed).

Otherwise the request goes upstream byte-identical and :attr:`Decision.why` says why (the
ledger's reason). Signing (:func:`sign`) is botocore's :class:`~botocore.auth.SigV4Auth` over
the header names the client signed, with their values as they now go upstream (a new
``content-length``, ``x-amz-content-sha256`` recomputed when the client sent it) and the time of
signing; the client's service, region and session token (``x-amz-security-token``) are kept.
The proxy's own follow-up requests (answers to ``headroom_retrieve``) are signed the same way.

Credentials stay in memory: never logged, stored, or shown in a ``repr``.

Sources: AWS IAM User Guide, "AWS Signature Version 4 for API requests" and "Create a signed
AWS API request" (the canonical request, the string to sign, the scope
``AKID/yyyymmdd/region/service/aws4_request``; "a request must reach AWS within five minutes of
the time stamp in the request"); botocore's ``auth.SigV4Auth`` (the signer).
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import logging
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping
from urllib.parse import urlsplit

from headroom_core.wire.signed import Signature

log = logging.getLogger("headroom")

#: The one scheme re-signed: SigV4 in an ``Authorization`` header (:func:`~headroom_core.wire.signed.body_signature`'s name).
SIGV4 = "AWS SigV4"
#: Longest a client's ``x-amz-date`` may be from the proxy's clock (seconds): AWS's replay window.
MAX_SKEW_SECONDS = 5 * 60
#: Seconds before an empty credential chain is asked again (the user may log in meanwhile).
RETRY_SECONDS = 60.0

_ALGORITHM = "AWS4-HMAC-SHA256"
_PARAM = re.compile(r"(Credential|SignedHeaders|Signature)=([^,\s]+)", re.IGNORECASE)
_HASH = re.compile(r"[0-9a-f]{64}")
_TIMESTAMP = "%Y%m%dT%H%M%SZ"

#: Why a signed request went upstream byte-identical (the ledger's reason, the log line).
OFF = "bedrock_resign is off"
NOT_HEADER = "only SigV4 in an Authorization header is re-signed"
CHUNKED = "the payload is signed chunk by chunk"
UNREADABLE = "its Authorization header could not be read"
NO_KEYS = "no AWS credentials found (botocore's standard chain)"
OTHER_KEY = "the AWS credentials found are for another access key than the request's"
NO_DATE = "no x-amz-date to check its time"
SKEWED = "its x-amz-date is more than 5 minutes from the proxy's clock"
BAD_SIGNATURE = "its signature does not verify with the credentials found"


@dataclass(frozen=True)
class Authorization:
    """A parsed ``Authorization: AWS4-HMAC-SHA256 …`` header: the ``Credential`` scope
    (``access_key/date/region/service/aws4_request``), the ``SignedHeaders`` (lowercase names,
    in the header's order) and the hex ``signature``."""

    access_key: str
    date: str
    region: str
    service: str
    signed_headers: tuple[str, ...]
    signature: str


def parse_authorization(value: str) -> Authorization | None:
    """``value`` (an ``Authorization`` header) read as SigV4, or None when it is not one or a
    part is missing or malformed."""
    v = value.strip()
    if not v.upper().startswith(_ALGORITHM + " "):
        return None
    params = {k.lower(): p for k, p in _PARAM.findall(v)}
    scope = params.get("credential", "").split("/")
    names = tuple(n.strip().lower() for n in params.get("signedheaders", "").split(";") if n.strip())
    sig = params.get("signature", "").lower()
    if len(scope) != 5 or scope[4] != "aws4_request" or not all(scope) or not names or not _HASH.fullmatch(sig):
        return None
    return Authorization(scope[0], scope[1], scope[2], scope[3], names, sig)


@dataclass(frozen=True)
class Keys:
    """AWS credentials: the access key id, its secret and the session token of temporary
    credentials (both kept out of ``repr``)."""

    access_key: str
    secret_key: str = field(repr=False)
    token: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Resign:
    """How a request (and the proxy's follow-ups of it) is signed again: the client's
    :class:`Authorization` (scope and signed header names), the ``keys`` of its access key (the
    client's session token in place of the chain's) and its ``host`` header value ("" when it
    came as HTTP/2 ``:authority``: botocore takes the URL's)."""

    auth: Authorization
    keys: Keys = field(repr=False)
    host: str = ""


@dataclass(frozen=True)
class Decision:
    """:func:`decide`'s answer: ``resign`` when the request may be changed and signed again,
    else None and ``why`` it goes byte-identical (one of this module's reason texts)."""

    resign: Resign | None
    why: str = ""


def decide(
    enabled: bool,
    sig: Signature,
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes,
    keys: Keys | None,
    now: float,
) -> Decision:
    """Whether a request signed as ``sig`` may be re-signed (module docstring, rules 1-4).

    ``method``, ``url`` (scheme, host, raw path and query as sent), ``headers`` (lowercase
    names, as the client sent them; ``host`` included when the client sent one) and ``body``
    (the bytes as sent) are the client's request; ``keys`` the chain's credentials (None: none
    found); ``now`` the proxy's clock (seconds since the epoch). Pure; raises nothing."""
    if not enabled:
        return Decision(None, OFF)
    if sig.scheme != SIGV4:
        return Decision(None, NOT_HEADER)
    payload = headers.get("x-amz-content-sha256", "").strip().lower()
    if payload and not _HASH.fullmatch(payload):
        return Decision(None, CHUNKED)
    auth = parse_authorization(headers.get("authorization", ""))
    if auth is None:
        return Decision(None, UNREADABLE)
    if keys is None:
        return Decision(None, NO_KEYS)
    if not hmac.compare_digest(keys.access_key, auth.access_key):
        return Decision(None, OTHER_KEY)
    stamp = _timestamp(headers.get("x-amz-date", ""))
    if stamp is None:
        return Decision(None, NO_DATE)
    if abs(now - stamp) > MAX_SKEW_SECONDS:
        return Decision(None, SKEWED)
    token = headers.get("x-amz-security-token") or None
    mine = Keys(keys.access_key, keys.secret_key, token)
    try:
        good = verify(method, url, headers, body, auth, mine)
    except Exception:  # noqa: BLE001 - a request botocore cannot canonicalise is not ours to sign
        good = False
    if not good:
        return Decision(None, BAD_SIGNATURE)
    return Decision(Resign(auth, mine, headers.get("host", "")))


def _timestamp(value: str) -> float | None:
    try:
        return datetime.datetime.strptime(value.strip(), _TIMESTAMP).replace(tzinfo=datetime.timezone.utc).timestamp()
    except ValueError:
        return None


def _signer(keys: Keys, auth: Authorization, names: tuple[str, ...] | None = None) -> Any:
    """botocore's SigV4 signer for ``auth``'s service and region with ``keys``; with ``names``,
    one that signs exactly those headers (to recompute a signature another client made: botocore
    leaves out some names, e.g. ``user-agent``, that another signer may have signed)."""
    from botocore.auth import SigV4Auth  # type: ignore[import-untyped]  # only when signing
    from botocore.awsrequest import HTTPHeaders  # type: ignore[import-untyped]
    from botocore.credentials import Credentials  # type: ignore[import-untyped]

    creds = Credentials(keys.access_key, keys.secret_key, keys.token)
    if names is None:
        return SigV4Auth(creds, auth.service, auth.region)

    exact = names

    class Exact(SigV4Auth):  # type: ignore[misc]
        def headers_to_sign(self, request: Any) -> Any:
            out = HTTPHeaders()
            for n in exact:
                out[n] = request.headers.get(n, _host_of(request.url) if n == "host" else "")
            return out

    return Exact(creds, auth.service, auth.region)


def _host_of(url: str) -> str:
    """The ``host`` a client signs for ``url`` when it sends none (HTTP/2's ``:authority``):
    lowercase, without user info or the scheme's default port (as botocore derives it)."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2].lower()
    default = {"https": ":443", "http": ":80"}.get(parts.scheme, "")
    return host[: -len(default)] if default and host.endswith(default) else host


def verify(method: str, url: str, headers: Mapping[str, str], body: bytes, auth: Authorization, keys: Keys) -> bool:
    """Whether ``auth`` (the request's parsed ``Authorization``) is the SigV4 signature of the
    request (``method``, ``url``, ``headers`` with lowercase names, ``body``) under ``keys``, as
    AWS checks it: the payload hash (``x-amz-content-sha256`` when sent, else the body's), the
    signed headers' values, the scope's date being the ``x-amz-date``'s. Compared in constant
    time. Raises whatever botocore raises on a URL it cannot read."""
    from botocore.awsrequest import AWSRequest

    stamp = headers.get("x-amz-date", "").strip()
    if stamp[:8] != auth.date:
        return False
    digest = hashlib.sha256(body).hexdigest()
    sent = headers.get("x-amz-content-sha256", "").strip().lower()
    if sent and sent != digest:
        return False
    req = AWSRequest(
        method=method, url=url, headers={n: headers[n] for n in auth.signed_headers if n in headers}, data=body
    )
    req.context["timestamp"] = stamp
    signer = _signer(keys, auth, auth.signed_headers)
    canonical = signer.canonical_request(req)
    expected = signer.signature(signer.string_to_sign(req, canonical), req)
    return hmac.compare_digest(str(expected), auth.signature)


def sign(resign: Resign, method: str, url: str, headers: Mapping[str, str], body: bytes) -> dict[str, str]:
    """The headers to set on a request going upstream as ``method`` ``url`` with ``body``
    (bytes as sent) and ``headers`` (any case; those the client signed are read from here),
    signed again as ``resign`` says, at the current time: ``authorization`` and ``x-amz-date``
    new; every other header the client signed with its value as it now goes, ``content-length``
    the body's, ``host`` the client's, ``x-amz-content-sha256`` the body's hash when the client
    sent one, ``x-amz-security-token`` the client's. Lowercase names. Raises what botocore
    raises (a URL it cannot read)."""
    from botocore.awsrequest import AWSRequest

    given = {k.lower(): v for k, v in headers.items()}
    signed: dict[str, str] = {}
    for n in resign.auth.signed_headers:
        if n in ("authorization", "x-amz-date", "x-amz-security-token"):
            continue  # the signer writes them
        if n == "content-length":
            signed[n] = str(len(body))
        elif n == "host":
            host = given.get("host") or resign.host
            if host:
                signed[n] = host
        elif n == "x-amz-content-sha256":
            signed[n] = hashlib.sha256(body).hexdigest()
        elif n in given:
            signed[n] = given[n]
    if "x-amz-content-sha256" in given and "x-amz-content-sha256" not in signed:
        signed["x-amz-content-sha256"] = hashlib.sha256(body).hexdigest()
    req = AWSRequest(method=method, url=url, headers=signed, data=body)
    _signer(resign.keys, resign.auth).add_auth(req)
    return {k.lower(): str(v) for k, v in req.headers.items()}


class KeySource:
    """The AWS credentials of botocore's standard chain, resolved when first asked for (a
    Session reads ``AWS_*`` variables, ``~/.aws/credentials`` and ``~/.aws/config``, SSO's cache,
    and may ask a container or instance metadata endpoint), kept for the process; refreshable
    credentials (SSO, assumed roles) refresh themselves as botocore does. An empty chain is asked
    again after :data:`RETRY_SECONDS`. ``resolve``: what finds them (tests pass their own).
    Blocking: call off the event loop. Thread-safe."""

    def __init__(self, resolve: Callable[[], Any] | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self._resolve = resolve or _standard_chain
        self._clock = clock
        self._lock = threading.Lock()
        self._creds: Any = None
        self._tried: float | None = None

    def current(self) -> Keys | None:
        """The chain's credentials now (refreshed when botocore says so), or None when it has
        none or reading them failed (logged by exception class only: a message may quote a
        file)."""
        with self._lock:
            if self._creds is None and (self._tried is None or self._clock() - self._tried >= RETRY_SECONDS):
                self._tried = self._clock()
                try:
                    self._creds = self._resolve()
                except Exception as e:  # noqa: BLE001 - no credentials is a reason to pass, not to fail
                    log.warning(
                        "headroom: could not read AWS credentials (%s); signed requests pass byte-identical",
                        type(e).__name__,
                    )
            creds = self._creds
        if creds is None:
            return None
        try:
            frozen = creds.get_frozen_credentials()
        except Exception as e:  # noqa: BLE001 - a failed refresh (expired SSO login): as none
            log.warning(
                "headroom: could not refresh AWS credentials (%s); signed requests pass byte-identical",
                type(e).__name__,
            )
            return None
        if not frozen.access_key or not frozen.secret_key:
            return None
        return Keys(str(frozen.access_key), str(frozen.secret_key), str(frozen.token) if frozen.token else None)


def _standard_chain() -> Any:
    import botocore.session  # type: ignore[import-untyped]  # only when re-signing is on

    return botocore.session.Session().get_credentials()


def identity(resign: Resign) -> str:
    """A stand-in for a re-signed request's ``Authorization`` header where the proxy tells
    clients apart (:func:`headroom_core.scope.credential`): a SigV4 header changes with every
    request (its date and signature), this does not. The SHA-256 of the access key id and its
    secret, which the client proved it holds (:func:`decide`, rule 4); never the secret itself."""
    digest = hashlib.sha256(
        f"{resign.keys.access_key}\0{resign.keys.secret_key}".encode("utf-8", "surrogatepass")
    ).hexdigest()
    return f"{_ALGORITHM} identity={digest}"
