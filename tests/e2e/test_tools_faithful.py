"""Minified tool definitions keep every value the minifier does not mean to change exactly as the
client wrote it: numbers (``1e400``, 25-digit decimals, ``-0.0``, ``1E+2``), escapes, key order,
duplicate keys, descriptions without words. Unit level (the tools step and ``jsonedit``), the
request plan, and a real mitmdump."""

from __future__ import annotations

import json

from headroom_core.request_plan import plan_request
from headroom_core.tools.minifier import ToolsMinifier
from headroom_core.wire import jsonedit
from tests.support.clients import http_client
from tests.support.upstream import Reply

# A tool definition as a client may write it: pretty-printed, numbers Python's float cannot hold
# (1e400 overflows to inf and would be written back as Infinity, invalid JSON; the decimals
# would be rounded to 17 digits), escapes, a description with no words, and one to minify.
TOOL_TEXT = """{
  "name": "measure",
  "description": "  Measures   a value.\\n\\n\\n  Returns it.  ",
  "input_schema": {
    "type": "object",
    "$schema": "http://json-schema.org/draft-07/schema#",
    "properties": {
      "huge":   {"type": "number", "maximum": 1e400, "minimum": -1E+400, "description": "   "},
      "exact":  {"type": "number", "default": 0.1000000000000000000000001, "multipleOf": 1.0000000000000000000000001},
      "zero":   {"type": "number", "default": -0.0, "exclusiveMaximum": 1E+2},
      "big":    {"type": "integer", "maximum": 123456789012345678901234567890},
      "unit":   {"type": "string", "enum": ["\\u00b0C", "\\u00b0F", "caf\\u00e9"], "title": "Unit", "description": ""},
      "weird":  {"type": "string", "default": "tab\\there", "description": "  two   spaces  "}
    },
    "required": ["huge"]
  }
}"""


def _tools_text(*entries: str) -> str:
    return "[" + ",\n".join(entries) + "]"


def test_minified_tool_keeps_numbers_and_escapes_as_written(counter):
    text = _tools_text(TOOL_TEXT)
    tools = json.loads(text)
    out = ToolsMinifier(counter, ()).run(text, tools)
    ((i, new),) = out.replacements
    assert i == 0 and isinstance(new, jsonedit.RawJSON)
    for literal in (
        '"maximum":1e400',
        '"minimum":-1E+400',
        '"default":0.1000000000000000000000001',
        '"multipleOf":1.0000000000000000000000001',
        '"default":-0.0',
        '"exclusiveMaximum":1E+2',
        '"maximum":123456789012345678901234567890',
        '"enum":["\\u00b0C","\\u00b0F","caf\\u00e9"]',
        '"default":"tab\\there"',
    ):
        assert literal in new, literal
    assert "Infinity" not in new
    parsed = json.loads(new)
    props = parsed["input_schema"]["properties"]
    assert parsed["description"] == "Measures a value.\n\nReturns it."
    assert "$schema" not in parsed["input_schema"] and "title" not in props["unit"]  # meant to go
    assert props["huge"]["description"] == "   " and props["unit"]["description"] == ""  # no words: as written
    assert props["weird"]["description"] == "two spaces"
    assert list(parsed["input_schema"]) == ["type", "properties", "required"]
    assert out.tokens_after < out.tokens_before


def test_duplicate_keys_keep_their_meaning(counter):
    tool = '{"name": "dup", "description": "first", "description": "  last   one ", "input_schema": {"title": "x", "type": "object", "title": "Dup"}}'
    text = _tools_text(tool)
    out = ToolsMinifier(counter, ()).run(text, json.loads(text))
    ((_, new),) = out.replacements
    # json.loads keeps the last duplicate: what it read is minified, the earlier one is kept as written
    assert json.loads(new) == {"name": "dup", "description": "last one", "input_schema": {"type": "object"}}
    assert new.startswith('{"name":"dup","description":"first","description":"last one"')


def test_reserialize_copies_unchanged_values_from_the_text():
    text = '{ "a" : [1e400, 1.10, "\\u0041"], "b": {"c": 2.50}, "d": "  x  " }'
    old = json.loads(text)
    new = {"a": old["a"], "b": {"c": old["b"]["c"]}, "d": "x"}
    assert jsonedit.reserialize(text, old, new) == '{"a":[1e400,1.10,"\\u0041"],"b":{"c":2.50},"d":"x"}'
    assert jsonedit.compact(text) == '{"a":[1e400,1.10,"\\u0041"],"b":{"c":2.50},"d":"  x  "}'


def test_plan_sends_numbers_as_written(runtime):
    body = (
        '{"model": "claude-sonnet-4", "max_tokens": 100, "tools": '
        + _tools_text(TOOL_TEXT)
        + ', "messages": [{"role": "user", "content": "measure it"}]}'
    )
    p = plan_request(runtime, "POST", "/v1/messages", {}, body.encode())
    assert p.action == "rewrite" and "tools sent as the session sends them" in p.reason, p.reason
    sent = p.body.decode()
    assert '"maximum":1e400' in sent and '"default":0.1000000000000000000000001' in sent and "Infinity" not in sent
    # everything outside the changed tool is the client's bytes
    assert sent.startswith('{"model": "claude-sonnet-4", "max_tokens": 100, "tools": [{"name":"measure"')
    assert sent.endswith('], "messages": [{"role": "user", "content": "measure it"}]}')


def test_numbers_as_written_through_mitmdump(upstream, proxy_factory):
    from tests.support.proxy import ADDON_SCRIPT

    px = proxy_factory(ADDON_SCRIPT, options={"headroom_compress_timeout_seconds": "600"})
    upstream.script(Reply.text("ok"))
    body = (
        '{"model": "claude-sonnet-4", "max_tokens": 100, "tools": '
        + _tools_text(TOOL_TEXT)
        + ', "messages": [{"role": "user", "content": "hi"}]}'
    )
    with http_client(px) as c:
        r = c.post(upstream.url + "/v1/messages", content=body.encode(), headers={"content-type": "application/json"})
    assert r.status_code == 200
    sent = upstream.last.body.decode()
    assert '"maximum":1e400,"minimum":-1E+400' in sent and '"multipleOf":1.0000000000000000000000001' in sent
    assert '"description":"Measures a value.\\n\\nReturns it."' in sent
