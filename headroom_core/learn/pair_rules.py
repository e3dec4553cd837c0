"""The pairing rules as data: does a later call ``s`` fix the failed call ``f``, and what lesson
does the pair teach? (the kinds: :class:`PairKind`; the walk over a session that asks:
:mod:`headroom_core.learn.pairing`; the facts the rules ask: :mod:`headroom_core.learn.pair_facts`).

Four tables of named rows, each evaluated **first match**: the first row whose ``applies`` holds
for the :class:`Candidate` decides, and no later row is asked. A row of :data:`MATCH_RULES`
with ``then`` hands the decision to that table. The last row of every table applies always
(``otherwise``). Adding a rule is adding a row, at the place its comment names; its unit test
(``tests/unit/test_learn_pair_rules.py``) gives an input that this row decides.

- :data:`MATCH_RULES`: the pair's kind, or None (no pair). Order: the family of the two calls
  first (a tool call and a shell command never pair; agent tools and shell edits have their own
  tables), then answer programs, then the same command line again (any distance up to
  ``SETUP_WINDOW``), then another command line (only within ``WINDOW``), where what the later
  line itself shows (the failed command after a ``cd`` or a set-up, fed by a pipe, retyped)
  is asked before whether the failure could be fixed by a command at all (``code-failure``),
  and that before which command fixed it.
- :data:`TOOL_RULES`: two agent tool calls (``Read``, ``Edit``, ``Task`` ...).
- :data:`EDIT_RULES`: how a rejected edit was corrected (line range, indentation, other text).
- :data:`SAME_JOB_RULES`: whether ``s`` does the job ``f`` failed to do by a corrected command
  (``True``/``False``), asked by ``MATCH_RULES``' ``same-job`` row.

Within each table a row that refuses (kind None, or ``False``) sits before the rows it guards:
``identical`` before ``similar-line``, ``far`` before every row about another command.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property
from typing import Callable, Sequence, TypeVar

from headroom_core.learn.outcome import TIMEOUT
from headroom_core.learn.pair_facts import (
    EDIT_RANGE,
    NO_SUCH_VERB,
    NOT_FOUND_TEXT,
    WAITING,
    WINDOW,
    dedent,
    edit_texts,
    edited,
    inline,
    invocation,
    main_command,
    missing_param,
    missing_things,
    pathlike,
    piped_into,
    program_missing,
    related,
    relative,
    reread,
    same_command,
    same_file,
    setup_between,
    similar,
    tool_reads,
    typo,
)
from headroom_core.learn.shell import (
    ANSWER_PROGRAMS,
    Segment,
    first_line,
    is_inspection,
    is_setup,
    job_flags,
    jobs,
    line_is_setup,
    literal,
    normalize_command,
    runs_file,
    segments_of,
    select_flags,
    substantive_tokens,
    unsafe_parts,
    verb,
    word_program,
)
from headroom_core.learn.steps import Step


class PairKind(StrEnum):
    """What a failure -> fix pair teaches (the module docstring of
    :mod:`~headroom_core.learn.pairing` describes each). A ``str``: compares equal to the kind's
    text, which is what rules and the database store."""

    COMMAND = "command"
    SETUP = "setup"
    CWD = "cwd"
    STDIN = "stdin"
    BACKGROUND = "background"
    PREREQUISITE = "prerequisite"
    PARAM = "param"
    EDIT_RANGE = "edit-range"
    EDIT_INDENT = "edit-indent"
    RETRY = "retry"


@dataclass(frozen=True)
class Candidate:
    """A failed call ``f``, a later call ``s`` and the calls ``between`` them (one thread, call
    order); ``ignore``: tokens that never relate two commands (the project's folder); ``root``:
    the project's folder without a trailing ``/``. The properties are the facts the rules ask,
    each computed once, when a row first asks it."""

    f: Step
    s: Step
    between: Sequence[Step] = ()
    ignore: frozenset[str] = frozenset()
    root: str = ""

    @cached_property
    def near(self) -> bool:
        """``s`` comes within :data:`~.pair_facts.WINDOW` calls of ``f``."""
        return len(self.between) < WINDOW

    @cached_property
    def f_main(self) -> tuple[int, list[str]]:
        """:func:`~.pair_facts.main_command` of ``f``."""
        return main_command(self.f.command)

    @cached_property
    def s_main(self) -> tuple[int, list[str]]:
        """:func:`~.pair_facts.main_command` of ``s``."""
        return main_command(self.s.command)

    @property
    def wf(self) -> list[str]:
        """The words of ``f``'s main command."""
        return self.f_main[1]

    @property
    def ws(self) -> list[str]:
        """The words of ``s``'s main command."""
        return self.s_main[1]

    @cached_property
    def pf(self) -> str:
        """``f``'s program."""
        return word_program(self.wf)

    @cached_property
    def ps(self) -> str:
        """``s``'s program."""
        return word_program(self.ws)

    @cached_property
    def same_command(self) -> bool:
        """Both ran the same command line."""
        return same_command(self.f, self.s)

    @cached_property
    def invocation(self) -> bool:
        """``f`` failed at how it was run (:func:`~.pair_facts.invocation`)."""
        return invocation(self.f)

    @cached_property
    def program_missing(self) -> bool:
        """``f``'s error says its program is missing or cannot run."""
        return program_missing(self.f)

    @cached_property
    def param(self) -> str:
        """The parameter ``f``'s error says is missing, or ``""``."""
        return missing_param(self.f.error)

    @cached_property
    def tool_reads(self) -> tuple[Step, ...]:
        """Calls between that worked on ``f``'s file with another tool family."""
        return tool_reads(self.f, self.between)

    @cached_property
    def edit_texts(self) -> tuple[str, str]:
        """The texts the two edits carry."""
        return edit_texts(self.f), edit_texts(self.s)

    @cached_property
    def edit_kind(self) -> PairKind | None:
        """How ``s`` corrected the edit ``f`` (:data:`EDIT_RULES`)."""
        return decide(EDIT_RULES, self)[-1].kind

    @cached_property
    def setup(self) -> Step | None:
        """The set-up call between that explains why ``f`` works now."""
        return setup_between(self.f, self.between, self.ignore)

    @cached_property
    def inline(self) -> list[Segment] | None:
        """The segments before ``f``'s command on ``s``'s line (``B && A``), or None."""
        return inline(self.f, self.s)

    @property
    def inline_cds(self) -> list[Segment]:
        """The ``cd``/``pushd`` segments of :attr:`inline`."""
        return [seg for seg in self.inline or () if seg.words[0] in ("cd", "pushd")]

    @property
    def inline_others(self) -> list[Segment]:
        """The other segments of :attr:`inline`."""
        return [seg for seg in self.inline or () if seg.words[0] not in ("cd", "pushd")]

    @property
    def inline_dir(self) -> str:
        """The folder the last ``cd`` of :attr:`inline` went to (``~`` for a bare ``cd``)."""
        last = self.inline_cds[-1]
        return last.words[1] if len(last.words) > 1 else "~"

    @cached_property
    def feeder(self) -> str:
        """What ``s`` pipes or redirects into ``f``'s command, or ``""``."""
        return piped_into(self.f, self.s)

    @cached_property
    def shared_words(self) -> set[str]:
        """Substantive words both main commands share."""
        return substantive_tokens(" ".join(self.wf), self.ignore) & substantive_tokens(" ".join(self.ws), self.ignore)


def _no_detail(c: Candidate) -> str:
    return ""


@dataclass(frozen=True)
class PairRule:
    """One row of a pairing table. ``applies``: whether it decides this candidate (asked only
    when no earlier row did); ``kind``: the pair's kind, None for no pair; ``doc``: what it means
    and why; ``detail``: the pair's detail text (set-up command, folder, feeder, parameter);
    ``then``: a table that decides instead (``kind`` is then unused)."""

    name: str
    applies: Callable[[Candidate], bool]
    kind: PairKind | None
    doc: str
    detail: Callable[[Candidate], str] = _no_detail
    then: tuple[PairRule, ...] = ()


@dataclass(frozen=True)
class JobRule:
    """One row of :data:`SAME_JOB_RULES`: ``same`` is the answer when ``applies`` holds."""

    name: str
    applies: Callable[[Candidate], bool]
    same: bool
    doc: str


R = TypeVar("R", PairRule, JobRule)


def first_match(table: Sequence[R], c: Candidate) -> R:
    """The first row of ``table`` that applies to ``c``. Raises ValueError when none does (every
    table ends with a row that always applies)."""
    for row in table:
        if row.applies(c):
            return row
    raise ValueError("no row of the table applies")


def decide(table: Sequence[PairRule], c: Candidate) -> tuple[PairRule, ...]:
    """The rows that decide ``c``: the first that applies and, when it hands over (``then``),
    the rows deciding in that table; the last is the one whose kind and detail hold."""
    row = first_match(table, c)
    return (row, *decide(row.then, c)) if row.then else (row,)


def same_job(c: Candidate) -> bool:
    """Whether ``c.s`` does the job ``c.f`` failed to do, by a corrected command
    (:data:`SAME_JOB_RULES`). Assumes ``f`` failed with an invocation error."""
    return first_match(SAME_JOB_RULES, c).same


def _always(c: Candidate) -> bool:
    return True


def _range_moved(c: Candidate) -> bool:
    """``edit N:M`` again from the same line N to another M, with the same text."""
    f, s = c.f, c.s
    mf, ms = EDIT_RANGE.match(f.first_line), EDIT_RANGE.match(s.first_line)
    body_f, body_s = f.command.strip().split("\n", 1)[1:], s.command.strip().split("\n", 1)[1:]
    return bool(mf and ms and mf.group(1) == ms.group(1) and mf.group(2) != ms.group(2) and body_f == body_s)


EDIT_RULES: tuple[PairRule, ...] = (
    # what makes two edits incomparable comes first
    PairRule("not-both-edits", lambda c: not (c.f.is_edit and c.s.is_edit), None, "Only an edit corrects an edit."),
    PairRule(
        "other-file",
        lambda c: bool(c.f.target and c.s.target) and c.f.target != c.s.target,
        None,
        "Edits of two different files are two jobs.",
    ),
    PairRule(
        "other-edit-command",
        lambda c: c.f.is_shell and c.s.is_shell and c.wf[:1] != c.ws[:1],
        None,
        "Shell edits by two different edit commands (edit vs str_replace_editor) are not compared.",
    ),
    PairRule(
        "same-text",
        lambda c: c.edit_texts[0].strip() == c.edit_texts[1].strip(),
        None,
        "The same text again: it simply worked the second time.",
    ),
    # then the correction, most specific first: only the range's end moved, only indentation, anything else
    PairRule(
        "line-range",
        lambda c: c.f.is_shell and _range_moved(c),
        PairKind.EDIT_RANGE,
        "`edit N:M` again with the same text and another end line M.",
    ),
    PairRule(
        "indentation",
        lambda c: dedent(c.edit_texts[0]) == dedent(c.edit_texts[1]),
        PairKind.EDIT_INDENT,
        "The same text with only its indentation changed (whitespace compared exactly before).",
    ),
    PairRule("other-text", _always, PairKind.RETRY, "Another text: a content fix that makes no general rule."),
)

TOOL_RULES: tuple[PairRule, ...] = (
    # refusals: too far, another kind of tool, another file
    PairRule("far", lambda c: not c.near, None, "Tool calls pair only within WINDOW calls."),
    PairRule("other-family", lambda c: c.f.family != c.s.family, None, "A read does not fix an edit, nor the reverse."),
    PairRule(
        "other-file",
        lambda c: bool(c.f.target or c.s.target) and c.f.target != c.s.target,
        None,
        "Calls on two different files are two jobs.",
    ),
    # calls without a file: the missing parameter decides, else the call must be the same tool with similar arguments
    PairRule(
        "param-given",
        lambda c: not (c.f.target or c.s.target) and bool(c.param) and c.param in c.s.keys and c.param not in c.f.keys,
        PairKind.PARAM,
        "The parameter the error named missing is given now.",
        detail=lambda c: c.param,
    ),
    PairRule(
        "param-not-given",
        lambda c: not (c.f.target or c.s.target) and bool(c.param),
        None,
        "The error named a missing parameter and the later call still lacks it (or had it already).",
    ),
    PairRule(
        "other-call",
        lambda c: (
            not (c.f.target or c.s.target)
            and not (c.f.tool == c.s.tool and c.f.args != c.s.args and similar(c.f.args[:300], c.s.args[:300]))
        ),
        None,
        "Without a file, only the same tool with other but similar arguments can be a correction.",
    ),
    PairRule(
        "same-call",
        lambda c: c.f.args == c.s.args and not c.tool_reads,
        None,
        "The same call simply worked the second time: nothing to learn.",
    ),
    # what the correction was, most specific first
    PairRule(
        "indentation",
        lambda c: c.f.family == "edit" and c.f.args != c.s.args and c.edit_kind == PairKind.EDIT_INDENT,
        PairKind.EDIT_INDENT,
        "An Edit whose text changed only in indentation (EDIT_RULES).",
    ),
    PairRule(
        "read-first",
        lambda c: bool(c.f.target) and bool(c.tool_reads),
        PairKind.PREREQUISITE,
        "Another tool worked on the file in between (Read before Edit).",
    ),
    PairRule(
        "param",
        lambda c: bool(c.param) and c.param in c.s.keys,
        PairKind.PARAM,
        "The parameter the error named missing is given (calls on a file).",
        detail=lambda c: c.param,
    ),
    PairRule("otherwise", _always, PairKind.RETRY, "Other arguments: a content fix that makes no general rule."),
)


def _changed_literals(c: Candidate) -> bool:
    """Only free text changed (a message, an answer): every differing word is a literal."""
    changed = set(c.wf[1:]) ^ set(c.ws[1:])
    return bool(changed) and all(literal(t) for t in changed)


def _other_verb(c: Candidate) -> bool:
    """Another verb that is no typo of the first, no other path to the same file, and not the
    same job named again after the failure said there is no such verb."""
    vf, vs = verb(c.wf), verb(c.ws)
    return vf != vs and not (
        typo(vf, vs)
        or (pathlike(vf) and pathlike(vs) and same_file(vf, vs))
        or bool(NO_SUCH_VERB.search(c.f.failure_text) and jobs(c.wf) & jobs(c.ws))
    )


def _installs_program(c: Candidate) -> bool:
    """A segment of ``s``'s line is a set-up naming ``f``'s program (installing or enabling it)."""
    wf = c.wf
    prog_names = {wf[0], wf[0].removeprefix("./"), word_program(wf)}
    return any(
        is_setup(seg.words) and bool(prog_names & {w.removeprefix("./") for w in seg.words[1:]})
        for seg in segments_of(first_line(c.s.command))
    )


def _same_tail(c: Candidate) -> bool:
    """``s``'s arguments end with all of ``f``'s."""
    rest_f, rest_s = c.wf[1:], c.ws[1:]
    return bool(rest_f) and rest_s[-len(rest_f) :] == rest_f


def _shares_operand(c: Candidate) -> bool:
    """A substantive word, an operand or a job in common, or ``s`` runs ``f``'s script path."""
    wf = c.wf
    operands_f = {x.removeprefix("./").rstrip("/") for x in wf[1:] if not x.startswith("-")}
    operands_s = {x.removeprefix("./").rstrip("/") for x in c.ws[1:] if not x.startswith("-")}
    script = wf[0].removeprefix("./")
    return bool(
        c.shared_words
        or (operands_f & operands_s)
        or (jobs(wf) & jobs(c.ws))
        or ("/" in wf[0] and script in operands_s)
    )


def _main_segment(command: str, index: int) -> tuple[str, ...]:
    return segments_of(first_line(command))[index].words


def _starts_server(c: Candidate) -> bool:
    """The common job is starting something (a server), or ``f`` starts and ``s`` runs a file."""
    common = jobs(c.wf) & jobs(c.ws)
    return common == {"start"} or ("start" in jobs(c.wf) and bool(runs_file(c.ws)))


SAME_JOB_RULES: tuple[JobRule, ...] = (
    # a later command that does another job is never the fix, whatever else it shares
    JobRule("no-command", lambda c: not c.wf or not c.ws, False, "One of the lines has no command (only cd/export)."),
    JobRule(
        "adds-job-flag",
        lambda c: bool(job_flags(c.ws) - job_flags(c.wf)),
        False,
        "s adds a checking or listing flag (--check, --help, --dry-run, --collect-only): another job.",
    ),
    JobRule(
        "selects-part",
        lambda c: bool(select_flags(c.ws)) and not select_flags(c.wf),
        False,
        "s runs part of a test suite (-k, -t, --ignore): another job.",
    ),
    JobRule(
        "forces-or-skips",
        lambda c: bool(
            unsafe_parts(_main_segment(c.s.command, c.s_main[0]))
            - unsafe_parts(_main_segment(c.f.command, c.f_main[0]))
        ),
        False,
        "s forces or skips checks (--force, --no-verify, sudo): another job.",
    ),
    # the same program: another verb, free text or the very same line is no correction
    JobRule(
        "same-program-looks",
        lambda c: c.pf == c.ps and is_inspection(c.wf),
        False,
        "Looking again with other arguments (ls, cat, grep) teaches no command.",
    ),
    JobRule(
        "same-program-answer",
        lambda c: c.pf == c.ps and c.pf in ANSWER_PROGRAMS,
        False,
        "Another answer (submit) is no command lesson.",
    ),
    JobRule(
        "other-verb",
        lambda c: c.pf == c.ps and _other_verb(c),
        False,
        "Another verb or script (npm run test after npm run start) does another job.",
    ),
    JobRule(
        "free-text-only",
        lambda c: c.pf == c.ps and _changed_literals(c),
        False,
        "Only free text changed (a message, a submitted answer).",
    ),
    JobRule(
        "identical",
        lambda c: c.pf == c.ps and c.f.first_line == c.s.first_line and c.f.workdir == c.s.workdir,
        False,
        "The very same line in the same folder corrects nothing.",
    ),
    JobRule(
        "similar-line",
        lambda c: c.pf == c.ps and similar(normalize_command(" ".join(c.wf)), normalize_command(" ".join(c.ws))),
        True,
        "The same program with a similar line: other flags or a corrected path.",
    ),
    JobRule(
        "shared-words",
        lambda c: c.pf == c.ps and bool(c.shared_words),
        True,
        "The same program sharing a substantive word (a file, a target).",
    ),
    JobRule("same-program-otherwise", lambda c: c.pf == c.ps, False, "The same program on unrelated words."),
    # another program doing the same thing
    JobRule(
        "same-script",
        lambda c: bool(runs_file(c.wf)) and runs_file(c.wf) == runs_file(c.ws),
        True,
        "The same script run another way (ts-node a.ts -> npx tsx a.ts).",
    ),
    JobRule(
        "same-arguments",
        lambda c: len(c.wf) > 1 and tuple(c.ws[-(len(c.wf) - 1) :]) == tuple(c.wf[1:]) and not is_inspection(c.ws),
        True,
        "The same arguments to another tool (pip install x -> uv pip install x).",
    ),
    JobRule(
        "looks-instead",
        lambda c: is_inspection(c.ws) and not c.program_missing,
        False,
        "A command that only looks teaches nothing unless the program itself was missing.",
    ),
    # the program itself was missing: another program on the same things does the job
    JobRule(
        "installs-the-program",
        lambda c: c.program_missing and _installs_program(c),
        False,
        "Installing or enabling the missing program is a set-up, not another way to do the job.",
    ),
    JobRule(
        "missing-program-same-arguments",
        lambda c: c.program_missing and _same_tail(c),
        True,
        "The missing program replaced, its arguments kept.",
    ),
    JobRule(
        "missing-program-related",
        lambda c: c.program_missing and _shares_operand(c),
        True,
        "The missing program replaced by one on the same files, words or job.",
    ),
    JobRule("missing-program-otherwise", lambda c: c.program_missing, False, "Another program on unrelated things."),
    # otherwise a common job decides (test, build, lint, start ...)
    JobRule("no-common-job", lambda c: not (jobs(c.wf) & jobs(c.ws)), False, "No job in common."),
    JobRule("looks", lambda c: is_inspection(c.wf), False, "The failed command only looked."),
    JobRule(
        "server-kept-running",
        lambda c: _starts_server(c) and (c.s.outcome == TIMEOUT or c.s.background),
        True,
        "Starting something: s kept running (timed out under the harness, or in the background).",
    ),
    JobRule("server-stopped", _starts_server, False, "Starting something: s stopped, so it served nothing."),
    JobRule("common-job", _always, True, "Another program doing a job in common (yarn test -> npm test)."),
)


def _setup_detail(c: Candidate) -> str:
    return c.setup.first_line if c.setup is not None else ""


def _shell_edit(c: Candidate) -> bool:
    return c.f.is_edit or c.s.is_edit


def _inline_setup(c: Candidate) -> bool:
    return (
        c.inline is not None
        and bool(c.inline_others)
        and not is_inspection(c.wf)
        and any(is_setup(seg.words) for seg in c.inline_others)
    )


def _inline_cd_only(c: Candidate) -> bool:
    return c.inline is not None and bool(c.inline_cds) and not c.inline_others


def _cd_teaches_nothing(c: Candidate) -> bool:
    """The ``cd`` went to the project's root, home, back or nowhere, or the failure was not
    about how the command was run."""
    return c.inline_dir.rstrip("/") in (c.root, "", "~", "-", "..", ".") or not c.invocation


def _installs_missing(c: Candidate) -> bool:
    return (
        not is_inspection(c.wf)
        and bool(missing_things(c.f.failure_text))
        and line_is_setup(first_line(c.s.command))
        and related(c.s, c.f, c.ignore)
    )


MATCH_RULES: tuple[PairRule, ...] = (
    # the family of the two calls: tool calls and shell edits have their own tables
    PairRule(
        "mixed-call",
        lambda c: c.f.is_shell != c.s.is_shell,
        None,
        "A tool call and a shell command never fix each other.",
    ),
    PairRule(
        "tool-calls", lambda c: not c.f.is_shell, None, "Two agent tool calls: TOOL_RULES decides.", then=TOOL_RULES
    ),
    PairRule("edit-far", lambda c: _shell_edit(c) and not c.near, None, "Shell edits pair only within WINDOW calls."),
    PairRule(
        "edit-after-reread",
        lambda c: (
            _shell_edit(c)
            and c.edit_kind == PairKind.RETRY
            and bool(NOT_FOUND_TEXT.search(c.f.error))
            and bool(reread(c.f, c.between))
        ),
        PairKind.PREREQUISITE,
        "The text to replace was not in the file; viewing the file again gave the right one.",
    ),
    PairRule("edit", _shell_edit, None, "A shell edit: EDIT_RULES decides.", then=EDIT_RULES),
    # answers are content, never commands
    PairRule(
        "answer-retyped",
        lambda c: c.pf in ANSWER_PROGRAMS and c.near and c.ws[:1] == c.wf[:1],
        PairKind.RETRY,
        "Another answer (submit, check_flag): a content fix.",
    ),
    PairRule("answer", lambda c: c.pf in ANSWER_PROGRAMS, None, "An answer is fixed only by another answer."),
    # the same command line again, up to SETUP_WINDOW away: what changed around it
    PairRule(
        "same-command-far-away",
        lambda c: c.same_command and c.f.workdir != c.s.workdir and not c.near,
        None,
        "The same line from another folder counts only within WINDOW calls.",
    ),
    PairRule(
        "same-command-from-root",
        lambda c: c.same_command and c.f.workdir != c.s.workdir and c.s.workdir.rstrip("/") == c.root,
        PairKind.RETRY,
        "The same line run from the project's root: the shell had only wandered off.",
    ),
    PairRule(
        "same-command-elsewhere",
        lambda c: c.same_command and c.f.workdir != c.s.workdir,
        PairKind.CWD,
        "The same line worked from another folder (Codex workdir).",
        detail=lambda c: relative(c.s.workdir, c.root),
    ),
    PairRule(
        "background",
        lambda c: c.same_command and c.near and c.s.background and not c.f.background and "timed out" in c.f.error,
        PairKind.BACKGROUND,
        "It timed out under the harness; started in the background it worked.",
    ),
    PairRule(
        "same-inspection", lambda c: c.same_command and is_inspection(c.wf), None, "Looking again teaches nothing."
    ),
    PairRule(
        "setup-between",
        lambda c: c.same_command and c.setup is not None,
        PairKind.SETUP,
        "A set-up in between (install, create, migrate, a server started) made it work.",
        detail=_setup_detail,
    ),
    PairRule(
        "code-edited-between",
        lambda c: c.same_command and edited(c.between),
        PairKind.RETRY,
        "The code was changed in between: a content fix.",
    ),
    PairRule(
        "same-command-again", lambda c: c.same_command, None, "It simply worked the second time: nothing to learn."
    ),
    # another command line: only within WINDOW calls
    PairRule("far", lambda c: not c.near, None, "Another command fixes a failure only within WINDOW calls."),
    # the failed command again on a longer line (B && A, cd x && A)
    PairRule(
        "inline-setup",
        _inline_setup,
        PairKind.SETUP,
        "`B && A` where B prepares the environment.",
        detail=lambda c: " && ".join(" ".join(seg.words) for seg in c.inline or ()),
    ),
    PairRule(
        "inline-cd-no-lesson",
        lambda c: _inline_cd_only(c) and _cd_teaches_nothing(c),
        PairKind.RETRY,
        "`cd x && A` to the root, home or back, or after a failure about the code: no folder lesson.",
    ),
    PairRule(
        "inline-cd",
        _inline_cd_only,
        PairKind.CWD,
        "`cd x && A`: A is run from folder x.",
        detail=lambda c: relative(c.inline_dir.rstrip("/"), c.root),
    ),
    PairRule(
        "inline-other", lambda c: c.inline is not None, PairKind.RETRY, "`B && A` for any other B: no general rule."
    ),
    # what the later line shows about the failure
    PairRule(
        "stdin",
        lambda c: bool(c.feeder) and bool(WAITING.search(c.f.failure_text)),
        PairKind.STDIN,
        "It waited for input; `… | A` or `A < file` worked.",
        detail=lambda c: c.s.first_line,
    ),
    PairRule(
        "retyped",
        lambda c: (
            "syntax error, not executed" in c.f.error
            and c.ws[:1] == c.wf[:1]
            and similar(c.f.first_line, c.s.first_line)
        ),
        PairKind.RETRY,
        "A mistyped command line, retyped.",
    ),
    # only a failure about how the command was run can be fixed by another command
    PairRule(
        "code-failure",
        lambda c: not c.invocation,
        None,
        "It failed because the code is wrong: another command is no fix.",
    ),
    PairRule("same-job", same_job, PairKind.COMMAND, "A corrected command doing the same job (SAME_JOB_RULES)."),
    PairRule(
        "installs-missing",
        _installs_missing,
        PairKind.SETUP,
        "It installs or creates what the error says is missing.",
        detail=lambda c: c.s.first_line,
    ),
    PairRule("otherwise", _always, None, "No relation found."),
)

#: the kinds a checker that ran but reported problems (not ``s.ok``) may fix
CHECKER_KINDS = frozenset({PairKind.COMMAND, PairKind.CWD})
