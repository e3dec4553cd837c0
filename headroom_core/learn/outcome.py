"""What a tool call's result says about it: worked, failed, found nothing, or was stopped by a
timeout; and, for a failure, a one-line summary of what went wrong.

Evidence, in order:

1. **Timeouts.** SWE-agent's own (``EXECUTION TIMED OUT``, "was cancelled because it took more
   than N seconds") are failures: the command hung. A harness timeout (Claude Code "Command timed
   out after 2m", Codex "command timed out") or exit status 124/137/143 of a command bounded by
   ``timeout N`` is a *timeout* when the command is a server or watcher (it was running, as
   meant) or bounded itself; otherwise a failure.
2. **Exit status** (Codex ``metadata.exit_code``, ``Exit code: N`` / ``Process exited with code
   N`` headers, Claude Code's ``is_error``): non-zero is a failure, except that exit status 1
   with no output from a search or test program (``grep``, ``rg``, ``lsof``, ``pgrep``,
   ``test``, ``which`` ..., the last stage of the command) means *no match*, and exit status 1
   of ``diff``/``cmp`` means the inputs differ.
3. **Without a status**: for shell-like tools and SWE-agent actions, well-known error lines
   anchored at a line start (``command not found``, ``Traceback (most recent call last)``,
   ``E999 SyntaxError``, ``fatal:``, "Wrong flag!", "Your bash command contained syntax errors",
   "No replacement was performed" ...); for other tools an output that *starts* as an error.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass

from headroom_core.learn.redaction import redact
from headroom_core.learn.shell import DIFFERS, NO_MATCH, has_timeout_wrapper, is_server, last_programs

OK, FAILED, NO_MATCH_FOUND, TIMEOUT = "ok", "failed", "no-match", "timeout"
MAX_ERROR_CHARS = 160
SUMMARY_SPAN = 8000  # characters read at each end of a long output for its error summary

_EXIT_RE = re.compile(r"(?im)^(?:exit code|process exited with code|exit status|exited with code)[:\s]+(-?\d+)")
_SWE_TIMEOUT = re.compile(
    r"(?m)^EXECUTION TIMED OUT\b.*$|was cancelled because it took more than \d+(?:\.\d+)? seconds"
)
_HARNESS_TIMEOUT = re.compile(
    r"(?im)^(?:error: )?(?:command timed out\b.*|.*\btimed out after \d+(?:\.\d+)?\s*(?:ms|s|m|seconds|minutes|milliseconds)\b.*)$"
)
_STRONG_ERROR_LINES = re.compile(
    r"(?im)^(?:.*\bcommand not found\b.*|.*: (?:\[Errno \d+\] )?No such file or directory\b.*|.*\bcannot access\b.*|Traceback \(most recent call last\):"
    r"|(?:- )?E\d{3} \w+Error\b.*|Your proposed edit has introduced new syntax error.*|[A-Za-z_.]*(?:Error|Exception): .+"
    r"|error(?:\[E\d+\])?: .+|fatal: .+|.*: Permission denied\b.*|npm ERR! .+|npm error .+|ERROR: .+|.*\bSegmentation fault\b.*"
    r"|Wrong flag!.*|Your bash command contained syntax errors and was NOT executed.*|No replacement was performed.*"
    r"|Your edit was not applied.*|Invalid `\w+` parameter.*|Usage: edit .*|No file open\..*|E\s+[A-Za-z_.]*(?:Error|Exception)\b.*"
    r"|ImportError while loading conftest.*|FAILED \S+.*|=+ \d+ failed\b.*"
    # structure, whatever the program: a shell's own diagnostic ("/bin/sh: 1: pytest: not found",
    # "zsh:1: no such file", "sh: 1: cd: can't cd to x"), make's "make: *** [...] Error 2", a
    # program's "prog: error: ...", "prog: cannot/can't/unable to/could not ...", the program
    # named by its path as argv[0] often is ("/usr/bin/python3: can't open file ..."), Python's
    # OSError text ("...: [Errno 2] No such file or directory"), apt's "E: ...",
    # and a stated non-zero exit ("exited with code 2", "non-zero exit status")
    r"|(?:/\S*/)?(?:ba|da|z|k|c|tc|fi|a|mk)?sh(?:\.exe)?:[ \t]*(?:line[ \t]+)?\d*:?[ \t]*\S.*"
    r"|[\w.+-]+: \*\*\* .+|(?:[\w.+~-]*/)*[\w.+-]+: (?:fatal )?error(?:\[\w+\])?: .+"
    r"|(?:[\w.+~-]*/)*[\w.+-]+: (?:[^:\n]{1,80}: )?(?:can't|cannot|unable to|could not|couldn't) .+|E: .+"
    r"|.*\b(?:exit(?:ed)?|terminated|returned|failed)\b[^\n]{0,20}\b(?:with )?(?:exit )?(?:code|status)[ :=]+[1-9]\d*\b.*"
    r"|.*\bnon-zero exit (?:code|status)\b.*)$"
)
_ERROR_WORDS = (
    "not found",
    "no such file",
    "cannot access",
    "traceback",
    "error",
    "exception",
    "fatal:",
    "permission denied",
    "npm err",
    "segmentation fault",
    "wrong flag",
    "syntax errors",
    "no replacement",
    "not applied",
    "invalid `",
    "usage: edit",
    "no file open",
    "failed",
    "sh:",
    "sh.exe:",
    ": ***",
    "can't",
    "cannot",
    "unable to",
    "could not",
    "couldn't",
    "e: ",
    "code",
    "status",
)


def has_error_line(body: str, limit: int = 20000) -> bool:
    """Whether the first ``limit`` characters of an output hold a well-known error line
    (:data:`_STRONG_ERROR_LINES`); only lines holding an error word (found with ``str.find``)
    are tried, so a large output costs little. Answers are remembered for the last 256
    outputs: agents resend the history, and live learning reads the latest outputs again on
    each of the next few requests."""
    return _has_error_line(body[:limit])


@functools.lru_cache(maxsize=256)
def _has_error_line(chunk: str) -> bool:
    low = chunk.lower()
    starts: set[int] = set()
    for w in _ERROR_WORDS:
        i = low.find(w)
        while i >= 0 and len(starts) < 200:
            a = low.rfind("\n", 0, i) + 1
            starts.add(a)
            nxt = low.find("\n", i)
            i = low.find(w, nxt) if nxt >= 0 else -1
    for a in sorted(starts):
        b = chunk.find("\n", a)
        if _STRONG_ERROR_LINES.match(chunk, a, len(chunk) if b < 0 else b):
            return True
    return False


_TOOL_ERROR_START = re.compile(
    r"^\s*(?:<tool_use_error>|error\b|Error\b|ERROR\b|\{\s*\"error\"\s*:|apply_patch verification failed|Failed to apply patch)"
)
_HEADER_LINES = re.compile(
    r"(?im)^(?:exit code[:\s]+-?\d+|process exited with code -?\d+|exit status[:\s]+-?\d+|wall time:.*|chunk id:.*"
    r"|original token count:.*|total output lines:.*|output:|error|\(no output\)|your command ran successfully and did not produce any output\.?)\s*$"
)


@dataclass(frozen=True)
class Outcome:
    """How a call ended: ``status`` one of ``ok``, ``failed``, ``no-match``, ``timeout``;
    ``error`` a one-line summary (failures and timeouts; ``""`` otherwise); ``exit_code`` when
    the result states one."""

    status: str
    error: str = ""
    exit_code: int | None = None

    @property
    def failed(self) -> bool:
        return self.status == FAILED


def exit_code_of(text: str) -> int | None:
    """The exit code a result states (Codex JSON ``metadata.exit_code`` or an ``Exit code: N``
    line), or None."""
    s = text.lstrip()
    if s.startswith("{"):
        try:
            obj = json.loads(s)
        except (ValueError, RecursionError):  # RecursionError: nested deeper than the decoder's limit
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
        except (ValueError, RecursionError):  # RecursionError: nested deeper than the decoder's limit
            return text
        if isinstance(obj, dict) and isinstance(obj.get("output"), str):
            return obj["output"]
    return text


def bare_output(text: str, limit: int = 8000) -> str:
    """The start of the output (``limit`` characters) without the harness's own header lines
    (``Exit code 1``, ``Wall time: ...``, Claude Code's bare ``Error`` ...), stripped."""
    return _HEADER_LINES.sub("", output_text(text)[:limit]).strip()


def read_outcome(text: str, is_error: bool | None, command: str = "", agent: str = "") -> Outcome:
    """Read a result (module docstring). ``is_error``: the provider's flag (None when the
    provider does not say); ``command``: the shell command for shell-like calls (``""`` for
    other tools); ``agent``: ``"swe-agent"`` for SWE-agent observations."""
    body = output_text(text)
    code = exit_code_of(text)
    if command:
        m = _SWE_TIMEOUT.search(body[:4000]) if agent == "swe-agent" or "EXECUTION TIMED OUT" in body[:4000] else None
        if m:
            return Outcome(FAILED, _clip(_timeout_phrase(m.group(0))), code)
        harness = _HARNESS_TIMEOUT.search(body[:600])
        bounded = code in (124, 137, 143) and (has_timeout_wrapper(command) or is_server(command, body))
        if harness or bounded:
            what = _timeout_phrase(harness.group(0)) if harness else f"stopped by its timeout (exit {code})"
            if is_server(command, body) or (bounded and not harness):
                return Outcome(TIMEOUT, _clip(what), code)
            return Outcome(FAILED, _clip(what), code)
        if is_error is True or (code is not None and code != 0):
            progs = last_programs(command)
            bare = bare_output(text)
            if progs and code in (1, 123, None) and not bare and progs[-1] in NO_MATCH:
                return Outcome(NO_MATCH_FOUND, "", code)  # the last stage decides the exit status
            if progs and progs[-1] in DIFFERS and code in (1, None) and bare and not has_error_line(bare, 2000):
                return Outcome(OK, "", code)
            return Outcome(FAILED, error_summary(text), code)
        if is_error is False or code == 0:
            return Outcome(OK, "", code)
        if has_error_line(body):
            return Outcome(FAILED, error_summary(text), code)
        return Outcome(OK, "", code)
    if is_error is True or (code is not None and code != 0):
        return Outcome(FAILED, error_summary(text), code)
    if is_error is False or code == 0:
        return Outcome(OK, "", code)
    if _TOOL_ERROR_START.match(body[:200]):
        return Outcome(FAILED, error_summary(text), code)
    return Outcome(OK, "", code)


def _timeout_phrase(line: str) -> str:
    line = line.strip()
    m = re.search(r"(?i)(?:took|for) more than (\d+(?:\.\d+)?) seconds", line)
    if m:
        return f"timed out after {m.group(1).removesuffix('.0')} seconds"
    return line


_TAGS = re.compile(r"</?tool_use_error>")
_NOISE = re.compile(
    r"(?i)^(npm warn|warning:|\s*at |\s*File \"|>\s*\S+@\S+ |>\s*$|-+$|=+$|ERRORS:$|\[?\d+/\d+\]|\s*\^+\s*$"
    r"|[.FEsxX]+\s*(?:\[\s*\d+%\])?$)"
)
_PREFERRED = (  # (pattern, take the last hit rather than the first)
    (re.compile(r"^(?:- )?(E\d{3} \w+Error\b.*)$"), False),
    (re.compile(r"^(Wrong flag!.*)$"), False),
    (re.compile(r"^(No replacement was performed.*)$"), False),
    (re.compile(r"^(Your edit was not applied.*)$"), False),
    (re.compile(r"^.*?\b(command not found)\b.*$"), False),
    (re.compile(r"^(?:/\S*/)?(?:ba|da|z|k|c|tc|fi|a|mk)?sh:[ \t]*(?:line[ \t]+)?\d*:?[ \t]*(\S+: not found)$"), False),
    (re.compile(r"^.*(The required parameter `[^`]+` is missing).*$"), False),
    (re.compile(r"^.*\b(Missing script: .+)$"), False),
    (re.compile(r"^FAILED (\S+.*)$"), False),
    (re.compile(r"^(?:E\s+)?\[?((?:[A-Za-z_.]*(?:Error|Exception)): .+?)\]?$"), True),
    (re.compile(r"(?i)^(.*\bNo such file or directory\b.*)$"), False),
    (re.compile(r"^((?:error(?:\[E\d+\])?|fatal|ERROR|npm ERR!): .+)$"), False),
)


def error_summary(text: str) -> str:
    """One line, at most :data:`MAX_ERROR_CHARS` characters, that says what went wrong.

    Preference: a SWE-agent lint line (``E999 SyntaxError: unmatched ')'``), "Wrong flag!", a
    rejected edit, ``command not found``, a missing required parameter, a missing npm script,
    the last ``XxxError: ...`` line (a traceback's exception), ``No such file or directory``, an
    ``error:``/``fatal:`` line; else the first error-shaped line (:data:`_STRONG_ERROR_LINES`);
    else the first line that is not a warning or a header.
    """
    body = output_text(text)
    if len(body) > 2 * SUMMARY_SPAN:  # what went wrong is said near the start or the end
        body = body[:SUMMARY_SPAN] + "\n" + body[-SUMMARY_SPAN:]
    body = _TAGS.sub("", _HEADER_LINES.sub("", body)).strip()
    body = re.sub(
        r"`[^`]*`", lambda m: "`…`" if "\n" in m.group(0) or len(m.group(0)) > 60 else m.group(0), body
    )  # quoted code
    if body.startswith("Error: "):
        body = body[len("Error: ") :]
    lines = [ln.strip() for ln in body.splitlines() if ln.strip()]
    if any(ln.startswith("Your bash command contained syntax errors") for ln in lines):
        rest = [ln for ln in lines if "syntax error" in ln.lower() and not ln.startswith("Your bash")]
        return _clip("bash syntax error, not executed" + (f": {rest[0]}" if rest else ""))
    for pat, last in _PREFERRED:
        hits = [m.group(1) for m in (pat.match(ln) for ln in lines) if m]
        if hits:
            return _clip(hits[-1] if last else hits[0])
    for ln in lines:  # an error-shaped line (structure: make's ***, apt's E:, a stated exit code ...)
        if _STRONG_ERROR_LINES.match(ln):
            return _clip(ln)
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
