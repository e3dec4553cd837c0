"""Session-log readers: Claude Code, Codex, Gemini CLI, SWE-agent, opencode and Aider, each turning one log
file into a :class:`LogSession` (threads of :class:`~headroom_core.learn.steps.Step` plus
:class:`Note`); an opencode database holds many sessions (:func:`read_logs`).

The format is told by content, never by the file name (:func:`detect`). Readers never raise on
content: a line that is not a JSON object, or a record of a known type with the wrong shape, is
*malformed* (``LogSession.skipped``); a well-formed record of a type the reader does not know is
counted apart (``LogSession.unknown``), never as malformed. A file that cannot be read at all,
or is no agent's session log, raises :class:`LogError` naming it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from headroom_core.errors import UsageError
from headroom_core.learn.steps import Step


class LogError(ValueError, UsageError):
    """A log file could not be read at all (missing, unreadable, not a known agent's log)."""


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
    """One line of work: the main conversation, one sub-agent (Claude Code sidechain or
    ``agent_progress``), or one attempt (SWE-agent retry loop)."""

    key: str
    steps: tuple[Step, ...]
    notes: tuple[Note, ...] = ()


@dataclass(frozen=True)
class LogSession:
    """One session log.

    ``source``: ``"claude-code"``, ``"codex"`` or ``"swe-agent"``; ``cwd`` the working directory it
    states (``""`` if none); ``started`` its first timestamp (ISO 8601, ``""`` if none);
    ``records`` the records read; ``skipped`` malformed records left out; ``unknown``
    well-formed records of types the reader does not know (left out, not malformed); ``parts``
    the files read (a Claude Code session with its sub-agent files).
    """

    source: str
    session_id: str
    path: str
    cwd: str
    started: str
    threads: tuple[Thread, ...]
    records: int = 0
    skipped: int = 0
    unknown: int = 0
    parts: tuple[str, ...] = ()


def _head_records(text: str, n: int = 40) -> list[dict]:
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if isinstance(r, dict):
            out.append(r)
        if len(out) >= n:
            break
    return out


_CODEX_ITEMS = {
    "message",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "local_shell_call",
    "reasoning",
    "web_search_call",
}
_CODEX_TOP = {"session_meta", "response_item", "event_msg", "turn_context", "compacted", "world_state"}
_CLAUDE_TYPES = {
    "user",
    "assistant",
    "summary",
    "system",
    "progress",
    "file-history-snapshot",
    "queue-operation",
    "last-prompt",
    "custom-title",
    "ai-title",
    "agent-name",
    "attachment",
}


def detect(path: Path, head: str) -> str:
    """``"swe-agent"``, ``"codex"``, ``"claude-code"``, ``"gemini-cli"``, ``"opencode"``, ``"aider"`` or ``""``
    (unknown) for a file whose first bytes are ``head``: an SQLite file with opencode's tables,
    or a JSON object that is a session of opencode's JSON storage, is opencode; a JSON object
    with a ``trajectory`` (or ``attempts``) is SWE-agent; JSON lines are Codex when they carry
    ``payload`` envelopes, a first record with ``instructions``, ``{"record_type": "state"}`` or
    bare Responses API items, and Claude Code when they carry ``message`` records with
    ``uuid``/``sessionId`` or Claude Code's own record types; Markdown with Aider's session
    headers and ``#### `` user lines is Aider; a session object naming its ``sessionId`` and
    ``projectHash`` (JSON lines or one object) is Gemini CLI."""
    from . import aider, gemini_cli, opencode

    if head.startswith(opencode.SQLITE_MAGIC.decode("latin-1")):
        return "opencode" if opencode.is_database(path, opencode.SQLITE_MAGIC) else ""
    if aider.looks_like_history(head):
        return "aider"
    if gemini_cli.looks_like(head):
        return "gemini-cli"
    s = head.lstrip()
    if s.startswith("{") and not _head_records(head, 2)[1:] and '"trajectory"' not in head and '"attempts"' not in head:
        try:
            obj = (
                json.loads(path.read_text(encoding="utf-8", errors="replace"))
                if path.stat().st_size < 1 << 20
                else None
            )
        except (OSError, ValueError):
            obj = None
        if opencode.is_session_file(obj, path):
            return "opencode"
    if s.startswith("{") and ('"trajectory"' in head or '"attempts"' in head) and not _head_records(head, 2)[1:]:
        return "swe-agent"
    recs = _head_records(head)
    codex = claude = 0
    for i, r in enumerate(recs):
        t = r.get("type")
        if "payload" in r and t in _CODEX_TOP:
            codex += 2
        elif r.get("record_type") == "state" or (i == 0 and "instructions" in r and "id" in r and "type" not in r):
            codex += 2
        elif t in _CODEX_ITEMS and "message" not in r and "uuid" not in r:
            codex += 1
        elif t in _CLAUDE_TYPES and (
            "uuid" in r or "sessionId" in r or "message" in r or "leafUuid" in r or "snapshot" in r
        ):
            claude += 1
    if codex > claude:
        return "codex"
    if claude:
        return "claude-code"
    if path.suffix == ".traj":
        return "swe-agent"
    return ""


NOT_A_LOG = "not a Claude Code, Codex, Gemini CLI, SWE-agent, opencode or Aider session log"


def read_logs(path: Path, project: str | None = None) -> list[LogSession]:
    """Every session in one log file, choosing the reader by content (:func:`detect`): one for
    a session log, every session (run in ``project`` or a folder inside it, when given) of an
    opencode store, every session of an Aider history. Raises :class:`LogError` when the file
    cannot be read or is no known agent's log."""
    from . import aider, opencode

    kind, head = _kind(path)
    if kind == "opencode":
        return opencode.read_all(path, project)
    if kind == "aider":
        return aider.read_all(path, project)
    return [_read_one(path, kind)]


def _kind(path: Path) -> tuple[str, str]:
    try:
        with path.open("r", encoding="latin-1" if _is_binary(path) else "utf-8", errors="replace") as fh:
            head = fh.read(65536)
    except OSError as e:
        raise LogError(f"{path}: cannot read ({e})") from e
    return detect(path, head), head


def _is_binary(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def read_log(path: Path) -> LogSession:
    """Read the one session of a log file, choosing the reader by content (:func:`detect`);
    of a store holding several (opencode, an Aider history), all of them in one
    :class:`LogSession` whose threads are theirs. Raises :class:`LogError` when the file cannot
    be read or is no known agent's log."""
    kind, _ = _kind(path)
    if kind in ("opencode", "aider"):
        many = read_logs(path)
        if len(many) == 1:
            return many[0]
        if not many:
            raise LogError(f"{path}: holds no session")
        first = many[0]
        return LogSession(
            first.source,
            path.stem,
            str(path),
            first.cwd,
            first.started,
            tuple(t for s in many for t in s.threads),
            sum(s.records for s in many),
            sum(s.skipped for s in many),
            sum(s.unknown for s in many),
            (str(path),),
        )
    return _read_one(path, kind)


def _read_one(path: Path, kind: str) -> LogSession:
    from headroom_core.learn.readers import claude_code, codex, gemini_cli, swe_agent

    if kind == "gemini-cli":
        return gemini_cli.read(path)
    if kind == "swe-agent":
        return swe_agent.read(path)
    if kind == "codex":
        return codex.read(path)
    if kind == "claude-code":
        return claude_code.read(path)
    raise LogError(f"{path}: {NOT_A_LOG}")


def read_jsonl(path: Path) -> tuple[list[dict], int, int]:
    """The JSON-object records of a JSONL log, as ``(records, lines, malformed)``: ``lines``
    counts non-blank lines, ``malformed`` those that are not a JSON object (skipped).

    Raises :class:`LogError` naming ``path`` when it cannot be read.
    """
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
