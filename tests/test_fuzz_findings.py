"""Bugs the fuzz test (``tests/test_fuzz_e2e.py``) found, each pinned with its right value."""

from __future__ import annotations

from headroom_core.cache.volatile import diff_tools


def test_prefix_diff_with_repeated_tool_names():
    """Two tools of one name made the tool-order diff raise ``StopIteration`` (the prefix
    observer failed for the request)."""
    changes = diff_tools([("a", "1"), ("a", "2"), ("b", "3")], [("a", "1"), ("b", "3")])
    assert [c.kind for c in changes] == ["tool-order", "tool-definition"]
    assert changes[0].before.startswith("#1:")
