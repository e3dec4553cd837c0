"""SigV4-signed Bedrock requests re-signed with the user's own AWS credentials (opt-in
``bedrock_resign``), end to end: boto3's ``bedrock-runtime`` and Anthropic's ``AnthropicBedrock``
(both sign with botocore, dummy keys from the environment) through a real
``mitmdump -s addons/headroom.py`` whose environment holds AWS credentials, to a local upstream
that checks every SigV4 signature as AWS does (recomputed with botocore from the same dummy
secret, 403 on a mismatch: tests/support/sigv4_check.py).

- the proxy holds the client's key: the large tool output reaches the upstream compressed under
  a valid signature, ``headroom_retrieve`` offered; the proxy's follow-up answering it is signed
  validly too (Converse JSON and event-stream, InvokeModel event-stream); the client gets one
  answer; two turns are one session (the client told apart by its key, not by a signature that
  changes every request);
- the proxy holds another key, the same key with another secret, no key, or the setting is off:
  the body goes byte-identical with the client's own (valid) signature, the row says signed and
  why; with the setting off one line in the log names it, once.
"""

from __future__ import annotations

import pytest

from headroom_core.ccr import retrieve
from headroom_core.compress import markers
from tests.e2e.test_bedrock_converse_e2e import CONVERSE, MODEL, _call, _output, conv
from tests.e2e.test_hosted_claude_e2e import BEDROCK_MODEL, _create, messages
from tests.support.clients import http_client
from tests.support.dialect_e2e import (
    OPTIONS,
    big_output,  # noqa: F401 (fixture)
    ledger_rows,
)
from tests.support.proxy import ADDON_SCRIPT
from tests.support.upstream import Reply

anthropic = pytest.importorskip("anthropic")
pytest.importorskip("boto3")

R = retrieve.TOOL_NAME
AKID, SECRET = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
#: nothing but the environment gives botocore credentials (no instance metadata asked)
NO_AWS = {
    "AWS_ACCESS_KEY_ID": None,
    "AWS_SECRET_ACCESS_KEY": None,
    "AWS_SESSION_TOKEN": None,
    "AWS_PROFILE": None,
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_BEARER_TOKEN_BEDROCK": None,
}
RESIGN = {**OPTIONS, "headroom_bedrock_resign": True}


def _keys(akid: str | None, secret: str | None) -> dict[str, str | None]:
    return {**NO_AWS, "AWS_ACCESS_KEY_ID": akid, "AWS_SECRET_ACCESS_KEY": secret}


@pytest.fixture
def resigning(proxy_factory):
    """A proxy that re-signs, holding the client's key (one per test: its ledger is the test's)."""
    return proxy_factory(ADDON_SCRIPT, options=RESIGN, env=_keys(AKID, SECRET))


@pytest.fixture
def aws(upstream, monkeypatch):
    """The upstream checks signatures with the client's secret; the client's keys come from
    its environment, as botocore's chain reads them."""
    upstream.aws_secrets = {AKID: SECRET}
    for k, v in _keys(AKID, SECRET).items():
        if v is None:
            monkeypatch.delenv(k, raising=False)
        else:
            monkeypatch.setenv(k, v)
    return upstream


def boto(upstream, proxy):
    import boto3
    from botocore.config import Config

    return boto3.client("bedrock-runtime", region_name="us-east-1", endpoint_url=upstream.url, verify=str(proxy.ca_path),
                        config=Config(proxies={"https": proxy.url}, retries={"max_attempts": 1}))  # fmt: skip


@pytest.mark.parametrize("stream", [False, True])
def test_converse_compressed_resigned_and_its_followup_signed(aws, resigning, big_output, stream):
    key = markers.offload_key(big_output)
    aws.script(Reply.tool_call(R, {"key": key}, text="Checking."), Reply.text("Thirteen issues are open."))
    text, stop, uses, _ = _call(boto(aws, resigning), stream, conv(big_output))
    assert text == "Checking.Thirteen issues are open." and uses == [] and stop == "end_turn"
    first, follow = aws.requests[-2:]
    assert first.signature == follow.signature == ""  # both hold under the client's secret
    assert first.header("authorization").startswith(f"AWS4-HMAC-SHA256 Credential={AKID}/") and first.header(
        "authorization"
    ) != follow.header("authorization")
    assert len(_output(first)) < len(big_output) / 2 and key in _output(first)
    assert first.json["toolConfig"]["tools"][-1]["toolSpec"]["name"] == R
    assert follow.json["messages"][4]["content"][0]["toolResult"]["content"] == [{"text": big_output}]
    (row,) = ledger_rows(resigning, 1)
    assert (row.dialect, row.outcome, row.retrieve_rounds, row.status_code) == (CONVERSE.value, "compressed", 1, 200)
    assert "re-signed" in row.reason


def test_invoke_stream_resigned_with_anthropic_bedrock(aws, resigning, big_output):
    key = markers.offload_key(big_output)
    aws.script(Reply.tool_call(R, {"key": key}, text="Checking."), Reply.text("Thirteen issues are open."))
    client = anthropic.AnthropicBedrock(
        aws_region="us-east-1", base_url=aws.url, http_client=http_client(resigning), max_retries=0
    )
    msg = _create(client, BEDROCK_MODEL, True, messages(big_output))
    assert "".join(b.text for b in msg.content if b.type == "text") == "Checking.Thirteen issues are open."
    first, follow = aws.requests[-2:]
    assert first.path_only.endswith("/invoke-with-response-stream") and first.signature == follow.signature == ""
    assert len(first.json["messages"][2]["content"][0]["content"]) < len(big_output) / 2
    assert follow.json["messages"][4]["content"][0]["content"] == big_output


def test_two_turns_are_one_session(aws, resigning, big_output):
    client = boto(aws, resigning)
    msgs = conv(big_output)
    aws.script(Reply.text("one"), Reply.text("two"))
    _call(client, False, msgs)
    _call(
        client,
        False,
        msgs
        + [{"role": "assistant", "content": [{"text": "one"}]}, {"role": "user", "content": [{"text": "and closed?"}]}],
    )
    a, b = aws.requests[-2:]
    assert a.signature == b.signature == "" and b.json["messages"][:3] == a.json["messages"]
    first, second = ledger_rows(resigning, 2)
    assert first.session_key == second.session_key and first.project == second.project


@pytest.mark.parametrize(
    ("env", "options", "why"),
    [
        (_keys("AKIDOTHEREXAMPLE", SECRET), RESIGN, "another access key"),
        (_keys(AKID, "not-the-clients-secret"), RESIGN, "does not verify"),
        (NO_AWS, RESIGN, "no AWS credentials found"),
        (_keys(AKID, SECRET), OPTIONS, "bedrock_resign is off"),
    ],
    ids=["other-key", "other-secret", "no-credentials", "off"],
)
def test_otherwise_byte_identical_and_counted_signed(aws, proxy_factory, big_output, env, options, why):
    p = proxy_factory(ADDON_SCRIPT, options=options, env=env)
    aws.script(Reply.text("Thirteen."), Reply.text("Again."))
    client = boto(aws, p)
    assert _call(client, False, conv(big_output))[0] == "Thirteen."
    assert _call(client, True, conv(big_output))[0] == "Again."
    for req in aws.requests[-2:]:
        assert (
            req.signature == "" and _output(req) == big_output and R not in req.text
        )  # the client's bytes and signature
    rows = ledger_rows(p, 2)
    assert [(r.outcome, r.action) for r in rows] == [("signed", "unchanged")] * 2 and all(why in r.reason for r in rows)
    hint = "re-signs them with your own AWS credentials"
    assert p.log_text().count(hint) == (1 if why == "bedrock_resign is off" else 0)


def test_the_upstream_refuses_a_body_changed_under_the_clients_signature(aws, big_output):
    """The check the tests rely on: a signed body changed in one byte gets AWS's 403."""
    import boto3
    from botocore.config import Config

    client = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=aws.url,
        verify=str(aws.ca_path),
        config=Config(retries={"max_attempts": 1}),
    )

    def tamper(request, **_):
        request.body = request.body.replace(b"summarise", b"summarize")

    client.meta.events.register_last("before-send.bedrock-runtime.Converse", tamper)
    with pytest.raises(client.exceptions.ClientError) as e:
        _call(client, False, conv(big_output))
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403 and aws.requests[-1].signature.startswith(
        "The request signature"
    )
    assert MODEL in aws.requests[-1].path_only.replace("%3A", ":")
