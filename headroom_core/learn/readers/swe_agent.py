"""SWE-agent trajectories (``*.traj``): JSON with ``trajectory`` (a list of ``{action,
observation, response, thought, state}``), ``history`` and ``info`` (``exit_status``, ...).

Every action is a command line for SWE-agent's shell (its own commands such as ``open``,
``edit N:M`` ... ``end_of_edit``, ``find_file``, ``submit``, and plain shell commands), so each
becomes a shell step; its observation decides success (a rejected edit says "Your proposed edit
has introduced new syntax error(s)", a crash prints a traceback). ``state.open_file`` names the
file an ``edit`` acts on. ``info.exit_status`` ``exit_context`` means the context ran out.

Default location: ``<project>/trajectories/**/*.traj`` (where SWE-agent writes them when run from
the project); any file or folder can be given to ``headroom learn --from``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from headroom_core.learn.readers import LogError, LogSession, Note, Thread
from headroom_core.learn.steps import Step, make_step

SOURCE = "swe-agent"
TOOL = "swe-agent"


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


def read(path: Path) -> LogSession:
    """Read one trajectory. Raises :class:`LogError` when the file cannot be read or is not a
    JSON object with a ``trajectory`` list; bad steps inside are skipped and counted."""
    try:
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError) as e:
        raise LogError(f"{path}: not a readable SWE-agent trajectory ({e})") from e
    if not isinstance(data, dict) or not isinstance(data.get("trajectory"), list):
        raise LogError(f"{path}: not a SWE-agent trajectory (no 'trajectory' list)")
    steps: list[Step] = []
    notes: list[Note] = []
    skipped = 0
    cwd = ""
    for i, st in enumerate(data["trajectory"]):
        if not isinstance(st, dict) or not isinstance(st.get("action"), str) or not st["action"].strip():
            skipped += 1
            continue
        state = _state(st.get("state"))
        cwd = cwd or str(state.get("working_dir") or "")
        action = st["action"].strip()
        target = ""
        if action.startswith("edit ") and isinstance(state.get("open_file"), str) and state["open_file"] not in ("", "n/a"):
            target = state["open_file"]
        obs = st.get("observation")
        steps.append(make_step(TOOL, {"command": action}, obs if isinstance(obs, str) else "", index=i, target=target))
    info = data.get("info") if isinstance(data.get("info"), dict) else {}
    if str(info.get("exit_status", "")).startswith("exit_context"):
        notes.append(Note("context", f"exit_status {info['exit_status']}", len(data["trajectory"])))
    thread = Thread(path.stem, tuple(steps), tuple(notes))
    return LogSession(SOURCE, path.stem, str(path), cwd, "", (thread,), len(data["trajectory"]), skipped)
