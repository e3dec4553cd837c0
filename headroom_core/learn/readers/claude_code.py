"""Claude Code session logs: ``<config>/projects/<project>/<session>.jsonl``.

``<config>`` is ``$CLAUDE_CONFIG_DIR`` or ``~/.claude``; ``<project>`` is the project's absolute
path with every character other than a letter or digit replaced by ``-`` (``/path/to/Demo`` ->
``-path-to-Demo``). Each line is a record: ``type`` (``user``/``assistant``), ``message`` (an
Anthropic message with ``tool_use`` / ``tool_result`` content blocks), ``uuid``, ``parentUuid``,
``isSidechain`` (a sub-agent's turn), ``isMeta``, ``cwd``, ``sessionId``, ``timestamp``.

Threads follow ``parentUuid`` chains: the main conversation and each sub-agent chain are kept
apart, so a sub-agent's failure is never paired with the main agent's next call. Only a
``user``/``assistant`` record whose ``message`` is a user or assistant message with content is
read as conversation; every other record that sits in the chain (2.x writes ``attachment``
records between a tool result and the next call; ``system``, ``progress``, and types of later
releases) is a transparent link: its ``uuid`` leads to its ``parentUuid`` (or, across a
compaction, its ``logicalParentUuid``), so a failed call and the call that fixed it stay in one
thread whatever the release puts between them. Claude Code 1.x writes sub-agents into the
session file (``isSidechain``); 2.x writes them to ``<session>/subagents/agent-<id>.jsonl``
(read with the session, one thread each) and mirrors their messages into ``progress`` records
(``data.type`` ``agent_progress``, ``data.agentId``, ``data.message`` = ``{type, message, uuid,
timestamp}``), which are read as the sub-agent's thread when its file is absent.

A tool result is a ``tool_result`` block (``content`` a string or text blocks, ``is_error``);
2.x also stores the tool's own result in the record's ``toolUseResult`` (an ``"Error: ..."``
string for a failed call, an object with ``stdout``/``stderr`` for a shell call), used when the
block has no ``is_error`` and to read the whole output behind a ``<persisted-output>`` preview
(an output too large for the context: saved to a file, the model sees its first 2 KB).

Records that carry nothing to learn (``summary``, ``system``, ``file-history-snapshot``,
``queue-operation``, ``last-prompt``, ``attachment``, ``api-request``, ``tools-used``,
``cost-state``, ... see ``_IGNORED_TYPES``) are read silently; a record of another type is
counted as unknown (and still linked); a line that is not a JSON object, a record without a
``type``, or a ``user``/``assistant`` record without a ``message`` object is malformed.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from headroom_core.learn.readers import LogSession, Note, Thread, read_jsonl
from headroom_core.learn.steps import Step, is_rejection, make_step

SOURCE = "claude-code"
_IGNORED_TYPES = {
    "summary",
    "system",
    "file-history-snapshot",
    "queue-operation",
    "progress",
    "last-prompt",
    "custom-title",
    "ai-title",
    "agent-name",
    "attachment",
    "mode",
    "permission-mode",
    "tag",
    "pr-link",
    "result",
    "api-request",
    "api-request-shape",
    "api-request-blob",
    "tools-used",
    "cost-state",
    "atis-latch",
}
_ROLES = ("user", "assistant")
_PREVIEW = re.compile(r"(?m)^Preview \([^)\n]*\):[ \t]*\n")
INTERRUPT_PREFIX = "[Request interrupted by user"
_CONTEXT = re.compile(r"ran out of context|Prompt is too long|context window|context_length_exceeded", re.I)
_WRAPPERS = (
    "<command-",
    "<local-command",
    "Caveat:",
    "<system-reminder>",
    "<bash-",
    "<user-prompt-submit-hook>",
    "<task-notification>",
)


def config_dir() -> Path:
    """``$CLAUDE_CONFIG_DIR`` or ``~/.claude``."""
    return Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude").expanduser()


def project_dir_name(project: str | Path) -> str:
    """Claude Code's folder name for a project path: non-alphanumerics become ``-``."""
    return re.sub(r"[^A-Za-z0-9]", "-", str(project))


def find_logs(project: str | Path, config: Path | None = None) -> list[Path]:
    """The session logs of ``project`` (an absolute path), oldest first by modification time
    (sub-agent files are read with their session, see :func:`read`)."""
    d = (config or config_dir()) / "projects" / project_dir_name(project)
    if not d.is_dir():
        return []
    return sorted(d.glob("*.jsonl"), key=lambda p: (p.stat().st_mtime, p.name))


def subagent_files(path: Path) -> list[Path]:
    """Claude Code 2.x sub-agent logs of the session ``path``: ``<dir>/<stem>/subagents/agent-*.jsonl``
    (also one level deeper, for workflow-spawned agents)."""
    d = path.with_suffix("") / "subagents"
    return sorted(d.rglob("agent-*.jsonl")) if d.is_dir() else []


def is_subagent_file(path: Path) -> bool:
    """Whether ``path`` is a sub-agent log whose session file exists (it is read with it)."""
    parts = path.parts
    if "subagents" not in parts:
        return False
    i = len(parts) - 1 - parts[::-1].index("subagents")
    session_dir = Path(*parts[:i])
    return session_dir.with_name(session_dir.name + ".jsonl").exists()


def is_message(r: dict) -> bool:
    """Whether a record is conversation: ``type`` user/assistant and a ``message`` whose ``role``
    is user/assistant (absent: the record's type) with non-empty ``content``."""
    msg = r.get("message")
    if r.get("type") not in _ROLES or not isinstance(msg, dict):
        return False
    if msg.get("role", r["type"]) not in _ROLES:
        return False
    content = msg.get("content")
    return bool(content) and isinstance(content, (str, list))


def result_text(block: dict, tool_result: Any) -> str:
    """The text of a ``tool_result`` block; behind a ``<persisted-output>`` preview, the whole
    output from the record's ``toolUseResult`` when it holds it (``stdout``/``stderr``, or an
    ``"Error: ..."`` string), else the preview itself."""
    text = _text_of(block.get("content"))
    if not text.lstrip().startswith("<persisted-output>"):
        return text
    if isinstance(tool_result, dict):
        parts = [tool_result.get(k) for k in ("stdout", "stderr")]
        full = "\n".join(p for p in parts if isinstance(p, str) and p)
        if full:
            return full
    if isinstance(tool_result, str) and tool_result.strip():
        return tool_result.removeprefix("Error: ")
    m = _PREVIEW.search(text, 0, 2000)
    body = text[m.end() :] if m else text
    return body.rstrip().removesuffix("</persisted-output>").rstrip()


def error_flag(block: dict, tool_result: Any) -> bool | None:
    """The call's failure flag: the block's ``is_error`` when it says; else True when the
    record's ``toolUseResult`` is an ``"Error..."`` string (2.x); else None (unknown)."""
    flag = block.get("is_error")
    if isinstance(flag, bool):
        return flag
    if isinstance(tool_result, str) and tool_result.lstrip().startswith(("Error", "<tool_use_error>")):
        return True
    return None


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


class _Reader:
    """Accumulates the threads of one session from its records (main file, sub-agent files,
    ``agent_progress`` mirrors)."""

    def __init__(self) -> None:
        self.parent: dict[str, str | None] = {}
        self.calls: dict[str, tuple[str, str, Any, int, str]] = {}  # tool_use id -> (thread, tool, input, index, when)
        self.steps: dict[str, list[Step]] = {}
        self.notes: dict[str, list[Note]] = {}
        self.order: list[str] = []
        self.counter = 0
        self.seen: set[str] = set()  # uuids of messages already read (a progress mirror repeats a message)
        self.session_id = self.cwd = self.started = ""
        self.records = self.skipped = self.unknown = 0

    def thread(self, key: str) -> str:
        if key not in self.steps:
            self.steps[key], self.notes[key] = [], []
            self.order.append(key)
        return key

    def link(self, r: dict) -> None:
        """Map a record's ``uuid`` to its parent (``parentUuid``, else ``logicalParentUuid``),
        whatever its type: records without conversation are links of the chain."""
        uid = r.get("uuid")
        if not isinstance(uid, str) or not uid or uid in self.parent:
            return
        parent = r.get("parentUuid")
        if not isinstance(parent, str) or not parent:
            parent = r.get("logicalParentUuid")
        self.parent[uid] = parent if isinstance(parent, str) and parent and parent != uid else None

    def root(self, uid: Any) -> str:
        seen = 0
        cur = uid if isinstance(uid, str) else ""
        while cur in self.parent and self.parent[cur] is not None and seen < 100000:
            cur = self.parent[cur]  # type: ignore[assignment]
            seen += 1
        return cur

    def read_file(self, path: Path, agent: str = "") -> list[tuple[str, dict]]:
        """Parse one file's records; returns ``(thread key, record)`` for message records in
        order, and the ``agent_progress`` mirrors as ``("progress:<agent>", message)``."""
        rows, records, skipped = read_jsonl(path)
        self.records += records
        self.skipped += skipped
        out: list[tuple[str, dict]] = []
        for r in rows:
            self.link(r)
            t = r.get("type")
            if not isinstance(t, str):
                self.skipped += 1
                continue
            if t == "progress":
                data = r.get("data")
                if isinstance(data, dict) and data.get("type") == "agent_progress":
                    msg = data.get("message")
                    aid = str(data.get("agentId") or r.get("parentToolUseID") or "")
                    if isinstance(msg, dict) and is_message(msg):
                        out.append((f"progress:{aid}", {**msg, "isSidechain": True, "agentId": aid}))
                continue
            if t not in _ROLES:
                if t not in _IGNORED_TYPES:
                    self.unknown += 1
                continue
            if not isinstance(r.get("message"), dict):
                self.skipped += 1
                continue
            if not is_message(r):
                continue  # no conversational content: a link only
            self.session_id = self.session_id or str(r.get("sessionId") or "")
            self.cwd = self.cwd or str(r.get("cwd") or "")
            self.started = self.started or str(r.get("timestamp") or "")
            out.append((f"agent:{agent}" if agent else "", r))
        return out

    def add(self, key: str, r: dict) -> None:
        """Read one message record into thread ``key`` (``""``: by its ``parentUuid`` root)."""
        uid = r.get("uuid")
        if isinstance(uid, str) and uid:
            if uid in self.seen:
                return
            self.seen.add(uid)
        thread = self.thread(key or self.root(uid))
        msg = r["message"]
        content = msg.get("content")
        when = str(r.get("timestamp") or "")
        if r["type"] == "assistant":
            for b in content if isinstance(content, list) else []:
                if (
                    isinstance(b, dict)
                    and b.get("type") == "tool_use"
                    and isinstance(b.get("id"), str)
                    and b["id"] not in self.calls
                ):
                    self.counter += 1
                    self.calls[b["id"]] = (thread, str(b.get("name") or ""), b.get("input"), self.counter, when)
            text = _text_of(content)
            if r.get("isApiErrorMessage") and _CONTEXT.search(text):
                self.counter += 1
                self.notes[thread].append(Note("context", text[:300], self.counter))
            return
        results = (
            [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
            if isinstance(content, list)
            else []
        )
        for b in results:
            call = self.calls.pop(str(b.get("tool_use_id", "")), None)
            if call is None:
                continue
            th, tool, args, idx, called = call
            tur = r.get("toolUseResult") if len(results) == 1 else None
            text = result_text(b, tur)
            if is_rejection(text):
                self.notes.setdefault(th, []).append(Note("interrupt", text[:300], idx))
                continue
            self.steps.setdefault(th, []).append(
                make_step(
                    tool,
                    args,
                    text,
                    is_error=error_flag(b, tur),
                    index=idx,
                    call_id=str(b.get("tool_use_id")),
                    when=called or when,
                )
            )
            if "Prompt is too long" in text[:300]:
                self.counter += 1
                self.notes[th].append(Note("context", text[:300], self.counter))
        if results or r.get("isMeta"):
            return
        text = _text_of(content).strip()
        if not text:
            return
        self.counter += 1
        if text.startswith(INTERRUPT_PREFIX):
            self.notes[thread].append(Note("interrupt", text[:300], self.counter))
        elif r.get("isCompactSummary") or text.startswith(
            "This session is being continued from a previous conversation"
        ):
            self.notes[thread].append(Note("context", text[:300], self.counter))
        elif not r.get("isSidechain") and not text.startswith(_WRAPPERS):
            self.notes[thread].append(Note("user", text[:2000], self.counter))


def read(path: Path) -> LogSession:
    """Read one Claude Code session log with its sub-agent files (see module docstring).
    Raises :class:`LogError` only when the file cannot be opened."""
    rd = _Reader()
    main = rd.read_file(path)
    subs = subagent_files(path)
    agents: dict[str, list[tuple[str, dict]]] = {}
    for sub in subs:
        aid = sub.stem[len("agent-") :] if sub.stem.startswith("agent-") else sub.stem
        agents[aid] = rd.read_file(sub, agent=aid)
    for key, r in main:
        if key.startswith("progress:"):
            aid = key[len("progress:") :]
            if aid not in agents:
                rd.add(f"agent:{aid}", r)
            continue
        rd.add(key, r)
    for aid, recs in agents.items():
        for key, r in recs:
            if not key.startswith("progress:"):
                rd.add(key, r)
    sid = rd.session_id or path.stem
    threads = tuple(
        Thread(
            f"{sid}:{t[:8] if not t.startswith('agent:') else t}",
            tuple(sorted(rd.steps[t], key=lambda s: s.index)),
            tuple(rd.notes[t]),
        )
        for t in rd.order
        if rd.steps[t] or rd.notes[t]
    )
    return LogSession(
        SOURCE,
        sid,
        str(path),
        rd.cwd,
        rd.started,
        threads,
        rd.records,
        rd.skipped,
        rd.unknown,
        (str(path), *map(str, subs)),
    )
