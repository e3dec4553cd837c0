"""Bedrock Converse beyond the conformance cases: ``cachePoint`` blocks are the request's
breakpoints, ``{json}`` tool results are tool outputs, the proxy's tool goes into a ``toolConfig``
it creates, a follow-up round's blocks are numbered on, usage is summed over rounds."""

from __future__ import annotations

import json

from headroom_core.cache import breakpoints
from headroom_core.ccr.loop import StreamLoop
from headroom_core.request_plan import Action, plan_request
from headroom_core.runtime import Runtime
from headroom_core.settings import load_settings
from headroom_core.wire import converse
from headroom_core.wire.blocks import ErrorAnswer, ToolCall
from headroom_core.wire.detect import Dialect
from headroom_core.wire.dialects import REGISTRY
from headroom_core.wire.eventstream import EventStreamParser
from tests.unit.test_dialect_conformance import ROWS, _converse_body, _converse_resp, _converse_stream

D = REGISTRY[Dialect.BEDROCK_CONVERSE]
PATH = "/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse"


def _rt(tmp_path) -> Runtime:
    return Runtime(load_settings({"home": str(tmp_path)}, env={}))


def test_cache_points_are_the_breakpoints_and_stay_put(tmp_path):
    body = _converse_body(ROWS)
    assert breakpoints.count(body, D) == 3  # system, tools, the last user message
    plan = plan_request(_rt(tmp_path), "POST", PATH, {}, json.dumps(body).encode())
    assert plan.action is Action.REWRITE
    sent = json.loads(plan.body or b"")
    assert breakpoints.breakpoints(sent, D) == breakpoints.breakpoints(body, D)
    # the proxy's tool after the client's, the client's cache point where it put it
    assert [next(iter(t)) for t in sent["toolConfig"]["tools"]] == ["toolSpec", "cachePoint", "toolSpec"]
    assert sent["toolConfig"]["tools"][2]["toolSpec"]["name"] == "headroom_retrieve"
    assert sent["system"] == body["system"] and sent["inferenceConfig"] == body["inferenceConfig"]


def test_json_results_are_outputs_and_tools_go_into_a_new_tool_config(tmp_path):
    body = _converse_body()
    body.pop("toolConfig")
    body["messages"][2]["content"][0]["toolResult"]["content"] = [{"json": {"stdout": ROWS, "code": 0}}]
    (out,) = D.tool_outputs(body)
    assert (
        out.path == ("messages", 2, "content", 0, "toolResult", "content", 0, "json", "stdout")
        and out.tool_name == "shell"
    )
    plan = plan_request(_rt(tmp_path), "POST", PATH, {}, json.dumps(body).encode())
    sent = json.loads(plan.body or b"")
    assert (
        converse.tool_names(sent) == ["headroom_retrieve"]
        and "headroom_retrieve key=" in sent["messages"][2]["content"][0]["toolResult"]["content"][0]["json"]["stdout"]
    )
    assert sent["messages"][2]["content"][0]["toolResult"]["content"][0]["json"]["code"] == 0


def test_followup_round_numbers_blocks_on_and_sums_usage():
    hidden = frozenset({"headroom_retrieve"})
    mine = ToolCall("r1", "headroom_retrieve", {"key": "k"})
    loop = StreamLoop(D.reply, json.dumps(_converse_body()), hidden, 3)
    out = loop.feed(_converse_stream([mine], "Looking.")) + loop.end_round()
    body2 = json.loads(loop.next_request([(mine, ErrorAnswer("no such key"))]))
    assert body2["messages"][-1] == {
        "role": "user",
        "content": [{"toolResult": {"toolUseId": "r1", "content": [{"text": "no such key"}], "status": "error"}}],
    }
    assert body2["messages"][-2]["content"][1]["toolUse"] == {
        "toolUseId": "r1",
        "name": "headroom_retrieve",
        "input": {"key": "k"},
    }
    out += loop.feed(_converse_stream([ToolCall("c9", "shell", {"cmd": "wc"})], "Found.")) + loop.end_round()
    p = EventStreamParser()
    evs = [(e.event, e.parsed) for e in p.feed(out) + p.feed(b"")]
    kinds = [k for k, _ in evs]
    assert kinds.count("messageStart") == 1 and kinds[-2:] == ["messageStop", "metadata"]
    idx = [d["contentBlockIndex"] for k, d in evs if k == "contentBlockDelta"]
    assert idx == [0, 1, 2]  # Looking., Found., the client's own call
    assert evs[-2][1]["stopReason"] == "tool_use"  # a call is the client's
    assert evs[-1][1]["usage"]["inputTokens"] == 20 and evs[-1][1]["usage"]["cacheReadInputTokens"] == 10
    merged = json.loads(
        D.reply.merge([json.dumps(_converse_resp([mine], "a")), json.dumps(_converse_resp([], "b"))], hidden, None)
    )
    assert (
        merged["output"]["message"]["content"] == [{"text": "a"}, {"text": "b"}]
        and merged["stopReason"] == "end_turn"
        and merged["usage"]["totalTokens"] == 24
    )
