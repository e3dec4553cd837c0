"""wire: byte-faithful JSON edits, SSE parsing, dialect detection, tool outputs per dialect."""

from __future__ import annotations

import json

import pytest

from headroom_core.wire import anthropic, jsonedit, openai_chat, openai_responses
from headroom_core.wire.detect import Dialect, detect
from headroom_core.wire.sse import SSEParser, encode_event
from tests.conftest import flow_files, load_flow


def test_replace_keeps_every_other_byte():
    src = '{ "a" : [1, {"b":"x\\u00e9"},  3] ,\n "c":{"d": "é"}}'
    out = jsonedit.apply(src, [jsonedit.Replace(("a", 1, "b"), "new")])
    assert out == '{ "a" : [1, {"b":"new"},  3] ,\n "c":{"d": "é"}}'


def test_append_to_array_and_missing_key():
    assert jsonedit.apply('{"tools": [ ]}', [jsonedit.Append(("tools",), {"n": 1})]) == '{"tools": [ {"n":1}]}'
    assert jsonedit.apply('{"tools":[1]}', [jsonedit.Append(("tools",), 2)]) == '{"tools":[1,2]}'
    assert jsonedit.apply('{"m": 1}', [jsonedit.Append(("tools",), 2)]) == '{"m": 1,"tools":[2]}'
    assert jsonedit.apply("{}", [jsonedit.Append(("tools",), 2)]) == '{"tools":[2]}'


def test_missing_path_raises():
    with pytest.raises(jsonedit.JSONPathError):
        jsonedit.span('{"a": [1]}', ("a", 3))
    with pytest.raises(jsonedit.JSONPathError):
        jsonedit.span('{"a": 1}', ("a", "b"))


def test_span_on_real_request_matches_json_loads():
    """On a real 300 KB Claude Code request, the located span parses to the same value."""
    body = load_flow(flow_files()[-1])["request"]["body"]
    text = json.dumps(body, indent=1)
    for path in [("messages", 0, "content"), ("tools", 5, "input_schema"), ("system",)]:
        a, b = jsonedit.span(text, path)
        v = body
        for k in path:
            v = v[k]
        assert json.loads(text[a:b]) == v


def test_sse_parser_keeps_raw_bytes_across_chunk_boundaries():
    stream = load_flow(flow_files()[4])["response"]["body"].encode()
    p = SSEParser()
    events = []
    for i in range(0, len(stream), 7):
        events += p.feed(stream[i : i + 7])
    events += p.feed(b"")
    assert b"".join(e.raw for e in events) == stream
    types = [e.event for e in events]
    assert types[0] == "message_start" and types[-1] == "message_stop"
    assert events[0].json()["type"] == "message_start"


def test_encode_event_roundtrip():
    raw = encode_event({"type": "ping"}, "ping")
    (ev,) = SSEParser().feed(raw)
    assert ev.event == "ping" and ev.json() == {"type": "ping"}


@pytest.mark.parametrize(
    "method,path,body,expected",
    [
        ("POST", "/v1/messages", b'{"model":"m","messages":[]}', Dialect.ANTHROPIC_MESSAGES),
        ("POST", "/anthropic/v1/messages?beta=true", b'{"model":"m","messages":[]}', Dialect.ANTHROPIC_MESSAGES),
        (
            "POST",
            "/v1/messages/count_tokens",
            b'{"model":"m","messages":[]}',
            Dialect.ANTHROPIC_MESSAGES,
        ),  # planned like the request it measures
        ("POST", "/openai/v1/chat/completions", b'{"model":"m","messages":[]}', Dialect.OPENAI_CHAT),
        ("POST", "/v1/responses", b'{"model":"m","input":"hi"}', Dialect.OPENAI_RESPONSES),
        ("GET", "/v1/messages", b"", None),
        ("POST", "/v1/messages", b"not json", None),
        ("POST", "/v1/messages", b"[1,2]", None),
        ("POST", "/v1/chat/completions", b'{"model":"m"}', None),
        ("POST", "/upload", b'{"messages":[]}', None),
    ],
)
def test_detect(method, path, body, expected):
    assert detect(method, path, body).dialect == expected


def test_anthropic_tool_outputs_on_real_session():
    """Every tool_result of the real session is found, with the tool name of its tool_use."""
    body = load_flow(flow_files()[-1])["request"]["body"]
    outs = anthropic.tool_outputs(body)
    n_results = sum(
        1
        for m in body["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    )
    assert n_results > 0 and len({o.call_id for o in outs}) <= n_results
    assert all(o.tool_name for o in outs)
    for o in outs:
        v = body
        for k in o.path:
            v = v[k]
        assert v == o.text


def test_openai_shapes():
    chat = {
        "messages": [
            {"role": "user", "content": "find the bug"},
            {
                "role": "assistant",
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "grep", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "out"},
        ]
    }
    (o,) = openai_chat.tool_outputs(chat)
    assert (o.path, o.tool_name, o.text) == (("messages", 2, "content"), "grep", "out")
    assert openai_chat.latest_user_text(chat) == "find the bug"
    resp = {
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "q?"}]},
            {"type": "function_call", "call_id": "k", "name": "shell", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "k", "output": "done"},
        ]
    }
    (r,) = openai_responses.tool_outputs(resp)
    assert (r.path, r.tool_name) == (("input", 2, "output"), "shell")
    assert openai_responses.latest_user_text(resp) == "q?"


# A client that escapes every non-ASCII character (Claude Code's bodies are ASCII) gets the
# proxy's values written the same way: the text stays ASCII, which keeps every string operation
# on a 450 KB body at one byte a character (a single "…" made the whole text two bytes a
# character: session-a's plan 4.2 -> 3.0 ms median). The values are the same once parsed.
NON_ASCII = "elided … → • ≤ é 😀 and a lone \ud83d half"


def test_values_spliced_into_an_ascii_body_are_escaped_and_parse_to_the_same_value():
    src = '{"messages":[{"role":"user","content":"caf\\u00e9"}],"m":1}'
    out = jsonedit.apply(
        src, [jsonedit.Replace(("messages", 0, "content"), NON_ASCII), jsonedit.Append(("extra",), {"k": "→"})]
    )
    assert out.isascii()
    assert json.loads(out)["messages"][0]["content"] == NON_ASCII and json.loads(out)["extra"] == [{"k": "→"}]
    assert out.startswith('{"messages":[{"role":"user","content":"elided \\u2026 \\u2192')  # JSON's \uXXXX escapes
    assert "\\ud83d\\ude00" in out and "\\ud83d half" in out  # astral: a surrogate pair; lone: its escape


def test_values_spliced_into_a_utf8_body_are_written_as_utf8():
    src = '{"messages":[{"role":"user","content":"café"}]}'
    out = jsonedit.apply(src, [jsonedit.Replace(("messages", 0, "content"), NON_ASCII)])
    assert "elided … → • ≤ é 😀" in out and "\\ud83d half" in out  # the lone surrogate has no UTF-8 form
    assert json.loads(out)["messages"][0]["content"] == NON_ASCII


def test_reserialize_writes_changed_values_as_the_source_text_does():
    ascii_src = '{"name":"Read","description":"Reads \\u2192 a file","n":1e400}'
    old = json.loads(ascii_src)
    new = {**old, "description": "Reads → a file."}
    out = jsonedit.reserialize(ascii_src, old, new)
    assert out.isascii() and json.loads(out)["description"] == "Reads → a file." and '"n":1e400' in out
    utf8_src = '{"name":"Read","description":"Reads → a file"}'
    assert (
        jsonedit.reserialize(utf8_src, json.loads(utf8_src), {"name": "Read", "description": "Reads → a file."})
        == '{"name":"Read","description":"Reads → a file."}'
    )
