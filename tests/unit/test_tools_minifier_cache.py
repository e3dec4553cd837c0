"""ToolsMinifier keeps each tool's own minification and written text: a tool list not seen
before pays only for its tools not seen before, and gives exactly what a fresh minifier gives
(the dedupe across tools, which edits what it is given, runs on every list). Real tool lists
from ``../shared/corpus/anthropic-flows``."""

from __future__ import annotations

import copy
import json

import pytest

from headroom_core.tools import minifier as tools_step
from headroom_core.compress.tokens import TokenCounter
from headroom_core.tools.minifier import ToolsMinifier
from tests.unit.test_tool_defs import flow_tools


@pytest.fixture(scope="module")
def tools() -> list:
    return max((t for _f, t in flow_tools()), key=len)


def variants(tools: list) -> list[list]:
    """What agents do to a tool list between requests and sessions."""
    changed = copy.deepcopy(tools)
    for t in changed[:2]:
        t["description"] = t.get("description", "") + "\n\n  Added   in this session.  "
    shared = "A long paragraph every helper tool repeats word for word, " * 6
    helpers = [{"name": f"helper_{i}", "description": f"Helper {i}.\n\n{shared}", "input_schema": {"type": "object"}} for i in range(3)]
    return [
        tools[3:] + tools[:1],  # some removed, one moved to the end
        changed,  # two descriptions differ
        helpers + tools,  # new tools in front: the dedupe now points elsewhere
        list(reversed(helpers + tools)),  # another order: other tools hold the passages
    ]


def outcome(m: ToolsMinifier, tools: list) -> tools_step.ToolsOutcome:
    return m.run(json.dumps(tools), json.loads(json.dumps(tools)), count=False)


def test_a_new_list_gives_what_a_fresh_minifier_gives_and_minifies_only_tools_not_seen(tools, monkeypatch, tmp_path):
    counter = TokenCounter(tmp_path)
    warm = ToolsMinifier(counter, ())
    calls: list[str] = []
    real = tools_step.minify_container
    monkeypatch.setattr(tools_step, "minify_container", lambda c, k: calls.append(c["name"]) or real(c, k))
    outcome(warm, tools)
    assert len(calls) == len(tools)
    seen = {json.dumps(t) for t in tools}
    for v in variants(tools):
        calls.clear()
        got = outcome(warm, v)
        new = [t["name"] for t in v if json.dumps(t) not in seen]
        assert sorted(calls) == sorted(new)  # only the tools not seen before were minified
        calls.clear()
        assert got == outcome(ToolsMinifier(counter, ()), v)
        assert got.replacements  # the list was minified, not passed through
        seen |= {json.dumps(t) for t in v}
    calls.clear()
    assert outcome(warm, tools) == outcome(ToolsMinifier(counter, ()), tools)  # the first list again, after all that


def test_the_per_tool_caches_hold_a_bounded_number_of_characters():
    lru = tools_step._Lru(entries=10, chars=100)
    for i in range(5):
        lru.put(bytes([i]), "x" * 30)
    assert [lru.get(bytes([i])) is not None for i in range(5)] == [False, False, True, True, True]  # 90 of 100 kept
    lru.put(b"big", "y" * 101)
    assert lru.get(b"big") is None and lru.get(bytes([4])) == "x" * 30  # too big: not kept, nothing evicted
