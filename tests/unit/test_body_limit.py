"""``max_body_bytes`` from a request's head (headroom_core/body_limit.py, issue 36): which requests
it applies to, the length a head declares, and the 413 in each dialect's error shape."""

from __future__ import annotations

import json

import pytest

from headroom_core.body_limit import body_limit, declared_length
from headroom_core.plan_codes import Action, Code


@pytest.mark.parametrize(
    "headers,length",
    [
        ({"content-length": "2000000000"}, 2_000_000_000),
        ({"content-length": " 0 "}, 0),
        ({}, None),
        ({"transfer-encoding": "chunked"}, None),
        ({"transfer-encoding": "chunked", "content-length": "5"}, None),  # the length is overridden (RFC 9112 §6.3)
        ({"content-length": "5, 5"}, None),
        ({"content-length": "-1"}, None),
        ({"content-length": "1e9"}, None),
    ],
)
def test_declared_length(headers, length):
    assert declared_length(headers) == length


def test_over_at_once_and_passed_are_strictly_over_the_limit():
    at = body_limit("POST", "/v1/messages", {"content-length": "1000"}, 1000)
    over = body_limit("POST", "/v1/messages", {"content-length": "1001"}, 1000)
    unknown = body_limit("POST", "/v1/messages", {"transfer-encoding": "chunked"}, 1000)
    assert at is not None and over is not None and unknown is not None
    assert (at.over_at_once, over.over_at_once, unknown.over_at_once) == (False, True, False)
    assert (unknown.passed(1000), unknown.passed(1001)) == (False, True)


@pytest.mark.parametrize(
    "method,path,headers",
    [
        ("POST", "/v1/files", {}),  # not an LLM API call
        ("GET", "/v1/messages", {}),
        ("POST", "/v1/messages/count_tokens", {}),  # a token count goes on whatever its size
        ("POST", "/v1/messages", {"x-headroom-bypass": "true"}),
        (
            "POST",
            "/model/m/converse",
            {
                "authorization": "AWS4-HMAC-SHA256 Credential=AKIA/20250101/us-east-1/bedrock/aws4_request, SignedHeaders=host;x-amz-date, Signature=ab"
            },
        ),
    ],
)
def test_not_decided_from_the_head(method, path, headers):
    assert body_limit(method, path, {"content-length": "99999999", **headers}, 1000) is None


@pytest.mark.parametrize(
    "path,message_of",
    [
        (
            "/v1/messages",
            lambda b: (
                b["error"]["message"] if b["type"] == "error" and b["error"]["type"] == "request_too_large" else None
            ),
        ),
        ("/v1/chat/completions", lambda b: b["error"]["message"]),
        (
            "/v1beta/models/gemini-2.5-pro:generateContent",
            lambda b: b["error"]["message"] if b["error"]["code"] == 413 else None,
        ),
        ("/api/chat", lambda b: b["error"]),
        ("/model/m/converse", lambda b: b["message"]),
    ],
)
def test_refusal_is_a_413_in_the_dialects_shape(path, message_of):
    limit = body_limit("POST", path, {"content-length": "2000000000"}, 1000)
    assert limit is not None
    head = limit.refusal(2_000_000_000, declared=True)
    read = limit.refusal(1500, declared=False)
    assert (head.action, head.status, head.code, head.bytes_before) == (
        Action.REJECT,
        413,
        Code.TOO_LARGE,
        2_000_000_000,
    )
    assert read.bytes_before == 1500 and head.dialect == limit.route.dialect
    said = message_of(json.loads(head.error_body or b""))
    assert "2000000000 bytes (its Content-Length)" in said and "limit of 1000 bytes (headroom max_body_bytes)" in said
    assert "after 1500 bytes were read" in message_of(json.loads(read.error_body or b""))
