"""The proxy's own tools over the Responses WebSocket: the model calls ``headroom_retrieve``, the
proxy answers it, sends the follow-up ``response.create`` upstream on the same socket and the
client (a real ``websockets`` client through a real ``mitmdump -s addons/headroom.py``) sees one
coherent response. Plus the pure decisions of :mod:`headroom_core.ccr.ws_loop`, fed with the
events the test upstream renders (the same code that speaks to the proxy)."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from headroom_core.ccr import retrieve, ws_loop
from headroom_core.ccr.loop import notice_rounds
from headroom_core.compress import markers
from headroom_core.db.engine import open_database
from headroom_core.db.models import RequestOutcome
from headroom_core.wire.blocks import ToolCall as WireCall
from tests.e2e.test_ws_e2e import create_frame, items, read_turn, wait_until, ws_frames
from tests.support.clients import ws_connect
from tests.support.proxy import ADDON_SCRIPT
from tests.support.upstream import RecordedRequest, Reply, ToolCall, _ResponsesRenderer
from tests.unit.test_request_plan import github_scenario

HIDDEN = frozenset({retrieve.TOOL_NAME})
ANSWER = "Issues 1 and 2 are still open."


@pytest.fixture(scope="module")
def proxy(module_proxy_factory):
    return module_proxy_factory(
        ADDON_SCRIPT, options={"headroom_compress_timeout_seconds": 300}
    )  # loaded machine: plans finish


@pytest.fixture(scope="module")
def big_output() -> str:
    return github_scenario("paginate-issues.json")


def decoded(frames: list[str]) -> list[dict]:
    return [json.loads(f) for f in frames]


def text_of(events: list[dict]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")


def without_tools_echo(event: dict) -> dict:
    """``event`` without ``response.tools``: response objects echo the tools offered upstream,
    the proxy's included; like the HTTP path, the proxy passes that echo through untouched."""
    if isinstance(event.get("response"), dict):
        return {**event, "response": {k: v for k, v in event["response"].items() if k != "tools"}}
    return event


def assert_one_coherent_response(frames: list[str]) -> list[dict]:
    events = decoded(frames)
    assert not any(retrieve.TOOL_NAME in json.dumps(without_tools_echo(e)) for e in events)
    assert [e["type"] for e in events].count("response.completed") == 1 and events[-1]["type"] == "response.completed"
    assert [e["type"] for e in events].count("response.created") == 1 and events[0]["type"] == "response.created"
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    return events


# -- end to end -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "preamble,nested",
    [(None, False), ("Let me look at the full list.", False), (None, True)],
    ids=["call-only", "text-then-call", "nested-frame"],
)
def test_retrieve_call_is_answered_by_the_proxy(upstream, proxy, big_output, preamble, nested):
    key = markers.offload_key(big_output)
    upstream.script(
        Reply.tool_call(retrieve.TOOL_NAME, {"key": key}, text=preamble, input_tokens=500, output_tokens=4),
        Reply.text(ANSWER, input_tokens=700, output_tokens=9),
    )
    with ws_connect(upstream, proxy) as ws:
        ws.send(create_frame(items(big_output), nested=nested))
        frames = read_turn(ws)
        # the connection goes on normally afterwards: the next turn is a plain one
        upstream.script(Reply.text("second turn"))
        ws.send(create_frame(items("small output", "and now?")))
        after = decoded(read_turn(ws))
    events = assert_one_coherent_response(frames)
    assert text_of(events) == (preamble or "") + ANSWER
    done = events[-1]["response"]
    texts = [it["content"][0]["text"] for it in done["output"]]
    assert texts == ([preamble] if preamble else []) + [ANSWER]
    added = [e for e in events if e["type"] == "response.output_item.added"]
    assert [e["output_index"] for e in added] == list(range(len(texts)))  # continues the first turn's items
    assert text_of(after) == "second turn" and after[0]["type"] == "response.created"

    first, follow, third = ws_frames(upstream)
    assert (list(follow.json) == ["type", "response"]) is nested  # the follow-up keeps the client's frame shape
    if nested:
        first.json, follow.json = first.json["response"], {"type": follow.json["type"], **follow.json["response"]}
    assert set(markers.find_marker_keys(first.json["input"][2]["output"])) == {key}
    assert follow.json["type"] == "response.create"
    call = follow.json["input"][-2]
    assert (call["type"], call["name"], json.loads(call["arguments"])) == (
        "function_call",
        retrieve.TOOL_NAME,
        {"key": key},
    )
    assert follow.json["input"][-1] == {
        "type": "function_call_output",
        "call_id": call["call_id"],
        "output": big_output,
    }
    assert follow.json["input"][:3] == first.json["input"]  # the compressed request, not re-planned
    assert follow.json["tools"] == first.json["tools"]
    assert third.json["input"][2]["output"] == "small output"
    # one usage for the client: both rounds summed
    assert (done["usage"]["input_tokens"], done["usage"]["output_tokens"]) == (1200, 13)
    assert "Traceback" not in proxy.log_text()


def test_retrieve_turn_reaches_the_ledger_with_its_rounds(upstream, proxy, big_output):
    key = markers.offload_key(big_output)
    upstream.script(
        Reply.tool_call(retrieve.TOOL_NAME, {"key": key}, input_tokens=5000, output_tokens=20),
        Reply.text(ANSWER, input_tokens=7000, output_tokens=30),
    )
    with ws_connect(upstream, proxy) as ws:
        ws.send(create_frame(items(big_output), model="gpt-ws-retrieve"))
        read_turn(ws)
    sessions = open_database(f"sqlite:///{proxy.home / 'headroom.db'}")

    def row():
        with sessions() as s:
            return s.scalars(select(RequestOutcome).where(RequestOutcome.model == "gpt-ws-retrieve")).first()

    r = wait_until(row)
    assert r is not None, "no ledger row for the WebSocket turn"
    assert (r.retrieve_rounds, r.usage_input_tokens, r.usage_output_tokens) == (1, 12000, 50)


def test_hidden_and_client_calls_in_one_turn_go_to_the_client_without_the_hidden_one(upstream, proxy, big_output):
    key = markers.offload_key(big_output)
    calls = [
        ToolCall(retrieve.TOOL_NAME, {"key": key}, "call_r"),
        ToolCall("shell", {"cmd": "gh issue view 1"}, "call_s"),
    ]
    upstream.script(Reply.tool_calls_reply(calls, text="Checking."))
    with ws_connect(upstream, proxy) as ws:
        ws.send(create_frame(items(big_output)))
        frames = read_turn(ws)
    events = assert_one_coherent_response(frames)
    done = events[-1]["response"]
    assert [(it["type"], it.get("name")) for it in done["output"]] == [("message", None), ("function_call", "shell")]
    shell = [e for e in events if e["type"] == "response.output_item.done" and e["item"]["type"] == "function_call"]
    assert [(e["output_index"], e["item"]["call_id"], json.loads(e["item"]["arguments"])) for e in shell] == [
        (1, "call_s", {"cmd": "gh issue view 1"})
    ]
    assert {e["output_index"] for e in events if "output_index" in e} == {0, 1}
    assert text_of(events) == "Checking."
    assert len(ws_frames(upstream)) == 1  # no follow-up: the client must answer its shell call
    assert "Traceback" not in proxy.log_text()


# -- the pure decisions -----------------------------------------------------------------------


def rendered(reply: Reply, body: dict | None = None) -> list[bytes]:
    """The event frames the test upstream sends for ``reply`` (as it does through the proxy)."""
    body = body or {"model": "m", "input": []}
    rec = RecordedRequest("WS", "/v1/responses", [], json.dumps(body).encode(), body, 0.0)
    return [json.dumps(ev).encode() for ev in _ResponsesRenderer.events(rec, body, reply)]


def feed_all(loop: ws_loop.WsRetrieveLoop, frames: list[bytes]) -> list[ws_loop.Step]:
    return [loop.feed(f) for f in frames]


def client_view(frames: list[bytes], steps: list[ws_loop.Step]) -> list[bytes]:
    out: list[bytes] = []
    for f, s in zip(frames, steps):
        if isinstance(s, ws_loop.Pass):
            out.append(f)
        elif isinstance(s, ws_loop.Emit):
            out.extend(s.frames)
    return out


REQUEST = {"type": "response.create", "model": "m", "input": [{"role": "user", "content": "hi"}], "tools": []}
REQUEST_TEXT = json.dumps(REQUEST)  # the loop works on the text that went upstream


def test_loop_without_hidden_calls_passes_every_frame():
    frames = rendered(Reply.text("plain answer")) + [b"not json"]
    loop = ws_loop.WsRetrieveLoop(REQUEST_TEXT, HIDDEN, 3)
    steps = feed_all(loop, frames)
    assert all(isinstance(s, ws_loop.Pass) for s in steps)
    assert loop.done and loop.rounds == 0 and loop.final == json.loads(frames[-2])["response"]


def test_loop_answers_hidden_calls_and_continues_the_response():
    first = rendered(
        Reply.tool_call(
            retrieve.TOOL_NAME,
            {"key": "ab" * 12},
            "call_r",
            text="Looking.",
            input_tokens=100,
            output_tokens=10,
            cache_read=40,
        )
    )
    loop = ws_loop.WsRetrieveLoop(REQUEST_TEXT, HIDDEN, 3, '{"type":"response.create","response":', "}")
    steps = feed_all(loop, first)
    kinds = [type(s).__name__ for s in steps]
    hold_from = next(
        i for i, f in enumerate(first) if b'"response.output_item.added"' in f and retrieve.TOOL_NAME.encode() in f
    )
    assert kinds[:hold_from] == ["Pass"] * hold_from and set(kinds[hold_from:-1]) == {"Hold"}
    settle = steps[-1]
    assert settle == ws_loop.Settle(
        (WireCall("call_r", retrieve.TOOL_NAME, {"key": "ab" * 12}, json.dumps({"key": "ab" * 12})),), True
    )
    res = loop.resolve([(settle.calls[0], "the original")])
    assert res.to_client == ()
    frame = json.loads(res.to_upstream)
    assert list(frame) == ["type", "response"]  # the client's nested frame shape
    body = frame["response"]
    assert body["input"][0] == REQUEST["input"][0]
    assert [i["type"] for i in body["input"][1:]] == ["message", "function_call", "function_call_output"]
    assert body["input"][-1] == {"type": "function_call_output", "call_id": "call_r", "output": "the original"}

    second = rendered(Reply.text("Found it.", input_tokens=300, output_tokens=5, cache_read=200))
    steps2 = feed_all(loop, second)
    assert not any(isinstance(s, ws_loop.Settle) for s in steps2)  # the follow-up ends the turn
    seen = [json.loads(f) for f in client_view(first, steps) + client_view(second, steps2)]
    assert [e["sequence_number"] for e in seen] == list(range(len(seen)))
    assert [e["type"] for e in seen].count("response.created") == 1 and seen[-1]["type"] == "response.completed"
    assert [e["output_index"] for e in seen if e["type"] == "response.output_item.added"] == [0, 1]
    out = seen[-1]["response"]["output"]
    assert [it["content"][0]["text"] for it in out] == ["Looking.", "Found it."]
    assert seen[-1]["response"]["usage"]["input_tokens"] == 400
    assert loop.done and loop.rounds == 1 and loop.called == [retrieve.TOOL_NAME]
    assert (loop.usage.input_tokens, loop.usage.output_tokens, loop.usage.cache_read_tokens) == (400, 15, 240)
    assert loop.final == seen[-1]["response"]


def test_loop_with_a_client_call_releases_the_held_events_without_the_hidden_one():
    calls = [ToolCall(retrieve.TOOL_NAME, {"key": "cd" * 12}, "call_r"), ToolCall("shell", {"cmd": "ls"}, "call_s")]
    frames = rendered(Reply.tool_calls_reply(calls))
    loop = ws_loop.WsRetrieveLoop(REQUEST_TEXT, HIDDEN, 3)
    steps = feed_all(loop, frames)
    assert (
        isinstance(steps[-1], ws_loop.Settle)
        and not steps[-1].follow_up
        and [c.name for c in steps[-1].calls] == [retrieve.TOOL_NAME]
    )
    res = loop.resolve([(steps[-1].calls[0], "ignored")])
    assert res.to_upstream is None and loop.done
    seen = [json.loads(f) for f in client_view(frames, steps) + list(res.to_client)]
    assert not any(retrieve.TOOL_NAME in json.dumps(without_tools_echo(e)) for e in seen)
    assert [e["sequence_number"] for e in seen] == list(range(len(seen)))
    assert {e["output_index"] for e in seen if "output_index" in e} == {0}
    assert [it["name"] for it in seen[-1]["response"]["output"]] == ["shell"]


def test_loop_stops_after_max_rounds():
    call = Reply.tool_call(retrieve.TOOL_NAME, {"key": "ef" * 12}, "call_r")
    loop = ws_loop.WsRetrieveLoop(REQUEST_TEXT, HIDDEN, 1)
    steps = feed_all(loop, rendered(call))
    assert steps[-1].follow_up
    loop.resolve([(steps[-1].calls[0], "x")])
    again = rendered(call)
    steps = feed_all(loop, again)
    assert isinstance(steps[-1], ws_loop.Settle) and not steps[-1].follow_up  # rounds exhausted
    res = loop.resolve([(steps[-1].calls[0], "x")])
    *notice, last = [json.loads(f) for f in res.to_client]
    # the rounds ran out: the response ends with a message that says so (issue 13, case 3)
    assert [e["type"] for e in notice] == [
        "response.output_item.added", "response.content_part.added", "response.output_text.delta",
        "response.output_text.done", "response.content_part.done", "response.output_item.done",
    ]  # fmt: skip
    assert last["type"] == "response.completed"
    assert [it["content"][0]["text"] for it in last["response"]["output"]] == [notice_rounds(1)]
    assert loop.done and loop.rounds == 1


def test_loop_resolve_needs_a_settle():
    with pytest.raises(RuntimeError):
        ws_loop.WsRetrieveLoop(REQUEST_TEXT, HIDDEN, 1).resolve([])
