"""The test upstream's check of AWS SigV4 signatures, as AWS makes it: the signature recomputed
with botocore's own signer (:class:`botocore.auth.SigV4Auth`) from the secret of the request's
access key, over the headers the request says it signed, the exact body and the time it states;
a payload hash header must be the body's, and the time within five minutes of now.

Written apart from :mod:`headroom_core.wire.sigv4` (the proxy's), so a test of the proxy's
signing does not check it against itself. Sources: AWS IAM User Guide, "Create a signed AWS API
request"; botocore ``auth.SigV4Auth``.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import re
from typing import Mapping

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

#: AWS's words for a signature that does not match (the ``message`` of its 403).
MISMATCH = "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method."

_AUTH = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]{64})$"
)


def check(
    method: str,
    path: str,
    headers: Mapping[str, str],
    body: bytes,
    secrets: Mapping[str, str],
    now: datetime.datetime | None = None,
) -> str:
    """``""`` when the request (``headers`` with lowercase names; ``path`` raw, query included)
    carries a valid SigV4 signature by one of ``secrets`` (access key id -> secret), else why
    not, in a few words."""
    m = _AUTH.match(headers.get("authorization", ""))
    if m is None:
        return "no SigV4 Authorization header"
    akid, day, region, service, names, signature = m.groups()
    if akid not in secrets:
        return "unknown access key"
    stamp = headers.get("x-amz-date", "")
    try:
        at = datetime.datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.timezone.utc)
    except ValueError:
        return "no x-amz-date"
    if abs(((now or datetime.datetime.now(datetime.timezone.utc)) - at).total_seconds()) > 300 or stamp[:8] != day:
        return "signature expired or scope date wrong"
    sent = headers.get("x-amz-content-sha256")
    if sent is not None and sent != hashlib.sha256(body).hexdigest():
        return "x-amz-content-sha256 is not the body's hash"
    signed = names.split(";")
    if "host" not in signed or any(n not in headers for n in signed):
        return "a signed header is missing"
    req = AWSRequest(
        method=method, url=f"https://{headers['host']}{path}", headers={n: headers[n] for n in signed}, data=body
    )
    req.context["timestamp"] = stamp
    auth = SigV4Auth(Credentials(akid, secrets[akid], headers.get("x-amz-security-token")), service, region)
    canonical = auth.canonical_request(req)
    if auth.signed_headers(auth.headers_to_sign(req)) != names:
        return "signed headers differ"
    expected = auth.signature(auth.string_to_sign(req, canonical), req)
    return "" if hmac.compare_digest(expected, signature) else MISMATCH
