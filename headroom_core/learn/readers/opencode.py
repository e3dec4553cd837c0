"""opencode session storage: ``<data>/opencode/opencode.db`` (1.x: SQLite) or ``<data>/opencode/storage/``
(earlier releases: one JSON file per record); ``<data>`` is ``$XDG_DATA_HOME`` or ``~/.local/share``.

SQLite (checked on opencode 1.18.33): table ``session`` (``id``, ``directory`` = the working
directory, ``parent_id`` = the session that started this one as a sub-agent, ``title``,
``version``, ``time_created`` in ms), ``message`` (``id``, ``session_id``, ``time_created``,
``data`` = JSON ``{role, parentID, path: {cwd}, error?, ...}``) and ``part`` (``id``,
``message_id``, ``session_id``, ``time_created``, ``data`` = JSON). Ids grow with time, so
``(time_created, id)`` is the order. The JSON storage holds the same objects as files:
``storage/session/<project>/<session>.json`` (``id``, ``directory``, ``parentID``),
``storage/message/<session>/<message>.json`` and ``storage/part/<message>/<part>.json`` (with
``sessionID`` / ``messageID`` inside).

A part of ``type`` ``tool`` is a tool call: ``tool`` (``bash``, ``read``, ``edit`` ...),
``callID`` and ``state`` = ``{status, input, output, error, metadata}``; ``status`` is
``completed`` or ``error`` when it ended (``pending``/``running`` are not read). A failed call
of any tool has ``status`` ``error`` and its ``error`` text; a shell call that ran and exited
non-zero is ``completed`` with ``metadata.exit`` (its exit code) in 1.x; when nothing states the
outcome the output's text decides (:func:`~headroom_core.learn.outcome.read_outcome`). ``text``
parts of user messages are the user's words (``synthetic`` ones are opencode's own); a
``compaction`` part, or a message whose ``error.name`` says the context ran out, is a context
note; an aborted message (``error.name`` ``MessageAbortedError``) an interrupt. Other part
types (``step-start``, ``step-finish``, ``reasoning``, ``patch``, ``file``, later ones) carry
nothing to learn. Each session is one :class:`LogSession` with one thread; the database's other
tables (accounts, credentials) are never read.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from pathlib import Path
from typing import Any, Iterable

from headroom_core.learn.readers import LogError, LogSession, Note, Thread
from headroom_core.learn.steps import Step, make_step

SOURCE = "opencode"
SQLITE_MAGIC = b"SQLite format 3\x00"
DB_NAME = "opencode.db"
_ENDED = ("completed", "error")
_CONTEXT = re.compile(r"ContextOverflow|context (?:window|length)|prompt is too long", re.I)


def data_dir() -> Path:
    """``$XDG_DATA_HOME/opencode`` or ``~/.local/share/opencode``."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base).expanduser() / "opencode"


def find_logs(data: Path | None = None) -> list[Path]:
    """opencode's stores under ``data`` (default :func:`data_dir`): the database, and the JSON
    session files of the older storage. Each may hold sessions of any project (filter with
    ``project`` in :func:`read_all`)."""
    d = data or data_dir()
    out = [d / DB_NAME] if (d / DB_NAME).is_file() else []
    sess = d / "storage" / "session"
    if sess.is_dir():
        out += sorted(p for p in sess.rglob("*.json") if p.is_file())
    return out


def is_database(path: Path, head: bytes) -> bool:
    """Whether ``path`` is an opencode SQLite database: an SQLite file with the ``session``,
    ``message`` and ``part`` tables (checked by content, whatever the file is named)."""
    if not head.startswith(SQLITE_MAGIC):
        return False
    try:
        with _connect(path) as db:
            names = {r[0] for r in db.execute("select name from sqlite_master where type = 'table'")}
    except sqlite3.Error:
        return False
    return {"session", "message", "part"} <= names


def storage_root(path: Path) -> Path | None:
    """The ``storage`` folder of a JSON session file ``storage/session/<project>/<id>.json``
    (also ``storage/session/<id>.json``): the first ancestor that holds ``message`` and ``part``
    folders; None when there is none."""
    for up in list(path.parents)[1:4]:
        if (up / "message").is_dir() and (up / "part").is_dir():
            return up
    return None


def is_session_file(obj: Any, path: Path) -> bool:
    """Whether a JSON object read from ``path`` is an opencode session of the JSON storage: an
    object with a string ``id`` and a ``time`` object, next to whose storage root
    ``message/<id>/`` exists."""
    if not isinstance(obj, dict) or not isinstance(obj.get("id"), str) or not isinstance(obj.get("time"), dict):
        return False
    root = storage_root(path)
    return root is not None and (root / "message" / obj["id"]).is_dir()


def is_storage_part(path: Path) -> bool:
    """Whether ``path`` is a message or part file of an opencode JSON storage (read with its
    session, never on its own)."""
    parts = path.parts
    for i in range(len(parts) - 2, 0, -1):
        if parts[i] in ("message", "part"):
            root = Path(*parts[:i])
            if (root / "session").is_dir() and (root / ("part" if parts[i] == "message" else "message")).is_dir():
                return True
    return False


def _connect(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5)


def _json(text: Any) -> dict | None:
    if isinstance(text, dict):
        return text
    try:
        obj = json.loads(text) if isinstance(text, (str, bytes)) else None
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def _within(directory: str, project: str | None) -> bool:
    if project is None:
        return True
    p = project.rstrip("/")
    return bool(directory) and (directory == p or directory.startswith(p + "/"))


def _iso(ms: Any) -> str:
    from datetime import datetime, timezone

    if not isinstance(ms, (int, float)) or isinstance(ms, bool):
        return ""
    try:
        return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat().replace("+00:00", "Z")
    except (OverflowError, OSError, ValueError):
        return ""


def read_all(path: Path, project: str | None = None) -> list[LogSession]:
    """Every session of the opencode store ``path`` (a database or a JSON session file) whose
    directory is ``project`` or inside it (all when None), oldest first. Raises
    :class:`LogError` when the store cannot be read."""
    try:
        with path.open("rb") as fh:
            head = fh.read(16)
    except OSError as e:
        raise LogError(f"{path}: cannot read ({e})") from e
    if head.startswith(SQLITE_MAGIC):
        return _read_db(path, project)
    return _read_json_session(path, project)


def _read_db(path: Path, project: str | None) -> list[LogSession]:
    try:
        with _connect(path) as db:
            rows = db.execute(
                "select id, directory, parent_id, time_created from session order by time_created, id"
            ).fetchall()
            out = []
            for sid, directory, parent, created in rows:
                if not _within(str(directory or ""), project):
                    continue
                msgs = db.execute(
                    "select id, data from message where session_id = ? order by time_created, id", (sid,)
                ).fetchall()
                parts = db.execute(
                    "select message_id, data from part where session_id = ? order by time_created, id", (sid,)
                ).fetchall()
                out.append(
                    _session(path, str(sid), str(directory or ""), str(parent or ""), _iso(created), msgs, parts)
                )
    except sqlite3.Error as e:
        raise LogError(f"{path}: cannot read the opencode database ({e})") from e
    return out


def _read_json_session(path: Path, project: str | None) -> list[LogSession]:
    try:
        info = _json(path.read_text(encoding="utf-8", errors="replace"))
    except OSError as e:
        raise LogError(f"{path}: cannot read ({e})") from e
    root = storage_root(path)
    if info is None or root is None or not is_session_file(info, path):
        raise LogError(f"{path}: not an opencode session")
    sid = info["id"]
    directory = str(info.get("directory") or "")
    if not _within(directory, project):
        return []
    msgs: list[tuple[str, Any]] = []
    parts: list[tuple[str, Any]] = []
    for mp in sorted((root / "message" / sid).glob("*.json")):
        mid = mp.stem
        msgs.append((mid, _read_text(mp)))
        pdir = root / "part" / mid
        parts += [(mid, _read_text(pp)) for pp in sorted(pdir.glob("*.json"))] if pdir.is_dir() else []
    created = info["time"].get("created")
    return [_session(path, sid, directory, str(info.get("parentID") or ""), _iso(created), msgs, parts)]


def _read_text(p: Path) -> str:
    try:
        return p.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _session(
    path: Path,
    sid: str,
    directory: str,
    parent: str,
    started: str,
    msgs: Iterable[tuple[str, Any]],
    parts: Iterable[tuple[str, Any]],
) -> LogSession:
    records = skipped = unknown = 0
    role: dict[str, str] = {}
    notes: list[Note] = []
    steps: list[Step] = []
    counter = 0
    cwd = directory
    for mid, data in msgs:
        records += 1
        m = _json(data)
        if m is None:
            skipped += 1
            continue
        role[mid] = str(m.get("role") or "")
        path_info = m.get("path")
        if not cwd and isinstance(path_info, dict) and isinstance(path_info.get("cwd"), str):
            cwd = path_info["cwd"]
        err = m.get("error")
        name = str(err.get("name") or "") if isinstance(err, dict) else ""
        if name == "MessageAbortedError":
            counter += 1
            notes.append(Note("interrupt", "aborted", counter))
        elif isinstance(err, dict) and _CONTEXT.search(json.dumps(err)[:500]):
            counter += 1
            notes.append(Note("context", name or "context window", counter))
    for mid, data in parts:
        records += 1
        p = _json(data)
        if p is None or not isinstance(p.get("type"), str):
            skipped += 1
            continue
        kind = p["type"]
        if kind == "tool":
            state = p.get("state")
            if not isinstance(state, dict):
                skipped += 1
                continue
            if state.get("status") not in _ENDED:
                continue
            counter += 1
            steps.append(_step(p, state, counter))
        elif kind == "text" and role.get(mid) == "user" and not p.get("synthetic") and not p.get("ignored"):
            text = str(p.get("text") or "").strip()
            if text:
                counter += 1
                notes.append(Note("user", text[:2000], counter))
        elif kind == "compaction":
            counter += 1
            notes.append(Note("context", "conversation compacted", counter))
        elif kind not in (
            "text",
            "step-start",
            "step-finish",
            "reasoning",
            "patch",
            "file",
            "snapshot",
            "agent",
            "subtask",
            "retry",
        ):
            unknown += 1
    thread = Thread(f"{sid}", tuple(steps), tuple(notes))
    return LogSession(
        SOURCE,
        sid,
        f"{path}#{sid}" if path.suffix == ".db" or path.name == DB_NAME else str(path),
        cwd,
        started,
        (thread,) if steps or notes else (),
        records,
        skipped,
        unknown,
        (str(path),),
    )


def _step(part: dict, state: dict, index: int) -> Step:
    tool = str(part.get("tool") or "tool")
    raw_args, raw_md = state.get("input"), state.get("metadata")
    args: dict = raw_args if isinstance(raw_args, dict) else {}
    md: dict = raw_md if isinstance(raw_md, dict) else {}
    exit_code = md.get("exit", md.get("exitCode"))
    flag: bool | None = None
    if state.get("status") == "error":
        flag, text = True, str(state.get("error") or state.get("output") or "error")
    else:
        out = state.get("output")
        text = out if isinstance(out, str) else str(md.get("output") or "")
        if isinstance(exit_code, int) and not isinstance(exit_code, bool):
            flag = exit_code != 0
            if flag:
                text = f"Exit code {exit_code}\n{text}"
    t = state.get("time")
    when = _iso(t.get("start")) if isinstance(t, dict) else ""
    return make_step(
        tool, args, text, is_error=flag, index=index, call_id=str(part.get("callID") or part.get("id") or ""), when=when
    )
