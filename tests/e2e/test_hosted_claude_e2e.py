"""Claude on Vertex AI and on Bedrock InvokeModel end to end: the real clients (Anthropic's
``AnthropicVertex`` and ``AnthropicBedrock``, boto3's ``bedrock-runtime``) through a real
``mitmdump -s addons/headroom.py`` to a local upstream speaking those routes
(tests/support/upstream.py: the Messages responses, Bedrock's stream in AWS event-stream frames).

- a large ``tool_result`` goes upstream compressed with ``headroom_retrieve`` offered; the
  model's retrieve call is answered by the proxy (JSON, SSE and event-stream), the client gets one
  answer without it, the follow-up carries the byte-exact original to the same route;
- a SigV4-signed body (dummy AWS keys) reaches the upstream byte-identical and its row says
  signed; a Bedrock API key (``Authorization: Bearer``) is compressed;
- a multi-turn session replays every earlier message byte for byte (0 earlier-prefix breaks);
- Vertex's ``count-tokens:rawPredict`` is planned like the request, never recorded;
- a body over ``max_body_bytes`` gets a 413 in the route's error shape;
- the ledger row: dialect, the model from the path, usage;
- the same tool output saves the same as through the Messages dialect (±5%).
"""

from __future__ import annotations

import json
import time

import pytest

from headroom_core.ccr import retrieve
from headroom_core.compress import markers
from tests.support.clients import anthropic_client, http_client
from tests.support.dialect_e2e import OPTIONS, big_output, ledger_rows, proxy  # noqa: F401 (fixtures)
from tests.support.proxy import ADDON_SCRIPT
from tests.support.upstream import Reply

anthropic = pytest.importorskip("anthropic")
pytest.importorskip("boto3")

R = retrieve.TOOL_NAME
VERTEX_MODEL = "claude-sonnet-4@20250514"
BEDROCK_MODEL = "us.anthropic.claude-sonnet-4-20250514-v1:0"
TOOLS = [
    {
        "name": "run_shell_command",
        "description": "Run a command.",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
    }
]
SYSTEM = "You are an interactive CLI agent. Working directory: /home/dev/app"


def messages(big_output: str) -> list[dict]:
    return [
        {"role": "user", "content": "which issues are open?"},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "run_shell_command",
                    "input": {"command": "gh issue list --json"},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": big_output},
                {"type": "text", "text": "summarise"},
            ],
        },
    ]


def vertex_client(upstream, proxy):
    return anthropic.AnthropicVertex(
        region="us-east5",
        project_id="proj-1",
        access_token="ya29.test",
        base_url=f"{upstream.url}/v1",
        http_client=http_client(proxy),
        max_retries=0,
    )


def bedrock_client(upstream, proxy, *, signed: bool = False):
    auth = (
        {"aws_access_key": "AKIDEXAMPLE", "aws_secret_key": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}
        if signed
        else {"api_key": "bedrock-api-key-test"}
    )
    return anthropic.AnthropicBedrock(
        aws_region="us-east-1", base_url=upstream.url, http_client=http_client(proxy), max_retries=0, **auth
    )


def boto_client(upstream, proxy, monkeypatch, *, bearer: bool):
    import boto3
    from botocore.config import Config

    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK", raising=False)
    if bearer:
        monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "bedrock-api-key-test")
    return boto3.client(
        "bedrock-runtime", region_name="us-east-1", endpoint_url=upstream.url, verify=str(proxy.ca_path),
        aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        config=Config(proxies={"https": proxy.url}, retries={"max_attempts": 1}),
    )  # fmt: skip


def _output(req) -> str:
    return req.json["messages"][2]["content"][0]["content"]


def _create(client, model: str, stream: bool, msgs: list[dict]):
    if stream:
        with client.messages.stream(model=model, max_tokens=100, system=SYSTEM, tools=TOOLS, messages=msgs) as s:
            return s.get_final_message()
    return client.messages.create(model=model, max_tokens=100, system=SYSTEM, tools=TOOLS, messages=msgs)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("host", ["vertex", "bedrock"])
def test_sdk_output_compressed_and_retrieve_answered_by_the_proxy(upstream, proxy, big_output, host, stream):
    key = markers.offload_key(big_output)
    upstream.script(Reply.tool_call(R, {"key": key}, text="Checking."), Reply.text("Thirteen issues are open."))
    client, model = (
        (vertex_client(upstream, proxy), VERTEX_MODEL)
        if host == "vertex"
        else (bedrock_client(upstream, proxy), BEDROCK_MODEL)
    )
    msg = _create(client, model, stream, messages(big_output))
    assert "".join(b.text for b in msg.content if b.type == "text") == "Checking.Thirteen issues are open."
    assert [b for b in msg.content if b.type == "tool_use"] == [] and msg.stop_reason == "end_turn"
    first, follow = upstream.requests[-2:]
    assert first.path_only == follow.path_only
    if host == "vertex":
        assert first.path_only.endswith(
            f"/publishers/anthropic/models/{VERTEX_MODEL}:{'streamRawPredict' if stream else 'rawPredict'}"
        )
        assert (
            first.json["anthropic_version"] == "vertex-2023-10-16"
            and follow.header("authorization") == "Bearer ya29.test"
        )
    else:
        assert first.path_only.endswith("/invoke-with-response-stream" if stream else "/invoke")
        assert (
            first.json["anthropic_version"] == "bedrock-2023-05-31"
            and follow.header("authorization") == "Bearer bedrock-api-key-test"
        )
    assert len(_output(first)) < len(big_output) / 2 and key in _output(first)
    assert [t["name"] for t in first.json["tools"]] == ["run_shell_command", R]
    assert follow.json["messages"][:3] == first.json["messages"]
    assert follow.json["messages"][-1]["content"][0]["content"] == big_output  # the byte-exact original


def test_boto3_event_stream_with_an_api_key_is_compressed_and_retrieve_answered(
    upstream, proxy, big_output, monkeypatch
):
    key = markers.offload_key(big_output)
    upstream.script(Reply.tool_call(R, {"key": key}, text="Checking."), Reply.text("Thirteen."))
    client = boto_client(upstream, proxy, monkeypatch, bearer=True)
    body = {
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 100,
        "system": SYSTEM,
        "tools": TOOLS,
        "messages": messages(big_output),
    }
    resp = client.invoke_model_with_response_stream(modelId=BEDROCK_MODEL, body=json.dumps(body))
    events = [json.loads(e["chunk"]["bytes"]) for e in resp["body"]]  # botocore checks every frame's CRCs
    text = "".join(e["delta"].get("text", "") for e in events if e["type"] == "content_block_delta")
    assert text == "Checking.Thirteen." and R not in json.dumps(events)
    assert [e["type"] for e in events][0] == "message_start" and events[-1]["type"] == "message_stop"
    first, follow = upstream.requests[-2:]
    assert first.header("authorization") == "Bearer bedrock-api-key-test"
    assert (
        len(_output(first)) < len(big_output) / 2 and follow.json["messages"][-1]["content"][0]["content"] == big_output
    )


@pytest.mark.parametrize("client_kind", ["anthropic", "boto3"])
def test_sigv4_signed_bodies_pass_byte_identical_and_are_counted_signed(
    upstream, proxy_factory, big_output, monkeypatch, client_kind
):
    p = proxy_factory(ADDON_SCRIPT, options=OPTIONS)
    upstream.script(Reply.text("Thirteen."), Reply.text("Again."))
    body = {
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 100,
        "system": SYSTEM,
        "tools": TOOLS,
        "messages": messages(big_output),
    }
    if client_kind == "anthropic":
        _create(bedrock_client(upstream, p, signed=True), BEDROCK_MODEL, False, messages(big_output))
        _create(bedrock_client(upstream, p, signed=True), BEDROCK_MODEL, True, messages(big_output))
    else:
        client = boto_client(upstream, p, monkeypatch, bearer=False)
        raw = json.dumps(body).encode()
        assert (
            json.loads(client.invoke_model(modelId=BEDROCK_MODEL, body=raw)["body"].read())["content"][0]["text"]
            == "Thirteen."
        )
        got = [
            json.loads(e["chunk"]["bytes"])
            for e in client.invoke_model_with_response_stream(modelId=BEDROCK_MODEL, body=raw)["body"]
        ]
        assert "".join(e["delta"].get("text", "") for e in got if e["type"] == "content_block_delta") == "Again."
    for req in upstream.requests[-2:]:
        assert req.header("authorization", "").startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
        assert _output(req) == big_output and R not in req.text  # not a byte changed
        if client_kind == "boto3":
            assert req.body == json.dumps(body).encode()
    rows = ledger_rows(p, 2)
    assert [(r.dialect, r.outcome, r.action) for r in rows] == [("bedrock-invoke", "signed", "unchanged")] * 2


@pytest.mark.parametrize("host", ["vertex", "bedrock"])
def test_multi_turn_session_replays_earlier_messages_byte_for_byte(upstream, proxy, big_output, host):
    """Four turns, each the previous plus the answer and a new output: every request's earlier
    messages are, byte for byte, what the previous request sent (0 earlier-prefix breaks)."""
    client, model = (
        (vertex_client(upstream, proxy), VERTEX_MODEL)
        if host == "vertex"
        else (bedrock_client(upstream, proxy), BEDROCK_MODEL)
    )
    msgs = messages(big_output)
    sent = []
    for turn in range(4):
        upstream.script(Reply.text(f"answer {turn}"))
        _create(client, model, turn % 2 == 1, msgs)
        sent.append(upstream.requests[-1])
        msgs = msgs + [
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"answer {turn}"},
                    {
                        "type": "tool_use",
                        "id": f"toolu_{turn + 2}",
                        "name": "run_shell_command",
                        "input": {"command": f"cat log{turn}"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": f"toolu_{turn + 2}",
                        "content": big_output.replace("open", f"open{turn}"),
                    }
                ],
            },
        ]
    for a, b in zip(sent, sent[1:]):
        ma, mb = a.json["messages"], b.json["messages"]
        assert mb[: len(ma)] == ma
        assert b.json["system"] == a.json["system"] and b.json["tools"] == a.json["tools"]
    assert all(len(json.dumps(r.json["messages"])) < len(json.dumps(big_output)) for r in sent[:1])  # compressed


def test_vertex_count_tokens_planned_like_the_request(upstream, proxy, big_output):
    client = vertex_client(upstream, proxy)
    time.sleep(1.0)  # the earlier tests' rows are committed
    before = len(ledger_rows(proxy, 0, timeout=0))
    got = client.messages.count_tokens(model=VERTEX_MODEL, system=SYSTEM, tools=TOOLS, messages=messages(big_output))
    req = upstream.requests[-1]
    assert req.path_only.endswith("/publishers/anthropic/models/count-tokens:rawPredict")
    assert got.input_tokens == max(1, len(req.body) // 4) and len(_output(req)) < len(big_output) / 2
    time.sleep(1.0)
    assert len(ledger_rows(proxy, 0, timeout=0)) == before


def test_too_large_in_the_routes_error_shape_and_garbage_passes(upstream, proxy_factory):
    p = proxy_factory(ADDON_SCRIPT, options={"headroom_max_body_bytes": 2000})
    big = {
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "x" * 5000}],
    }
    with http_client(p) as c:
        r = c.post(f"{upstream.url}/model/{BEDROCK_MODEL}/invoke", json=big, headers={"authorization": "Bearer k"})
        assert r.status_code == 413 and set(r.json()) == {"message"} and "max_body_bytes" in r.json()["message"]
        r = c.post(
            f"{upstream.url}/v1/projects/p/locations/us-east5/publishers/anthropic/models/{VERTEX_MODEL}:rawPredict",
            json={**big, "anthropic_version": "vertex-2023-10-16"},
        )
        assert r.status_code == 413 and r.json()["error"]["type"] == "request_too_large"
        garbage = b'{"anthropic_version": "bedrock-2023-05-31", "messages": [ '
        r2 = c.post(
            f"{upstream.url}/model/{BEDROCK_MODEL}/invoke",
            content=garbage,
            headers={"content-type": "application/json"},
        )
    assert r2.status_code == 400 and upstream.requests[-1].body == garbage


@pytest.mark.parametrize("host", ["vertex", "bedrock"])
def test_ledger_row_and_same_savings_as_the_messages_dialect(upstream, proxy_factory, big_output, host):
    p = proxy_factory(ADDON_SCRIPT, options=OPTIONS)
    upstream.script(Reply.text("a", input_tokens=1234, output_tokens=5, cache_read=1000), Reply.text("b"))
    client, model = (
        (vertex_client(upstream, p), VERTEX_MODEL) if host == "vertex" else (bedrock_client(upstream, p), BEDROCK_MODEL)
    )
    _create(client, model, False, messages(big_output))
    anthropic_client(upstream, p).messages.create(
        model="claude-sonnet-4-5", max_tokens=100, system=SYSTEM, tools=TOOLS, messages=messages(big_output)
    )
    h, a = upstream.requests[-2:]
    saved_h, saved_a = len(big_output) - len(_output(h)), len(big_output) - len(_output(a))
    assert saved_h > 0 and abs(saved_h - saved_a) <= 0.05 * saved_a
    rows = ledger_rows(p, 2)
    dialect = "vertex-anthropic" if host == "vertex" else "bedrock-invoke"
    (row,) = [r for r in rows if r.dialect == dialect]
    assert (row.model, row.status_code, row.action) == (model, 200, "compressed")
    assert (row.usage_input_tokens, row.usage_output_tokens, row.usage_cache_read_tokens) == (1234, 5, 1000)
    by = {r.dialect: r.tokens_before - r.tokens_after for r in rows}
    assert abs(by[dialect] - by["anthropic-messages"]) <= 0.05 * by["anthropic-messages"]
