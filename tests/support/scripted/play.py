"""The dialect-neutral task the scripted model plays, one move per request.

The task, in order (each step one tool call, answered before the next):

====================  ======================================================================
step id               what the model asks for
====================  ======================================================================
``json``              shell ``python3 list_records.py``: a JSON array of 300 similar records
``log``               shell ``python3 build.py``: a build log of 300 lines with 2 errors
``read``              read ``notes.md`` (the agent's read tool; its shell's ``cat`` without one)
``fail``              shell ``python3 tool/stats.py``: fails, no such file (a wrong path)
``fix``               shell ``python3 tools/stats.py``: the same job, corrected path, works
``retrieve``          ``headroom_retrieve`` with a key from a marker seen in an earlier tool
                      output of the forwarded request (only when the proxy offered the tool and
                      such a marker is there; skipped otherwise)
``final``             a text answer holding :data:`FINAL_SENTINEL`
====================  ======================================================================

The next move is decided from the conversation only (:func:`next_move`), so an agent's extra
requests (title generation, quota probes, token counts, a retried request) get sensible answers
without derailing the task: a request whose first user message lacks :data:`TASK_TAG`, or that
offers no shell tool, is a side request (:class:`Side`).

Progress is read from the call ids the play hands out (:func:`call_id`): ``<prefix>hr<step>x<hex>``,
so a dialect adapter only has to list the calls of the conversation with their ids and outputs.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from headroom_core.compress.markers import find_marker_keys

#: In the first user message of the main conversation (the prompt the test gives the agent).
TASK_TAG = "HR-SCRIPTED-TASK"
#: The prompt to give the agent.
PROMPT = f"{TASK_TAG}: check this workspace's records, build and stats, then report."
#: In the final answer (the test asserts the agent printed it).
FINAL_SENTINEL = "HR-SCRIPTED-DONE-4f1c"
#: The steps, in order.
STEPS = ("json", "log", "read", "fail", "fix", "retrieve", "final")
RECORD_COUNT = 300
LOG_LINES = 300

_ID_RE = re.compile(r"hr(?P<step>[a-z]+)x[0-9a-f]{6,}")


# -- the workspace ----------------------------------------------------------------------------


def records_text() -> str:
    """What ``python3 list_records.py`` prints (stdout, exact): a JSON array of
    :data:`RECORD_COUNT` records, one per line, ~24 KB (under Claude Code's 30,000-character
    Bash output limit)."""
    rows = []
    for i in range(RECORD_COUNT):
        row = {
            "id": i + 1,
            "name": f"item-{i + 1:03d}",
            "status": "ok" if i % 7 else "stale",
            "region": ("eu-west", "us-east", "ap-south")[i % 3],
            "score": round((i * 37 % 100) / 100, 2),
        }
        rows.append("  " + json.dumps(row))
    return "[\n" + ",\n".join(rows) + "\n]\n"


def build_log_text() -> str:
    """What ``python3 build.py`` prints (stdout, exact): a CI build log of :data:`LOG_LINES`
    timestamped lines, two of them errors (``src/mod_117.c`` and ``src/mod_289.c``), ~23 KB. The
    build exits 0 (``--keep-going``): a failure here would pair with later calls in learning.
    (A bare ninja-style log, ``[n/N] CC …`` lines without timestamps or levels, is detected as
    plain text by this release's router and passes unchanged: a finding, not this test's topic.)"""
    out = []
    for i in range(LOG_LINES):
        ts = f"2026-12-02T10:{i // 60:02d}:{i % 60:02d}Z"
        if i in (117, 289):
            out.append(f"{ts} ERROR cc src/mod_{i:03d}.c:{i % 50 + 3}:9: error: 'count_{i}' undeclared")
        else:
            out.append(
                f"{ts} INFO  cc [{i + 1:3d}/{LOG_LINES}] src/mod_{i:03d}.c -> obj/mod_{i:03d}.o ({i % 9 + 1} ms)"
            )
    out.append(f"{ts} INFO  build finished: {LOG_LINES - 2} ok, 2 errors (--keep-going)")
    return "\n".join(out) + "\n"


NOTES_TEXT = "# Notes\n\nThe stats tool lives in tools/stats.py (not tool/).\nRecords come from list_records.py.\n"
STATS_TEXT = f"records: {RECORD_COUNT}, stale: {len(range(0, RECORD_COUNT, 7))}\n"

_FILES = {
    "list_records.py": "import sys\nsys.stdout.write(open('data/records.json').read())\n",
    "build.py": "import sys\nsys.stdout.write(open('data/build.log').read())\n",
    "tools/stats.py": f"import sys\nsys.stdout.write({STATS_TEXT!r})\n",
    "notes.md": NOTES_TEXT,
}


@dataclass(frozen=True)
class Task:
    """The task on one scratch workspace (made by :func:`make_workspace`)."""

    workspace: Path

    def path(self, rel: str) -> str:
        """Absolute path of workspace file ``rel`` (for read tools that want one)."""
        return str(self.workspace / rel)


def make_workspace(directory: Path) -> Task:
    """Write the task's files into ``directory`` (created if missing) and return the task.
    The files: ``list_records.py``, ``build.py``, ``tools/stats.py``, ``notes.md`` and their
    data under ``data/``; no ``tool/`` folder (the failing step's wrong path)."""
    directory.mkdir(parents=True, exist_ok=True)
    for rel, text in {**_FILES, "data/records.json": records_text(), "data/build.log": build_log_text()}.items():
        p = directory / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return Task(directory.resolve())


# -- what the adapter reads from a request ----------------------------------------------------


@dataclass(frozen=True)
class Call:
    """An assistant tool call seen in the request: its id, tool name and arguments."""

    call_id: str
    name: str
    arguments: dict[str, object]


@dataclass(frozen=True)
class Output:
    """A tool output seen in the request: the id of the call it answers, its text (text parts
    joined with newlines), and the error flag if the dialect has one."""

    call_id: str
    text: str
    is_error: bool | None = None


@dataclass(frozen=True)
class Conversation:
    """A request, dialect-neutral, as far as the play needs it.

    ``first_user_text``: the text of the first user message (all its text parts);
    ``tools``: names of the offered tools; ``calls``/``outputs``: in request order;
    ``ends_with_output``: whether the last message is (or ends with) tool outputs.
    """

    first_user_text: str
    tools: frozenset[str]
    calls: tuple[Call, ...] = ()
    outputs: tuple[Output, ...] = ()
    ends_with_output: bool = False


# -- the moves --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shell:
    """Run ``command`` in the workspace with the agent's shell tool."""

    step: str
    command: str


@dataclass(frozen=True)
class Read:
    """Read workspace file ``rel`` (the adapter gives an absolute path where the tool wants one,
    or falls back to ``Shell(f"cat {rel}")`` when the agent has no read tool)."""

    step: str
    rel: str


@dataclass(frozen=True)
class Retrieve:
    """Call ``headroom_retrieve`` with ``key``."""

    step: str
    key: str


@dataclass(frozen=True)
class Final:
    """The final answer text."""

    text: str


@dataclass(frozen=True)
class Side:
    """Not the task's conversation (a title, a probe): answer with ``text``."""

    text: str


Move = Shell | Read | Retrieve | Final | Side

_MOVES: dict[str, Shell | Read] = {
    "json": Shell("json", "python3 list_records.py"),
    "log": Shell("log", "python3 build.py"),
    "read": Read("read", "notes.md"),
    "fail": Shell("fail", "python3 tool/stats.py"),
    "fix": Shell("fix", "python3 tools/stats.py"),
}


def call_id(step: str, prefix: str) -> str:
    """A fresh call id for ``step`` in a dialect's style: ``prefix`` (``toolu_``, ``call_``, ...)
    then ``hr<step>x`` and 20 hex digits."""
    return f"{prefix}hr{step}x{secrets.token_hex(10)}"


def step_of(call_id_: str) -> str | None:
    """The step a call id from :func:`call_id` was made for, else None (not the play's)."""
    m = _ID_RE.search(call_id_)
    return m.group("step") if m and m.group("step") in STEPS else None


@dataclass(frozen=True)
class Progress:
    """What the conversation shows of the task: steps called, in order, and their outputs."""

    done: tuple[str, ...]
    outputs: dict[str, Output] = field(default_factory=dict)


def progress(conv: Conversation) -> Progress:
    """The play's steps called in ``conv`` (by call id) and the outputs that answer them."""
    done: list[str] = []
    ids: dict[str, str] = {}
    for c in conv.calls:
        s = step_of(c.call_id)
        if s and s not in done:
            done.append(s)
            ids[c.call_id] = s
    outs = {ids[o.call_id]: o for o in conv.outputs if o.call_id in ids}
    return Progress(tuple(done), outs)


def marker_key(conv: Conversation) -> str | None:
    """The first retrieval key named by a compression marker in the request's tool outputs."""
    for o in conv.outputs:
        keys = find_marker_keys(o.text)
        if keys:
            return keys[0]
    return None


def is_task(conv: Conversation, shell_tools: frozenset[str]) -> bool:
    """Whether ``conv`` is the task's conversation: its first user message holds
    :data:`TASK_TAG` and one of ``shell_tools`` (the dialect's names) is offered."""
    return TASK_TAG in conv.first_user_text and bool(conv.tools & shell_tools)


def next_move(conv: Conversation, shell_tools: frozenset[str], retrieve_tool: str = "headroom_retrieve") -> Move:
    """The scripted model's next move for ``conv``.

    ``shell_tools``: the names the dialect's agents give their shell tool (any offered one
    counts). A side request gets :class:`Side`. In the task, the first step not yet called
    comes next; ``retrieve`` only when ``retrieve_tool`` is offered and a marker key is in the
    request's tool outputs; then :class:`Final` (also for a repeated request after the end).
    """
    if not is_task(conv, shell_tools):
        return Side("Scripted task")
    prog = progress(conv)
    for step in STEPS:
        if step in prog.done:
            continue
        if step == "retrieve":
            key = marker_key(conv)
            if retrieve_tool in conv.tools and key:
                return Retrieve("retrieve", key)
            continue
        if step == "final":
            break
        return _MOVES[step]
    return Final(f"All checks done: 300 records, 2 build errors, stats fixed. {FINAL_SENTINEL}")
