"""Fold runs of repeated lines or blocks of lines: the first copy stays, a marker gives the count.

A tool output that prints one line 8,000 times, or the same 3-line block 500 times (a retry
loop, a progress message, a warning per item), says it once and the count. :func:`find_runs`
finds, left to right, the runs of consecutive identical blocks of 1 to :data:`MAX_PERIOD`
lines (exact repeats, whitespace included) that are worth folding: the copies after the first
hold more characters than :data:`MIN_SAVED_CHARS`, about one marker. At each line the longest
saving wins (ties: the shorter block), so ``a a a a`` folds as one line times four, not two
lines times two. :func:`fold_text` renders the first copy and then one marker line::

    [headroom omitted 7999 more copies of the line above (8000 in a row); headroom_retrieve key=…]
    [headroom omitted 49 more copies of the 3 lines above (50 in a row); headroom_retrieve key=…]

Nothing else changes, so folding is lossless in content (the count says exactly what the copies
were) and the original is retrievable by the key. Without a key (:func:`fold_note`) the line
reads ``[… 7999 more copies of the line above, 8000 in a row]``: the compressed log uses that
form under its one marker, and it suits a request whose model cannot call
``headroom_retrieve`` (nothing is lost, nothing needs retrieving). Deterministic: same text,
same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from headroom_core.compress.markers import make_marker

MAX_PERIOD = 64
# Candidate block lengths tried at one line: the distances to the next few lines equal to it.
MAX_CANDIDATES = 8
# A fold saves at least this many characters (a marker is about 100).
MIN_SAVED_CHARS = 120


@dataclass(frozen=True)
class Run:
    """``copies`` consecutive copies of the block of ``period`` lines starting at line ``start``
    (0-based); ``end`` is one past its last line."""

    start: int
    period: int
    copies: int

    @property
    def end(self) -> int:
        return self.start + self.period * self.copies


def find_runs(lines: Sequence[str], *, max_period: int = MAX_PERIOD, min_saved: int = MIN_SAVED_CHARS) -> list[Run]:
    """The runs of repeated blocks in ``lines`` worth folding, in order, not overlapping."""
    n = len(lines)
    ids_of: dict[str, int] = {}
    ids = [ids_of.setdefault(ln, len(ids_of)) for ln in lines]
    if len(ids_of) == n:
        return []
    sizes = [len(ln) + 1 for ln in lines]
    nxt = [n] * n  # next line equal to this one
    last: dict[int, int] = {}
    for i in range(n - 1, -1, -1):
        nxt[i] = last.get(ids[i], n)
        last[ids[i]] = i
    runs: list[Run] = []
    i = 0
    while i < n:
        best: tuple[int, int, int] | None = None  # (saved, period, copies)
        j = nxt[i]
        tried = 0
        while j < n and j - i <= max_period and tried < MAX_CANDIDATES:
            k = j - i
            tried += 1
            block = ids[i:j]
            copies = 1
            while ids[i + copies * k : i + (copies + 1) * k] == block:
                copies += 1
            if copies > 1:
                saved = (copies - 1) * sum(sizes[i:j])
                if best is None or saved > best[0]:
                    best = (saved, k, copies)
            j = nxt[j]
        if best is not None and best[0] >= min_saved:
            run = Run(i, best[1], best[2])
            runs.append(run)
            i = run.end
        else:
            i += 1
    return runs


def _what(run: Run) -> str:
    return "the line above" if run.period == 1 else f"the {run.period} lines above"


def fold_note(run: Run) -> str:
    """The key-less line that stands for the copies of ``run`` after the first:
    ``[… 49 more copies of the 3 lines above, 50 in a row]`` (it says all the copies held)."""
    return f"[… {run.copies - 1} more copies of {_what(run)}, {run.copies} in a row]"


def fold_marker(run: Run, key: str | None) -> str:
    """The marker line that stands for the copies of ``run`` after the first; with no ``key``
    (nothing stored: a request whose model cannot call ``headroom_retrieve``) the
    :func:`fold_note`, which loses nothing either."""
    if key is None:
        return fold_note(run)
    return make_marker(f"{run.copies - 1} more copies of {_what(run)} ({run.copies} in a row)", key)


def fold_lines(lines: Sequence[str], runs: Sequence[Run], key: str | None) -> list[str]:
    """``lines`` with every run of ``runs`` folded to its first copy and a marker under ``key``
    (a :func:`fold_note` when ``key`` is None)."""
    out: list[str] = []
    i = 0
    for r in runs:
        out.extend(lines[i : r.start + r.period])
        out.append(fold_marker(r, key))
        i = r.end
    out.extend(lines[i:])
    return out


@dataclass(frozen=True)
class Folded:
    """The folded ``text``, the ``runs`` folded, and the number of ``lines_folded`` away."""

    text: str
    runs: tuple[Run, ...]
    lines_folded: int


def fold_text(text: str, key: str | None) -> Folded | None:
    """``text`` with its runs of repeated lines folded (markers under ``key``; key-less notes
    when ``key`` is None, a lossless rewrite), or None when nothing is worth folding. Line ends are kept (``\\r\\n`` lines stay ``\\r\\n``: the ``\\r``
    is part of each line and the marker gets one too when every line has it)."""
    if "\n" not in text:
        return None
    lines = text.split("\n")
    runs = find_runs(lines)
    if not runs:
        return None
    crlf = all(ln.endswith("\r") for ln in lines[:-1])
    out = fold_lines(lines, runs, key)
    if crlf:
        folded_marks = {fold_marker(r, key) for r in runs}
        out = [ln + "\r" if ln in folded_marks else ln for ln in out]
    return Folded("\n".join(out), tuple(runs), sum(r.period * (r.copies - 1) for r in runs))
