"""A dialect's tools may live below a top-level member (``tools_path``, Bedrock Converse
``toolConfig.tools``): the view finds that array and its elements, and an Append to it creates
the missing keys at the end of the deepest object that is there, bytes around it as sent."""

from __future__ import annotations

import json

import pytest

from headroom_core.wire import jsonedit
from headroom_core.wire.view import array_at, parse_view


def test_array_at_top_level_and_nested():
    text = '{"tools": [ {"name":"a"} ,{"name":"b"}], "toolConfig": {"toolChoice": {"auto": {}}, "tools": [{"toolSpec": {"name": "x"}}, {"cachePoint": {"type": "default"}}]}}'
    v = parse_view(text)
    (a, b), els = array_at(v, ("tools",))
    assert text[a:b] == '[ {"name":"a"} ,{"name":"b"}]' and [text[x:y] for x, y in els] == [
        '{"name":"a"}',
        '{"name":"b"}',
    ]
    (a, b), els = array_at(v, ("toolConfig", "tools"))
    assert json.loads(text[a:b]) == v.parsed["toolConfig"]["tools"]
    assert [text[x:y] for x, y in els] == ['{"toolSpec": {"name": "x"}}', '{"cachePoint": {"type": "default"}}']
    with pytest.raises(jsonedit.JSONPathError):
        array_at(v, ("toolConfig", "toolChoice"))


@pytest.mark.parametrize(
    "before, after",
    [
        ('{"a": 1}', '{"a": 1,"toolConfig":{"tools":[{"n":1},{"n":2}]}}'),
        (
            '{"toolConfig": {"toolChoice": {"auto": {}}}}',
            '{"toolConfig": {"toolChoice": {"auto": {}},"tools":[{"n":1},{"n":2}]}}',
        ),
        ('{"toolConfig": {}}', '{"toolConfig": {"tools":[{"n":1},{"n":2}]}}'),
        ('{"toolConfig": {"tools": []}}', '{"toolConfig": {"tools": [{"n":1},{"n":2}]}}'),
    ],
)
def test_append_creates_a_missing_nested_array(before, after):
    edits = [jsonedit.Append(("toolConfig", "tools"), {"n": 1}), jsonedit.Append(("toolConfig", "tools"), {"n": 2})]
    assert jsonedit.apply(before, edits) == after


def test_append_cannot_create_below_a_value_that_is_no_object():
    with pytest.raises(jsonedit.JSONPathError):
        jsonedit.apply('{"toolConfig": [1]}', [jsonedit.Append(("toolConfig", "tools"), 1)])
    assert jsonedit.apply("{}", [jsonedit.Append(("tools",), 1)]) == '{"tools":[1]}'  # top level as before
