"""The managed section of an agent instruction file (CLAUDE.local.md, CLAUDE.md, AGENTS.md,
GEMINI.md) that holds learned rules.

The section sits between :data:`START` and :data:`END`; everything outside it is the user's and is
never changed. Inside, each learned rule is one list item ending in an HTML comment that names
the rule (``<!-- headroom:rule <id> <supersede key> -->``), invisible when the Markdown is
rendered. Merging (:func:`merge_rules`) keeps every earlier rule and every line the user wrote
inside the section, updates the evidence of a rule seen again (the larger count wins, so a run
over fewer logs never lowers it), replaces a rule only when a new rule answers the same failure
differently (same supersede key, other id), and ranks rules by evidence. Rendering is
deterministic, so merging the same rules twice gives byte-identical text.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from headroom_core.learn.rules import Rule

START = "<!-- headroom:learned:start -->"
END = "<!-- headroom:learned:end -->"
HEADING = "## Learned from past failures"
INTRO = "_Kept up to date by `headroom learn`: each rule comes from failures seen in this project's sessions; the count is its evidence. Text outside this section is never changed._"
TARGETS = {"CLAUDE.local.md": "CLAUDE.local.md", "CLAUDE.md": "CLAUDE.md", "AGENTS.md": "AGENTS.md", "GEMINI.md": "GEMINI.md"}
ALIASES = {"claude-local": "CLAUDE.local.md", "claude": "CLAUDE.md", "agents": "AGENTS.md", "gemini": "GEMINI.md"}
DEFAULT_TARGET = "CLAUDE.local.md"
_SECTION = re.compile(re.escape(START) + r"(?:(?!" + re.escape(START) + r").)*?" + re.escape(END), re.S)
_ITEM = re.compile(r"^- (?P<text>.*?) _\(evidence: (?P<n>\d+)\)_ <!-- headroom:rule (?P<id>[0-9a-f]{6,64}) (?P<sk>[0-9a-f]{0,64}) ?-->\s*$")


class TargetError(ValueError):
    """An unknown ``--target`` name; the message lists the known ones."""


def target_file(name: str) -> str:
    """The file name for a ``--target`` value (``CLAUDE.md`` or an alias such as ``agents``).
    Raises :class:`TargetError` for anything else."""
    if name in TARGETS:
        return TARGETS[name]
    low = name.lower()
    if low in ALIASES:
        return ALIASES[low]
    for k in TARGETS:
        if k.lower() == low:
            return k
    raise TargetError(f"unknown target {name!r}; use one of {', '.join(TARGETS)} (or {', '.join(ALIASES)})")


@dataclass(frozen=True)
class Entry:
    """One learned rule as written: ``rule_id``, ``supersede_key``, ``text`` (without the
    evidence), ``evidence``."""

    rule_id: str
    supersede_key: str
    text: str
    evidence: int

    def render(self) -> str:
        return f"- {self.text} _(evidence: {self.evidence})_ <!-- headroom:rule {self.rule_id} {self.supersede_key} -->"


@dataclass(frozen=True)
class Section:
    """A file split around its managed section: ``before`` and ``after`` are the user's text;
    ``entries`` the learned rules; ``own`` the lines the user wrote inside the section (kept as
    they are); ``present`` whether the markers were found."""

    before: str
    entries: tuple[Entry, ...]
    own: tuple[str, ...]
    after: str
    present: bool


def parse(text: str) -> Section:
    """Split ``text`` at the first well-formed ``START``...``END`` pair (``END`` after
    ``START``, no other ``START`` between them); a file without one has no section (all of it is
    the user's)."""
    m = _SECTION.search(text)
    if m is None:
        return Section(text, (), (), "", False)
    a, b = m.start(), m.end() - len(END)
    inner = text[a + len(START) : b]
    entries: list[Entry] = []
    own: list[str] = []
    for line in inner.splitlines():
        m = _ITEM.match(line)
        if m:
            entries.append(Entry(m["id"], m["sk"], m["text"], int(m["n"])))
        elif line.strip() and line.strip() not in (HEADING, INTRO):
            own.append(line.rstrip())
    return Section(text[:a], tuple(entries), tuple(own), text[b + len(END) :], True)


def entry_for(rule: Rule) -> Entry:
    """The written form of a rule."""
    return Entry(rule.id, rule.supersede_key, " ".join(rule.text.split()), rule.evidence)


def merge_entries(old: Sequence[Entry], new: Iterable[Entry]) -> list[Entry]:
    """Old and new entries merged (module docstring), ranked by evidence then text."""
    merged: dict[str, Entry] = {e.rule_id: e for e in old}
    for e in new:
        prev = merged.get(e.rule_id)
        if prev is not None:
            merged[e.rule_id] = Entry(e.rule_id, e.supersede_key, e.text, max(prev.evidence, e.evidence))
            continue
        for rid, o in list(merged.items()):
            if e.supersede_key and o.supersede_key == e.supersede_key:
                del merged[rid]  # the same failure, answered differently now: the new rule supersedes
        merged[e.rule_id] = e
    return sorted(merged.values(), key=lambda e: (-e.evidence, e.text))


def render(before: str, entries: Sequence[Entry], own: Sequence[str], after: str) -> str:
    """The whole file with the managed section in place (appended, after a blank line, when
    the file had none)."""
    body = [START, HEADING, "", INTRO, ""]
    body += [e.render() for e in entries]
    if own:
        body += ["", *own]
    body.append(END)
    section = "\n".join(body)
    if before and not before.endswith("\n\n") and not after:
        before = before.rstrip("\n") + "\n\n"
    tail = after if after else "\n"
    return f"{before}{section}{tail}"


def merge_rules(text: str, rules: Iterable[Rule]) -> str:
    """``text`` (a file's content, ``""`` for a new file) with ``rules`` merged into its managed
    section. Returns ``text`` itself when nothing changes."""
    sec = parse(text)
    entries = merge_entries(sec.entries, (entry_for(r) for r in rules))
    if sec.present and list(sec.entries) == entries:
        return text
    return render(sec.before, entries, sec.own, sec.after)


def diff(path: Path, old: str, new: str) -> str:
    """A unified diff of one file (empty when unchanged)."""
    return "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{path.name}", f"b/{path.name}"))


@dataclass(frozen=True)
class Planned:
    """One target file: its ``path``, current ``old`` text (``""`` if absent), ``new`` text."""

    path: Path
    old: str
    new: str

    @property
    def changed(self) -> bool:
        return self.old != self.new


def plan(project: Path, targets: Sequence[str], rules: Sequence[Rule]) -> list[Planned]:
    """What writing ``rules`` into each target file of ``project`` would change. Raises
    :class:`TargetError` for an unknown target and :class:`OSError` for an unreadable file."""
    out = []
    for t in dict.fromkeys(target_file(t) for t in targets):
        p = project / t
        old = p.read_text(encoding="utf-8") if p.exists() else ""
        out.append(Planned(p, old, merge_rules(old, rules) if rules else old))
    return out


def write(planned: Planned) -> None:
    """Write one planned file atomically (a temporary sibling renamed over it)."""
    tmp = planned.path.with_name(f".{planned.path.name}.headroom-tmp")
    tmp.write_text(planned.new, encoding="utf-8")
    tmp.replace(planned.path)


def read_entries(path: Path) -> list[Entry]:
    """The learned rules written in one file (none when absent)."""
    return list(parse(path.read_text(encoding="utf-8")).entries) if path.exists() else []
