"""Each dialect's stream view and merge (``headroom_core.wire.reply_anthropic``, ``reply_chat``,
``reply_responses``), fed SSE events directly: what the client gets for each upstream event
(passed as is, renumbered, held for the end, or dropped because it belongs to a call of the
proxy's own tools), the round's response object assembled from the deltas (tool-call arguments
streamed in pieces, cut inside a string and a number), the ending :meth:`close` makes, and
:func:`merge`, the non-streamed counterpart that removes the proxy's calls (``hidden``) from what
the client sees.
"""

from __future__ import annotations

import json

from headroom_core.wire import reply_anthropic, reply_chat, reply_responses
from headroom_core.wire.sse import SSEEvent, SSEParser
from tests.support.sse_forms import chat_completion, responses_response, sse

R = "headroom_retrieve"
HIDDEN = frozenset({R})


def events(objs: list, named: bool = True) -> list[SSEEvent]:
    p = SSEParser()
    return p.feed(sse(objs, named)) + p.feed(b"")


def datas(evs: list[SSEEvent]) -> list:
    return [e.parsed if e.parsed is not None else e.data for e in evs]


# -- Anthropic Messages ------------------------------------------------------------------------

CLIENT_INPUT_PIECES = ['{"path": "/tmp/caf', 'é.txt", "lines": [1, 2', "0]}"]


def anthropic_round(stop_reason: str = "tool_use", client_call: bool = True) -> list[dict]:
    start = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 40, "output_tokens": 1},
    }
    evs = [
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Reading."}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "toolu_r", "name": R, "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"key": "ab'},
        },
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": 'cd"}'}},
        {"type": "content_block_stop", "index": 1},
    ]
    if client_call:
        evs += [
            {
                "type": "content_block_start",
                "index": 2,
                "content_block": {"type": "tool_use", "id": "toolu_c", "name": "Read", "input": {}},
            }
        ]
        evs += [
            {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": p}}
            for p in CLIENT_INPUT_PIECES
        ]
        evs += [{"type": "content_block_stop", "index": 2}]
    return evs + [
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": 25},
        },
        {"type": "message_stop"},
    ]


def test_anthropic_view_hides_the_proxy_call_renumbers_the_client_s_and_holds_the_end():
    state = reply_anthropic.ViewState()
    view = reply_anthropic.StreamView(HIDDEN, state, 0)
    upstream = events(anthropic_round())
    got = [view.feed(ev) for ev in upstream]
    # text block and message_start: passed as they came (same bytes)
    assert all(got[i] == [upstream[i]] for i in range(4))
    # the proxy's call (index 1): nothing reaches the client
    assert got[4:8] == [[], [], [], []]
    # the client's call: index 2 becomes 1, every other member's text unchanged
    for ev, out in zip(upstream[8:13], got[8:13]):
        assert (
            len(out) == 1 and out[0].data == ev.data.replace('"index":2', '"index":1') and out[0].parsed["index"] == 1
        )
    # message_delta / message_stop wait for the end of the round
    assert got[13:] == [[], []] and view.complete
    assert state.next_index == 2 and state.client_calls and state.open == set()
    # the round as the provider would have sent it unstreamed: both calls, inputs from the pieces
    msg = json.loads(view.message_text())
    assert msg["content"] == [
        {"type": "text", "text": "Reading."},
        {"type": "tool_use", "id": "toolu_r", "name": R, "input": {"key": "abcd"}},
        {"type": "tool_use", "id": "toolu_c", "name": "Read", "input": {"path": "/tmp/café.txt", "lines": [1, 20]}},
    ]
    assert [(c.call_id, c.name, c.arguments) for c in reply_anthropic.tool_calls(msg)] == [
        ("toolu_r", R, {"key": "abcd"}),
        ("toolu_c", "Read", {"path": "/tmp/café.txt", "lines": [1, 20]}),
    ]
    # the end: the client still has a call to make, so the stop reason stays tool_use
    end = view.close(None, [view.message_text()])
    assert datas(end) == [
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 25},
        },
        {"type": "message_stop"},
    ]
    assert end[0].raw == upstream[13].raw  # unchanged event, unchanged bytes


def test_anthropic_view_only_proxy_calls_stop_reason_becomes_end_turn_and_rounds_number_on():
    state = reply_anthropic.ViewState()
    first = reply_anthropic.StreamView(HIDDEN, state, 0)
    r0 = events(anthropic_round(client_call=False))
    sent = [e for ev in r0 for e in first.feed(ev)]
    assert [d["type"] for d in datas(sent)] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
    ]
    # the follow-up round: its message_start is not sent again, its text block becomes index 1
    second = reply_anthropic.StreamView(HIDDEN, state, 1)
    r1 = events(
        [
            {
                "type": "message_start",
                "message": {
                    "id": "msg_2",
                    "type": "message",
                    "role": "assistant",
                    "content": [],
                    "usage": {"input_tokens": 60, "output_tokens": 1},
                },
            },
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Done."}},
            {"type": "content_block_stop", "index": 0},
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
            {"type": "message_stop"},
        ]
    )
    sent = [e for ev in r1 for e in second.feed(ev)]
    assert [(d["type"], d["index"]) for d in datas(sent)] == [
        ("content_block_start", 1),
        ("content_block_delta", 1),
        ("content_block_stop", 1),
    ]
    texts = [first.message_text(), second.message_text()]
    end = datas(second.close(None, texts))
    assert end[0]["delta"]["stop_reason"] == "end_turn"
    assert end[0]["usage"] == {"output_tokens": 30, "input_tokens": 100}  # summed over both rounds
    assert end[1] == {"type": "message_stop"}


def test_anthropic_view_closes_open_blocks_and_adds_the_notice():
    state = reply_anthropic.ViewState()
    view = reply_anthropic.StreamView(HIDDEN, state, 0)
    for ev in events(anthropic_round()[:3]):  # cut short inside the text block
        view.feed(ev)
    end = datas(view.close("[notice]", [view.message_text()]))
    assert end == [
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "[notice]"}},
        {"type": "content_block_stop", "index": 1},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 0},
        },
        {"type": "message_stop"},
    ]


def test_anthropic_merge_removes_only_the_proxy_s_calls():
    msg = {
        "type": "message", "role": "assistant",
        "content": [
            {"type": "text", "text": "a"},
            {"type": "tool_use", "id": "toolu_r", "name": R, "input": {"key": "k"}},
            {"type": "tool_use", "id": "toolu_x", "name": R + "_not", "input": {}},
        ],
        "stop_reason": "tool_use", "usage": {"input_tokens": 5, "output_tokens": 1},
    }  # fmt: skip
    out = json.loads(reply_anthropic.merge([json.dumps(msg)], HIDDEN, None))
    assert out["content"] == [msg["content"][0], msg["content"][2]] and out["stop_reason"] == "tool_use"
    alone = {**msg, "content": msg["content"][:2]}
    out = json.loads(reply_anthropic.merge([json.dumps(alone)], HIDDEN, None))
    assert out["content"] == [{"type": "text", "text": "a"}] and out["stop_reason"] == "end_turn"
    assert out["usage"] == msg["usage"]  # one round: its usage as sent


# -- Chat Completions ----------------------------------------------------------------------------

BASE = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1741570283, "model": "gpt-4o"}


def chunk(delta: dict, finish=None) -> dict:
    return {**BASE, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def chat_round(proxy_first: bool = True) -> list:
    hidden = [
        chunk(
            {"tool_calls": [{"index": 0, "id": "call_r", "type": "function", "function": {"name": R, "arguments": ""}}]}
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"key":'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": ' "k9"}'}}]}),
    ]
    client = [
        chunk(
            {
                "tool_calls": [
                    {"index": 1, "id": "call_c", "type": "function", "function": {"name": "shell", "arguments": ""}}
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": '{"cmd": "ls /tmp/caf'}}]}),
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": 'é", "timeout": 1'}}]}),
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": "5}"}}]}),
    ]
    return [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Let me "}),
        chunk({"content": "look."}),
        *hidden,
        *client,
        chunk({}, "tool_calls"),
        {**BASE, "choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}},
        "[DONE]",
    ]


def test_chat_view_drops_the_proxy_call_s_chunks_and_renumbers_the_client_s():
    state = reply_chat.ViewState()
    view = reply_chat.StreamView(HIDDEN, state, 0)
    upstream = events(chat_round(), named=False)
    got = [view.feed(ev) for ev in upstream]
    assert all(got[i] == [upstream[i]] for i in range(3))  # role and content chunks unchanged
    assert got[3:6] == [[], [], []]  # chunks that only carried the proxy's call: not sent at all
    client = [datas(g)[0]["choices"][0]["delta"]["tool_calls"][0] for g in got[6:10]]
    assert [tc["index"] for tc in client] == [0, 0, 0, 0]
    assert client[0] == {"index": 0, "id": "call_c", "type": "function", "function": {"name": "shell", "arguments": ""}}
    assert "".join(tc["function"]["arguments"] for tc in client) == '{"cmd": "ls /tmp/café", "timeout": 15}'
    assert got[10:] == [[], [], []] and view.complete  # finish, usage, [DONE]: held for the end
    assert state.client_calls == {0} and state.next_call == {0: 1}
    msg = json.loads(view.message_text())
    calls = msg["choices"][0]["message"]["tool_calls"]
    assert [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in calls] == [
        ("call_r", R, '{"key": "k9"}'),
        ("call_c", "shell", '{"cmd": "ls /tmp/café", "timeout": 15}'),
    ]
    assert msg["choices"][0]["message"]["content"] == "Let me look." and msg["usage"]["total_tokens"] == 18
    end = view.close(None, [view.message_text()])
    assert datas(end) == [
        chunk({}, "tool_calls"),
        {**BASE, "choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}},
        "[DONE]",
    ]
    assert [e.raw for e in end] == [e.raw for e in upstream[10:]]  # nothing changed: the same bytes


def test_chat_view_a_chunk_with_both_calls_keeps_the_client_s_part_only():
    state = reply_chat.ViewState()
    view = reply_chat.StreamView(HIDDEN, state, 0)
    both = chunk(
        {
            "tool_calls": [
                {"index": 0, "id": "call_r", "type": "function", "function": {"name": R, "arguments": "{}"}},
                {"index": 1, "id": "call_c", "type": "function", "function": {"name": "shell", "arguments": "{}"}},
            ]
        }
    )
    (out,) = view.feed(events([both], named=False)[0])
    assert out.parsed["choices"][0]["delta"]["tool_calls"] == [
        {"index": 0, "id": "call_c", "type": "function", "function": {"name": "shell", "arguments": "{}"}}
    ]


def test_chat_view_follow_up_round_without_role_and_finish_becomes_stop():
    state = reply_chat.ViewState()
    first = reply_chat.StreamView(HIDDEN, state, 0)
    hidden_only = [
        e
        for e in chat_round()
        if not (
            isinstance(e, dict)
            and e["choices"]
            and "tool_calls" in e["choices"][0]["delta"]
            and e["choices"][0]["delta"]["tool_calls"][0]["index"] == 1
        )
    ]
    for ev in events(hidden_only, named=False):
        first.feed(ev)
    second = reply_chat.StreamView(HIDDEN, state, 1)
    r1 = [
        chunk({"role": "assistant", "content": " Found."}),
        chunk({}, "stop"),
        {**BASE, "choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 2, "total_tokens": 32}},
        "[DONE]",
    ]
    got = [second.feed(ev) for ev in events(r1, named=False)]
    assert datas(got[0]) == [chunk({"content": " Found."})]  # the role was sent in the first round
    end = datas(second.close(None, [first.message_text(), second.message_text()]))
    assert end[0]["choices"][0]["finish_reason"] == "stop"
    assert end[1]["usage"] == {"prompt_tokens": 41, "completion_tokens": 9, "total_tokens": 50} and end[2] == "[DONE]"


def test_chat_merge_removes_the_proxy_s_calls_and_an_empty_list():
    tr = {"id": "call_r", "type": "function", "function": {"name": R, "arguments": "{}"}}
    tc = {"id": "call_c", "type": "function", "function": {"name": "shell", "arguments": '{"cmd":"ls"}'}}
    both = chat_completion({"content": None, "tool_calls": [tr, tc]}, "tool_calls")
    out = json.loads(reply_chat.merge([json.dumps(both)], HIDDEN, None))
    assert out["choices"][0]["message"]["tool_calls"] == [tc] and out["choices"][0]["finish_reason"] == "tool_calls"
    alone = chat_completion({"content": "x", "tool_calls": [tr]}, "tool_calls")
    out = json.loads(reply_chat.merge([json.dumps(alone)], HIDDEN, None))
    assert (
        out["choices"][0]["message"] == {"role": "assistant", "content": "x"}
        and out["choices"][0]["finish_reason"] == "stop"
    )


# -- Responses -----------------------------------------------------------------------------------


def responses_round() -> list[dict]:
    resp = {"id": "resp_1", "object": "response", "status": "in_progress", "output": [], "usage": None}
    fc = {
        "type": "function_call",
        "id": "fc_r",
        "call_id": "call_r",
        "name": R,
        "arguments": "",
        "status": "in_progress",
    }
    msg = {"type": "message", "id": "msg_1", "status": "in_progress", "role": "assistant", "content": []}
    text = {"type": "output_text", "text": "", "annotations": []}
    args = ['{"ke', 'y": "k', '7"}']
    at_fc = {"item_id": "fc_r", "output_index": 0}
    at_msg = {"item_id": "msg_1", "output_index": 1, "content_index": 0}
    done_fc = {**fc, "arguments": "".join(args), "status": "completed"}
    done_msg = {**msg, "status": "completed", "content": [{**text, "text": "Hi."}]}
    evs = [
        {"type": "response.created", "response": resp},
        {"type": "response.in_progress", "response": resp},
        {"type": "response.output_item.added", "output_index": 0, "item": fc},
        *[{"type": "response.function_call_arguments.delta", **at_fc, "delta": a} for a in args],
        {"type": "response.function_call_arguments.done", **at_fc, "arguments": "".join(args)},
        {"type": "response.output_item.done", "output_index": 0, "item": done_fc},
        {"type": "response.output_item.added", "output_index": 1, "item": msg},
        {"type": "response.content_part.added", **at_msg, "part": text},
        {"type": "response.output_text.delta", **at_msg, "delta": "Hi."},
        {"type": "response.output_text.done", **at_msg, "text": "Hi."},
        {"type": "response.content_part.done", **at_msg, "part": {**text, "text": "Hi."}},
        {"type": "response.output_item.done", "output_index": 1, "item": done_msg},
        {
            "type": "response.completed",
            "response": {
                **resp,
                "status": "completed",
                "output": [done_fc, done_msg],
                "usage": {"input_tokens": 9, "output_tokens": 4, "total_tokens": 13},
            },
        },
    ]
    return [{**e, "sequence_number": n} for n, e in enumerate(evs)]


def test_responses_view_hides_the_proxy_item_and_numbers_on_without_gaps():
    state = reply_responses.ViewState()
    view = reply_responses.StreamView(HIDDEN, state, 0)
    upstream = events(responses_round())
    got = [view.feed(ev) for ev in upstream]
    assert got[0] == [upstream[0]] and got[1] == [upstream[1]]
    assert got[2:8] == [[]] * 6  # the function_call item, its argument deltas and done events
    sent = [d for g in got[8:14] for d in datas(g)]
    assert [(d["type"], d["output_index"], d["sequence_number"]) for d in sent] == [
        ("response.output_item.added", 0, 2), ("response.content_part.added", 0, 3), ("response.output_text.delta", 0, 4),
        ("response.output_text.done", 0, 5), ("response.content_part.done", 0, 6), ("response.output_item.done", 0, 7),
    ]  # fmt: skip
    assert got[14] == [] and view.complete  # the terminal event waits for the end
    # the round as sent: the function_call's arguments joined from the deltas
    resp = json.loads(view.message_text())
    assert [(c.call_id, c.name, c.arguments) for c in reply_responses.tool_calls(resp)] == [
        ("call_r", R, {"key": "k7"})
    ]
    end = datas(view.close(None, [view.message_text()]))
    assert len(end) == 1 and end[0]["type"] == "response.completed" and end[0]["sequence_number"] == 8
    assert [o["type"] for o in end[0]["response"]["output"]] == ["message"]
    assert end[0]["response"]["usage"] == {"input_tokens": 9, "output_tokens": 4, "total_tokens": 13}


def test_responses_merge_removes_the_proxy_s_function_calls():
    fr = {
        "type": "function_call",
        "id": "fc_r",
        "call_id": "call_r",
        "name": R,
        "arguments": "{}",
        "status": "completed",
    }
    fc = {
        "type": "function_call",
        "id": "fc_c",
        "call_id": "call_c",
        "name": "shell",
        "arguments": "{}",
        "status": "completed",
    }
    rs = {"type": "reasoning", "id": "rs_1", "summary": []}
    out = json.loads(reply_responses.merge([json.dumps(responses_response([rs, fr, fc]))], HIDDEN, None))
    assert out["output"] == [rs, fc] and out["usage"]["total_tokens"] == 123
