"""Failed call -> the call that fixed it: the pairing both the live learner and ``headroom learn``
use. Pure functions over :class:`~headroom_core.learn.steps.Step` sequences (one thread of one
session, in call order).

A failure is paired with a later call that worked, of one of these kinds:

- ``command``: the same job done by a corrected command: the same program with other flags or a
  corrected path (``pytest tests`` -> ``python -m pytest tests``), the same arguments to another
  tool (``pip install x`` -> ``uv pip install x``), the same script run another way
  (``ts-node a.ts`` -> ``npx tsx a.ts``), or another program when the first is missing or has no
  such job (``yarn test`` -> ``npm test``; ``npm run start`` with no ``start`` script -> ``node
  express.js`` serving). Only when the failure was about *how the command was run* (not found,
  unknown option, missing script, no such file, a missing module): when a command fails because
  the code is wrong, another command that works is no fix. A command that adds a checking or
  listing flag (``node --check``, ``--help``, ``--dry-run``, ``--collect-only``), runs part of a
  test suite (``-k``, ``-t``, ``--ignore``), forces or skips checks (``--force``,
  ``--no-verify``, ``sudo``), or runs another verb or script (``npm run test`` after ``npm run
  start``) does another job and is never the fix; neither is a change of free text only (a
  message, a submitted answer). Commands that only look (``ls``, ``cat``, ``grep`` ...) teach no
  command unless the program itself was missing. A checker that ran and reported problems in
  the code (tests, lint, type check, build) counts as the fix of a command that could not run.
- ``setup``: "A fails -> B (any program) works -> A works": B prepared the environment (installs,
  creates, builds, migrates, activates: :func:`~.shell.is_setup`) and relates to A's error; or
  B installs/creates exactly what A's error says is missing (A need not be run again); or the
  fix is ``B && A`` in one line. Not when A then fails again the same way.
- ``cwd``: the same command worked from another folder (``cd app && A``, or Codex ``workdir``);
  not when that folder is the project's own root (the shell had only wandered off).
- ``stdin``: A hung or failed waiting for input; ``… | A`` or ``A < file`` worked.
- ``background``: A timed out under the harness; the same command started in the background
  worked.
- ``prerequisite``: the same tool call worked after another call on the same file (``Read``
  before ``Edit``; viewing the file again before an agent shell's edit whose text was not in
  it); ``param``: a missing required parameter given.
- ``edit-range`` / ``edit-indent``: a rejected edit fixed by the same text over a corrected line
  range / with only its indentation changed (every edit style: ``edit N:M``, ``edit 'old'
  'new'``, ``str_replace_editor``, ``Edit``; whitespace is compared exactly).
- ``retry``: a content-specific correction (code edited in between, another message, another
  answer) that makes no general rule.

Each success fixes at most one failure (the nearest before it, within :data:`WINDOW` calls,
:data:`SETUP_WINDOW` for a set-up between a failure and its identical re-run); the earlier
failures it also answers are the pair's ``retries``. The windows are this project's choices,
tuned on the logs in ``../shared`` and the hand-made ones in ``tests/learn_logs``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Sequence

from headroom_core.learn.outcome import NO_MATCH_FOUND, TIMEOUT, error_signature
from headroom_core.learn.shell import (
    ANSWER_PROGRAMS,
    first_line,
    is_inspection,
    is_server,
    is_setup,
    job_flags,
    jobs,
    levenshtein,
    line_is_setup,
    literal,
    name_tokens,
    normalize_command,
    runs_file,
    segments_of,
    select_flags,
    shell_tokens,
    strip_wrappers,
    substantive_tokens,
    unsafe_parts,
    verb,
    word_program,
)
from headroom_core.learn.steps import Step

WINDOW = 5  # a correction must come within this many calls after the failure
SETUP_WINDOW = 10  # a failure and its identical re-run, with a set-up in between
MAX_DISTANCE_RATIO = 0.40
_EDIT_RANGE = re.compile(r"^edit (\d+):(\d+)$")
_MISSING_PARAM = re.compile(r"parameter `([^`]+)` is missing|missing (?:required )?(?:parameter|argument|field)s?:? ['\"`]?(\w+)", re.I)
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
_MISSING_DEP = re.compile(r"(?i)no module named|cannot find (?:package|module)|err_module_not_found|modulenotfounderror|cannot load such file"
                          r"|no required module provides|can't find crate|could not find (?:gem|package)")
_PROGRAM_MISSING = re.compile(r"(?i)command not found|is not recognized as an internal|: not found\b|executable file not found|not installed")
_NO_SUCH_VERB = re.compile(r"(?i)missing script|no rule to make target|unknown (?:command|script|task|target|subcommand)|is not a \w+ command"
                           r"|no such (?:command|subcommand|task|script)|command \S+ not found|task \S+ not found")
_WAITING = re.compile(r"(?i)timed out|eoferror|eof when reading|end of file|no input|waiting for input|input\(\)")


@dataclass(frozen=True)
class Pair:
    """A failed call and the call that fixed it.

    ``kind``: see the module docstring. ``between``: for ``prerequisite``/``setup``, the call(s)
    that made the difference; ``retries``: earlier failures the fix also answers, oldest first;
    ``param``: the parameter given (``param``); ``detail``: the set-up command (``setup``), the
    folder (``cwd``) or the input feeder (``stdin``) as text.
    """

    failed: Step
    fixed: Step
    kind: str
    between: tuple[Step, ...] = ()
    retries: tuple[Step, ...] = ()
    param: str = ""
    detail: str = ""


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


def _invocation(f: Step) -> bool:
    """:func:`invocation_error` of the failure's summary or of the first or last lines of its
    output (where tools print why they did not run), not of everything it printed."""
    lines = [ln for ln in f.output.splitlines() if ln.strip()]
    return invocation_error(f.error) or invocation_error("\n".join(lines[:3] + lines[-3:]))


def _similar(a: str, b: str) -> bool:
    longest = max(len(a), len(b)) or 1
    limit = int(MAX_DISTANCE_RATIO * longest)
    return levenshtein(a, b, limit) <= limit


def _main(command: str) -> tuple[int, list[str]]:
    """(segment index, words) of the first segment of the first line that is not a cd/export."""
    for k, seg in enumerate(segments_of(first_line(command))):
        if seg.words[0] in ("cd", "pushd", "export", "source", ".", "set", "unset", "alias", "ulimit"):
            continue
        return k, strip_wrappers(seg.words)
    return -1, []


def _norm(words: Sequence[str]) -> tuple[str, ...]:
    return tuple(strip_wrappers(list(words)))


def _same_command(f: Step, s: Step) -> bool:
    return normalize_command(f.first_line) == normalize_command(s.first_line)


def _inline(f: Step, s: Step) -> list | None:
    """When ``s``'s first line runs ``f``'s main command after other segments (``B && A``):
    those segments; else None."""
    k, fw = _main(f.command)
    if k < 0 or not fw:
        return None
    f_rest = [seg for seg in segments_of(first_line(f.command))[k:]]
    segs = segments_of(first_line(s.command))
    for i in range(1, len(segs)):
        if segs[i].sep in ("&&", ";") and _norm(segs[i].words) == tuple(fw):
            tail_ok = all(_norm(a.words) == _norm(b.words) for a, b in zip(f_rest[1:], segs[i + 1:]))
            return segs[:i] if tail_ok else None
    return None


def _piped_into(f: Step, s: Step) -> str:
    """``… | A`` or ``A < file``: the feeder text, else ``""``."""
    _, fw = _main(f.command)
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


def _related(b: Step, f: Step, ignore: frozenset[str]) -> bool:
    """Whether a set-up call ``b`` is about what ``f`` lacked: it names something ``f``'s error
    says is missing, or shares a name with ``f``'s error or command; a plain ``install`` (all
    dependencies) answers any missing module."""
    want = missing_things(f.failure_text)
    have = {t.lower() for t in substantive_tokens(b.command, ignore)} | {t.lower().rsplit("/", 1)[-1] for t in substantive_tokens(b.command, ignore)}
    if want and any(w == h or (len(w) >= 3 and w in h) for w in want for h in have):
        return True
    _, bw = _main(b.command)
    if _MISSING_DEP.search(f.failure_text) and bw and verb(bw) in ("install", "sync") and not [p for p in bw[2:] if not p.startswith("-")]:
        return True
    if _MISSING_DEP.search(f.failure_text) and bw and any(x in ("-r", "--requirement", "-e", "--editable") for x in bw):
        return True
    context = name_tokens(f.failure_text) | {t.lower() for t in substantive_tokens(f.command, ignore)}
    return bool(context & {h for h in have if len(h) >= 4})


def _setup_between(f: Step, between: Sequence[Step], ignore: frozenset[str]) -> Step | None:
    """The set-up call among ``between`` that explains why ``f`` works now (module docstring)."""
    setups = [b for b in between if b.ok and b.is_shell and not b.is_edit and (
        line_is_setup(first_line(b.command)) or (is_server(b.command) and (b.background or b.outcome == TIMEOUT)))]
    related = [b for b in setups if _related(b, f, ignore)]
    if related:
        return related[-1]
    edited = any(b.is_edit or (b.ok and not b.is_shell and b.family == "edit") for b in between)
    return setups[-1] if setups and not edited and _invocation(f) else None


def _program_missing(f: Step) -> bool:
    """Whether the failure says the program itself is missing or cannot run."""
    prog = (_main(f.command)[1] or [""])[0]
    text = f.failure_text
    return bool(_PROGRAM_MISSING.search(f.error)) or bool(
        prog and re.search(rf"(?im)^(?:\S+: )*(?:line \d+: )?{re.escape(prog)}: (?:No such file or directory|Permission denied|command not found|not found)", text)
    )


def _typo(a: str, b: str) -> bool:
    return a != b and min(len(a), len(b)) >= 3 and levenshtein(a, b, 2) <= 2


def _pathlike(t: str) -> bool:
    return "/" in t or bool(re.search(r"\.[A-Za-z0-9]{1,5}$", t))


def same_job(f: Step, s: Step, ignore: frozenset[str] = frozenset()) -> bool:
    """Whether ``s`` does the job ``f`` failed to do, by a corrected command (module docstring,
    ``command``). Assumes ``f`` failed with an invocation error."""
    _, wf = _main(f.command)
    _, ws = _main(s.command)
    if not wf or not ws:
        return False
    if job_flags(ws) - job_flags(wf) or (select_flags(ws) and not select_flags(wf)) or unsafe_parts(segments_of(first_line(s.command))[_main(s.command)[0]].words) - unsafe_parts(
            segments_of(first_line(f.command))[_main(f.command)[0]].words):
        return False
    pf, ps = word_program(wf), word_program(ws)
    if pf == ps:
        if is_inspection(wf) or pf in ANSWER_PROGRAMS:
            return False
        vf, vs = verb(wf), verb(ws)
        if vf != vs and not (_typo(vf, vs) or (_pathlike(vf) and _pathlike(vs) and _same_file(vf, vs))
                             or (_NO_SUCH_VERB.search(f.failure_text) and jobs(wf) & jobs(ws))):
            return False
        changed = set(wf[1:]) ^ set(ws[1:])
        if changed and all(literal(t) for t in changed):
            return False
        if f.first_line == s.first_line and f.workdir == s.workdir:
            return False
        if _similar(normalize_command(" ".join(wf)), normalize_command(" ".join(ws))):
            return True
        return bool(substantive_tokens(" ".join(wf), ignore) & substantive_tokens(" ".join(ws), ignore))
    if runs_file(wf) and runs_file(wf) == runs_file(ws):
        return True  # the same script run another way (ts-node -> tsx, node -> bun)
    if len(wf) > 1 and tuple(ws[-(len(wf) - 1):]) == tuple(wf[1:]) and not is_inspection(ws):
        return True  # the same arguments to another tool (pip install x -> uv pip install x, docker-compose up -> docker compose up)
    if is_inspection(ws) and not _program_missing(f):
        return False
    if _program_missing(f):
        prog_names = {wf[0], wf[0].removeprefix("./"), word_program(wf)}
        if any(is_setup(seg.words) and prog_names & {w.removeprefix("./") for w in seg.words[1:]} for seg in segments_of(first_line(s.command))):
            return False  # installing or enabling the program itself is a set-up, not another way to do the job
        rest_f, rest_s = wf[1:], ws[1:]
        if rest_f and rest_s[-len(rest_f):] == rest_f:
            return True
        operands_f = {x.removeprefix("./").rstrip("/") for x in rest_f if not x.startswith("-")}
        operands_s = {x.removeprefix("./").rstrip("/") for x in rest_s if not x.startswith("-")}
        shared = substantive_tokens(" ".join(wf), ignore) & substantive_tokens(" ".join(ws), ignore)
        script = wf[0].removeprefix("./")
        return bool(shared or (operands_f & operands_s) or (jobs(wf) & jobs(ws)) or ("/" in wf[0] and script in operands_s))
    common = jobs(wf) & jobs(ws)
    if not common or is_inspection(wf):
        return False
    if common == {"start"} or ("start" in jobs(wf) and runs_file(ws)):
        return s.outcome == TIMEOUT or s.background
    return True


def _same_file(a: str, b: str) -> bool:
    """Two paths to the same file: one name in another folder, or a name corrected by a typo."""
    na, nb = a.rstrip("/").rsplit("/", 1)[-1], b.rstrip("/").rsplit("/", 1)[-1]
    return na == nb or _typo(na, nb)


def _dedent(text: str) -> str:
    return "\n".join(ln.strip() for ln in text.strip().splitlines())


def _edit_texts(step: Step) -> str:
    """The text an edit call carries: the command for shell edits, else the string values of
    its arguments (``old_string``, ``new_string``, ``content`` ...)."""
    if step.command:
        return step.command
    try:
        args = json.loads(step.args)
    except ValueError:
        return step.args
    if not isinstance(args, dict):
        return step.args
    return "\n\0\n".join(str(v) for k, v in sorted(args.items()) if isinstance(v, str) and k not in ("file_path", "path"))


_NOT_FOUND_TEXT = re.compile(r"(?i)did not appear verbatim|not found in (?:the )?file|no replacement was performed|not applied|failed to find expected lines"
                             r"|no match(?:es)? found for")


def _reread(f: Step, between: Sequence[Step]) -> tuple[Step, ...]:
    """The calls among ``between`` that showed ``f``'s file again."""
    return tuple(b for b in between if b.ok and b.is_read and (not f.target or not b.target or b.target == f.target))


def _edit_match(f: Step, s: Step) -> str | None:
    if not (f.is_edit and s.is_edit):
        return None
    if f.target and s.target and f.target != s.target:
        return None
    if f.is_shell and s.is_shell and _main(f.command)[1][:1] != _main(s.command)[1][:1]:
        return None
    a, b = _edit_texts(f), _edit_texts(s)
    if a.strip() == b.strip():
        return None
    if f.is_shell:
        mf, ms = _EDIT_RANGE.match(f.first_line), _EDIT_RANGE.match(s.first_line)
        body_f, body_s = f.command.strip().split("\n", 1)[1:], s.command.strip().split("\n", 1)[1:]
        if mf and ms and mf.group(1) == ms.group(1) and mf.group(2) != ms.group(2) and body_f == body_s:
            return "edit-range"
    if _dedent(a) == _dedent(b):
        return "edit-indent"
    return "retry"


def _tool_match(f: Step, s: Step, between: Sequence[Step]) -> tuple[str, str] | None:
    """Pairs of non-shell tool calls (module docstring: prerequisite, param, edit-indent, retry)."""
    if f.family != s.family:
        return None
    reads = tuple(b for b in between if b.ok and f.target and b.target == f.target and b.family != f.family)
    if f.target or s.target:
        if f.target != s.target:
            return None
    else:
        p = missing_param(f.error)
        if p:
            if p in s.keys and p not in f.keys:
                return "param", p
            return None
        if not (f.tool == s.tool and f.args != s.args and _similar(f.args[:300], s.args[:300])):
            return None
    if f.args == s.args and not reads:
        return None  # the same call simply worked the second time: nothing to learn
    if f.family == "edit" and f.args != s.args and _edit_match(f, s) == "edit-indent":
        return "edit-indent", ""
    if f.target and reads:
        return "prerequisite", ""
    p = missing_param(f.error)
    if p and p in s.keys:
        return "param", p
    return "retry", ""


def ran(s: Step) -> bool:
    """Whether ``s`` did its job: it worked, or it is a checker (tests, lint, type check,
    build) that ran and reported problems in the code (not a failure to run)."""
    if s.ok:
        return s.outcome != NO_MATCH_FOUND
    if not s.is_shell or s.is_edit or invocation_error(s.error) or "timed out" in s.error:
        return False
    _, w = _main(s.command)
    return bool(jobs(w) & {"test", "lint", "typecheck", "build"})


def _relative(d: str, root: str) -> str:
    return d[len(root) + 1:] if root and d.startswith(root + "/") else d


def match(f: Step, s: Step, between: Sequence[Step], ignore: frozenset[str] = frozenset(), root: str = "") -> tuple[str, str] | None:
    """``(kind, detail)`` when ``s`` fixes the failed ``f`` with ``between`` the calls in
    between (module docstring), else None. ``s`` must have worked, or (for ``command`` and
    ``cwd``) be a checker that ran (:func:`ran`). ``ignore``: tokens that never relate two
    commands (the project's directory); ``root``: the project's own folder."""
    if f.ok or not ran(s):
        return None
    m = _match(f, s, between, ignore, root)
    if m is not None and not s.ok and m[0] not in ("command", "cwd"):
        return None
    return m


def _match(f: Step, s: Step, between: Sequence[Step], ignore: frozenset[str], root: str) -> tuple[str, str] | None:
    near = len(between) < WINDOW
    if not f.is_shell or not s.is_shell:
        if f.is_shell != s.is_shell or not near:
            return None
        return _tool_match(f, s, between)
    if f.is_edit or s.is_edit:
        kind = _edit_match(f, s) if near else None
        if kind == "retry" and _NOT_FOUND_TEXT.search(f.error) and _reread(f, between):
            return "prerequisite", ""  # the text to replace was wrong; viewing the file again gave the right one
        return (kind, "") if kind else None
    _, wf = _main(f.command)
    pf = word_program(wf) if wf else ""
    if pf in ANSWER_PROGRAMS:
        return ("retry", "") if near and _main(s.command)[1][:1] == wf[:1] else None
    root = root.rstrip("/")
    if _same_command(f, s):
        if f.workdir != s.workdir:
            if not near:
                return None
            return ("retry", "") if s.workdir.rstrip("/") == root else ("cwd", _relative(s.workdir, root))
        if near and s.background and not f.background and "timed out" in f.error:
            return "background", ""
        if is_inspection(wf):
            return None
        b = _setup_between(f, between, ignore)
        if b is not None:
            return "setup", b.first_line
        if any(x.is_edit or (x.ok and not x.is_shell and x.family == "edit") for x in between):
            return "retry", ""  # the code was changed in between: a content fix
        return None
    if not near:
        return None
    pre = _inline(f, s)
    if pre is not None:
        cds = [seg for seg in pre if seg.words[0] in ("cd", "pushd")]
        others = [seg for seg in pre if seg.words[0] not in ("cd", "pushd")]
        if others and not is_inspection(wf) and any(is_setup(seg.words) for seg in others):
            return "setup", " && ".join(" ".join(seg.words) for seg in pre)
        if cds and not others:
            d = cds[-1].words[1] if len(cds[-1].words) > 1 else "~"
            if d.rstrip("/") in (root, "", "~", "-", "..", ".") or not _invocation(f):
                return "retry", ""
            return "cwd", _relative(d.rstrip("/"), root)
        return "retry", ""
    feeder = _piped_into(f, s)
    if feeder and _WAITING.search(f.failure_text):
        return "stdin", s.first_line
    if "syntax error, not executed" in f.error and _main(s.command)[1][:1] == wf[:1] and _similar(f.first_line, s.first_line):
        return "retry", ""  # a mistyped command line, retyped
    if not _invocation(f):
        return None
    if same_job(f, s, ignore):
        return "command", ""
    if not is_inspection(wf) and missing_things(f.failure_text) and line_is_setup(first_line(s.command)) and _related(s, f, ignore):
        return "setup", s.first_line
    return None


def corrects(f: Step, s: Step, ignore: frozenset[str] = frozenset()) -> bool:
    """Whether the successful ``s`` fixes the failed ``f`` with a lesson (any kind but ``retry``)
    when nothing happened in between."""
    m = match(f, s, (), ignore)
    return m is not None and m[0] != "retry"


def find_pairs(steps: Sequence[Step], window: int = WINDOW, ignore: frozenset[str] = frozenset(), root: str = "") -> list[Pair]:
    """Every failure -> fix pair in ``steps`` (one thread, call order), in the order of the
    fixes. ``root``: the project's folder (see :func:`match`). Runs in O(n * SETUP_WINDOW)
    comparisons."""
    pairs: list[Pair] = []
    used: set[int] = set()
    for j, s in enumerate(steps):
        if not ran(s):
            continue
        lo = max(0, j - max(window, SETUP_WINDOW))
        for i in range(j - 1, lo - 1, -1):
            f = steps[i]
            if i in used or f.ok:
                continue
            between = steps[i + 1 : j]
            if len(between) >= window and not _same_command(f, s):
                continue
            m = match(f, s, between, ignore, root)
            if m is None:
                continue
            kind, detail = m
            retries = tuple(
                r for k, r in enumerate(steps[max(lo, i - window):i], max(lo, i - window))
                if k not in used and not r.ok and (r.signature == f.signature or (match(r, s, (), ignore, root) or ("",))[0] == kind
                                                   or (f.is_edit and r.is_edit and r.target == f.target and r.first_line == f.first_line))
            )
            used.add(i)
            used.update(k for k in range(lo, i) if steps[k] in retries)
            param = detail if kind == "param" else ""
            if kind == "prerequisite" and f.is_shell:
                between_steps = _reread(f, between)
            elif kind == "prerequisite":
                between_steps = tuple(b for b in between if b.ok and f.target and b.target == f.target and b.family != f.family)
            elif kind == "setup":
                between_steps = tuple(b for b in between if b.first_line == detail) or (s,)
            else:
                between_steps = ()
            pairs.append(Pair(f, s, kind, between_steps, retries, param, "" if kind == "param" else detail))
            break
    return [p for p in pairs if not _refuted(p, steps)]


def _refuted(p: Pair, steps: Sequence[Step]) -> bool:
    """A set-up that did not help: after it, the very command failed again the same way before
    it ever worked."""
    if p.kind != "setup":
        return False
    pos = {id(s): k for k, s in enumerate(steps)}
    start = max(pos.get(id(p.fixed), -1), *(pos.get(id(b), -1) for b in p.between))
    for later in steps[start + 1:]:
        if later.signature == p.failed.signature:
            return not later.ok and error_signature(later.error) == error_signature(p.failed.error)
    return False
