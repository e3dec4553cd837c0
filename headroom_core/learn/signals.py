"""Failure signals in a session-log thread, besides the failure -> correction pairs.

- ``tool_error``: a failed call (:attr:`Step.ok` False).
- ``timeout``: a server or self-bounded command stopped by its timeout (not a failure).
- ``repeat``: the same error three or more times in a row (a run of failed calls whose errors
  have the same :func:`~.steps.error_signature`; a success ends the run).
- ``interrupt``: the user stopped the agent.
- ``correction``: the user's own words correcting the agent ("no, ...", "that's wrong",
  "don't ...", "use X instead"), not the opening request.
- ``rollback``: ``git reset`` / ``git checkout -- …`` / ``git checkout .`` / ``git restore`` /
  ``git stash`` after the thread had changed files.
- ``context``: the context window ran out (or was compacted for it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from headroom_core.learn.readers import Thread
from headroom_core.learn.steps import error_signature

REPEAT_MIN = 3
_CORRECTION = re.compile(
    r"^\s*(?:no\b[,.!:;]?|nope\b|wrong\b|stop\b|that'?s (?:wrong|not right|incorrect|not what)|that is (?:wrong|not right|incorrect)"
    r"|(?:please\s+)?(?:don'?t|do not|never)\b|instead\b)"
    r"|\buse\s+`?[\w./-]+`?\s+instead\b",
    re.I,
)
_ROLLBACK = re.compile(r"\bgit\s+(?:reset\b|checkout\s+(?:--\s|\.\s*$|\.\s)|restore\b|stash\b(?!\s+(?:list|show)))")


@dataclass(frozen=True)
class Signal:
    """One failure signal: ``kind`` (see module docstring), a short ``text``, the thread
    ``index`` where it happened."""

    kind: str
    text: str
    index: int


def is_correction(text: str) -> bool:
    """Whether the user's message reads as a correction of the agent (module docstring)."""
    first = text.strip().split("\n", 1)[0]
    return bool(_CORRECTION.search(first))


def correction_sentence(text: str, limit: int = 200) -> str:
    """The correcting sentence(s) of a user message, one line, at most ``limit`` characters."""
    first = " ".join(text.strip().split("\n", 1)[0].split())
    parts = re.split(r"(?<=[.!?])\s+", first)
    out = ""
    for p in parts:
        if len(out) + len(p) + 1 > limit:
            break
        out = f"{out} {p}".strip()
    out = out or first[: limit - 1] + "…"
    return out


def find_signals(thread: Thread) -> list[Signal]:
    """Every signal of one thread, in thread order."""
    out: list[Signal] = []
    run: list = []

    def close_run() -> None:
        if len(run) >= REPEAT_MIN:
            out.append(Signal("repeat", f"{run[0].tool}: {run[0].error} ({len(run)} times in a row)", run[-1].index))
        run.clear()

    edited = False
    for s in thread.steps:
        if s.ok:
            close_run()
            if s.outcome == "timeout":
                out.append(Signal("timeout", f"{s.first_line}: {s.error}", s.index))
            if s.is_edit or (s.is_shell and re.search(r"(^|\s)(>|>>|sed -i|tee)\s", s.first_line)):
                edited = True
            if s.is_shell and edited and _ROLLBACK.search(s.first_line):
                out.append(Signal("rollback", s.first_line, s.index))
            continue
        out.append(Signal("tool_error", f"{s.tool}: {s.error}", s.index))
        if run and error_signature(run[-1].error) != error_signature(s.error):
            close_run()
        run.append(s)
    close_run()
    steps_before = [s.index for s in thread.steps]
    for n in thread.notes:
        if n.kind == "user":
            if any(i < n.index for i in steps_before) and is_correction(n.text):
                out.append(Signal("correction", correction_sentence(n.text), n.index))
        else:
            out.append(Signal(n.kind, n.text[:200], n.index))
    return sorted(out, key=lambda s: s.index)
