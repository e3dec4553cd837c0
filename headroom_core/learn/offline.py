"""``headroom learn`` over a set of session logs: pairs, rules with their evidence, the failures
no fix followed (*known problems*), and why nothing was learned when nothing was.

Evidence (:func:`learn_from_logs`) is the number of distinct failed calls (per thread, identical
retries once) a rule accounts for: the paired failure, the attempts before the fix, and, for
``prerequisite``/``param``/``command``/``setup``/``cwd`` rules, the same failure recurring
elsewhere in the logs. The user's own corrections always count (they are the user's word).

A *known problem* is a failure that nothing fixed: no pair answers it and the same command never
worked later in its thread. Failures of commands that only look (``ls``, ``cat`` ...), of edits,
of submitted answers, of scripts the agent wrote in that thread (a reproduction script is meant
to fail), and harness refusals of tool calls are left out: they report a state or a content
mistake, not a problem of the project.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from typing import Sequence

from headroom_core.learn.pairing import Pair, find_pairs
from headroom_core.learn.readers import LogSession
from headroom_core.learn.rules import Rule, correction_rule, drop_contradictions, failure_key, rank, rule_for_pair, show
from headroom_core.learn.shell import ANSWER_PROGRAMS, is_inspection, main_words, normalize_command, runs_file
from headroom_core.learn.signals import find_signals
from headroom_core.learn.steps import Step


@dataclass
class FileStats:
    """Per log file: records read, malformed records skipped, records of unknown types, failed
    calls, other signals by kind, pairs made, rules written (rules at or over the threshold this
    file gave evidence to), known problems."""

    path: str
    source: str
    records: int = 0
    skipped: int = 0
    unknown: int = 0
    failures: int = 0
    signals: Counter = field(default_factory=Counter)
    pairs: int = 0
    rules_written: int = 0
    problems: int = 0


@dataclass(frozen=True)
class KnownProblem:
    """A failure nothing fixed (module docstring): its ``failure_key``, the command or tool as
    shown, the ``error``, how many failed calls (``count``), the log files, the latest failed
    ``step`` (for the failure-memory feed) and its time (``when``, ISO 8601 or ``""``)."""

    failure_key: str
    shown: str
    error: str
    count: int
    sources: tuple[str, ...]
    step: Step
    when: str = ""
    session: str = ""

    @property
    def text(self) -> str:
        return f"`{self.shown}` fails ({self.error or 'error'}); no fix was found"


@dataclass(frozen=True)
class LearnResult:
    """What :func:`learn_from_logs` found: ``rules`` to write (at or over the threshold, ranked
    by evidence; generic ones only when asked for), ``generic`` rules at or over the threshold
    kept out, ``candidates`` under it, ``dropped`` contradictions, ``problems`` the known
    problems, ``files`` per-file stats, ``pairs`` every pair with its evidence scope."""

    rules: tuple[Rule, ...]
    candidates: tuple[Rule, ...]
    dropped: tuple[Rule, ...]
    files: tuple[FileStats, ...]
    pairs: tuple[tuple[str, Pair], ...]
    generic: tuple[Rule, ...] = ()
    problems: tuple[KnownProblem, ...] = ()

    def why_nothing(self, min_evidence: int) -> str:
        """Why no rule is to be written, in one or two sentences (``""`` when some are)."""
        if self.rules:
            return ""
        failures = sum(f.failures for f in self.files)
        if not self.files:
            return "No session was read."
        if failures == 0:
            return (
                f"No failed tool call in {len(self.files)} session(s): nothing to learn from "
                "(a search that found nothing or a server stopped by its timeout is not a failure)."
            )
        lessons = [p for _, p in self.pairs if p.kind != "retry"]
        parts = [f"{failures} failed call(s)"]
        if not self.pairs:
            parts.append("none was followed by a call that fixed it")
        elif not lessons:
            _, p = self.pairs[-1]
            parts.append(
                f"{len(self.pairs)} were fixed, but only by content-specific changes (code edited, another text) that make no rule "
                f"(the latest: `{show(p.failed)}` failed, `{show(p.fixed, True)}` then worked)"
            )
        if self.candidates:
            parts.append(
                f"{len(self.candidates)} rule(s) below the evidence threshold of {min_evidence} (lower it with --min-evidence)"
            )
        if self.generic:
            parts.append(
                f"{len(self.generic)} generic rule(s) about the agent's own tools kept out (--include-generic writes them)"
            )
        if self.dropped:
            parts.append(f"{len(self.dropped)} rule(s) dropped because they contradict each other")
        if self.problems:
            parts.append(f"{len(self.problems)} known problem(s) that nothing fixed (listed below)")
        return "Nothing to write: " + "; ".join(parts) + "."


def _problem_candidate(st: Step) -> bool:
    if not st.is_shell or st.is_edit:
        return False
    words = main_words(st.command)
    if not words or is_inspection(words) or words[0] in ANSWER_PROGRAMS:
        return False
    return True


def _written(steps: Sequence[Step]) -> set[str]:
    """File names (last path part) the thread itself created or edited: a script the agent wrote
    for the task (a reproduction, a scratch test) failing is the task, not a project problem."""
    out = set()
    for st in steps:
        if st.is_edit and st.target:
            out.add(st.target.rstrip("/").rsplit("/", 1)[-1])
        elif st.is_shell:
            m = re.search(r"(?:>|\btee\s+(?:-a\s+)?)\s*['\"]?([\w./-]+)", st.first_line)
            if m:
                out.add(m.group(1).rsplit("/", 1)[-1])
    return out


def _unresolved(steps: Sequence[Step], pairs: Sequence[Pair]) -> list[Step]:
    answered = {id(x) for p in pairs for x in (p.failed, *p.retries)}
    own = _written(steps)
    out = []
    for k, st in enumerate(steps):
        if st.ok or id(st) in answered or not _problem_candidate(st):
            continue
        script = runs_file(main_words(st.command))
        if script and script.rsplit("/", 1)[-1] in own:
            continue
        cmd = normalize_command(st.first_line)
        if any(later.ok and later.is_shell and normalize_command(later.first_line) == cmd for later in steps[k + 1 :]):
            continue
        out.append(st)
    return out


def learn_from_logs(
    sessions: Sequence[LogSession],
    min_evidence: int = 2,
    ignore: frozenset[str] = frozenset(),
    include_generic: bool = False,
) -> LearnResult:
    """Pair failures with fixes in every thread of ``sessions``, build and merge rules, count
    evidence (module docstring), drop contradictions, split by ``min_evidence`` and by
    generality (:attr:`~.rules.Rule.generic`; written only with ``include_generic``), and
    collect the known problems.

    ``ignore``: tokens that never make two commands related (the project's directories).
    Deterministic: the same logs give the same rules in the same order.
    """
    files: list[FileStats] = []
    all_pairs: list[tuple[str, Pair]] = []
    failures: list[tuple[str, Step]] = []  # (evidence scope "path|thread", step)
    corrections: dict[str, set[str]] = defaultdict(set)
    sentences: dict[str, str] = {}
    open_problems: list[tuple[str, LogSession, Step]] = []
    resolved_later: set[str] = set()
    for sess in sessions:
        fs = FileStats(sess.path, sess.source, sess.records, sess.skipped, sess.unknown)
        ign = ignore | ({sess.cwd, sess.cwd.rstrip("/")} if sess.cwd else set())
        for th in sess.threads:
            scope = f"{sess.path}|{th.key}"
            for sig in find_signals(th):
                if sig.kind == "tool_error":
                    fs.failures += 1
                else:
                    fs.signals[sig.kind] += 1
                if sig.kind == "correction":
                    k = " ".join(sig.text.lower().split())
                    corrections[k].add(sess.path)
                    sentences.setdefault(k, sig.text)
            failures += [(scope, s) for s in th.steps if not s.ok]
            pairs = find_pairs(th.steps, ignore=frozenset(ign), root=sess.cwd)
            fs.pairs += len(pairs)
            all_pairs += [(scope, p) for p in pairs]
            unresolved = _unresolved(th.steps, pairs)
            fs.problems += len(unresolved)
            open_problems += [(scope, sess, st) for st in unresolved]
            resolved_later |= {failure_key(x) for p in pairs for x in (p.failed, *p.retries)}
        files.append(fs)

    by_rule: dict[str, list[tuple[str, Pair]]] = defaultdict(list)
    proto: dict[str, Rule] = {}
    last: dict[str, int] = {}
    for n, (scope, p) in enumerate(all_pairs):
        r = rule_for_pair(p)
        if r is None:
            continue
        by_rule[r.id].append((scope, p))
        proto[r.id] = r  # the latest example wins
        last[r.id] = n
    rules: list[Rule] = []
    for rid, items in sorted(by_rule.items(), key=lambda kv: last[kv[0]]):
        r = proto[rid]
        explained: set[tuple[str, str]] = set()
        tools: Counter = Counter()
        for scope, p in items:
            for st in (p.failed, *p.retries):
                explained.add((scope, st.signature))
        if r.kind in ("prerequisite", "param", "command", "setup", "cwd"):
            for scope, st in failures:
                if failure_key(st) == r.failure_key and (r.kind != "param" or r.key.split("\0")[0] == st.tool):
                    explained.add((scope, st.signature))
        for scope, st in failures:
            if (scope, st.signature) in explained:
                tools[st.program if st.is_shell else st.tool] += 1
        srcs = tuple(sorted({scope.split("|", 1)[0] for scope, _ in explained}))
        if r.kind == "prerequisite":
            latest = items[-1][1]
            ordered = [t for t, _ in sorted(tools.items(), key=lambda kv: (-kv[1], kv[0]))]
            r = rule_for_pair(latest, ordered) or r
        rules.append(replace(r, evidence=len(explained), sources=srcs))
    for k, paths in corrections.items():
        rules.append(replace(correction_rule(sentences[k]), evidence=len(paths), sources=tuple(sorted(paths))))
    kept, dropped = drop_contradictions(_one_fix_per_failure(rules))
    over = [r for r in kept if r.evidence >= min_evidence or r.kind == "correction"]
    written = rank(r for r in over if include_generic or not r.generic)
    generic = rank(r for r in over if r.generic and not include_generic)
    below = rank(r for r in kept if not (r.evidence >= min_evidence or r.kind == "correction"))
    for fs in files:
        fs.rules_written = sum(1 for r in written if fs.path in r.sources)
    problems = _known_problems(open_problems, resolved_later, {r.failure_key for r in kept})
    return LearnResult(
        tuple(written), tuple(below), tuple(dropped), tuple(files), tuple(all_pairs), tuple(generic), problems
    )


def _one_fix_per_failure(rules: list[Rule]) -> list[Rule]:
    """Rules answering the same failure with different fixes (same ``supersede_key``): the one
    with the most evidence, the most recent on a tie (rules come in the order of their latest
    pair), as the written file would keep."""
    best: dict[str, Rule] = {}
    out: list[Rule] = []
    for r in rules:
        if r.kind not in ("command", "setup", "cwd", "stdin", "background") or not r.supersede_key:
            out.append(r)
            continue
        prev = best.get(r.supersede_key)
        if prev is None or r.evidence >= prev.evidence:
            best[r.supersede_key] = r
    return out + list(best.values())


def _known_problems(
    items: list[tuple[str, LogSession, Step]], resolved: set[str], ruled: set[str]
) -> tuple[KnownProblem, ...]:
    groups: dict[str, list[tuple[str, LogSession, Step]]] = defaultdict(list)
    for scope, sess, st in items:
        fk = failure_key(st)
        if fk in resolved or fk in ruled:
            continue
        groups[fk].append((scope, sess, st))
    out = []
    for fk, its in groups.items():
        _, sess, last = its[-1]
        out.append(
            KnownProblem(
                fk,
                show(last),
                last.error,
                len(its),
                tuple(sorted({sc.split("|", 1)[0] for sc, _, _ in its})),
                last,
                last.when,
                sess.session_id,
            )
        )
    return tuple(sorted(out, key=lambda p: (-p.count, p.shown)))
