"""Claude Code session logs: ``<config>/projects/<project>/<session>.jsonl``.

``<config>`` is ``$CLAUDE_CONFIG_DIR`` or ``~/.claude``; ``<project>`` is the project's absolute
path with every character other than a letter or digit replaced by ``-`` (``/path/to/Demo`` ->
``-path-to-Demo``). Each line is a record: ``type`` (``user``/``assistant``), ``message`` (an
Anthropic message with ``tool_use`` / ``tool_result`` content blocks), ``uuid``, ``parentUuid``,
``isSidechain`` (a sub-agent's turn), ``isMeta``, ``cwd``, ``sessionId``, ``timestamp``.

Threads follow ``parentUuid`` chains: the main conversation and each sub-agent (``Task``) chain
are kept apart, so a sub-agent's failure is never paired with the main agent's next call.
Records of types ``summary``, ``system``, ``file-history-snapshot`` and ``queue-operation`` are
known and carry nothing to learn; any other type, or a line that is not a JSON object of the
expected shape, is skipped and counted.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from headroom_core.learn.readers import LogSession, Note, Thread, read_jsonl
from headroom_core.learn.steps import Step, is_rejection, make_step

SOURCE = "claude-code"
_IGNORED_TYPES = {"summary", "system", "file-history-snapshot", "queue-operation"}
INTERRUPT_PREFIX = "[Request interrupted by user"
_CONTEXT = re.compile(r"ran out of context|Prompt is too long|context window|context_length_exceeded", re.I)
_WRAPPERS = ("<command-", "<local-command", "Caveat:", "<system-reminder>", "<bash-")


def config_dir() -> Path:
    """``$CLAUDE_CONFIG_DIR`` or ``~/.claude``."""
    return Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude").expanduser()


def project_dir_name(project: str | Path) -> str:
    """Claude Code's folder name for a project path: non-alphanumerics become ``-``."""
    return re.sub(r"[^A-Za-z0-9]", "-", str(project))


def find_logs(project: str | Path, config: Path | None = None) -> list[Path]:
    """The session logs of ``project`` (an absolute path), oldest first by modification time."""
    d = (config or config_dir()) / "projects" / project_dir_name(project)
    if not d.is_dir():
        return []
    return sorted(d.glob("*.jsonl"), key=lambda p: (p.stat().st_mtime, p.name))


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


def read(path: Path) -> LogSession:
    """Read one Claude Code session log (see module docstring). Raises :class:`LogError` only
    when the file cannot be opened."""
    rows, records, skipped = read_jsonl(path)
    parent: dict[str, str | None] = {}
    recs: list[dict[str, Any]] = []
    session_id = cwd = started = ""
    for r in rows:
        if not isinstance(r.get("type"), str):
            skipped += 1
            continue
        if r["type"] in _IGNORED_TYPES:
            continue
        if r["type"] not in ("user", "assistant") or not isinstance(r.get("message"), dict):
            skipped += 1
            continue
        uid = r.get("uuid")
        if isinstance(uid, str):
            parent[uid] = r.get("parentUuid") if isinstance(r.get("parentUuid"), str) else None
        session_id = session_id or str(r.get("sessionId") or "")
        cwd = cwd or str(r.get("cwd") or "")
        started = started or str(r.get("timestamp") or "")
        recs.append(r)

    def root(uid: Any) -> str:
        seen = 0
        cur = uid if isinstance(uid, str) else ""
        while cur in parent and parent[cur] is not None and seen < 100000:
            cur = parent[cur]  # type: ignore[assignment]
            seen += 1
        return cur

    calls: dict[str, tuple[str, str, Any, int]] = {}  # tool_use id -> (thread, tool, input, call index)
    steps: dict[str, list[Step]] = {}
    notes: dict[str, list[Note]] = {}
    order: list[str] = []
    counter = 0
    for r in recs:
        thread = root(r.get("uuid"))
        if thread not in steps:
            steps[thread], notes[thread] = [], []
            order.append(thread)
        msg = r["message"]
        content = msg.get("content")
        if r["type"] == "assistant":
            for b in content if isinstance(content, list) else []:
                if isinstance(b, dict) and b.get("type") == "tool_use" and isinstance(b.get("id"), str):
                    counter += 1
                    calls[b["id"]] = (thread, str(b.get("name") or ""), b.get("input"), counter)
            text = _text_of(content)
            if r.get("isApiErrorMessage") and _CONTEXT.search(text):
                counter += 1
                notes[thread].append(Note("context", text[:300], counter))
            continue
        # user records: tool results, or the user's own words
        results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"] if isinstance(content, list) else []
        for b in results:
            call = calls.pop(str(b.get("tool_use_id", "")), None)
            if call is None:
                continue
            th, tool, args, idx = call
            text = _text_of(b.get("content"))
            if is_rejection(text):
                notes.setdefault(th, []).append(Note("interrupt", text[:300], idx))
                continue
            steps.setdefault(th, []).append(make_step(tool, args, text, is_error=bool(b.get("is_error")), index=idx, call_id=str(b.get("tool_use_id"))))
            if "Prompt is too long" in text[:300]:
                counter += 1
                notes[th].append(Note("context", text[:300], counter))
        if results or r.get("isMeta"):
            continue
        text = _text_of(content).strip()
        if not text:
            continue
        counter += 1
        if text.startswith(INTERRUPT_PREFIX):
            notes[thread].append(Note("interrupt", text[:300], counter))
        elif r.get("isCompactSummary") or text.startswith("This session is being continued from a previous conversation"):
            notes[thread].append(Note("context", text[:300], counter))
        elif not r.get("isSidechain") and not text.startswith(_WRAPPERS):
            notes[thread].append(Note("user", text[:2000], counter))
    threads = tuple(
        Thread(f"{session_id or path.stem}:{t[:8]}", tuple(sorted(steps[t], key=lambda s: s.index)), tuple(notes[t]))
        for t in order
        if steps[t] or notes[t]
    )
    return LogSession(SOURCE, session_id or path.stem, str(path), cwd, started, threads, records, skipped)
