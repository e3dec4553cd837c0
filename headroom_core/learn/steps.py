"""One tool call and its outcome, as both the live learner and the log readers see it.

A :class:`Step` is built by :func:`make_step` from the tool name, its arguments and its result
text; everything later (pairing, rules, the past-failures block) works on steps only. Secrets in
commands and outputs are redacted here, before anything is stored. How a result is read (exit
codes, "no match", timeouts, error lines) is :mod:`.outcome`; how a command line is read is
:mod:`.shell`.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from dataclasses import dataclass
from typing import Any, Mapping

from headroom_core.learn.outcome import (  # noqa: F401 - re-exported for callers
    FAILED,
    MAX_ERROR_CHARS,
    NO_MATCH_FOUND,
    OK,
    TIMEOUT,
    bare_output,
    error_signature,
    error_summary,
    exit_code_of,
    output_text,
    read_outcome,
)
from headroom_core.learn.redaction import redact  # noqa: F401 - re-exported
from headroom_core.learn.shell import (  # noqa: F401 - re-exported for callers
    EDIT_PROGRAMS,
    levenshtein,
    main_words,
    normalize_command,
    program,
    segments,
    shell_tokens,
    substantive_tokens,
)

SHELL_TOOLS = frozenset(
    {
        "bash",
        "shell",
        "exec_command",
        "local_shell",
        "local_shell_call",
        "run_shell_command",
        "execute_command",
        "run_terminal_cmd",
        "run_command",
        "terminal",
        "container.exec",
        "swe-agent",
        "shell_command",
    }
)
# tools that change a file; a failure of one and a success of another on the same file belong together
EDIT_TOOLS = frozenset(
    {
        "edit",
        "multiedit",
        "write",
        "notebookedit",
        "str_replace_editor",
        "str_replace_based_edit_tool",
        "apply_patch",
        "edit_file",
        "write_file",
        "replace",
        "create_file",
        "search_replace",
    }
)
READ_TOOLS = frozenset({"read", "view", "read_file", "open", "cat", "notebookread"})
# SWE-agent commands that show a file
_SWE_READERS = frozenset({"open", "goto", "scroll_up", "scroll_down", "cat", "view"})

MAX_COMMAND_CHARS = 300  # stored / compared part of a command's first line
MAX_OUTPUT_CHARS = 1500  # output kept with a failure


@dataclass(frozen=True)
class Step:
    """One tool call and its result.

    ``tool`` is the name the agent called (``Bash``, ``Edit``, ``shell``, ...); ``command`` the shell
    command (all lines; ``""`` for other tools); ``target`` the file the call acts on (``""`` if
    none); ``args`` the canonical JSON of the arguments (redacted); ``keys`` the argument names
    given; ``ok`` whether it did not fail (a *no match* or a server stopped by its timeout is not
    a failure); ``error`` a one-line summary of the failure (``""`` when ok); ``index`` its
    position in its thread; ``message_index`` the position of the message that holds its result
    (live requests; -1 in logs); ``call_id`` the provider's id; ``status`` the :mod:`.outcome`
    status (``ok``, ``failed``, ``no-match``, ``timeout``; ``""`` = derived from ``ok``);
    ``workdir`` the folder the call asked to run in (Codex ``workdir``; ``""`` if none);
    ``background`` whether it was started in the background; ``when`` its timestamp (ISO 8601,
    ``""`` if unknown); ``output`` for failures and timeouts, the start of the output
    (:data:`MAX_OUTPUT_CHARS` characters, redacted) that the one-line ``error`` summarises.
    """

    tool: str
    command: str
    target: str
    args: str
    keys: frozenset[str]
    ok: bool
    error: str
    index: int
    message_index: int = -1
    call_id: str = ""
    status: str = ""
    workdir: str = ""
    background: bool = False
    when: str = ""
    output: str = ""

    @property
    def failure_text(self) -> str:
        """The error summary and the output it came from, for reading what went wrong."""
        return f"{self.error}\n{self.output}" if self.output else self.error

    @property
    def outcome(self) -> str:
        """``ok``, ``failed``, ``no-match`` or ``timeout``."""
        return self.status or (OK if self.ok else FAILED)

    @property
    def is_shell(self) -> bool:
        return bool(self.command)

    @property
    def family(self) -> str:
        """``"edit"`` for file-changing tools, ``"read"`` for readers, else the tool name (lowercase)."""
        t = self.tool.lower()
        if t in EDIT_TOOLS:
            return "edit"
        if t in READ_TOOLS:
            return "read"
        return t

    @property
    def program(self) -> str:
        """The shell command's program (``""`` for other tools)."""
        return program(self.command) if self.command else ""

    @property
    def is_edit(self) -> bool:
        """A call that changes a file: an edit tool, or an editing command of an agent's shell
        (SWE-agent ``edit``/``str_replace_editor``/``insert``, ``apply_patch``)."""
        if not self.command:
            return self.family == "edit"
        words = main_words(self.command)
        prog = words[0] if words else ""
        if prog == "str_replace_editor":
            return len(words) > 1 and words[1] != "view"
        return prog in EDIT_PROGRAMS

    @property
    def is_read(self) -> bool:
        """A call that shows a file (``Read``, SWE-agent ``open``, ``str_replace_editor view``)."""
        if not self.command:
            return self.family == "read"
        words = main_words(self.command)
        prog = words[0] if words else ""
        return prog in _SWE_READERS or (prog == "str_replace_editor" and len(words) > 1 and words[1] == "view")

    @property
    def first_line(self) -> str:
        """The command's first line (heredoc bodies and edit texts left out), at most
        :data:`MAX_COMMAND_CHARS` characters; for other tools the tool name."""
        if not self.command:
            return self.tool
        return self.command.strip().splitlines()[0].strip()[:MAX_COMMAND_CHARS] if self.command.strip() else ""

    @property
    def signature(self) -> str:
        """SHA-256 hex (16 digits) of the tool and its arguments (for shell calls: of the command
        and its folder alone, so a changed ``description`` does not hide an identical retry; an
        editing command is compared exactly, whitespace included)."""
        if self.command:
            what = self.command.strip() if self.is_edit else normalize_command(self.command)
            what = f"{what}\0{self.workdir}"
        else:
            what = self.args
        return hashlib.sha256(f"{self.tool}\0{what}".encode()).hexdigest()[:16]


def command_of(tool: str, args: Any) -> str:
    """The shell command a call runs, or ``""`` when ``tool`` is not shell-like.

    ``args["command"]`` may be a string or an argv list (Codex: ``["bash", "-lc", "cmd"]`` gives
    ``cmd``); ``args["cmd"]`` is Codex's ``exec_command``.
    """
    if tool.lower() not in SHELL_TOOLS:
        return ""
    if isinstance(args, str):
        return args
    if not isinstance(args, Mapping):
        return ""
    c = args.get("command", args.get("cmd"))
    if isinstance(c, list) and c and all(isinstance(x, str) for x in c):
        if len(c) >= 3 and c[0].rsplit("/", 1)[-1] in ("bash", "sh", "zsh") and c[1] in ("-lc", "-c"):
            return c[2]
        return shlex.join(c)
    return c if isinstance(c, str) else ""


def target_of(args: Any) -> str:
    """The file a call acts on: ``file_path``, ``path``, ``notebook_path`` or ``filename``."""
    if isinstance(args, Mapping):
        for k in ("file_path", "path", "notebook_path", "filename", "target_file"):
            v = args.get(k)
            if isinstance(v, str) and v:
                return v
    return ""


def workdir_of(args: Any) -> str:
    """The folder a shell call asks to run in (Codex ``workdir``, ``working_directory``, ``cwd``)."""
    if isinstance(args, Mapping):
        for k in ("workdir", "working_directory", "cwd"):
            v = args.get(k)
            if isinstance(v, str) and v:
                return v.rstrip("/") or "/"
    return ""


def _background(args: Any, command: str) -> bool:
    if isinstance(args, Mapping) and args.get("run_in_background") is True:
        return True
    line = command.strip().splitlines()[-1].strip() if command.strip() else ""
    return bool(re.search(r"(?<![&|])&\s*$", line)) or line.startswith(("nohup ", "setsid "))


MAX_ARGS_CHARS = 2000  # arguments kept (redacted) per call; longer ones end in a digest of the whole


def canonical_args(args: Any) -> str:
    """Arguments as canonical JSON (sorted keys), redacted; beyond :data:`MAX_ARGS_CHARS`
    characters cut and ended by ``…`` and 16 hex digits of the whole text's SHA-256, so two
    calls still compare equal only when all their arguments are equal."""
    try:
        text = json.dumps(args, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = str(args)
    if len(text) <= MAX_ARGS_CHARS:
        return redact(text)
    return redact(text[:MAX_ARGS_CHARS]) + "…" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


_REJECTED = re.compile(r"^\s*(?:The user doesn't want to proceed with this tool use|\[Request interrupted by user)")


def is_rejection(text: str) -> bool:
    """Whether a tool result says the user refused or interrupted the call (Claude Code's
    wording): not a failure of the call, an interruption by the user."""
    return bool(_REJECTED.match(text[:200]))


def is_failure(text: str, is_error: bool | None, shell: bool) -> bool:
    """Whether a result reports a failure (see :func:`~.outcome.read_outcome`; without the
    command, "no match" and timeouts cannot be told apart)."""
    return read_outcome(text, is_error, "true" if shell else "").failed


def make_step(
    tool: str,
    args: Any,
    result: str,
    *,
    is_error: bool | None = None,
    index: int = 0,
    message_index: int = -1,
    call_id: str = "",
    target: str = "",
    agent: str = "",
    when: str = "",
) -> Step:
    """Build a :class:`Step` from a call (``tool``, parsed ``args``: dict, or str for SWE-agent
    actions) and its ``result`` text. ``is_error``: the provider's flag (True/False when it says,
    None when it does not); ``agent``: ``"swe-agent"`` for SWE-agent observations."""
    tool = tool or "tool"
    raw = command_of(tool, args)
    command = redact(raw)
    out = read_outcome(result, is_error, raw, agent)
    return Step(
        tool=tool,
        command=command,
        target=target or target_of(args),
        args=canonical_args(args),
        keys=frozenset(args) if isinstance(args, Mapping) else frozenset(),
        ok=not out.failed,
        error=out.error,
        index=index,
        message_index=message_index,
        call_id=call_id,
        status=out.status,
        workdir=workdir_of(args),
        background=_background(args, raw),
        when=when,
        output=redact(bare_output(result)[:MAX_OUTPUT_CHARS]) if out.status in (FAILED, TIMEOUT) else "",
    )
