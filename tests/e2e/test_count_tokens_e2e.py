"""Token counts measure what is sent, and markers only go where the model can redeem them:
through a real ``mitmdump -s addons/headroom.py`` with the real ``anthropic`` and ``openai`` SDKs
and a local upstream.

- ``/v1/messages/count_tokens`` (and the Responses API's ``/v1/responses/input_tokens``) gets
  the same plan as the Messages request with that body: the upstream counts the body the proxy
  would send, and nothing is stored, learned or recorded for it.
- With ``tool_choice`` ``none`` (or forcing another tool) the model cannot call
  ``headroom_retrieve``: only lossless transforms apply, no marker is sent.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from sqlalchemy import func, select

from headroom_core.compress import markers
from headroom_core.compress.json_crush import decode_table
from headroom_core.db.engine import open_database
from headroom_core.db.models import Original, RequestOutcome, SessionState
from tests.support.clients import anthropic_client, http_client
from tests.support.proxy import ADDON_SCRIPT
from tests.unit.test_request_plan import github_scenario

SYSTEM = "You are a coding agent. " * 400
TOOLS = [
    {
        "name": "gh",
        "description": "Call the GitHub API.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
]


def conversation(payload: str) -> list[dict]:
    return [
        {"role": "user", "content": "Which issues are still open?"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "gh", "input": {"path": "/issues"}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": payload}]},
    ]


def counts(proxy) -> list[int]:
    sessions = open_database(f"sqlite:///{Path(proxy.home) / 'headroom.db'}")
    with sessions() as s:
        return [s.scalar(select(func.count()).select_from(t)) for t in (Original, SessionState, RequestOutcome)]


def test_count_tokens_measures_the_body_the_proxy_sends(upstream, proxy_factory):
    proxy = proxy_factory(ADDON_SCRIPT, options={"headroom_compress_timeout_seconds": 300})
    client = anthropic_client(upstream, proxy)
    msgs = conversation(github_scenario("paginate-issues.json"))
    upstream.raw(200, b'{"input_tokens": 1234}', {"content-type": "application/json"})
    counted = client.messages.count_tokens(model="claude-sonnet-4-5", system=SYSTEM, tools=TOOLS, messages=msgs)
    assert counted.input_tokens == 1234  # the provider's answer reaches the client untouched
    assert counts(proxy) == [0, 0, 0]  # nothing stored, nothing recorded for a count
    client.messages.create(model="claude-sonnet-4-5", max_tokens=100, system=SYSTEM, tools=TOOLS, messages=msgs)
    count_body, sent_body = upstream.requests[0].json, upstream.requests[1].json
    assert upstream.requests[0].path == "/v1/messages/count_tokens"
    assert {k: v for k, v in sent_body.items() if k != "max_tokens"} == count_body
    assert markers.find_marker_keys(json.dumps(count_body))  # compressed, as the Messages request is
    deadline = time.monotonic() + 60  # the ledger is written off the response path
    while counts(proxy)[2] < 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert counts(proxy)[2] == 1  # only the Messages request is in the ledger


def test_responses_input_tokens_is_planned_too(upstream, proxy_factory):
    proxy = proxy_factory(ADDON_SCRIPT, options={"headroom_compress_timeout_seconds": 300})
    payload = github_scenario("paginate-issues.json")
    body = {
        "model": "gpt-5",
        "instructions": SYSTEM,
        "tools": [
            {
                "type": "function",
                "name": "gh",
                "description": "GitHub",
                "parameters": {"type": "object", "properties": {}},
            }
        ],
        "input": [
            {"role": "user", "content": "Which issues are open?"},
            {"type": "function_call", "call_id": "c1", "name": "gh", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": payload},
        ],
    }
    upstream.raw(200, b'{"object": "response.input_tokens", "input_tokens": 99}', {"content-type": "application/json"})
    with http_client(proxy) as c:
        r = c.post(upstream.url + "/v1/responses/input_tokens", json=body)
    assert r.json()["input_tokens"] == 99
    sent = upstream.requests[0].json
    assert len(sent["input"][2]["output"]) < len(payload) / 2
    assert counts(proxy) == [0, 0, 0]


def test_tool_choice_none_gets_lossless_compression_only(upstream, proxy_factory):
    proxy = proxy_factory(ADDON_SCRIPT, options={"headroom_compress_timeout_seconds": 300})
    client = anthropic_client(upstream, proxy)
    payload = github_scenario("paginate-issues.json")
    for n, choice in enumerate(({"type": "none"}, {"type": "tool", "name": "gh"})):
        msgs = conversation(payload)
        msgs[0]["content"] += f" ({n})"  # a session of its own
        client.messages.create(
            model="claude-sonnet-4-5", max_tokens=100, system=SYSTEM, tools=TOOLS, tool_choice=choice, messages=msgs
        )
        out = upstream.requests[-1].json["messages"][2]["content"][0]["content"]
        assert markers.find_marker_keys(out) == []
        assert decode_table(json.loads(out)) == json.loads(payload)  # every value kept
        assert len(out) < len(payload)
    client.messages.create(
        model="claude-sonnet-4-5", max_tokens=100, system=SYSTEM, tools=TOOLS, messages=conversation(payload)
    )
    assert markers.find_marker_keys(upstream.requests[-1].json["messages"][2]["content"][0]["content"])
