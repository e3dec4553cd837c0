"""Codex session logs: ``<home>/sessions/**/rollout-*.jsonl`` (``<home>``: ``$CODEX_HOME`` or
``~/.codex``).

Each line is ``{"timestamp", "type", "payload"}`` with ``type`` one of ``session_meta``
(``payload.id``, ``payload.cwd``), ``response_item`` (a Responses API item: ``message``,
``function_call`` / ``function_call_output``, ``custom_tool_call`` / ``custom_tool_call_output``,
``local_shell_call``, ``reasoning``), ``event_msg`` (``turn_aborted`` = the user interrupted;
``error`` / ``stream_error``), ``turn_context``, ``compacted`` and, in newer versions,
``world_state`` and ``inter_agent_*``. Older rollouts (up to September 2025) have no wrapper: the
first line is the session (``id``, ``timestamp``, ``instructions``), the rest are bare items and
``{"record_type": "state"}`` markers; both are read, whatever the file is named. Well-formed
records of other types are counted as unknown, never as malformed; a forked session that
replays its parent's calls is read once per call id.

A shell call's output is JSON ``{"output": ..., "metadata": {"exit_code": N}}`` in older versions
and text with an ``Exit code: N`` / ``Process exited with code N`` header in newer ones; the exit
code decides failure (:mod:`~headroom_core.learn.outcome`). The call's ``workdir`` is kept.
Codex 0.1xx's ``exec_command`` answers in an envelope (``Chunk ID``, ``Wall time``, ``Process
exited with code N``, ``Original token count``, ``Output:``); a command still running when its
call returned says ``Process running with session ID N`` instead, and a later ``write_stdin``
call with ``session_id`` N gets the rest, ending with the exit code: those outputs are the
command's own step (with the exit code of its last one), never steps of ``write_stdin``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from headroom_core.learn.readers import LogSession, Note, Thread, read_jsonl
from headroom_core.learn.steps import Step, exit_code_of, make_step

SOURCE = "codex"
_KNOWN = {
    "session_meta",
    "response_item",
    "event_msg",
    "turn_context",
    "compacted",
    "world_state",
    "inter_agent_communication",
    "inter_agent_communication_metadata",
}
_ITEM_TYPES = {
    "message",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "local_shell_call",
    "reasoning",
    "web_search_call",
    "tool_search_call",
    "tool_search_call_output",
    "image_generation_call",
    "compaction",
    "context_compaction",
}
_RUNNING = re.compile(r"(?im)^Process running with session ID (\S+)\s*$")
_CONTEXT = re.compile(r"context window|context_length_exceeded|ran out of room|exceeds the context", re.I)
_ENV_PREFIXES = (
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md",
    "<turn_aborted>",
    "<permissions instructions>",
    "<collaboration_mode>",
    "<multi_agent_mode>",
    "<apps_instructions>",
    "<user_shell_command>",
    "You are `/root`",
)


def codex_home() -> Path:
    """``$CODEX_HOME`` or ``~/.codex``."""
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex").expanduser()


def find_logs(project: str | Path | None = None, home: Path | None = None) -> list[Path]:
    """Rollout files under ``<home>/sessions`` whose session ran in ``project`` (or a folder
    inside it); all of them when ``project`` is None. Oldest first."""
    base = (home or codex_home()) / "sessions"
    if not base.is_dir():
        return []
    out = []
    for p in sorted(base.rglob("rollout-*.jsonl")):
        if project is None or _cwd_within(_cwd_of(p), str(project)):
            out.append(p)
    return out


def _cwd_within(cwd: str, project: str) -> bool:
    return bool(cwd) and (cwd == project or cwd.startswith(project.rstrip("/") + "/"))


def _cwd_of(path: Path) -> str:
    try:
        with path.open("r", encoding="utf-8", errors="replace") as fh:
            for _, line in zip(range(20), fh):
                m = re.search(r'"cwd"\s*:\s*"([^"]+)"|<cwd>([^<]+)</cwd>', line)
                if m:
                    return m.group(1) or m.group(2)
    except OSError:
        return ""
    return ""


def _args(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _output(raw: Any) -> str:
    if isinstance(raw, str):
        return raw
    if isinstance(raw, list):
        return "\n".join(p.get("text", "") for p in raw if isinstance(p, dict) and isinstance(p.get("text"), str))
    if isinstance(raw, dict):
        if isinstance(raw.get("content"), (str, list)):
            return _output(raw["content"])
        return json.dumps(raw)
    return ""


def _flag(raw: Any) -> bool | None:
    """A structured output's own verdict (``{"content": ..., "success": false}``), else None."""
    if isinstance(raw, dict) and isinstance(raw.get("success"), bool):
        return not raw["success"]
    return None


def read(path: Path) -> LogSession:
    """Read one Codex rollout (see module docstring). Raises :class:`LogError` only when the
    file cannot be opened."""
    rows, records, skipped = read_jsonl(path)
    unknown = 0
    counter = 0
    session_id = cwd = started = ""
    calls: dict[str, tuple[str, Any, int, str]] = {}
    done: set[str] = set()
    steps: list[Step] = []
    notes: list[Note] = []
    running: dict[
        str, tuple[str, Any, int, str, str, str]
    ] = {}  # exec session id -> the command's call and output so far
    for n, r in enumerate(rows):
        when = str(r.get("timestamp") or "")
        started = started or when
        if r.get("record_type") is not None and "type" not in r:
            continue  # the older format's state marker
        if "payload" in r:
            kind, p = r.get("type"), r.get("payload")
            if not isinstance(kind, str) or not isinstance(p, dict):
                skipped += 1
                continue
            if kind not in _KNOWN:
                unknown += 1
                continue
        elif isinstance(r.get("type"), str):
            kind, p = "response_item", r
        elif "id" in r and ("instructions" in r or "timestamp" in r):
            kind, p = "session_meta", r
        else:
            skipped += 1
            continue
        if kind == "session_meta":
            session_id = session_id or str(p.get("id") or "")
            cwd = cwd or str(p.get("cwd") or "")
            continue
        if kind == "event_msg":
            t = p.get("type")
            counter += 1
            if t == "turn_aborted":
                notes.append(Note("interrupt", str(p.get("reason") or "turn aborted"), counter))
            elif t in ("error", "stream_error") and _CONTEXT.search(str(p.get("message") or "")):
                notes.append(Note("context", str(p.get("message"))[:300], counter))
            continue
        if kind == "compacted":
            counter += 1
            notes.append(Note("context", "conversation compacted", counter))
            continue
        if kind != "response_item":
            continue
        t = p.get("type")
        if t in ("function_call", "custom_tool_call", "local_shell_call"):
            cid = str(p.get("call_id") or p.get("id") or "")
            if cid in done or cid in calls:
                continue  # a forked session replays its parent's calls
            counter += 1
            if t == "local_shell_call":
                name, args = "local_shell", (p.get("action") or {})
            else:
                name, args = (
                    str(p.get("name") or ""),
                    _args(p.get("arguments") if t == "function_call" else p.get("input")),
                )
            calls[cid] = (name, args, counter, when)
        elif t in ("function_call_output", "custom_tool_call_output"):
            cid = str(p.get("call_id") or "")
            call = calls.pop(cid, None)
            if call is None:
                continue
            done.add(cid)
            name, args, idx, called = call
            raw = p.get("output")
            text = _output(raw)
            sess_id = args.get("session_id") if name == "write_stdin" and isinstance(args, dict) else None
            if sess_id is not None and str(sess_id) in running:
                # more output of a command still running: the command's own step, ended when an exit code comes
                oname, oargs, oidx, ocid, ocalled, earlier = running.pop(str(sess_id))
                text = f"{text}\n{earlier}"
                if exit_code_of(text) is None and _RUNNING.search(text[:2000]):
                    running[str(sess_id)] = (oname, oargs, oidx, ocid, ocalled, text)
                else:
                    steps.append(make_step(oname, oargs, text, index=oidx, call_id=ocid, when=ocalled))
                continue
            m = _RUNNING.search(text[:2000]) if exit_code_of(text) is None else None
            if m:
                running[m.group(1)] = (name, args, idx, cid, called or when, text)
                continue
            steps.append(make_step(name, args, text, is_error=_flag(raw), index=idx, call_id=cid, when=called or when))
        elif t == "message" and p.get("role") == "user":
            text = _output(p.get("content")).strip()
            if text and not text.startswith(_ENV_PREFIXES):
                counter += 1
                notes.append(Note("user", text[:2000], counter))
            elif not cwd:
                m = re.search(r"<cwd>([^<]+)</cwd>", text)
                cwd = m.group(1).strip() if m else ""
        elif t not in _ITEM_TYPES:
            unknown += 1
    for oname, oargs, oidx, ocid, ocalled, text in running.values():
        steps.append(make_step(oname, oargs, text, index=oidx, call_id=ocid, when=ocalled))  # never ended in the log
    if not cwd:
        cwd = _cwd_of(path)
    sid = session_id or path.stem
    thread = Thread(sid, tuple(sorted(steps, key=lambda s: s.index)), tuple(notes))
    return LogSession(
        SOURCE,
        sid,
        str(path),
        cwd,
        started,
        (thread,) if steps or notes else (),
        records,
        skipped,
        unknown,
        (str(path),),
    )
