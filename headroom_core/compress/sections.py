"""Split a mixed tool output into sections the router handles one by one.

Real outputs mix kinds: a Claude Code ``Read`` is numbered code followed by a
``<system-reminder>`` block; a ``BashOutput`` wraps output in ``<status>``/``<stdout>`` tags; an
edit result is a sentence then a ``cat -n`` snippet; a SWE-agent window is a ``[File: …]``
header, numbered lines, then advice. Boundaries used, in this order:

1. agent wrapper tags: whole ``<system-reminder>…</system-reminder>`` blocks and lines that are
   only an opening or closing tag of :data:`WRAPPER_TAGS` (kept verbatim);
2. runs of at least :data:`MIN_NUMBERED` line-number-prefixed lines
   (:mod:`~headroom_core.compress.numbered`) — numbered file text;
3. everything else, in runs between those.

Concatenating the sections' ``text`` gives the input back exactly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from headroom_core.compress.numbered import is_numbered_line, split_numbered

WRAPPER_TAGS = ("system-reminder", "status", "stdout", "stderr", "exit_code", "timestamp", "tool_use_error", "output")
MIN_NUMBERED = 3

_REMINDER_RX = re.compile(r"<system-reminder>.*?</system-reminder>[ \t]*\n?", re.S)
_TAG_LINE_RX = re.compile(r"^\s*(</?(%s)>\s*)+$" % "|".join(WRAPPER_TAGS))


@dataclass(frozen=True)
class Section:
    """One piece of the input: ``text`` (with its line ends); ``verbatim`` pieces are never
    compressed; ``numbered`` marks a run of line-number-prefixed lines."""

    text: str
    verbatim: bool = False
    numbered: bool = False


def _split_lines(chunk: str) -> list[Section]:
    """Sections of a chunk without reminder blocks: tag lines, numbered runs, the rest."""
    lines = chunk.splitlines(keepends=True)
    tags: list[str] = []  # "t" tag line, "n" numbered, "o" other
    for ln in lines:
        body = ln.rstrip("\r\n")
        tags.append("t" if _TAG_LINE_RX.match(body) else "n" if is_numbered_line(body) else "o")
    # numbered runs shorter than MIN_NUMBERED, or whose numbers do not rise by one, are "other"
    i = 0
    while i < len(lines):
        if tags[i] != "n":
            i += 1
            continue
        j = i
        while j < len(lines) and tags[j] == "n":
            j += 1
        if j - i < MIN_NUMBERED or split_numbered("".join(lines[i:j])) is None:
            for k in range(i, j):
                tags[k] = "o"
        i = j
    out: list[Section] = []
    i = 0
    while i < len(lines):
        j = i
        while j < len(lines) and tags[j] == tags[i]:
            j += 1
        out.append(Section("".join(lines[i:j]), verbatim=tags[i] == "t", numbered=tags[i] == "n"))
        i = j
    return out


def split_sections(text: str) -> list[Section]:
    """The sections of ``text`` (see module docstring); one section when nothing splits it."""
    out: list[Section] = []
    pos = 0
    for m in _REMINDER_RX.finditer(text):
        if m.start() > pos:
            out += _split_lines(text[pos : m.start()])
        out.append(Section(m.group(0), verbatim=True))
        pos = m.end()
    if pos < len(text):
        out += _split_lines(text[pos:])
    # blank-only pieces (a numbered run's trailing blank line) are kept as they are
    merged = [Section(s.text, verbatim=True) if not s.text.strip() else s for s in out]
    return merged or [Section(text)]
