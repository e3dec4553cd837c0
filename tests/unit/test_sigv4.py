"""Re-signing SigV4 requests (headroom_core/wire/sigv4.py): the decision (off, another scheme, a
chunk-signed payload, no credentials, another key, the same key with another secret, an old
request, the client's key) on requests signed by botocore's real signer, and the signature made
again checked the way AWS checks it (tests/support/sigv4_check.py, written apart from the
proxy's code) for a compressed body and for a follow-up; the credential chain read once, retried
when empty, and never shown."""

from __future__ import annotations

import hashlib
import time

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from headroom_core.wire import sigv4
from headroom_core.wire.signed import Signature, body_signature
from tests.support.sigv4_check import check

AKID, SECRET = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
HOST = "bedrock-runtime.us-east-1.amazonaws.com"
PATH = "/model/us.anthropic.claude-sonnet-4-20250514-v1%3A0/converse"
URL = f"https://{HOST}{PATH}"
BODY = b'{"messages": [{"role": "user", "content": [{"text": "' + b"x" * 2000 + b'"}]}]}'
SMALLER = b'{"messages": [{"role": "user", "content": [{"text": "x"}]}]}'


def client_request(
    body: bytes = BODY, *, token: str | None = None, extra: dict[str, str] | None = None, secret: str = SECRET
) -> dict[str, str]:
    """The headers (lowercase) of a request botocore's signer signed as a boto3 client does,
    with the Host header urllib3 sends."""
    req = AWSRequest(
        method="POST", url=URL, headers={"Content-Type": "application/json", "Host": HOST, **(extra or {})}, data=body
    )
    SigV4Auth(Credentials(AKID, secret, token), "bedrock", "us-east-1").add_auth(req)
    return {k.lower(): v for k, v in req.headers.items()}


def decide(
    headers: dict[str, str],
    keys: sigv4.Keys | None = sigv4.Keys(AKID, SECRET),
    *,
    enabled: bool = True,
    body: bytes = BODY,
    later: float = 0.0,
) -> sigv4.Decision:
    """``later``: seconds after now at which the proxy decides (read at the call, not at collection)."""
    sig = body_signature(headers)
    assert sig is not None
    return sigv4.decide(enabled, sig, "POST", URL, headers, body, keys, time.time() + later)


def test_the_clients_own_key_is_resigned_keeping_scope_host_and_token():
    h = client_request(token="session-token")
    d = decide(h)
    assert d.why == "" and d.resign is not None
    auth = d.resign.auth
    assert (auth.access_key, auth.region, auth.service) == (AKID, "us-east-1", "bedrock")
    assert auth.signed_headers == ("content-type", "host", "x-amz-date", "x-amz-security-token")
    assert d.resign.keys.token == "session-token" and d.resign.host == HOST


@pytest.mark.parametrize(
    ("keys", "kw", "why"),
    [
        (sigv4.Keys(AKID, SECRET), {"enabled": False}, sigv4.OFF),
        (None, {}, sigv4.NO_KEYS),
        (sigv4.Keys("AKIDOTHER", SECRET), {}, sigv4.OTHER_KEY),
        (sigv4.Keys(AKID, "another-secret"), {}, sigv4.BAD_SIGNATURE),
        (sigv4.Keys(AKID, SECRET), {"body": SMALLER}, sigv4.BAD_SIGNATURE),  # the body is not what was signed
        (sigv4.Keys(AKID, SECRET), {"later": 6 * 60}, sigv4.SKEWED),
    ],
    ids=["off", "no-credentials", "other-key", "other-secret", "other-body", "old-request"],
)
def test_otherwise_it_passes_and_says_why(keys, kw, why):
    assert decide(client_request(), keys, **kw) == sigv4.Decision(None, why)


def test_other_schemes_and_chunked_payloads_pass():
    h = client_request()
    sig = Signature("AWS SigV4a", frozenset())
    assert sigv4.decide(True, sig, "POST", URL, h, BODY, sigv4.Keys(AKID, SECRET), time.time()).why == sigv4.NOT_HEADER
    chunked = {**h, "x-amz-content-sha256": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"}
    assert decide(chunked).why == sigv4.CHUNKED
    assert (
        decide({**h, "authorization": "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/x, Signature=zz"}).why
        == sigv4.UNREADABLE
    )


def test_a_compressed_body_is_signed_so_aws_accepts_it():
    # a client that sends the payload hash and signs the length too
    h = client_request(
        extra={"X-Amz-Content-SHA256": hashlib.sha256(BODY).hexdigest(), "Content-Length": str(len(BODY))}, token="tok"
    )
    d = decide(h)
    assert d.resign is not None
    sent = {**h, "content-length": str(len(SMALLER))}
    new = sigv4.sign(d.resign, "POST", URL, sent, SMALLER)
    out = {**sent, **new}
    assert check("POST", PATH, out, SMALLER, {AKID: SECRET}) == ""
    assert out["x-amz-content-sha256"] == hashlib.sha256(SMALLER).hexdigest()
    assert out["x-amz-security-token"] == "tok" and out["content-length"] == str(len(SMALLER))
    assert "content-length" in sigv4.parse_authorization(out["authorization"]).signed_headers
    assert check("POST", PATH, out, BODY, {AKID: SECRET}) != ""  # and it covers that body only


def test_a_followup_without_host_or_length_is_signed_for_them():
    h = client_request(extra={"Content-Length": str(len(BODY))})
    d = decide(h)
    assert d.resign is not None
    followup = {
        k.title(): v for k, v in h.items() if k not in ("host", "content-length")
    }  # as _followup_target copies them
    new = sigv4.sign(d.resign, "POST", URL, followup, SMALLER + b" ")
    assert new["host"] == HOST and new["content-length"] == str(len(SMALLER) + 1)
    merged = {**{k.lower(): v for k, v in followup.items()}, **new}
    assert check("POST", PATH, merged, SMALLER + b" ", {AKID: SECRET}) == ""


def test_the_identity_is_stable_per_key_and_never_the_secret():
    a, b = decide(client_request()).resign, decide(client_request(token="t")).resign
    assert a is not None and b is not None
    assert sigv4.identity(a) == sigv4.identity(b) and SECRET not in sigv4.identity(a) and AKID not in sigv4.identity(a)
    other = sigv4.Resign(a.auth, sigv4.Keys(AKID, "another-secret"))
    assert sigv4.identity(other) != sigv4.identity(a)
    assert (
        SECRET not in repr(a)
        and SECRET not in repr(sigv4.Keys(AKID, SECRET))
        and "tok" not in repr(sigv4.Keys(AKID, SECRET, "tok"))
    )


class _Frozen:
    def __init__(self, akid: str, secret: str, token: str | None = None) -> None:
        self.access_key, self.secret_key, self.token = akid, secret, token


class _Creds:
    def __init__(self) -> None:
        self.frozen = 0

    def get_frozen_credentials(self) -> _Frozen:
        self.frozen += 1
        return _Frozen(AKID, SECRET, "tok")


def test_the_chain_is_read_once_and_an_empty_one_again_after_a_minute():
    calls, now = [], [0.0]
    creds = _Creds()
    src = sigv4.KeySource(lambda: calls.append(1) or (creds if len(calls) > 1 else None), clock=lambda: now[0])
    assert src.current() is None and src.current() is None and len(calls) == 1
    now[0] += sigv4.RETRY_SECONDS
    assert src.current() == sigv4.Keys(AKID, SECRET, "tok") and src.current() is not None
    assert len(calls) == 2 and creds.frozen == 2  # asked for its current (refreshed) keys each time


def test_a_chain_that_fails_is_none_and_logs_no_message(caplog):
    def boom():
        raise RuntimeError(f"cannot read /home/u/.aws/credentials with {SECRET}")

    assert sigv4.KeySource(boom).current() is None
    assert "RuntimeError" in caplog.text and SECRET not in caplog.text and ".aws" not in caplog.text


def test_botocores_standard_chain_reads_the_environment(monkeypatch, tmp_path):
    for k in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", AKID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    assert sigv4.KeySource().current() == sigv4.Keys(AKID, SECRET)
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    assert sigv4.KeySource().current() is None
