"""Ollama's ``/api/chat`` end to end: the real ``ollama`` Python client through a real
``mitmdump -s addons/headroom.py`` to a local upstream speaking Ollama's wire format
(tests/support/upstream.py: NDJSON lines, or one JSON answer with ``"stream": false``).

- a large ``role: "tool"`` output goes upstream compressed with ``headroom_retrieve`` offered as
  a function tool; the model's retrieve call is answered by the proxy (NDJSON and JSON), the
  client gets one answer without it, the follow-up carries the byte-exact original;
- a multi-turn session replays every earlier message byte for byte (0 earlier-prefix breaks);
- a body over ``max_body_bytes`` gets a 413 in Ollama's ``{"error"}`` shape;
- the ledger row (dialect, model, counts) and the same savings as the Messages dialect (±5%).
"""

from __future__ import annotations

import json

import pytest

from headroom_core.ccr import retrieve
from headroom_core.compress import markers
from tests.support.clients import anthropic_client, http_client, ssl_context
from tests.support.dialect_e2e import OPTIONS, big_output, ledger_rows, proxy  # noqa: F401 (fixtures)
from tests.support.proxy import ADDON_SCRIPT
from tests.support.upstream import Reply

ollama = pytest.importorskip("ollama")

R = retrieve.TOOL_NAME
MODEL = "qwen3:8b"
SYSTEM = "You are an interactive CLI agent. Working directory: /home/dev/app"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "run_shell_command",
            "description": "Run a command.",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
]


def client(upstream, proxy):
    return ollama.Client(host=upstream.url, proxy=proxy.url, verify=ssl_context(proxy.ca_path), trust_env=False)


def messages(big_output: str) -> list[dict]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "which issues are open?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"function": {"name": "run_shell_command", "arguments": {"command": "gh issue list --json"}}}
            ],
        },
        {"role": "tool", "content": big_output, "tool_name": "run_shell_command"},
    ]


def _chat(c, msgs: list[dict], stream: bool) -> tuple[str, list, dict]:
    if stream:
        parts = list(c.chat(model=MODEL, messages=msgs, tools=TOOLS, stream=True))
        assert parts[-1].done and sum(1 for p in parts if p.done) == 1
        calls = [tc for p in parts for tc in (p.message.tool_calls or [])]
        return "".join(p.message.content or "" for p in parts), calls, parts[-1].model_dump()
    r = c.chat(model=MODEL, messages=msgs, tools=TOOLS, stream=False)
    return r.message.content or "", list(r.message.tool_calls or []), r.model_dump()


@pytest.mark.parametrize("stream", [False, True])
def test_client_output_compressed_and_retrieve_answered_by_the_proxy(upstream, proxy, big_output, stream):
    key = markers.offload_key(big_output)
    upstream.script(Reply.tool_call(R, {"key": key}, text="Checking."), Reply.text("Thirteen issues are open."))
    text, calls, last = _chat(client(upstream, proxy), messages(big_output), stream)
    assert text.startswith("Checking.") and text.endswith("Thirteen issues are open.") and calls == []
    first, follow = upstream.requests[-2:]
    assert first.path_only == follow.path_only == "/api/chat"
    out = first.json["messages"][3]["content"]
    assert len(out) < len(big_output) / 2 and key in out
    assert [t["function"]["name"] for t in first.json["tools"]] == ["run_shell_command", R]
    assert follow.json["messages"][:4] == first.json["messages"]
    assert follow.json["messages"][-1] == {"role": "tool", "content": big_output, "tool_name": R}
    assert follow.json["messages"][-2]["tool_calls"][0]["function"]["name"] == R  # the model's turn as sent
    assert last["prompt_eval_count"] == sum(max(1, len(r.body) // 4) for r in (first, follow))  # counts over rounds


def test_multi_turn_session_replays_earlier_messages_byte_for_byte(upstream, proxy, big_output):
    c = client(upstream, proxy)
    msgs = messages(big_output)
    sent = []
    for turn in range(4):
        upstream.script(Reply.text(f"answer {turn}"))
        _chat(c, msgs, turn % 2 == 1)
        sent.append(upstream.requests[-1])
        msgs = msgs + [
            {
                "role": "assistant",
                "content": f"answer {turn}",
                "tool_calls": [{"function": {"name": "run_shell_command", "arguments": {"command": f"cat log{turn}"}}}],
            },
            {"role": "tool", "content": big_output.replace("open", f"open{turn}"), "tool_name": "run_shell_command"},
        ]
    for a, b in zip(sent, sent[1:]):
        ma, mb = a.json["messages"], b.json["messages"]
        assert mb[: len(ma)] == ma and b.json["tools"] == a.json["tools"]
    assert len(sent[0].json["messages"][3]["content"]) < len(big_output) / 2


def test_too_large_in_ollamas_shape_and_garbage_passes(upstream, proxy_factory):
    p = proxy_factory(ADDON_SCRIPT, options={"headroom_max_body_bytes": 2000})
    with http_client(p) as c:
        r = c.post(
            f"{upstream.url}/api/chat", json={"model": MODEL, "messages": [{"role": "user", "content": "x" * 5000}]}
        )
        assert r.status_code == 413 and set(r.json()) == {"error"} and "max_body_bytes" in r.json()["error"]
        garbage = b'{"model": "qwen3:8b", "messages": [ '
        r2 = c.post(f"{upstream.url}/api/chat", content=garbage)
    assert r2.status_code == 400 and upstream.requests[-1].body == garbage


def test_ledger_row_and_same_savings_as_the_messages_dialect(upstream, proxy_factory, big_output):
    p = proxy_factory(ADDON_SCRIPT, options=OPTIONS)
    upstream.script(Reply.text("a"), Reply.text("b"))
    _chat(client(upstream, p), messages(big_output), False)
    anthropic_client(upstream, p).messages.create(
        model="claude-sonnet-4-5", max_tokens=100, system=SYSTEM,
        tools=[{"name": "run_shell_command", "description": "Run a command.", "input_schema": TOOLS[0]["function"]["parameters"]}],
        messages=[
            {"role": "user", "content": "which issues are open?"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "run_shell_command", "input": {"command": "gh issue list --json"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": big_output}]},
        ],
    )  # fmt: skip
    o, a = upstream.requests[-2:]
    saved_o = len(big_output) - len(o.json["messages"][3]["content"])
    saved_a = len(big_output) - len(a.json["messages"][2]["content"][0]["content"])
    assert saved_o > 0 and abs(saved_o - saved_a) <= 0.05 * saved_a
    rows = ledger_rows(p, 2)
    (row,) = [r for r in rows if r.dialect == "ollama-chat"]
    assert (row.model, row.status_code, row.action) == (MODEL, 200, "compressed")
    assert row.usage_input_tokens == max(1, len(o.body) // 4) and json.loads(o.body)["model"] == MODEL
    by = {r.dialect: r.tokens_before - r.tokens_after for r in rows}
    assert abs(by["ollama-chat"] - by["anthropic-messages"]) <= 0.05 * by["anthropic-messages"]
