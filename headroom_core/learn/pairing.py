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

Which kind a pair is, and whether it is one, is decided by the tables of named rules in
:mod:`headroom_core.learn.pair_rules` (first match, in their stated order); the facts they ask
are in :mod:`headroom_core.learn.pair_facts`. This module walks a session and asks them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from headroom_core.learn.outcome import NO_MATCH_FOUND, error_signature
from headroom_core.learn.pair_facts import (
    SETUP_WINDOW,
    WINDOW,
    invocation_error,
    main_command,
    missing_param,
    missing_things,
    reread,
    same_command,
    tool_reads,
)
from headroom_core.learn.pair_rules import CHECKER_KINDS, MATCH_RULES, Candidate, PairKind, decide
from headroom_core.learn.pair_rules import same_job as _same_job
from headroom_core.learn.shell import jobs
from headroom_core.learn.steps import Step

__all__ = [
    "SETUP_WINDOW",
    "WINDOW",
    "Pair",
    "PairKind",
    "corrects",
    "find_pairs",
    "invocation_error",
    "match",
    "missing_param",
    "missing_things",
    "ran",
    "same_job",
]


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
    kind: PairKind
    between: tuple[Step, ...] = ()
    retries: tuple[Step, ...] = ()
    param: str = ""
    detail: str = ""


def ran(s: Step) -> bool:
    """Whether ``s`` did its job: it worked, or it is a checker (tests, lint, type check,
    build) that ran and reported problems in the code (not a failure to run)."""
    if s.ok:
        return s.outcome != NO_MATCH_FOUND
    if not s.is_shell or s.is_edit or invocation_error(s.error) or "timed out" in s.error:
        return False
    _, w = main_command(s.command)
    return bool(jobs(w) & {"test", "lint", "typecheck", "build"})


def match(
    f: Step, s: Step, between: Sequence[Step], ignore: frozenset[str] = frozenset(), root: str = ""
) -> tuple[PairKind, str] | None:
    """``(kind, detail)`` when ``s`` fixes the failed ``f`` with ``between`` the calls in
    between (module docstring), else None. ``s`` must have worked, or (for ``command`` and
    ``cwd``) be a checker that ran (:func:`ran`). ``ignore``: tokens that never relate two
    commands (the project's directory); ``root``: the project's own folder."""
    if f.ok or not ran(s):
        return None
    m = _match(f, s, between, ignore, root)
    if m is not None and not s.ok and m[0] not in CHECKER_KINDS:
        return None
    return m


def _match(f: Step, s: Step, between: Sequence[Step], ignore: frozenset[str], root: str) -> tuple[PairKind, str] | None:
    """The kind and detail :data:`~.pair_rules.MATCH_RULES` decide for ``s`` after ``f``, or None."""
    c = Candidate(f, s, between, ignore, root.rstrip("/"))
    rule = decide(MATCH_RULES, c)[-1]
    return None if rule.kind is None else (rule.kind, rule.detail(c))


def same_job(f: Step, s: Step, ignore: frozenset[str] = frozenset()) -> bool:
    """Whether ``s`` does the job ``f`` failed to do, by a corrected command (module docstring,
    ``command``; :data:`~.pair_rules.SAME_JOB_RULES`). Assumes ``f`` failed with an invocation
    error."""
    return _same_job(Candidate(f, s, ignore=ignore))


def corrects(f: Step, s: Step, ignore: frozenset[str] = frozenset()) -> bool:
    """Whether the successful ``s`` fixes the failed ``f`` with a lesson (any kind but ``retry``)
    when nothing happened in between."""
    m = match(f, s, (), ignore)
    return m is not None and m[0] != PairKind.RETRY


def find_pairs(
    steps: Sequence[Step], window: int = WINDOW, ignore: frozenset[str] = frozenset(), root: str = ""
) -> list[Pair]:
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
            if len(between) >= window and not same_command(f, s):
                continue
            m = match(f, s, between, ignore, root)
            if m is None:
                continue
            kind, detail = m
            retries = tuple(
                r
                for k, r in enumerate(steps[max(lo, i - window) : i], max(lo, i - window))
                if k not in used and not r.ok and _also_answers(r, f, s, kind, ignore, root)
            )
            used.add(i)
            used.update(k for k in range(lo, i) if steps[k] in retries)
            param = detail if kind == PairKind.PARAM else ""
            pairs.append(
                Pair(
                    f,
                    s,
                    kind,
                    _made_the_difference(kind, f, s, between, detail),
                    retries,
                    param,
                    "" if kind == PairKind.PARAM else detail,
                )
            )
            break
    return [p for p in pairs if not _refuted(p, steps)]


def _also_answers(r: Step, f: Step, s: Step, kind: PairKind, ignore: frozenset[str], root: str) -> bool:
    """Whether an earlier failure ``r`` is answered by the fix ``s`` of ``f`` too: the same
    call, one ``s`` fixes the same way on its own, or the same edit of the same file."""
    return (
        r.signature == f.signature
        or (match(r, s, (), ignore, root) or ("",))[0] == kind
        or (f.is_edit and r.is_edit and r.target == f.target and r.first_line == f.first_line)
    )


def _made_the_difference(kind: PairKind, f: Step, s: Step, between: Sequence[Step], detail: str) -> tuple[Step, ...]:
    """The pair's ``between`` (:class:`Pair`): for ``prerequisite`` the calls that showed the
    file again (shell) or worked on it with another tool; for ``setup`` the set-up calls (the
    fix itself when the set-up is on its line); else none."""
    if kind == PairKind.PREREQUISITE:
        return reread(f, between) if f.is_shell else tool_reads(f, between)
    if kind == PairKind.SETUP:
        return tuple(b for b in between if b.first_line == detail) or (s,)
    return ()


def _refuted(p: Pair, steps: Sequence[Step]) -> bool:
    """A set-up that did not help: after it, the very command failed again the same way before
    it ever worked."""
    if p.kind != PairKind.SETUP:
        return False
    pos = {id(s): k for k, s in enumerate(steps)}
    start = max(pos.get(id(p.fixed), -1), *(pos.get(id(b), -1) for b in p.between))
    for later in steps[start + 1 :]:
        if later.signature == p.failed.signature:
            return not later.ok and error_signature(later.error) == error_signature(p.failed.error)
    return False
