"""Gemini CLI session logs: ``~/.gemini/tmp/<project>/chats/session-*.jsonl`` (``.json`` in
releases before the JSON-lines log; ``<project>``: a short name in newer releases, with the
project's path in that folder's ``.project_root``, the SHA-256 of the path in older ones).

Shapes (gemini-cli ``packages/core/src/services/chatRecordingService.ts``, seen in 0.61):

- JSON lines: a first record ``{"sessionId", "projectHash", "startTime", "lastUpdated", …}``,
  then message records ``{"id", "timestamp", "type", "content", …}`` (a message written again
  with the same ``id`` replaces the earlier one: a model turn is written before and after its
  tool calls ran) and ``{"$set": {…}}`` updates of the session (``messages`` among them, a whole
  list replacing what came before);
- one JSON object: the session with its ``messages`` list.

A message of ``type`` ``user`` holds the user's parts (``content``: a string or Gemini parts;
function responses are tool results, not words); ``gemini`` a model turn with ``toolCalls``
``[{"id", "name", "args", "result": [<functionResponse parts>], "status", "resultDisplay"}]``;
``info``, ``error``, ``warning`` the CLI's own lines. A call's outcome is read from its result
text (:mod:`~headroom_core.learn.outcome`); ``status`` ``error`` says it failed.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from headroom_core.learn.readers import LogError, LogSession, Note, Thread, read_jsonl
from headroom_core.learn.steps import make_step

SOURCE = "gemini-cli"
_TYPES = {"user", "gemini", "info", "error", "warning", "compression"}


def gemini_home() -> Path:
    """``$GEMINI_CLI_HOME/.gemini`` when set (Gemini CLI's own override), else ``~/.gemini``."""
    base = os.environ.get("GEMINI_CLI_HOME")
    return (Path(base).expanduser() if base else Path.home()) / ".gemini"


def looks_like(head: str) -> bool:
    """Whether a file's first bytes are a Gemini CLI session: a session object naming its
    ``sessionId`` and ``projectHash`` near the start."""
    start = head[:4000]
    return head.lstrip().startswith("{") and '"projectHash"' in start and '"sessionId"' in start


def _project_of(folder: Path) -> str:
    """The project path a ``tmp/<project>`` folder belongs to (its ``.project_root``), or ``""``."""
    try:
        return (folder / ".project_root").read_text(encoding="utf-8").strip()
    except OSError:
        return ""


def _within(path: str, project: str) -> bool:
    return bool(path) and (path == project or path.startswith(project.rstrip("/") + "/"))


def find_logs(project: str | Path | None = None, home: Path | None = None) -> list[Path]:
    """Session files under ``<home>/tmp/*/chats`` of ``project`` (or a folder inside it: the
    folder's ``.project_root``, or its name the SHA-256 of the project's path); all of them when
    ``project`` is None. Oldest first (by name: they start with their time)."""
    base = (home or gemini_home()) / "tmp"
    if not base.is_dir():
        return []
    want = str(project) if project is not None else None
    out: list[Path] = []
    for folder in sorted(p for p in base.iterdir() if p.is_dir()):
        if want is not None:
            root = _project_of(folder)
            if not (_within(root, want) or folder.name == hashlib.sha256(want.encode()).hexdigest()):
                continue
        chats = folder / "chats"
        if chats.is_dir():
            out += sorted(p for p in chats.glob("session-*.json*") if p.is_file())
    return sorted(out, key=lambda p: p.name)


def _records(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]], int, int, int]:
    """``(session, messages, records, malformed, unknown)``: the session's own members and its
    messages in order (the last write of each id), from either format."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise LogError(f"{path}: cannot read ({e})") from e
    try:
        whole = json.loads(text)
    except ValueError:
        whole = None
    if isinstance(whole, dict) and isinstance(whole.get("messages"), list):
        msgs = [m for m in whole["messages"] if isinstance(m, dict)]
        return whole, msgs, len(whole["messages"]), len(whole["messages"]) - len(msgs), 0
    recs, total, malformed = read_jsonl(path)
    session: dict[str, Any] = {}
    order: list[str] = []
    by_id: dict[str, dict[str, Any]] = {}
    unknown = 0

    def put(m: dict[str, Any]) -> None:
        key = str(m.get("id") or f"#{len(order)}")
        if key not in by_id:
            order.append(key)
        by_id[key] = m

    for r in recs:
        if "$set" in r and isinstance(r["$set"], dict):
            upd = r["$set"]
            if isinstance(upd.get("messages"), list):
                order.clear()
                by_id.clear()
                for m in upd["messages"]:
                    if isinstance(m, dict):
                        put(m)
            session.update({k: v for k, v in upd.items() if k != "messages"})
        elif "type" in r and "id" in r:
            if r.get("type") in _TYPES:
                put(r)
            else:
                unknown += 1
        elif "sessionId" in r:
            session.update(r)
        else:
            unknown += 1
    return session, [by_id[k] for k in order], total, malformed, unknown


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else [content]
    return "\n".join(
        p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str) and not p.get("thought")
    )


def _result_text(call: dict[str, Any]) -> str:
    """A call's result as the model saw it: the ``functionResponse`` texts, else what the CLI
    displayed."""
    out: list[str] = []
    for p in call.get("result") or []:
        fr = p.get("functionResponse") if isinstance(p, dict) else None
        resp = fr.get("response") if isinstance(fr, dict) else None
        if isinstance(resp, dict):
            out += [v for k, v in resp.items() if isinstance(v, str)]
        elif isinstance(p, dict) and isinstance(p.get("text"), str):
            out.append(p["text"])
    if out:
        return "\n".join(out)
    shown = call.get("resultDisplay")
    return shown if isinstance(shown, str) else json.dumps(shown) if shown is not None else ""


def read(path: Path) -> LogSession:
    """One Gemini CLI session file as a :class:`~headroom_core.learn.readers.LogSession` (one
    thread). Raises :class:`~headroom_core.learn.readers.LogError` when it cannot be read."""
    session, msgs, total, malformed, unknown = _records(path)
    steps = []
    notes = []
    i = 0
    for m in msgs:
        kind = m.get("type")
        when = str(m.get("timestamp") or "")
        if kind == "user":
            words = _text(m.get("content"))
            if words.strip():
                notes.append(Note("user", words, i))
                i += 1
        elif kind == "gemini":
            for c in m.get("toolCalls") or []:
                if not isinstance(c, dict) or not isinstance(c.get("name"), str):
                    malformed += 1
                    continue
                status = str(c.get("status") or "")
                args = c.get("args") if isinstance(c.get("args"), dict) else {}
                steps.append(make_step(c["name"], args, _result_text(c), is_error=True if status == "error" else None, index=i,
                                       call_id=str(c.get("id") or ""), when=str(c.get("timestamp") or when)))  # fmt: skip
                i += 1
    cwd = _project_of(path.parent.parent)
    return LogSession(SOURCE, str(session.get("sessionId") or path.stem), str(path), cwd, str(session.get("startTime") or ""),
                      (Thread("main", tuple(steps), tuple(notes)),), total, malformed, unknown, (str(path),))  # fmt: skip
