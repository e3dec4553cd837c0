"""Facts the pairing rules ask about a failed call and a later call: what a command's main words
are, whether a failure was about how the command was run, what it says is missing, whether a
later line runs the failed command after a set-up or a ``cd``, fed by a pipe ... Pure functions
over :class:`~headroom_core.learn.steps.Step` and command text; the rules themselves are the
tables in :mod:`headroom_core.learn.pair_rules`, the walk over a session in
:mod:`headroom_core.learn.pairing`.

The windows and the distance ratio are this project's choices, tuned on the logs in
``../shared`` and the hand-made ones in ``tests/learn_logs``.
"""

from __future__ import annotations

import json
import re
from typing import Sequence

from headroom_core.learn.outcome import TIMEOUT
from headroom_core.learn.shell import (
    Segment,
    first_line,
    is_server,
    levenshtein,
    line_is_setup,
    name_tokens,
    normalize_command,
    segments_of,
    shell_tokens,
    strip_wrappers,
    substantive_tokens,
    verb,
)
from headroom_core.learn.steps import Step

WINDOW = 5  # a correction must come within this many calls after the failure
SETUP_WINDOW = 10  # a failure and its identical re-run, with a set-up in between
MAX_DISTANCE_RATIO = 0.40  # two command lines are similar within this share of the longer one's length
EDIT_RANGE = re.compile(r"^edit (\d+):(\d+)$")
_MISSING_PARAM = re.compile(
    r"parameter `([^`]+)` is missing|missing (?:required )?(?:parameter|argument|field)s?:? ['\"`]?(\w+)", re.I
)
# the failure was about how the command was run, or a missing dependency: a command can fix it
_INVOCATION = re.compile(
    r"(?i)command not found|: not found\b|is not recognized as|no such file or directory|can't open file|cannot find the (?:path|file)"
    r"|does not exist|\benoent\b|not a directory|is a directory|unrecognized (?:cli )?(?:option|argument|arguments|command|subcommand|parameter|flag)"
    r"|unknown (?:cli )?(?:option|command|flag|argument|subcommand|target|switch|parameter)|invalid (?:option|choice|argument|command|subcommand|flag)"
    r"|no such (?:option|command|subcommand|script)|is not a \w+ command|did you mean|\busage:|requires (?:an |a value|at least)"
    r"|missing (?:required )?argument|too many arguments|unexpected argument|missing script|no rule to make target"
    r"|no tests ran|collected 0 items|no test files|file or directory not found|not a git repository|no upstream branch"
    r"|has no upstream|couldn't find remote ref|did not match any file|could not find [`'\"]?(?:a |an )?(?:file|package\.json|cargo\.toml|pyproject|manage\.py|makefile|project|go\.mod)"
    r"|no package\.json|permission denied|modulenotfounderror|no module named|cannot find (?:package|module)|err_module_not_found"
    r"|cannot load such file|no required module provides|can't find crate|not installed|not available|could not locate"
    r"|unable to (?:locate|find)|executable file not found|no such host|error: externally-managed-environment"
    r"|unable to resolve dependency tree|eresolve|no matching distribution found|could not find a version that satisfies"
    r"|requires a different python|ebadengine|unsupported engine|not supported on this platform|no matching manifest"
    r"|exec format error|connection refused|econnrefused|failed to connect|could not connect|cannot connect to the docker daemon"
    r"|is the docker daemon running|no such container|no such image|pull access denied|unknown file extension"
    r"|updates were rejected|fetch first|non-fast-forward|no such table|no such column|relation \S+ does not exist"
    r"|database \S+ does not exist|unapplied migration|migrations? (?:have not|not) (?:been )?applied|run migrations"
)
_MISSING_WHAT = re.compile(
    r"(?i)cannot find (?:package|module) ['\"]([^'\"]+)['\"]|no module named ['\"]?([\w.\-]+)|cannot load such file -- (\S+)"
    r"|no required module provides package (\S+)|can't find crate for `([^`]+)`|package ([\w.]+) does not exist"
    r"|command not found: (\S+)|(\S+): command not found|(\S+): not found|'(\S+)' is not recognized|could not find (?:gem|package) ['\"]?([\w.\-]+)"
    r"|no such file or directory[:,]? ['\"]?([^'\"\s]+)|['\"]?([^'\"\s:]+)['\"]?: no such file or directory"
    r"|can't open file ['\"]([^'\"]+)['\"]|executable file not found in \$path: \"?(\S+?)\"?"
)
MISSING_DEP = re.compile(
    r"(?i)no module named|cannot find (?:package|module)|err_module_not_found|modulenotfounderror|cannot load such file"
    r"|no required module provides|can't find crate|could not find (?:gem|package)"
)
_PROGRAM_MISSING = re.compile(
    r"(?i)command not found|is not recognized as an internal|: not found\b|executable file not found|not installed"
)
NO_SUCH_VERB = re.compile(
    r"(?i)missing script|no rule to make target|unknown (?:command|script|task|target|subcommand)|is not a \w+ command"
    r"|no such (?:command|subcommand|task|script)|command \S+ not found|task \S+ not found"
)
WAITING = re.compile(r"(?i)timed out|eoferror|eof when reading|end of file|no input|waiting for input|input\(\)")
NOT_FOUND_TEXT = re.compile(
    r"(?i)did not appear verbatim|not found in (?:the )?file|no replacement was performed|not applied|failed to find expected lines"
    r"|no match(?:es)? found for"
)
#: the words of a line's set-up segments that are not its main command (``cd app && A``)
_NOT_MAIN = ("cd", "pushd", "export", "source", ".", "set", "unset", "alias", "ulimit")


def missing_param(error: str) -> str:
    """The parameter an input-validation error says is missing, or ``""``."""
    m = _MISSING_PARAM.search(error)
    return (m.group(1) or m.group(2) or "") if m else ""


def missing_things(error: str) -> set[str]:
    """What an error says is missing (a package, module, command or file), lower-case, with
    path tails and name parts (``'express'``, ``'yaml'``, ``'config.yaml'``)."""
    out: set[str] = set()
    for m in _MISSING_WHAT.finditer(error):
        for g in m.groups():
            if g:
                g = g.strip("'\"`:,.").lower()
                out.add(g)
                out.add(g.rsplit("/", 1)[-1])
                out.add(g.split(".", 1)[0])
    return {x for x in out if len(x) >= 2}


def invocation_error(error: str) -> bool:
    """Whether a failure is about how a command was run or what it lacks (not found, unknown
    option, missing script or module, no such file ...), not about the code it ran."""
    return bool(_INVOCATION.search(error)) and "syntax error, not executed" not in error


def invocation(f: Step) -> bool:
    """:func:`invocation_error` of the failure's summary or of the first or last lines of its
    output (where tools print why they did not run), not of everything it printed."""
    lines = [ln for ln in f.output.splitlines() if ln.strip()]
    return invocation_error(f.error) or invocation_error("\n".join(lines[:3] + lines[-3:]))


def similar(a: str, b: str) -> bool:
    """Whether two texts are within :data:`MAX_DISTANCE_RATIO` of the longer one's length in
    Levenshtein distance."""
    longest = max(len(a), len(b)) or 1
    limit = int(MAX_DISTANCE_RATIO * longest)
    return levenshtein(a, b, limit) <= limit


def main_command(command: str) -> tuple[int, list[str]]:
    """(segment index, words) of the first segment of the first line that is not a cd/export;
    ``(-1, [])`` when there is none."""
    for k, seg in enumerate(segments_of(first_line(command))):
        if seg.words[0] in _NOT_MAIN:
            continue
        return k, strip_wrappers(seg.words)
    return -1, []


def _norm(words: Sequence[str]) -> tuple[str, ...]:
    return tuple(strip_wrappers(list(words)))


def same_command(f: Step, s: Step) -> bool:
    """Whether two calls ran the same command line (normalized first lines)."""
    return normalize_command(f.first_line) == normalize_command(s.first_line)


def inline(f: Step, s: Step) -> list[Segment] | None:
    """When ``s``'s first line runs ``f``'s main command after other segments (``B && A``):
    those segments; else None."""
    k, fw = main_command(f.command)
    if k < 0 or not fw:
        return None
    f_rest = [seg for seg in segments_of(first_line(f.command))[k:]]
    segs = segments_of(first_line(s.command))
    for i in range(1, len(segs)):
        if segs[i].sep in ("&&", ";") and _norm(segs[i].words) == tuple(fw):
            tail_ok = all(_norm(a.words) == _norm(b.words) for a, b in zip(f_rest[1:], segs[i + 1 :]))
            return segs[:i] if tail_ok else None
    return None


def piped_into(f: Step, s: Step) -> str:
    """``… | A`` or ``A < file``: the feeder text, else ``""``."""
    _, fw = main_command(f.command)
    if not fw:
        return ""
    segs = segments_of(first_line(s.command))
    for i in range(1, len(segs)):
        if segs[i].sep == "|" and _norm(segs[i].words)[: len(fw)] == tuple(fw):
            return " | ".join(" ".join(x.words) for x in segs[:i])
    toks = shell_tokens(first_line(s.command))
    if "<" in toks and tuple(strip_wrappers(toks[: toks.index("<")])) == tuple(fw):
        return "< " + (toks[toks.index("<") + 1] if toks.index("<") + 1 < len(toks) else "")
    return ""


def related(b: Step, f: Step, ignore: frozenset[str]) -> bool:
    """Whether a set-up call ``b`` is about what ``f`` lacked: it names something ``f``'s error
    says is missing, or shares a name with ``f``'s error or command; a plain ``install`` (all
    dependencies) answers any missing module."""
    want = missing_things(f.failure_text)
    have = {t.lower() for t in substantive_tokens(b.command, ignore)} | {
        t.lower().rsplit("/", 1)[-1] for t in substantive_tokens(b.command, ignore)
    }
    if want and any(w == h or (len(w) >= 3 and w in h) for w in want for h in have):
        return True
    _, bw = main_command(b.command)
    if (
        MISSING_DEP.search(f.failure_text)
        and bw
        and verb(bw) in ("install", "sync")
        and not [p for p in bw[2:] if not p.startswith("-")]
    ):
        return True
    if MISSING_DEP.search(f.failure_text) and bw and any(x in ("-r", "--requirement", "-e", "--editable") for x in bw):
        return True
    context = name_tokens(f.failure_text) | {t.lower() for t in substantive_tokens(f.command, ignore)}
    return bool(context & {h for h in have if len(h) >= 4})


def edited(between: Sequence[Step]) -> bool:
    """Whether any of the calls changed code (an edit call, or a shell edit, worked or not)."""
    return any(b.is_edit or (b.ok and not b.is_shell and b.family == "edit") for b in between)


def setup_between(f: Step, between: Sequence[Step], ignore: frozenset[str]) -> Step | None:
    """The set-up call among ``between`` that explains why ``f`` works now: the last one
    :func:`related` to ``f``'s failure, else the last set-up when no code was edited in between
    and ``f`` failed at how it was run."""
    setups = [
        b
        for b in between
        if b.ok
        and b.is_shell
        and not b.is_edit
        and (line_is_setup(first_line(b.command)) or (is_server(b.command) and (b.background or b.outcome == TIMEOUT)))
    ]
    rel = [b for b in setups if related(b, f, ignore)]
    if rel:
        return rel[-1]
    return setups[-1] if setups and not edited(between) and invocation(f) else None


def program_missing(f: Step) -> bool:
    """Whether the failure says the program itself is missing or cannot run."""
    prog = (main_command(f.command)[1] or [""])[0]
    text = f.failure_text
    return bool(_PROGRAM_MISSING.search(f.error)) or bool(
        prog
        and re.search(
            rf"(?im)^(?:\S+: )*(?:line \d+: )?{re.escape(prog)}: (?:No such file or directory|Permission denied|command not found|not found)",
            text,
        )
    )


def typo(a: str, b: str) -> bool:
    """Two different words of three or more letters within two edits of each other."""
    return a != b and min(len(a), len(b)) >= 3 and levenshtein(a, b, 2) <= 2


def pathlike(t: str) -> bool:
    """Whether a word looks like a path (a ``/`` or a short file extension)."""
    return "/" in t or bool(re.search(r"\.[A-Za-z0-9]{1,5}$", t))


def same_file(a: str, b: str) -> bool:
    """Two paths to the same file: one name in another folder, or a name corrected by a typo."""
    na, nb = a.rstrip("/").rsplit("/", 1)[-1], b.rstrip("/").rsplit("/", 1)[-1]
    return na == nb or typo(na, nb)


def dedent(text: str) -> str:
    """The text with every line stripped of leading and trailing blanks."""
    return "\n".join(ln.strip() for ln in text.strip().splitlines())


def edit_texts(step: Step) -> str:
    """The text an edit call carries: the command for shell edits, else the string values of
    its arguments (``old_string``, ``new_string``, ``content`` ...)."""
    if step.command:
        return step.command
    try:
        args = json.loads(step.args)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than the decoder's limit
        return step.args
    if not isinstance(args, dict):
        return step.args
    return "\n\0\n".join(
        str(v) for k, v in sorted(args.items()) if isinstance(v, str) and k not in ("file_path", "path")
    )


def reread(f: Step, between: Sequence[Step]) -> tuple[Step, ...]:
    """The calls among ``between`` that showed ``f``'s file again."""
    return tuple(b for b in between if b.ok and b.is_read and (not f.target or not b.target or b.target == f.target))


def tool_reads(f: Step, between: Sequence[Step]) -> tuple[Step, ...]:
    """The calls among ``between`` that worked on ``f``'s file with another tool family (a
    ``Read`` before an ``Edit`` that had failed)."""
    return tuple(b for b in between if b.ok and f.target and b.target == f.target and b.family != f.family)


def relative(d: str, root: str) -> str:
    """``d`` relative to the project folder ``root`` when inside it, else ``d``."""
    return d[len(root) + 1 :] if root and d.startswith(root + "/") else d
