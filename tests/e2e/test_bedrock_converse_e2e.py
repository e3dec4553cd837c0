"""Bedrock Converse / ConverseStream end to end: boto3's ``bedrock-runtime`` ``converse`` and
``converse_stream`` through a real ``mitmdump -s addons/headroom.py`` to a local upstream that
speaks Converse (tests/support/upstream.py: Bedrock's validation of the body, the JSON response,
the stream as AWS event-stream frames that botocore decodes, CRCs checked).

- with a Bedrock API key (``AWS_BEARER_TOKEN_BEDROCK``: ``Authorization: Bearer``) a large
  ``toolResult`` goes upstream compressed, ``headroom_retrieve`` offered as a ``toolSpec``; the
  model's retrieve call is answered by the proxy (JSON and event-stream), the client gets one
  answer without it, the follow-up carries the byte-exact original;
- SigV4-signed (dummy AWS keys): the body reaches the upstream byte-identical, the row says signed;
- four turns: earlier messages, ``system`` and ``toolConfig`` byte-stable, the client's
  ``cachePoint`` blocks where it put them (0 earlier-prefix breaks);
- 413 in Bedrock's ``{message}`` shape; the ledger row (dialect, model from the path, usage with
  cache reads); the same tool output saves the same as through the Messages dialect (±5%).
"""

from __future__ import annotations

import json

import pytest

from headroom_core.cache import breakpoints
from headroom_core.cache.prefix_check import earlier_break
from headroom_core.ccr import retrieve
from headroom_core.compress import markers
from headroom_core.wire.detect import Dialect
from headroom_core.wire.dialects import REGISTRY
from tests.e2e.test_hosted_claude_e2e import SYSTEM, TOOLS, boto_client, messages
from tests.support.clients import anthropic_client, http_client
from tests.support.dialect_e2e import OPTIONS, big_output, ledger_rows, proxy  # noqa: F401 (fixtures)
from tests.support.proxy import ADDON_SCRIPT
from tests.support.upstream import Reply

pytest.importorskip("boto3")

R = retrieve.TOOL_NAME
MODEL = "us.anthropic.claude-sonnet-4-20250514-v1:0"
CP = {"cachePoint": {"type": "default"}}
TOOL_CONFIG = {
    "tools": [
        {
            "toolSpec": {
                "name": "run_shell_command",
                "description": "Run a command.",
                "inputSchema": {"json": {"type": "object", "properties": {"command": {"type": "string"}}}},
            }
        },
        CP,
    ]
}
CONVERSE = Dialect.BEDROCK_CONVERSE


def conv(big_output: str) -> list[dict]:
    return [
        {"role": "user", "content": [{"text": "which issues are open?"}]},
        {
            "role": "assistant",
            "content": [
                {
                    "toolUse": {
                        "toolUseId": "tooluse_1",
                        "name": "run_shell_command",
                        "input": {"command": "gh issue list --json"},
                    }
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {"toolResult": {"toolUseId": "tooluse_1", "content": [{"text": big_output}]}},
                {"text": "summarise"},
                CP,
            ],
        },
    ]


def _call(client, stream: bool, msgs: list[dict]) -> tuple[str, str, list[dict], dict]:
    """(text, stop reason, the client's toolUse blocks, usage) of one converse(-stream) call."""
    kw = {
        "modelId": MODEL,
        "messages": msgs,
        "system": [{"text": SYSTEM}, CP],
        "toolConfig": TOOL_CONFIG,
        "inferenceConfig": {"maxTokens": 100},
    }
    if not stream:
        r = client.converse(**kw)
        content = r["output"]["message"]["content"]
        return (
            "".join(b.get("text", "") for b in content),
            r["stopReason"],
            [b for b in content if "toolUse" in b],
            r["usage"],
        )
    events = list(client.converse_stream(**kw)["stream"])  # botocore decodes every frame, CRCs checked
    kinds = [next(iter(e)) for e in events]
    assert kinds[0] == "messageStart" and kinds.count("messageStart") == 1 and kinds[-2:] == ["messageStop", "metadata"]
    text = "".join(e["contentBlockDelta"]["delta"].get("text", "") for e in events if "contentBlockDelta" in e)
    uses = [e for e in events if "contentBlockStart" in e]
    return text, events[-2]["messageStop"]["stopReason"], uses, events[-1]["metadata"]["usage"]


def _output(req) -> str:
    return req.json["messages"][2]["content"][0]["toolResult"]["content"][0]["text"]


@pytest.mark.parametrize("stream", [False, True])
def test_api_key_compressed_and_retrieve_answered_by_the_proxy(upstream, proxy, big_output, monkeypatch, stream):
    key = markers.offload_key(big_output)
    upstream.script(Reply.tool_call(R, {"key": key}, text="Checking."), Reply.text("Thirteen issues are open."))
    text, stop, uses, _ = _call(boto_client(upstream, proxy, monkeypatch, bearer=True), stream, conv(big_output))
    assert text == "Checking.Thirteen issues are open." and uses == [] and stop == "end_turn"
    first, follow = upstream.requests[-2:]
    assert first.path_only == follow.path_only and first.path_only.endswith(
        "/converse-stream" if stream else "/converse"
    )
    assert first.header("authorization") == follow.header("authorization") == "Bearer bedrock-api-key-test"
    assert len(_output(first)) < len(big_output) / 2 and key in _output(first)
    tools = first.json["toolConfig"]["tools"]
    assert (
        tools[:2] == TOOL_CONFIG["tools"]
        and tools[2]["toolSpec"]["name"] == R
        and "json" in tools[2]["toolSpec"]["inputSchema"]
    )
    assert follow.json["messages"][:3] == first.json["messages"]
    assert follow.json["messages"][3]["content"][-1]["toolUse"]["name"] == R
    assert follow.json["messages"][4]["content"][0]["toolResult"]["content"] == [
        {"text": big_output}
    ]  # the byte-exact original


def test_sigv4_signed_converse_passes_byte_identical_and_is_counted_signed(
    upstream, proxy_factory, big_output, monkeypatch
):
    p = proxy_factory(ADDON_SCRIPT, options=OPTIONS)
    upstream.script(Reply.text("Thirteen."), Reply.text("Again."))
    client = boto_client(upstream, p, monkeypatch, bearer=False)
    assert _call(client, False, conv(big_output))[0] == "Thirteen."
    assert _call(client, True, conv(big_output))[0] == "Again."
    for req in upstream.requests[-2:]:
        assert req.header("authorization", "").startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
        assert _output(req) == big_output and R not in req.text  # not a byte changed
    rows = ledger_rows(p, 2)
    assert [(r.dialect, r.outcome, r.action) for r in rows] == [("bedrock-converse", "signed", "unchanged")] * 2


def test_four_turns_keep_earlier_messages_system_tools_and_cache_points(upstream, proxy, big_output, monkeypatch):
    client = boto_client(upstream, proxy, monkeypatch, bearer=True)
    msgs = conv(big_output)
    sent, client_bodies = [], []
    for turn in range(4):
        upstream.script(Reply.text(f"answer {turn}"))
        _call(client, turn % 2 == 1, msgs)
        sent.append(upstream.requests[-1])
        client_bodies.append(
            {"messages": json.loads(json.dumps(msgs)), "system": [{"text": SYSTEM}, CP], "toolConfig": TOOL_CONFIG}
        )
        msgs = msgs + [
            {
                "role": "assistant",
                "content": [
                    {"text": f"answer {turn}"},
                    {
                        "toolUse": {
                            "toolUseId": f"tooluse_{turn + 2}",
                            "name": "run_shell_command",
                            "input": {"command": f"cat log{turn}"},
                        }
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "toolResult": {
                            "toolUseId": f"tooluse_{turn + 2}",
                            "content": [{"text": big_output.replace("open", f"open{turn}")}],
                        }
                    }
                ],
            },
        ]
    d = REGISTRY[CONVERSE]
    for k, (a, b) in enumerate(zip(sent, sent[1:])):
        ma, mb = a.json["messages"], b.json["messages"]
        assert mb[: len(ma)] == ma
        assert b.json["system"] == a.json["system"] and b.json["toolConfig"] == a.json["toolConfig"]
        assert earlier_break(client_bodies[k], client_bodies[k + 1], a.json, b.json) is None
    for c, r in zip(client_bodies, sent):
        assert (
            breakpoints.count(r.json, d) == breakpoints.count(c, d) == 3
        )  # the client's cache points, where it put them
    assert len(_output(sent[0])) < len(big_output) / 2


def test_too_large_in_bedrocks_shape_and_garbage_passes(upstream, proxy_factory):
    p = proxy_factory(ADDON_SCRIPT, options={"headroom_max_body_bytes": 2000})
    big = {"messages": [{"role": "user", "content": [{"text": "x" * 5000}]}]}
    with http_client(p) as c:
        r = c.post(f"{upstream.url}/model/{MODEL}/converse", json=big, headers={"authorization": "Bearer k"})
        assert r.status_code == 413 and set(r.json()) == {"message"} and "max_body_bytes" in r.json()["message"]
        garbage = b'{"messages": [ '
        r2 = c.post(
            f"{upstream.url}/model/{MODEL}/converse-stream",
            content=garbage,
            headers={"content-type": "application/json"},
        )
    assert r2.status_code == 400 and upstream.requests[-1].body == garbage


def test_ledger_row_and_same_savings_as_the_messages_dialect(upstream, proxy_factory, big_output, monkeypatch):
    p = proxy_factory(ADDON_SCRIPT, options=OPTIONS)
    upstream.script(Reply.text("a", input_tokens=1234, output_tokens=5, cache_read=1000), Reply.text("b"))
    _call(boto_client(upstream, p, monkeypatch, bearer=True), False, conv(big_output))
    anthropic_client(upstream, p).messages.create(
        model="claude-sonnet-4-5", max_tokens=100, system=SYSTEM, tools=TOOLS, messages=messages(big_output)
    )
    h, a = upstream.requests[-2:]
    saved_h, saved_a = (
        len(big_output) - len(_output(h)),
        len(big_output) - len(a.json["messages"][2]["content"][0]["content"]),
    )
    assert saved_h > 0 and abs(saved_h - saved_a) <= 0.05 * saved_a
    rows = ledger_rows(p, 2)
    (row,) = [r for r in rows if r.dialect == "bedrock-converse"]
    assert (row.model, row.status_code, row.action) == (MODEL, 200, "compressed")
    assert (row.usage_input_tokens, row.usage_output_tokens, row.usage_cache_read_tokens) == (1234, 5, 1000)
    by = {r.dialect: r.tokens_before - r.tokens_after for r in rows}
    assert abs(by["bedrock-converse"] - by["anthropic-messages"]) <= 0.05 * by["anthropic-messages"]
