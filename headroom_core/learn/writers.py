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

Rules found in the project's own sessions come first. Rules found elsewhere (logs of another
project read with ``headroom learn --from``) follow under a heading that says where they come
from (``### From sessions of another project (/path)``, :data:`FROM`); a rule later found in the
project's own sessions moves up to them.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from headroom_core.errors import UsageError
from headroom_core.learn.rules import Rule

START = "<!-- headroom:learned:start -->"
END = "<!-- headroom:learned:end -->"
HEADING = "## Learned from past failures"
INTRO = (
    "_Kept up to date by `headroom learn`: each rule comes from failures seen in this project's sessions unless a heading "
    "below says where it comes from; the count is its evidence. Text outside this section is never changed._"
)
#: Earlier wordings of :data:`INTRO` (recognised in existing files, never kept as the user's lines).
OLD_INTROS = (
    "_Kept up to date by `headroom learn`: each rule comes from failures seen in this project's sessions; the count is its evidence. Text outside this section is never changed._",
)
#: The heading of rules from elsewhere: ``FROM + origin`` (e.g. ``### From sessions of another project (/src/app)``).
FROM = "### From "
TARGETS = {
    "CLAUDE.local.md": "CLAUDE.local.md",
    "CLAUDE.md": "CLAUDE.md",
    "AGENTS.md": "AGENTS.md",
    "GEMINI.md": "GEMINI.md",
}
ALIASES = {"claude-local": "CLAUDE.local.md", "claude": "CLAUDE.md", "agents": "AGENTS.md", "gemini": "GEMINI.md"}
DEFAULT_TARGET = "CLAUDE.local.md"
_SECTION = re.compile(re.escape(START) + r"(?:(?!" + re.escape(START) + r").)*?" + re.escape(END), re.S)
_ITEM = re.compile(
    r"^- (?P<text>.*?) _\(evidence: (?P<n>\d+)\)_ <!-- headroom:rule (?P<id>[0-9a-f]{6,64}) (?P<sk>[0-9a-f]{0,64}) ?-->\s*$"
)


class TargetError(ValueError, UsageError):
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
    evidence), ``evidence``; ``origin`` where its failures were seen when not in the project's own
    sessions (the words after :data:`FROM` in its heading; ``""``: the project's sessions; None,
    only for a rule being merged: not known, e.g. a rule read back from the database)."""

    rule_id: str
    supersede_key: str
    text: str
    evidence: int
    origin: str | None = ""

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
    origin = ""
    for line in inner.splitlines():
        m = _ITEM.match(line)
        if m:
            entries.append(Entry(m["id"], m["sk"], m["text"], int(m["n"]), origin))
        elif line.startswith(FROM) and line[len(FROM) :].strip():
            origin = line[len(FROM) :].strip()
        elif line.strip() and line.strip() not in (HEADING, INTRO, *OLD_INTROS):
            own.append(line.rstrip())
    return Section(text[:a], tuple(entries), tuple(own), text[b + len(END) :], True)


def entry_for(rule: Rule, origin: str | None = "") -> Entry:
    """The written form of a rule; ``origin`` where it was found (see :class:`Entry`)."""
    return Entry(
        rule.id,
        rule.supersede_key,
        " ".join(rule.text.split()),
        rule.evidence,
        None if origin is None else " ".join(origin.split()),
    )


def merge_entries(old: Sequence[Entry], new: Iterable[Entry]) -> list[Entry]:
    """Old and new entries merged (module docstring), ranked by evidence then text. A rule seen
    in the project's own sessions once stays the project's; one of unknown origin keeps the origin
    written (the project's when new)."""
    merged: dict[str, Entry] = {e.rule_id: e for e in old}
    for e in new:
        prev = merged.get(e.rule_id)
        if prev is not None:
            origin = prev.origin if e.origin is None else "" if not prev.origin or not e.origin else e.origin
            merged[e.rule_id] = Entry(e.rule_id, e.supersede_key, e.text, max(prev.evidence, e.evidence), origin)
            continue
        if e.origin is None:
            e = Entry(e.rule_id, e.supersede_key, e.text, e.evidence, "")
        for rid, o in list(merged.items()):
            if e.supersede_key and o.supersede_key == e.supersede_key:
                del merged[rid]  # the same failure, answered differently now: the new rule supersedes
        merged[e.rule_id] = e
    return sorted(merged.values(), key=lambda e: (-e.evidence, e.text))


def render(before: str, entries: Sequence[Entry], own: Sequence[str], after: str) -> str:
    """The whole file with the managed section in place (appended, after a blank line, when
    the file had none). The project's own rules come first; rules from elsewhere follow under
    one :data:`FROM` heading per origin (origins sorted, each group in ``entries``' order)."""
    body = [START, HEADING, "", INTRO, ""]
    body += [e.render() for e in entries if not e.origin]
    for origin in sorted({e.origin for e in entries if e.origin}):
        body += ([""] if body[-1] else []) + [f"{FROM}{origin}", ""]
        body += [e.render() for e in entries if e.origin == origin]
    if own:
        body += ["", *own]
    body.append(END)
    section = "\n".join(body)
    if before and not before.endswith("\n\n") and not after:
        before = before.rstrip("\n") + "\n\n"
    tail = after if after else "\n"
    return f"{before}{section}{tail}"


def merge_rules(text: str, rules: Iterable[Rule], origins: Mapping[str, str] | None = None) -> str:
    """``text`` (a file's content, ``""`` for a new file) with ``rules`` merged into its managed
    section; ``origins`` maps a rule id to where it was found (``""``: the project's own sessions;
    see :class:`Entry`); a rule it does not name keeps the origin written (the project's when
    new). Returns ``text`` itself when nothing changes."""
    sec = parse(text)
    origins = origins or {}
    entries = merge_entries(sec.entries, (entry_for(r, origins.get(r.id)) for r in rules))
    if sec.present and list(sec.entries) == entries:
        return text
    return render(sec.before, entries, sec.own, sec.after)


def origin_of(cwds: Iterable[str], project: str) -> str:
    """Where a rule was found, from the working directories its session logs state (``cwds``;
    ``""`` for a log that states none), for project folder ``project``: ``""`` when one of them is
    the project (or inside it), else ``"sessions of another project (/a)"``, ``"sessions of
    other projects (/a, /b)"``, or ``"logs that name no project (headroom learn --from)"``."""
    root = project.rstrip("/") or "/"
    dirs = sorted({c.rstrip("/") or "/" for c in cwds if c})
    if any(d == root or d.startswith(root + "/") for d in dirs):
        return ""
    if not dirs:
        return "logs that name no project (headroom learn --from)"
    if len(dirs) == 1:
        return f"sessions of another project ({dirs[0]})"
    return f"sessions of other projects ({', '.join(dirs)})"


def origins(rules: Iterable[Rule], cwd_of: Mapping[str, str], project: str) -> dict[str, str]:
    """Rule id -> :func:`origin_of` its sources (log paths, looked up in ``cwd_of``: log path ->
    the working directory it states; ``""`` for ``project``'s own). Rules without sources or
    with one missing from ``cwd_of`` are left out (origin not known)."""
    return {
        r.id: origin_of((cwd_of[src] for src in r.sources), project)
        for r in rules
        if r.sources and all(src in cwd_of for src in r.sources)
    }


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


def plan(
    project: Path, targets: Sequence[str], rules: Sequence[Rule], origins: Mapping[str, str] | None = None
) -> list[Planned]:
    """What writing ``rules`` into each target file of ``project`` would change (``origins``: see
    :func:`merge_rules`). Raises :class:`TargetError` for an unknown target and :class:`OSError`
    for an unreadable file."""
    out = []
    for t in dict.fromkeys(target_file(t) for t in targets):
        p = project / t
        old = p.read_text(encoding="utf-8") if p.exists() else ""
        out.append(Planned(p, old, merge_rules(old, rules, origins) if rules else old))
    return out


def write(planned: Planned) -> None:
    """Write one planned file atomically (a temporary sibling renamed over it)."""
    tmp = planned.path.with_name(f".{planned.path.name}.headroom-tmp")
    tmp.write_text(planned.new, encoding="utf-8")
    tmp.replace(planned.path)


def read_entries(path: Path) -> list[Entry]:
    """The learned rules written in one file (none when absent)."""
    return list(parse(path.read_text(encoding="utf-8")).entries) if path.exists() else []
