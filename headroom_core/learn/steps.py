"""One tool call and its outcome, as both the live learner and the log readers see it.

A :class:`Step` is built by :func:`make_step` from the tool name, its arguments and its result
text; everything later (pairing, rules, the past-failures block) works on steps only. Secrets in
commands and outputs are redacted here, before anything is stored.

Failure detection, in order: the provider's own flag (Anthropic ``tool_result.is_error``), an exit
code (Codex ``metadata.exit_code``, ``Exit code: N`` headers), then, for shell-like tools and
SWE-agent actions, well-known error lines (``command not found``, ``Traceback (most recent call
last)``, ``E999 SyntaxError``, ``fatal:`` ...), and for other tools an output that *starts* as an
error (``Error: ...``, ``{"error": ...}``). Anchoring on line starts keeps a ``grep`` hit that
merely mentions an error from counting as a failure.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from dataclasses import dataclass
from typing import Any, Mapping

SHELL_TOOLS = frozenset(
    {"bash", "shell", "exec_command", "local_shell", "local_shell_call", "run_shell_command", "execute_command",
     "run_terminal_cmd", "run_command", "terminal", "container.exec", "swe-agent"}
)
# tools that change a file; a failure of one and a success of another on the same file belong together
EDIT_TOOLS = frozenset(
    {"edit", "multiedit", "write", "notebookedit", "str_replace_editor", "str_replace_based_edit_tool",
     "apply_patch", "edit_file", "write_file", "replace", "create_file"}
)
READ_TOOLS = frozenset({"read", "view", "read_file", "open", "cat", "notebookread"})

MAX_COMMAND_CHARS = 300  # stored / compared part of a command's first line
MAX_ERROR_CHARS = 160

_SECRET_PATTERNS = (
    re.compile(r"(?i)\b(authorization|x-api-key|api[_-]?key|access[_-]?token|auth[_-]?token|token|secret|password|passwd)(\s*[:=]\s*|\s+)(bearer\s+)?(['\"]?)[^\s'\"]{6,}\4"),
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{12,}"),
    re.compile(r"\b(sk-(?:ant-)?[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16})\b"),
)


def redact(text: str) -> str:
    """``text`` with API keys, bearer tokens and ``password=...`` style values replaced by ``***``."""

    def keep_name(m: re.Match[str]) -> str:
        return f"{m.group(1)}{m.group(2)}***" if m.re is _SECRET_PATTERNS[0] else "***"

    for p in _SECRET_PATTERNS:
        text = p.sub(keep_name, text)
    return text


@dataclass(frozen=True)
class Step:
    """One tool call and its result.

    ``tool`` is the name the agent called (``Bash``, ``Edit``, ``shell``, ...); ``command`` the shell
    command (all lines; ``""`` for other tools); ``target`` the file the call acts on (``""`` if
    none); ``args`` the canonical JSON of the arguments (redacted); ``keys`` the argument names
    given; ``ok`` whether it succeeded; ``error`` a one-line summary of the failure (``""`` when
    ok); ``index`` its position in its thread; ``message_index`` the position of the message that
    holds its result (live requests; -1 in logs); ``call_id`` the provider's id.
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
    def first_line(self) -> str:
        """The command's first line (heredoc bodies and edit texts left out), at most
        :data:`MAX_COMMAND_CHARS` characters; for other tools the tool name."""
        if not self.command:
            return self.tool
        return self.command.strip().splitlines()[0].strip()[:MAX_COMMAND_CHARS] if self.command.strip() else ""

    @property
    def signature(self) -> str:
        """SHA-256 hex (16 digits) of the tool and its arguments (for shell calls: of the command
        alone, so a changed ``description`` does not hide an identical retry)."""
        what = normalize_command(self.command) if self.command else self.args
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


_EXIT_RE = re.compile(r"(?im)^(?:exit code|process exited with code|exit status)[:\s]+(-?\d+)")
_STRONG_ERROR_LINES = re.compile(
    r"(?im)^(?:.*\bcommand not found\b|.*: No such file or directory\b|.*\bcannot access\b.*|Traceback \(most recent call last\):"
    r"|(?:- )?E\d{3} \w+Error\b.*|Your proposed edit has introduced new syntax error.*|[A-Za-z_.]*(?:Error|Exception): .+"
    r"|error(?:\[E\d+\])?: .+|fatal: .+|.*: Permission denied\b.*|npm ERR! .+|ERROR: .+|.*\bSegmentation fault\b.*)$"
)
_TOOL_ERROR_START = re.compile(r"^\s*(?:<tool_use_error>|error\b|Error\b|ERROR\b|\{\s*\"error\"\s*:)")


def exit_code_of(text: str) -> int | None:
    """The exit code a result states (Codex JSON ``metadata.exit_code`` or an ``Exit code: N``
    line), or None."""
    s = text.lstrip()
    if s.startswith("{"):
        try:
            obj = json.loads(s)
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            md = obj.get("metadata")
            if isinstance(md, dict) and isinstance(md.get("exit_code"), int):
                return md["exit_code"]
    m = _EXIT_RE.search(text[:2000])
    return int(m.group(1)) if m else None


def output_text(text: str) -> str:
    """The readable output of a result: Codex's JSON ``{"output": ..., "metadata": ...}``
    unwrapped, anything else as it is."""
    s = text.lstrip()
    if s.startswith("{") and '"output"' in s[:200]:
        try:
            obj = json.loads(s)
        except ValueError:
            return text
        if isinstance(obj, dict) and isinstance(obj.get("output"), str):
            return obj["output"]
    return text


def is_failure(text: str, is_error: bool, shell: bool) -> bool:
    """Whether a result reports a failure (see the module docstring for the order of evidence)."""
    if is_error:
        return True
    code = exit_code_of(text)
    if code is not None:
        return code != 0
    body = output_text(text)
    if shell:
        return bool(_STRONG_ERROR_LINES.search(body[:20000]))
    return bool(_TOOL_ERROR_START.match(body[:200]))


_TAGS = re.compile(r"</?tool_use_error>")
_NOISE = re.compile(r"(?i)^(npm warn|warning:|\s*at |\s*File \"|>\s*\S+@\S+ |>\s*$|-+$|ERRORS:$)")
_PREFERRED = (  # (pattern, take the last hit rather than the first)
    (re.compile(r"^(?:- )?(E\d{3} \w+Error\b.*)$"), False),
    (re.compile(r"^.*?\b(command not found)\b.*$"), False),
    (re.compile(r"^.*(The required parameter `[^`]+` is missing).*$"), False),
    (re.compile(r"^\[?((?:[A-Za-z_.]*(?:Error|Exception)): .+?)\]?$"), True),
    (re.compile(r"^(.*\bNo such file or directory\b.*)$"), False),
    (re.compile(r"^((?:error(?:\[E\d+\])?|fatal|ERROR|npm ERR!): .+)$"), False),
)


def error_summary(text: str) -> str:
    """One line, at most :data:`MAX_ERROR_CHARS` characters, that says what went wrong.

    Preference: a SWE-agent lint line (``E999 SyntaxError: unmatched ')'``), ``command not
    found``, a missing required parameter, the last ``XxxError: ...`` line (a traceback's
    exception), ``No such file or directory``, an ``error:``/``fatal:`` line; else the first
    line that is not a warning.
    """
    body = _TAGS.sub("", output_text(text)).strip()
    if body.startswith("Error: "):
        body = body[len("Error: "):]
    lines = [ln.strip() for ln in body.splitlines() if ln.strip()]
    for pat, last in _PREFERRED:
        hits = [m.group(1) for m in (pat.match(ln) for ln in lines) if m]
        if hits:
            return _clip(hits[-1] if last else hits[0])
    for ln in lines:
        if not _NOISE.match(ln):
            return _clip(ln)
    return _clip(lines[0]) if lines else "failed"


def _clip(s: str) -> str:
    s = redact(" ".join(s.split()))
    return s if len(s) <= MAX_ERROR_CHARS else s[: MAX_ERROR_CHARS - 1] + "…"


def error_signature(error: str) -> str:
    """The error with paths, numbers and quoted names blurred, for grouping recurrences."""
    s = error.lower()
    s = re.sub(r"(/[\w.@-]+)+/?", "<path>", s)
    s = re.sub(r"\d+", "n", s)
    return " ".join(s.split())


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


def make_step(
    tool: str,
    args: Any,
    result: str,
    *,
    is_error: bool = False,
    index: int = 0,
    message_index: int = -1,
    call_id: str = "",
    target: str = "",
) -> Step:
    """Build a :class:`Step` from a call (``tool``, parsed ``args``: dict, or str for SWE-agent
    actions) and its ``result`` text (``is_error``: the provider flagged it)."""
    tool = tool or "tool"
    command = redact(command_of(tool, args))
    failed = is_failure(result, is_error, bool(command))
    return Step(
        tool=tool,
        command=command,
        target=target or target_of(args),
        args=canonical_args(args),
        keys=frozenset(args) if isinstance(args, Mapping) else frozenset(),
        ok=not failed,
        error=error_summary(result) if failed else "",
        index=index,
        message_index=message_index,
        call_id=call_id,
    )


# --- shell commands -------------------------------------------------------------------------

_WRAPPERS = {"sudo", "env", "time", "nohup", "command", "exec", "nice", "timeout", "stdbuf"}
_RUNNERS = {  # runner -> number of words after it that are part of the runner itself
    "npx": 0, "bunx": 0, "pnpx": 0, "uvx": 0,
}
_RUNNER_SUB = {("uv", "run"), ("poetry", "run"), ("pipenv", "run"), ("pnpm", "exec"), ("pnpm", "dlx"), ("npm", "exec"),
               ("yarn", "dlx"), ("bundle", "exec"), ("hatch", "run"), ("pdm", "run"), ("conda", "run"), ("rye", "run")}
_PYTHONS = re.compile(r"^python(\d(\.\d+)?)?$")
_CD = {"cd", "pushd", "popd", "export", "set", "source", ".", "unset", "alias"}
FILLER = frozenset(
    {"grep", "rg", "cat", "head", "tail", "ls", "echo", "find", "xargs", "sort", "uniq", "wc", "sed", "awk", "tr", "cut",
     "less", "more", "tee", "true", "false", "sh", "bash", "cd", "pwd", "which", "test", "node_modules", ".git", ".",
     "..", "*", "/dev/null", "dist", "build", "src", "eof", "-", "--", "null", "then", "do", "done", "fi", "if", "for",
     "in", "while", "the", "and", "or", "not"}
)
_OPERATORS = {"&&", "||", ";", "|", "&", ">", ">>", "<", "<<", "2>", "2>&1", ">&", "(", ")", "|&"}


def shell_tokens(line: str) -> list[str]:
    """Tokens of one command line, operators (``&&``, ``|``, ``>`` ...) as tokens of their own;
    falls back to whitespace splitting when the line does not parse (unbalanced quotes)."""
    try:
        lex = shlex.shlex(line, posix=True, punctuation_chars=True)
        lex.whitespace_split = True
        return list(lex)
    except ValueError:
        return line.split()


def segments(line: str) -> list[list[str]]:
    """The simple commands of a line, split at ``&&``, ``||``, ``;``, ``|``, ``&``."""
    out: list[list[str]] = [[]]
    for t in shell_tokens(line):
        if t in ("&&", "||", ";", "|", "&", "|&", ";;"):
            out.append([])
        else:
            out[-1].append(t)
    return [s for s in out if s]


def _strip_wrappers(words: list[str]) -> list[str]:
    w = list(words)
    while w:
        head = w[0].rsplit("/", 1)[-1]
        if "=" in w[0] and not w[0].startswith("-") and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w[0]):
            w = w[1:]
        elif head in _WRAPPERS:
            w = w[1:]
            while w and (w[0].startswith("-") or re.match(r"^\d+[smh]?$", w[0])):
                w = w[1:]
        elif head in _RUNNERS:
            w = w[1:]
            while w and w[0].startswith("-"):
                w = w[1:]
        elif len(w) >= 2 and (head, w[1]) in _RUNNER_SUB:
            w = w[2:]
            while w and w[0].startswith("-"):
                w = w[1:]
        elif _PYTHONS.match(head) and len(w) >= 3 and w[1] == "-m":
            w = w[2:]
        else:
            break
    return w


def main_words(command: str) -> list[str]:
    """The words of the command's first simple command that is not a ``cd``/``export``,
    with wrappers (``sudo``, ``env X=1``, ``npx``, ``uv run``, ``python -m`` ...) removed."""
    first = command.strip().splitlines()[0] if command.strip() else ""
    for seg in segments(first):
        if seg[0] in _CD:
            continue
        return _strip_wrappers(seg)
    return []


def program(command: str) -> str:
    """The effective program of a command: ``pytest`` for both ``pytest tests`` and ``python -m
    pytest tests``; ``""`` when there is none."""
    w = main_words(command)
    return w[0].rsplit("/", 1)[-1] if w else ""


def substantive_tokens(command: str, ignore: frozenset[str] = frozenset()) -> set[str]:
    """Tokens of the command's first line that carry meaning: not the program, not a flag, not
    an operator, not a filler word (:data:`FILLER`), not a number, at least 3 characters, not in
    ``ignore`` (e.g. the project's own directory)."""
    first = command.strip().splitlines()[0] if command.strip() else ""
    prog = program(command)
    out = set()
    for t in shell_tokens(first):
        t2 = t.strip("'\"").rstrip("/")
        low = t2.lower()
        if (not t2 or t2 == prog or t.startswith("-") or t in _OPERATORS or low in FILLER or len(t2) < 3
                or t2.isdigit() or t2 in ignore or not re.search(r"[A-Za-z]", t2)):
            continue
        out.add(t2)
    return out


def levenshtein(a: str, b: str, limit: int | None = None) -> int:
    """Edit distance (insertions, deletions, substitutions; Levenshtein 1966) between ``a`` and
    ``b``; stops early and returns ``limit + 1`` once every path exceeds ``limit``."""
    if a == b:
        return 0
    if len(a) < len(b):
        a, b = b, a
    if limit is not None and len(a) - len(b) > limit:
        return limit + 1
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        if limit is not None and min(cur) > limit:
            return limit + 1
        prev = cur
    return prev[-1]


def normalize_command(command: str) -> str:
    """A command with runs of whitespace collapsed (multi-line texts kept line by line)."""
    return "\n".join(" ".join(ln.split()) for ln in command.strip().splitlines())
