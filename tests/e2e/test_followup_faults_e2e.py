"""Faults around the proxy's follow-ups over HTTP (issue 36, items 2, 4 and 5), each through a
real ``mitmdump -s addons/headroom.py`` with real clients and the scripted upstream:

- item 5: a call to ``headroom_retrieve`` that the model's token limit cut is never carried out
  (no follow-up reaches the upstream, the ledger row counts no round) and the client sees the
  truncation in its dialect's terms (Anthropic ``max_tokens``, Chat ``length``, Responses
  ``incomplete``).
"""

from __future__ import annotations

import json

import pytest

from headroom_core.ccr import retrieve
from headroom_core.compress import markers
from tests.support.clients import openai_client, anthropic_client
from tests.support.dialect_e2e import ledger_rows
from tests.support.proxy import ADDON_SCRIPT
from tests.support.sse_forms import responses_events, responses_response, sse
from tests.support.upstream import Reply
from tests.unit.test_request_plan import anthropic_request, github_scenario

MODEL = "claude-sonnet-4-5"
R = retrieve.TOOL_NAME
# the machine is loaded: let every plan finish, so the proxy's tools are always offered
OPTIONS = {"headroom_compress_timeout_seconds": 300}


@pytest.fixture(scope="module")
def proxy(module_proxy_factory):
    return module_proxy_factory(ADDON_SCRIPT, options=OPTIONS)


@pytest.fixture(scope="module")
def big_output() -> str:
    return github_scenario("paginate-issues.json")


def chat_messages(big_output: str) -> list[dict]:
    return [
        {"role": "user", "content": "which issues are open?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "gh", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": big_output},
    ]


def responses_items(big_output: str) -> list[dict]:
    return [
        {"role": "user", "content": "which issues are open?"},
        {"type": "function_call", "call_id": "c1", "name": "gh", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": big_output},
    ]


def _new_rows(proxy, before: int, n: int = 1) -> list:
    return ledger_rows(proxy, before + n)[before:]


# -- item 5: a proxy call cut at the token limit ----------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_anthropic_retrieve_cut_by_max_tokens_is_never_carried_out(upstream, proxy, big_output, stream):
    key = markers.offload_key(big_output)
    before = len(ledger_rows(proxy, 0, timeout=0))
    upstream.script(Reply.tool_call(R, {"key": key}, text="Checking.", stop_reason="max_tokens"))
    client = anthropic_client(upstream, proxy)
    body = anthropic_request(big_output)
    kw = dict(model=MODEL, max_tokens=100, tools=body["tools"], messages=body["messages"])
    if stream:
        with client.messages.stream(**kw) as s:
            msg = s.get_final_message()
    else:
        msg = client.messages.create(**kw)
    assert [(b.type, getattr(b, "text", None)) for b in msg.content] == [("text", "Checking.")]
    assert msg.stop_reason == "max_tokens"
    assert len(upstream.requests) == 1  # no follow-up: the cut call was not answered
    (row,) = _new_rows(proxy, before)
    assert (row.status_code, row.retrieve_rounds) == (200, 0)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_chat_retrieve_cut_by_length_is_never_carried_out(upstream, proxy, big_output, stream):
    key = markers.offload_key(big_output)
    upstream.script(Reply.tool_call(R, {"key": key}, text="Checking.", stop_reason="length"))
    client = openai_client(upstream, proxy)
    if stream:
        chunks = list(client.chat.completions.create(model="gpt-4o", messages=chat_messages(big_output), stream=True))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        assert not any(c.choices and c.choices[0].delta.tool_calls for c in chunks)
    else:
        r = client.chat.completions.create(model="gpt-4o", messages=chat_messages(big_output))
        text, finish = r.choices[0].message.content, [r.choices[0].finish_reason]
        assert not r.choices[0].message.tool_calls
    assert text == "Checking." and finish == ["length"]
    assert len(upstream.requests) == 1


def test_responses_retrieve_cut_by_max_output_tokens_is_never_carried_out(upstream, proxy, big_output):
    key = markers.offload_key(big_output)
    msg = {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant", "content": [{"type": "output_text", "text": "Checking.", "annotations": []}]}
    fc = {"type": "function_call", "id": "fc_1", "call_id": "call_r", "name": R, "arguments": json.dumps({"key": key})[:12], "status": "incomplete"}
    resp = responses_response([msg, fc], status="incomplete", incomplete_details={"reason": "max_output_tokens"})
    evs = responses_events(resp)
    evs[-1] = {**evs[-1], "type": "response.incomplete"}
    upstream.raw(200, b"", {"content-type": "text/event-stream"}, chunks=[sse(evs)])
    events = list(openai_client(upstream, proxy).responses.create(model="gpt-5", input=responses_items(big_output), stream=True))
    (last,) = [e for e in events if e.type == "response.incomplete"]
    assert last.response.status == "incomplete" and last.response.incomplete_details.reason == "max_output_tokens"
    assert [o.type for o in last.response.output] == ["message"] and last.response.output_text == "Checking."
    assert not any(R in json.dumps(e.to_dict()) for e in events)
    assert len(upstream.requests) == 1
