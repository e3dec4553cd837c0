"""ToolsMinifier keeps each tool's own minification and written text: a tool list not seen
before pays only for its tools not seen before, and gives exactly what a fresh minifier gives
(the dedupe across tools, which edits what it is given, runs on every list). Real tool lists
from ``../shared/corpus/anthropic-flows``."""

from __future__ import annotations

import copy
import json

import pytest

from headroom_core.compress.tokens import TokenCounter
from headroom_core.tools import minifier as tools_step
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
    helpers = [
        {"name": f"helper_{i}", "description": f"Helper {i}.\n\n{shared}", "input_schema": {"type": "object"}}
        for i in range(3)
    ]
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


def test_a_tool_seen_before_is_written_again_only_when_the_dedupe_changed_it(tools, monkeypatch, tmp_path):
    """The text written for a tool the dedupe left alone is kept by the tool's text: a later
    list writes only the tools it changes that were never before left alone by the dedupe, and
    those the dedupe changes in it (what it gives is what a fresh minifier gives: the test above)."""
    warm = ToolsMinifier(TokenCounter(tmp_path), ())
    written: list[str] = []
    real = ToolsMinifier._written_text
    monkeypatch.setattr(
        ToolsMinifier,
        "_written_text",
        lambda self, text, old, new: written.append(old["name"]) or real(self, text, old, new),
    )
    kept: set[str] = set()  # texts of tools written once as their own minification
    counts = []
    for v in [tools, *variants(tools)]:
        written.clear()
        outcome(warm, v)
        counts.append(len(written))
        deduped = tools_step.minify_tools(json.loads(json.dumps(v))).deduped
        may = {t["name"] for i, t in enumerate(v) if i in deduped or json.dumps(t) not in kept}
        assert written and set(written) <= may
        kept |= {json.dumps(t) for i, t in enumerate(v) if i not in deduped}
    assert counts[1] < counts[0] // 4, counts  # some removed, one moved: the rest written before (144 -> 22)


def test_the_per_tool_caches_hold_a_bounded_number_of_characters():
    lru = tools_step._Lru(entries=10, chars=100)
    for i in range(5):
        lru.put(bytes([i]), "x" * 30)
    assert [lru.get(bytes([i])) is not None for i in range(5)] == [False, False, True, True, True]  # 90 of 100 kept
    lru.put(b"big", "y" * 101)
    assert lru.get(b"big") is None and lru.get(bytes([4])) == "x" * 30  # too big: not kept, nothing evicted
