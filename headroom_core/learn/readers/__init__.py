"""Session-log readers: Claude Code, Codex and SWE-agent, each turning one log file into a
:class:`LogSession` (threads of :class:`~headroom_core.learn.steps.Step` plus :class:`Note`).

Readers never raise on content: a malformed line or an unknown record is skipped and counted in
``LogSession.skipped``; a file that cannot be read at all raises :class:`LogError` naming it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from headroom_core.learn.steps import Step


class LogError(ValueError):
    """A log file could not be read at all (missing, unreadable, not the expected format)."""


@dataclass(frozen=True)
class Note:
    """Something other than a tool call in a thread.

    ``kind``: ``"user"`` (the user's own words), ``"interrupt"`` (the user stopped the agent),
    ``"context"`` (the context window ran out / the conversation was compacted for it).
    ``index`` shares the counter of the thread's steps, so notes and steps can be ordered.
    """

    kind: str
    text: str
    index: int


@dataclass(frozen=True)
class Thread:
    """One line of work: the main conversation or one sub-agent (Claude Code sidechain)."""

    key: str
    steps: tuple[Step, ...]
    notes: tuple[Note, ...] = ()


@dataclass(frozen=True)
class LogSession:
    """One session log.

    ``source``: ``"claude-code"``, ``"codex"`` or ``"swe-agent"``; ``cwd`` the working directory it
    states (``""`` if none); ``started`` its first timestamp (ISO 8601, ``""`` if none);
    ``records`` the records read; ``skipped`` malformed or unknown records left out.
    """

    source: str
    session_id: str
    path: str
    cwd: str
    started: str
    threads: tuple[Thread, ...]
    records: int = 0
    skipped: int = 0


def read_log(path: Path) -> LogSession:
    """Read any supported log, choosing the reader by name and content: ``*.traj`` is SWE-agent;
    a ``.jsonl`` whose records carry ``payload`` / ``session_meta`` is Codex; other ``.jsonl``
    files are Claude Code. Raises :class:`LogError` when the file cannot be read."""
    from headroom_core.learn.readers import claude_code, codex, swe_agent

    if path.suffix == ".traj":
        return swe_agent.read(path)
    try:
        with path.open("r", encoding="utf-8", errors="replace") as fh:
            head = fh.read(4096)
    except OSError as e:
        raise LogError(f"{path}: cannot read ({e})") from e
    if path.name.startswith("rollout-") or '"session_meta"' in head or '"payload"' in head[:600]:
        return codex.read(path)
    return claude_code.read(path)


def read_jsonl(path: Path) -> tuple[list[dict], int, int]:
    """The JSON-object records of a JSONL log, as ``(records, lines, malformed)``: ``lines``
    counts non-blank lines, ``malformed`` those that are not a JSON object (skipped).

    Raises :class:`LogError` naming ``path`` when it cannot be read.
    """
    import json

    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as e:
        raise LogError(f"{path}: cannot read ({e})") from e
    out: list[dict] = []
    total = malformed = 0
    for line in lines:
        if not line.strip():
            continue
        total += 1
        try:
            r = json.loads(line)
        except ValueError:
            malformed += 1
            continue
        if isinstance(r, dict):
            out.append(r)
        else:
            malformed += 1
    return out, total, malformed
