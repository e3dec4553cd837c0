"""The fast path of ``jsonedit.reserialize`` (``wire/canonical.py``) writes the very bytes the
character walk writes, and declines (None) whenever the text is not written as ``dumps`` writes."""

from __future__ import annotations

import json

import pytest

from headroom_core.tools.minify import minify_tools
from headroom_core.wire import jsonedit
from headroom_core.wire.canonical import reserialize_canonical

CASES = [
    # (client text, edit of the parsed value)
    (
        '{"name":"Read","description":"Reads  a\\n\\n\\nfile.","input_schema":{"type":"object","properties":{"p":{"type":"string","description":" x "}}}}',
        lambda v: {**v, "description": "Reads a\n\nfile."},
    ),
    (
        '{"a":1,"b":[1,2,3],"c":{"d":"é"}}',
        lambda v: {"c": v["c"], "a": 2, "e": [None, True, 1.5]},
    ),  # order: a, c, then e
    ('{"a":0.0,"b":"x"}', lambda v: {"a": -0.0, "b": "y"}),  # 0.0 == -0.0: the client's 0.0 stays
    ('{"a":"\\u00e9","b":1}', lambda v: {"a": v["a"], "b": 2}),  # ASCII text: new values escaped
    ('{"a":[1,2],"b":true}', lambda v: {"a": [1, 2, 3], "b": 1}),  # other length, other type
    ('{"s":"\\ud800x","t":1}', lambda v: {"s": v["s"], "t": 3}),  # a lone surrogate, escaped
    ('{"n":NaN,"m":1}', lambda v: {"n": v["n"], "m": 2}),
]


@pytest.mark.parametrize("text,edit", CASES)
def test_same_bytes_as_the_walk(text: str, edit) -> None:
    old = json.loads(text)
    new = edit(old)
    fast = reserialize_canonical(text, old, new)
    assert fast is not None
    assert fast == jsonedit.reserialize(text, old, new)


@pytest.mark.parametrize(
    "text",
    [
        '{"a":1e400,"b":1}',  # written as 1e400, dumps writes Infinity
        '{"a":1.10,"b":1}',  # 1.10, dumps writes 1.1
        '{"a":"\\u0041","b":1}',  # an escape dumps does not write
        '{"a":1,"b":2,"a":3}',  # a duplicate key
        '{"a":"é","b":1}'.replace("é", "\\u00e9").replace("\\u00e9", "\\u00E9"),  # upper-case hex
    ],
)
def test_declines_what_dumps_does_not_write(text: str) -> None:
    old = json.loads(text)
    assert reserialize_canonical(text, old, {**old, "b": 9}) is None


def test_whitespace_between_tokens_is_canonical() -> None:
    text = '{ "a" : [1, 2],\n  "b": "x  y" }'
    old = json.loads(text)
    new = {"a": old["a"], "b": "x y"}
    assert reserialize_canonical(text, old, new) == jsonedit.reserialize(text, old, new) == '{"a":[1,2],"b":"x y"}'


def test_declines_raw_json_and_non_string_keys() -> None:
    text = '{"a":1}'
    old = json.loads(text)
    assert reserialize_canonical(text, old, {"a": jsonedit.RawJSON("2")}) is None
    assert reserialize_canonical(text, old, {"a": 1, 2: 3}) is None


def test_a_minified_tool_list_is_written_alike() -> None:
    """Every tool the minifier changes, both ways: compact UTF-8 and ASCII-escaped texts."""
    desc = "Reads a file.\n\n\n   Usage:\n     - one  two\n     - three\n\nShared paragraph that repeats across several tools, long enough to be deduplicated by reference."
    tools = [
        {"name": f"t{i}", "description": desc + ("é" if i % 2 else ""), "input_schema": {"type": "object", "title": f"T{i}",
         "properties": {"path": {"type": "string", "title": "Path", "description": " the  path ", "default": 0.5, "enum": ["a", "b"]}}}}
        for i in range(6)
    ]  # fmt: skip
    for ascii_ in (False, True):
        text = json.dumps(tools, ensure_ascii=ascii_, separators=(",", ":"))
        parsed = json.loads(text)
        res = minify_tools(parsed)
        assert res.changed
        spans = jsonedit.element_spans(text, ())
        for (a, b), old, new in zip(spans, parsed, res.tools):
            if new is old:
                continue
            assert reserialize_canonical(text[a:b], old, new) == jsonedit.reserialize(text[a:b], old, new)


def test_the_tools_minifier_writes_what_the_walk_writes(tmp_path) -> None:
    """The minifier's copies (``copy=True``: written as ``dumps(new)``, not merged) give the
    walk's text for every tool it changes: the corpus session's tool lists, compact UTF-8 and
    ASCII-escaped, with spaces doubled, a ``-0.0``, a NaN and a 25-digit number in a schema, from
    a fresh minifier and again from one that has them cached (parsed back from its own JSON)."""
    from headroom_core.compress.tokens import TokenCounter
    from headroom_core.tools.minifier import ToolsMinifier
    from tests.unit.test_tool_defs import flow_tools

    lists = {json.dumps(t) for _f, t in flow_tools()}
    assert lists
    warm = ToolsMinifier(TokenCounter(tmp_path), ())
    checked = 0
    for raw in sorted(lists):
        tools = json.loads(raw)
        tools[0] = {
            **tools[0],
            "input_schema": {
                **tools[0].get("input_schema", {}),
                "x-limits": [-0.0, float("nan"), 1234567890123456789012345],
            },
        }
        for ascii_, doubled in ((False, False), (True, False), (False, True)):
            text = json.dumps(tools, ensure_ascii=ascii_, separators=(",", ":"))
            text = text.replace(" ", "  ") if doubled else text
            parsed = json.loads(text)
            spans = jsonedit.element_spans(text, ())
            news = minify_tools(json.loads(text)).tools
            cached = ToolsMinifier(TokenCounter(tmp_path), ())
            if len(spans) > 1:  # all but the first tool
                cached.run(text[:1] + text[spans[1][0] :], json.loads(text[:1] + text[spans[1][0] :]), count=False)
            cached._final = type(cached._final)(4096, 1 << 26)  # written again, from minifications parsed back
            for m in (ToolsMinifier(TokenCounter(tmp_path), ()), warm, cached):
                got = m.run(text, json.loads(text), count=False)
                assert got.replacements
                for i, written in got.replacements:
                    a, b = spans[i]
                    assert str(written) == jsonedit.reserialize(text[a:b], parsed[i], news[i])
                    checked += 1
    assert checked > 1000
