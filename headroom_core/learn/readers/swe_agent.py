"""SWE-agent trajectories (``*.traj``, any name): JSON with ``trajectory`` (a list of ``{action,
observation, response, thought, state}``; 1.x adds ``execution_time``, ``query``,
``extra_info``), ``history`` and ``info`` (``exit_status``, ...). The retry loop of 1.x writes
``attempts`` (one ``{trajectory, history, info}`` per attempt) plus a copy of the chosen one at
the top: each attempt is read as its own thread and the copy is not read again. EnIGMA (the CTF
variant) writes the 0.x shape.

Every action is a command line for SWE-agent's shell (its own commands such as ``open``,
``edit N:M`` ... ``end_of_edit``, ``edit 'search' 'replace'``, ``str_replace_editor``,
``find_file``, ``submit``, EnIGMA's ``connect_start``/``decompile``/``debug_*``, and plain shell
commands), so each becomes a shell step; its observation decides success
(:mod:`~headroom_core.learn.outcome`: a rejected edit, a traceback, ``EXECUTION TIMED OUT``, a
command cancelled for taking too long, a bash syntax error, "Wrong flag!"). ``state`` (a dict, or
a JSON string in 0.x) names the open file an ``edit`` acts on; ``str_replace_editor`` and
``open``/``create`` name it themselves. ``info.exit_status`` ``exit_context`` means the context
ran out.

Default location: ``<project>/trajectories/**/*.traj`` (where SWE-agent writes them when run from
the project); any file or folder can be given to ``headroom learn --from``.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from headroom_core.learn.readers import LogError, LogSession, Note, Thread
from headroom_core.learn.steps import Step, make_step

SOURCE = "swe-agent"
TOOL = "swe-agent"
_NAMES_FILE = {"open", "create", "str_replace_editor", "goto"}


def find_logs(project: str | Path) -> list[Path]:
    """``<project>/trajectories/**/*.traj``, oldest first."""
    d = Path(project) / "trajectories"
    return sorted(d.rglob("*.traj"), key=lambda p: (p.stat().st_mtime, str(p))) if d.is_dir() else []


def _state(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            v = json.loads(raw)
        except ValueError:
            return {}
        return v if isinstance(v, dict) else {}
    return {}


def _target(action: str, state: dict[str, Any]) -> str:
    """The file an action acts on: a path argument of ``str_replace_editor``/``open``/``create``,
    else the open file for ``edit``/``insert``."""
    head = action.split(None, 1)[0] if action.split() else ""
    if head in _NAMES_FILE:
        try:
            words = shlex.split(action.splitlines()[0])
        except ValueError:
            words = action.splitlines()[0].split()
        paths = [w for w in words[1:] if w.startswith("/") or "." in w.rsplit("/", 1)[-1]]
        if paths:
            return paths[0]
    if (
        head in ("edit", "insert", "append")
        and isinstance(state.get("open_file"), str)
        and state["open_file"] not in ("", "n/a")
    ):
        return state["open_file"]
    return ""


def _steps(items: list, key: str) -> tuple[list[Step], int, str]:
    steps: list[Step] = []
    skipped = 0
    cwd = ""
    for i, st in enumerate(items):
        if not isinstance(st, dict) or not isinstance(st.get("action"), str):
            skipped += 1
            continue
        if not st["action"].strip():
            continue  # a step where the model gave no command (e.g. a format error re-asked): nothing ran
        state = _state(st.get("state"))
        cwd = cwd or str(state.get("working_dir") or "")
        action = st["action"].strip()
        obs = st.get("observation")
        steps.append(
            make_step(
                TOOL,
                {"command": action},
                obs if isinstance(obs, str) else "",
                index=i,
                target=_target(action, state),
                agent=SOURCE,
            )
        )
    return steps, skipped, cwd


def read(path: Path) -> LogSession:
    """Read one trajectory. Raises :class:`LogError` when the file cannot be read or is not a
    JSON object with a ``trajectory`` (or ``attempts``) list; bad steps inside are skipped and
    counted."""
    try:
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError) as e:
        raise LogError(f"{path}: not a readable SWE-agent trajectory ({e})") from e
    if not isinstance(data, dict):
        raise LogError(f"{path}: not a SWE-agent trajectory (not a JSON object)")
    attempts = [a for a in data.get("attempts") or [] if isinstance(a, dict) and isinstance(a.get("trajectory"), list)]
    parts = [(f"{path.stem}:attempt{k}", a) for k, a in enumerate(attempts)] if attempts else [(path.stem, data)]
    if not attempts and not isinstance(data.get("trajectory"), list):
        raise LogError(f"{path}: not a SWE-agent trajectory (no 'trajectory' list)")
    threads: list[Thread] = []
    records = skipped = 0
    cwd = ""
    for key, part in parts:
        steps, bad, wd = _steps(part["trajectory"], key)
        records += len(part["trajectory"])
        skipped += bad
        cwd = cwd or wd
        notes: list[Note] = []
        info = got if isinstance(got := part.get("info"), dict) else {}
        if str(info.get("exit_status", "")).startswith("exit_context"):
            notes.append(Note("context", f"exit_status {info['exit_status']}", len(part["trajectory"])))
        threads.append(Thread(key, tuple(steps), tuple(notes)))
    return LogSession(SOURCE, path.stem, str(path), cwd, "", tuple(threads), records, skipped, 0, (str(path),))
