"""Aider chat histories: ``<project>/.aider.chat.history.md`` (``--chat-history-file``).

Markdown appended by Aider (read from aider 0.86's ``io.py``/``commands.py``/``base_coder.py``):
each run starts with ``# aider chat started at YYYY-MM-DD HH:MM:SS``; the user's input is
``#### text`` (one such line per input line; ``/run cmd``, ``!cmd``, ``/test cmd`` are
commands); the model's replies are plain Markdown; Aider's own messages, questions and answers
are ``> `` lines (``> Running cmd`` before a shell command the model proposed, ``> Add command
output to the chat? ... y``, ``> Added N lines of output to the chat.``, ``> Attempt to fix test
errors? ... y`` after a failed ``--test-cmd`` run, ``> Attempt to fix lint errors?``,
``> Applied edit to path``).

The output of a command is not written to the history; what is:

- ``/test cmd`` adds its output to the chat only when the command exits non-zero: ``Added N
  lines`` after it is a failure, nothing is success;
- ``Attempt to fix test errors?`` / ``... lint errors?`` is a failed run of the configured test
  command / linter: the shell command given by ``--test-cmd`` / ``--lint-cmd`` on the command
  line Aider quotes at the start of a run (``> aider … --test-cmd python3 -B check.py …``; its
  words are joined by blanks, so an option's value runs to the next ``--option``), else tools
  ``aider-test`` / ``aider-lint`` (set in a config file, the command is not in the history);
  once one was seen, a later round of applied edits with no such question is a run that passed;
- ``Applied edit to path`` is an edit of that file (tool ``edit``): a test that failed, then an
  edit, then the test passing is a fix of the code, not of how the test was run (no rule;
  ``headroom learn`` says so);
- a shell command (``> Running cmd``, ``/run cmd``, ``!cmd``) fails when the ``> `` lines after it
  hold an error line (``Error running command: ...``, or an error-shaped line,
  :func:`~headroom_core.learn.outcome.has_error_line`); otherwise nothing says it failed.

Each run (``# aider chat started``) is one :class:`LogSession` with one thread; its working
directory is the history file's folder.
"""

from __future__ import annotations

import re
from pathlib import Path

from headroom_core.learn.outcome import has_error_line
from headroom_core.learn.readers import LogError, LogSession, Note, Thread
from headroom_core.learn.steps import Step, make_step

SOURCE = "aider"
HISTORY_NAME = ".aider.chat.history.md"
_START = re.compile(r"(?m)^# aider chat started at (\d{4}-\d\d-\d\d[ T]\d\d:\d\d(?::\d\d)?)\s*$")
_ADDED = re.compile(r"^Added \d+ lines? of output to the chat\.?$")
_RUN_ERROR = "Error running command"  # run_cmd's report of a command that could not be started
_QUESTION = re.compile(r"^(.*?\?)\s*(?:\([^)]*\)[^:]*:\s*)?(\S*)\s*$")
_CHECK_OPTION = re.compile(r"(?:^|\s)--(test|lint)-cmd(?:=|\s+)(.+?)(?=\s--[A-Za-z]|$)")


def check_commands(line: str) -> dict[str, str]:
    """The test and lint commands of an Aider command line as the history quotes it (words
    joined by blanks): ``{"aider-test": cmd, "aider-lint": cmd}``, those given; an option's value
    runs to the next ``--option`` (Aider's options are all long ones), quotes taken off."""
    out = {}
    for m in _CHECK_OPTION.finditer(line):
        cmd = m.group(2).strip().strip("'\"").strip()
        if cmd:
            out[f"aider-{m.group(1)}"] = cmd
    return out


def looks_like_history(head: str) -> bool:
    """Whether text starts like an Aider chat history: a ``# aider chat started at <date>``
    line among its first lines."""
    return bool(_START.search(head[:4000]))


def find_logs(project: str | Path) -> list[Path]:
    """The Aider history of ``project`` (``<project>/.aider.chat.history.md``), if any."""
    p = Path(project) / HISTORY_NAME
    return [p] if p.is_file() else []


def read_all(path: Path, project: str | None = None) -> list[LogSession]:
    """Every run in the history ``path`` (module docstring), oldest first; none when
    ``project`` is given and the file is outside it. Raises :class:`LogError` when the file
    cannot be read."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise LogError(f"{path}: cannot read ({e})") from e
    cwd = str(path.resolve().parent)
    if project is not None and not (cwd == project.rstrip("/") or cwd.startswith(project.rstrip("/") + "/")):
        return []
    starts = list(_START.finditer(text))
    out = []
    for n, m in enumerate(starts):
        end = starts[n + 1].start() if n + 1 < len(starts) else len(text)
        out.append(_run(path, n, m.group(1), text[m.end() : end], cwd))
    return out


class _Run:
    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.notes: list[Note] = []
        self.counter = 0
        self.records = 0
        self.pending: tuple[str, str, list[str], bool] | None = None  # (tool, command, quoted lines, is /test)
        self.checks_seen: set[str] = set()  # aider-test / aider-lint failures seen
        self.edits_open = False
        self.failed_this_round: set[str] = set()
        self.commands: dict[str, str] = {}  # aider-test / aider-lint -> the configured command

    def check_step(self, check: str, text: str, failed: bool) -> Step:
        """A run of the test command or linter: the shell command when the history names it."""
        cmd = self.commands.get(check)
        if cmd:
            return make_step("shell", {"command": cmd}, text, is_error=failed, index=self.next())
        return make_step(check, {}, text, is_error=failed, index=self.next())

    def next(self) -> int:
        self.counter += 1
        return self.counter

    def close_pending(self) -> None:
        if self.pending is None:
            return
        tool, command, lines, is_test = self.pending
        self.pending = None
        body = "\n".join(lines)
        if is_test:
            failed = any(_ADDED.match(ln) for ln in lines)
            text = "exited non-zero (its output went to the chat, not to the history)" if failed else ""
            self.steps.append(make_step(tool, {"command": command}, text, is_error=failed, index=self.next()))
            return
        flag = True if any(ln.startswith(_RUN_ERROR) for ln in lines) or has_error_line(body) else None
        self.steps.append(make_step(tool, {"command": command}, body, is_error=flag, index=self.next()))

    def close_round(self) -> None:
        """The end of a round of applied edits: a check that failed before and did not fail in
        this round passed."""
        if self.edits_open:
            for check in sorted(self.checks_seen - self.failed_this_round):
                self.steps.append(self.check_step(check, "", False))
        self.edits_open = False
        self.failed_this_round = set()


def _run(path: Path, n: int, started: str, body: str, cwd: str) -> LogSession:
    r = _Run()
    user: list[str] = []
    for raw in body.splitlines():
        line = raw.rstrip()
        if line.endswith("  "):
            line = line.rstrip()
        if line.startswith("#### ") or line == "####":
            r.records += 1
            user.append(line[5:])
            continue
        if user:
            _user_input(r, "\n".join(user))
            user = []
        if line.startswith("> ") or line == ">":
            r.records += 1
            _quoted(r, line[2:].strip())
        elif line.strip():
            r.close_pending()  # the model's reply: whatever was quoted before belongs to the command
            r.close_round()
    if user:
        _user_input(r, "\n".join(user))
    r.close_pending()
    r.close_round()
    thread = Thread(f"{path.name}#{n}", tuple(r.steps), tuple(r.notes))
    when = started.replace(" ", "T")
    return LogSession(
        SOURCE,
        f"{path.stem}#{n}",
        f"{path}#{n}",
        cwd,
        when,
        (thread,) if r.steps or r.notes else (),
        r.records,
        0,
        0,
        (str(path),),
    )


def _user_input(r: _Run, text: str) -> None:
    r.close_pending()
    r.close_round()
    s = text.strip()
    if s.startswith("/run ") or (s.startswith("!") and len(s) > 1):
        r.pending = ("shell", s[5:].strip() if s.startswith("/run ") else s[1:].strip(), [], False)
    elif s.startswith("/test ") and s[6:].strip():
        r.pending = ("shell", s[6:].strip(), [], True)
    elif s.startswith("/"):
        return  # other in-chat commands (/add, /drop, /undo ...)
    elif s and s != "<blank>":
        r.notes.append(Note("user", s[:2000], r.next()))


def _quoted(r: _Run, line: str) -> None:
    if line.startswith("Running ") and len(line) > 8:
        r.close_pending()
        r.pending = ("shell", line[8:].strip(), [], False)
        return
    q = _QUESTION.match(line)
    question = q.group(1) if q else ""
    if question.startswith(("Attempt to fix test errors", "Attempt to fix lint errors")):
        r.close_pending()
        check = "aider-test" if "test" in question else "aider-lint"
        r.checks_seen.add(check)
        r.failed_this_round.add(check)
        r.steps.append(r.check_step(check, f"{check[6:]} errors (output added to the chat)", True))
        return
    if line.startswith("Applied edit to "):
        r.close_pending()
        r.edits_open = True
        r.steps.append(
            make_step("edit", {"path": line[len("Applied edit to ") :].strip()}, "", is_error=False, index=r.next())
        )
        return
    if not r.commands and not r.steps and ("--test-cmd" in line or "--lint-cmd" in line):
        r.commands = check_commands(line)
        return
    if r.pending is not None:
        r.pending[2].append(line)
