"""Classes of an unreachable upstream and the answer per dialect (issue 34, item 6); the end to
end path is tests/e2e/test_unreachable_e2e.py. The texts are the kinds mitmproxy reports
(``flow.error.msg``: the OS's and OpenSSL's words)."""

from __future__ import annotations

import json

import pytest

from headroom_core.outcomes import outcome_of
from headroom_core.plan_codes import Code
from headroom_core.upstream_failure import classify, error_answer
from headroom_core.wire.dialects import route


@pytest.mark.parametrize(
    ("text", "kind", "status"),
    [
        ("[Errno 111] Connect call failed ('127.0.0.1', 9)", "refused", 502),
        ("[Errno -2] Name or service not known", "dns", 502),
        ("TLS handshake failed: certificate verify failed (unable to get local issuer certificate)", "tls", 502),
        ("TimeoutError: connect timed out", "timeout", 504),
        ("[Errno 101] Network is unreachable", "unreachable", 502),
        ("Server disconnected.", "closed", 502),
        ("something new", "other", 502),
    ],
)
def test_classify(text, kind, status):
    f = classify(text)
    assert (f.kind, f.status, f.detail) == (kind, status, text)


@pytest.mark.parametrize(
    ("path", "member"),
    [("/v1/messages", ("error", "type", "api_error")), ("/v1/chat/completions", ("error", "type", "server_error")),
     ("/v1/responses", ("error", "type", "server_error")), ("/v1beta/models/gemini-2.5-pro:generateContent", ("error", "status", "DEADLINE_EXCEEDED"))],
)  # fmt: skip
def test_answer_in_the_dialects_shape(path, member):
    r = route("POST", path)
    status, body = error_answer(r.wire, "api.example.com:443", classify("timed out"))
    got = json.loads(body)
    assert status == 504 and got[member[0]][member[1]] == member[2]
    assert "could not reach the upstream api.example.com:443: the connection timed out" in json.dumps(got)


def test_outcome_classes():
    assert outcome_of(Code.FALLBACK, "compression timed out after 30 s; fallback: x") == "timeout"
    assert outcome_of(Code.FALLBACK, "internal error: KeyError; fallback: x", internal_error=True) == "internal_error"
    assert outcome_of(Code.NOT_COMPRESSED, "the proxy was not ready within 30 s of the request") == "not_ready"
    assert outcome_of(Code.NOT_PARSED, "no messages list") == "not_parsed"
    assert outcome_of(Code.PLANNED, "3 tool outputs compressed", rewritten=True) == "compressed"
    assert outcome_of(Code.PLANNED, "nothing to compress") == "unchanged"
