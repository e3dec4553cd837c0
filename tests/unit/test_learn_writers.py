"""The managed section of agent instruction files: merging keeps the user's text and earlier
rules, supersedes only what a new rule answers differently, ranks by evidence, and is stable."""

from __future__ import annotations

from pathlib import Path

import pytest

from headroom_core.learn.rules import Rule, content_hash
from headroom_core.learn.writers import END, START, TargetError, merge_rules, parse, plan, target_file, write


def rule(text: str, evidence: int, key: str | None = None, sk: str | None = None) -> Rule:
    key = key or text
    return Rule("command", key, text, sk or content_hash("sk", key), content_hash("fk", key), evidence)


A = rule("`pytest tests` fails (command not found); use `python -m pytest tests`", 5)
B = rule(
    "Read a file before editing it: `Edit` fails on a file that was not read first (File has not been read yet)", 12
)


def test_new_file_gets_only_the_section_ranked_by_evidence():
    text = merge_rules("", [A, B])
    lines = text.splitlines()
    assert lines[0] == START and lines[-1] == END and text.endswith(END + "\n")
    items = [ln for ln in lines if ln.startswith("- ")]
    assert items[0].startswith(f"- {B.text} _(evidence: 12)_") and items[1].startswith(f"- {A.text} _(evidence: 5)_")
    assert merge_rules(text, [A, B]) == text  # stable: the same rules change nothing


def test_user_text_around_and_inside_the_section_survives():
    mine = "# Project\n\nUse tabs.\n"
    first = merge_rules(mine, [A])
    assert first.startswith(mine + "\n" + START)
    # the user adds a line inside the section and text after it
    edited = first.replace(END, "- my own rule: never push on Fridays\n" + END) + "\n## After\nkeep me\n"
    second = merge_rules(edited, [B])
    assert "- my own rule: never push on Fridays" in second
    assert second.endswith(f"{END}\n\n## After\nkeep me\n")
    assert A.text in second and B.text in second  # the earlier rule is kept
    assert second.startswith(mine)


def test_evidence_never_decreases_and_duplicates_merge():
    text = merge_rules("", [A])
    fewer = merge_rules(text, [rule(A.text, 2, key=A.key)])
    assert fewer == text  # a run over fewer logs keeps the larger count
    more = merge_rules(text, [rule(A.text, 9, key=A.key)])
    assert "_(evidence: 9)_" in more and more.count(A.text) == 1


def test_a_new_fix_for_the_same_failure_supersedes_the_old_rule():
    old = rule(
        "`make test` fails (no rule to make target); use `make tests`",
        3,
        key="make test\0make tests",
        sk=content_hash("same failure"),
    )
    new = rule(
        "`make test` fails (no rule to make target); use `make check`",
        4,
        key="make test\0make check",
        sk=content_hash("same failure"),
    )
    text = merge_rules(merge_rules("", [old, A]), [new])
    entries = parse(text).entries
    assert [e.text for e in entries] == [A.text, new.text]


def test_plan_and_write_targets(tmp_path: Path):
    (tmp_path / "AGENTS.md").write_text("# Agents\n")
    planned = plan(tmp_path, ["agents", "CLAUDE.local.md", "AGENTS.md"], [A])
    assert [p.path.name for p in planned] == ["AGENTS.md", "CLAUDE.local.md"]
    for p in planned:
        write(p)
    assert (tmp_path / "AGENTS.md").read_text().startswith("# Agents\n\n" + START)
    assert all(not p.changed for p in plan(tmp_path, ["AGENTS.md", "CLAUDE.local.md"], [A]))
    assert plan(tmp_path, ["GEMINI.md"], [])[0].changed is False
    with pytest.raises(TargetError, match="unknown target"):
        target_file("README.md")


def test_broken_markers_leave_the_file_to_the_user():
    text = f"notes\n{END}\nmore\n{START}\n"  # end before start: no section
    assert parse(text).present is False
    out = merge_rules(text, [A])
    assert out.startswith(text.rstrip("\n"))  # all of the user's text kept, a section appended
    assert parse(out).entries[0].text == A.text
