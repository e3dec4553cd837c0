"""Line-number prefixes that file-reading tools put before each line, split off and put back.

Three styles seen in real agent traffic (../shared/corpus):

* Claude Code ``Read`` (1.0.x): ``"     1→code"`` (number right-aligned to 6, then U+2192);
  newer builds and ``cat -n`` use a tab instead of the arrow: ``"     1\\tcode"``.
* SWE-agent ``open``/``edit`` windows: ``"273:code"`` (no padding, a colon).

:func:`split_numbered` turns such text into the code without prefixes plus the prefixes, so a
compressor can parse the code and still print every kept line with its own, truthful number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A padded number then the arrow or a tab (Claude Code Read, cat -n), or a bare number and a colon
# (SWE-agent). The prefix is group 1, the line's own text group 2.
_STYLES = (
    re.compile(r"^( *\d+→)(.*)$", re.S),
    re.compile(r"^( *\d+\t)(.*)$", re.S),
    re.compile(r"^(\d+:)(.*)$", re.S),
)


@dataclass(frozen=True)
class Numbered:
    """A run of numbered lines: ``prefixes[i] + lines[i]`` is line ``i`` of the input (without
    its newline); ``numbers[i]`` the number it shows; ``style`` 0, 1 or 2 (see ``_STYLES``)."""

    prefixes: tuple[str, ...]
    lines: tuple[str, ...]
    numbers: tuple[int, ...]
    style: int

    @property
    def code(self) -> str:
        """The lines without prefixes, joined by ``\\n``."""
        return "\n".join(self.lines)

    def blank_prefix(self) -> str:
        """A prefix as wide as the others but with no number, for lines the input did not have."""
        sep = {0: "→", 1: "\t", 2: ":"}[self.style]
        width = max((len(p) for p in self.prefixes), default=1) - len(sep)
        return " " * width + sep


def split_numbered(text: str, min_lines: int = 3) -> Numbered | None:
    """The numbered view of ``text`` when every line (a final empty line aside) carries a prefix of
    one style and the numbers rise by one; None otherwise (including fewer than ``min_lines``
    lines)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines = lines[:-1]
    if len(lines) < min_lines:
        return None
    for style, rx in enumerate(_STYLES):
        m0 = rx.match(lines[0])
        if not m0:
            continue
        prefixes: list[str] = []
        body: list[str] = []
        numbers: list[int] = []
        for ln in lines:
            m = rx.match(ln)
            if not m:
                return None
            n = int(m.group(1).strip(" →\t:"))
            if numbers and n != numbers[-1] + 1:
                return None
            prefixes.append(m.group(1))
            body.append(m.group(2))
            numbers.append(n)
        return Numbered(tuple(prefixes), tuple(body), tuple(numbers), style)
    return None


def is_numbered_line(line: str) -> bool:
    """True when ``line`` starts with one of the numbered-line prefixes."""
    return any(rx.match(line) for rx in _STYLES)
