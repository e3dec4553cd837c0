"""Bugs the fuzz test (``tests/e2e/test_fuzz_e2e.py``) found, each pinned with its right value."""

from __future__ import annotations

from headroom_core.cache.volatile import diff_tools


def test_prefix_diff_with_repeated_tool_names():
    """Two tools of one name made the tool-order diff raise ``StopIteration`` (the prefix
    observer failed for the request)."""
    changes = diff_tools([("a", "1"), ("a", "2"), ("b", "3")], [("a", "1"), ("b", "3")])
    assert [c.kind for c in changes] == ["tool-order", "tool-definition"]
    assert changes[0].before.startswith("#1:")


def test_tool_names_of_tools_that_are_not_an_array():
    """``"tools": true`` made the plan raise ``TypeError: 'bool' object is not iterable`` (the
    request went through unchanged, but as an internal error)."""
    from headroom_core.wire import anthropic, openai_chat, openai_responses

    for mod in (anthropic, openai_chat, openai_responses):
        for tools in (True, 5, "x", {"name": "a"}, None):
            assert mod.tool_names({"tools": tools}) == []
    assert openai_chat.tool_names(
        {"tools": [{"type": "function", "function": "x"}, {"type": "function", "function": {"name": "ok"}}]}
    ) == ["", "ok"]
    assert anthropic.tool_names({"tools": [{"name": "a"}, True]}) == ["a"]
