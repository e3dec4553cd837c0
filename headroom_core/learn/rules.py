"""Rules from failure -> correction pairs and from the user's own corrections.

A :class:`Rule` is one short sentence for an agent's instruction file plus its evidence count.
Identical rules share an id (SHA-256 of kind and key, the *content hash*) and add up their
evidence; a rule with the same failure side (``supersede_key``) but another fix replaces an
older one in the written file. Command rules that contradict each other (``A`` fixed by ``B``
and ``B`` fixed by ``A``) are both dropped.

Rule kinds and their sentences (``{err}`` is the one-line error summary):

- ``command``: "`pytest tests` fails (command not found); use `python -m pytest tests`"; when the
  fix only changed folder first (``cd DIR && <same command>``), the rule says to run it from DIR.
- ``prerequisite``: "Read a file before editing it: `Edit` and `Write` fail on a file that was
  not read first ({err})" - one rule for every file: the file path is not part of the key, so
  many Edit-before-Read failures make one abstract rule. When the error does not say the file
  was unread (e.g. "String to replace not found"), the rule says to read it *again* before
  retrying instead.
- ``param``: "Always pass `prompt` to `Task`: calls without it fail ({err})"
- ``edit-range`` (SWE-agent): the replaced line range must cover the whole block.
- ``correction``: "User correction: “...”" (the user's own words, verbatim).

Evidence offline (:func:`learn_from_logs`) is the number of distinct failed calls (per session,
identical retries once) the rule accounts for: the paired failure, the attempts before the fix,
and, for ``prerequisite``/``param``/``command`` rules, the same failure recurring elsewhere in
the logs. Live (:mod:`.live`) evidence is the number of distinct pairs, each counted once per
session.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from typing import Iterable, Sequence

from headroom_core.learn.pairing import Pair, find_pairs
from headroom_core.learn.readers import LogSession
from headroom_core.learn.signals import find_signals
from headroom_core.learn.steps import Step, error_signature, normalize_command

SHOW_CHARS = 90  # a command is shown up to this many characters in a rule
_CD_THEN = re.compile(r"^cd\s+(\S+)\s*&&\s*(.+)$")


@dataclass(frozen=True)
class Rule:
    """One learned rule.

    ``kind`` and ``key`` identify it (``id`` is their content hash, 12 hex digits);
    ``supersede_key`` identifies the failure it answers (a newer rule with the same one replaces
    it); ``failure_key`` matches :func:`failure_key` of the failed calls it answers (for the
    past-failures block); ``text`` the sentence (without the evidence count); ``evidence`` a
    count (see module docstring); ``failed``/``fixed`` the latest example; ``sources`` the log
    files (or sessions) it came from.
    """

    kind: str
    key: str
    text: str
    supersede_key: str
    failure_key: str
    evidence: int = 1
    failed: str = ""
    fixed: str = ""
    error: str = ""
    sources: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return content_hash(self.kind, self.key)

    @property
    def reverse_key(self) -> str:
        """For a command rule ``A -> B``: the key of ``B -> A`` (a contradiction); else ``""``."""
        if self.kind != "command" or "\0" not in self.key:
            return ""
        a, b = self.key.split("\0", 1)
        return f"{b}\0{a}"


def content_hash(*parts: str) -> str:
    """SHA-256 hex (12 digits) of the parts joined by NUL."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:12]


def failure_key(step: Step) -> str:
    """What makes two failures "the same failure": for shell commands the command's first line
    and the error's signature; for other tools the tool family and the error's signature (the
    file is left out, so "not read yet" on any file is one failure)."""
    if step.is_shell:
        return content_hash("sh", normalize_command(step.first_line), error_signature(step.error))
    return content_hash("tool", step.family, error_signature(step.error))


def show(step: Step) -> str:
    """A command (or tool name) as shown in a rule: first line, at most :data:`SHOW_CHARS`
    characters, ``…`` when cut or when more lines follow; backticks become quotes."""
    if not step.is_shell:
        return step.tool
    line = step.first_line.replace("`", "'")
    more = len(step.command.strip().splitlines()) > 1
    if len(line) > SHOW_CHARS:
        return line[: SHOW_CHARS - 1] + "…"
    return line + (" …" if more else "")


def _err(e: str) -> str:
    return e.rstrip(".") if e else "failed"


def _names(tools: Sequence[str]) -> str:
    names = [f"`{t}`" for t in tools]
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]


def rule_for_pair(p: Pair, tools: Sequence[str] = ()) -> Rule | None:
    """The rule a pair teaches, or None for a content-specific (``retry``) pair. ``tools``:
    the tool names to name in a prerequisite rule (default: the failed call's)."""
    f, s = p.failed, p.fixed
    err = _err(f.error)
    fk = failure_key(f)
    if p.kind == "command":
        a, b = normalize_command(f.first_line), normalize_command(s.first_line)
        m = _CD_THEN.match(b)
        if m and m.group(2).startswith(a):
            # the fix was the working directory, not the command
            text = f"`{show(f)}` fails when the shell is in another folder ({err}); run it from `{m.group(1)}` (`cd {m.group(1)} && {a}`)"
            return Rule("command", f"{a}\0{b}", text, fk, fk, 1, show(f), show(s), f.error)
        return Rule("command", f"{a}\0{b}", f"`{show(f)}` fails ({err}); use `{show(s)}`", fk, fk, 1, show(f), show(s), f.error)
    if p.kind == "prerequisite":
        pre = p.between[-1]
        names = _names(tools or [f.tool])
        verb = "fail" if (len(tools) > 1) else "fails"
        if pre.family == "read" and "read" not in error_signature(f.error):
            # the file had been read; its text had changed (e.g. "String to replace not found")
            text = f"When {names} {verb} on a file ({err}), read the file again before retrying: the edit that worked came after reading it"
            key = f"{f.family}\0{error_signature(f.error)}\0{pre.family}"
            return Rule("prerequisite", key, text, fk, fk, 1, f.tool, f"{pre.tool} then {s.tool}", f.error)
        if pre.family == "read":
            head = "Read a file before editing it" if f.family == "edit" else f"Read a file before calling `{f.tool}` on it"
            tail = f"{names} {verb} on a file that was not read first ({err})"
        else:
            head = f"Call `{pre.tool}` on a file before " + ("editing it" if f.family == "edit" else f"calling `{f.tool}` on it")
            tail = f"{names} {verb} on a file until `{pre.tool}` was called on it ({err})"
        key = f"{f.family}\0{error_signature(f.error)}\0{pre.family}"
        return Rule("prerequisite", key, f"{head}: {tail}", fk, fk, 1, f.tool, f"{pre.tool} then {s.tool}", f.error)
    if p.kind == "param":
        key = f"{f.tool}\0{p.param}"
        text = f"Always pass `{p.param}` to `{f.tool}`: calls without it fail ({err})"
        return Rule("param", key, text, content_hash("param", key), fk, 1, f.tool, f"{s.tool} with {p.param}", f.error)
    if p.kind == "edit-range":
        a, b = (int(x) for x in f.first_line.split()[1].split(":"))
        c = int(s.first_line.split()[1].split(":")[1])
        if c > b:
            left = f"line {b + 1}" if c == b + 1 else f"lines {b + 1}-{c}"
            what = f"`edit {a}:{b}` left {left} of the old code in place and was rejected ({err}); the same text as `edit {a}:{c}` worked"
        else:
            gone = f"line {b}" if b == c + 1 else f"lines {c + 1}-{b}"
            what = f"`edit {a}:{b}` also replaced {gone}, which had to stay, and was rejected ({err}); the same text as `edit {a}:{c}` worked"
        text = ("When `edit` is rejected with a syntax error, check the line range before the new text: "
                f"it must span exactly the lines being replaced. Here {what}")
        return Rule("edit-range", "edit-range", text, content_hash("edit-range"), fk, 1, show(f), show(s), f.error)
    return None


def correction_rule(sentence: str) -> Rule:
    """A rule from the user's own correcting words (kept verbatim)."""
    key = " ".join(sentence.lower().split())
    return Rule("correction", key, f"User correction: “{sentence}”", content_hash("correction", key), "", 1)


def drop_contradictions(rules: Iterable[Rule]) -> tuple[list[Rule], list[Rule]]:
    """``(kept, dropped)``: command rules whose reverse is also present are dropped, both of them."""
    rules = list(rules)
    keys = {r.key for r in rules if r.kind == "command"}
    dropped = [r for r in rules if r.reverse_key and r.reverse_key in keys]
    ids = {r.id for r in dropped}
    return [r for r in rules if r.id not in ids], dropped


# --- offline: a set of session logs -----------------------------------------------------------


@dataclass
class FileStats:
    """Per log file: records read, records skipped, failed calls, other signals by kind,
    pairs made, rules written (rules at or over the threshold this file gave evidence to)."""

    path: str
    source: str
    records: int = 0
    skipped: int = 0
    failures: int = 0
    signals: Counter = field(default_factory=Counter)
    pairs: int = 0
    rules_written: int = 0


@dataclass(frozen=True)
class LearnResult:
    """What :func:`learn_from_logs` found: ``rules`` at or over the threshold (ranked by
    evidence), ``candidates`` under it, ``dropped`` contradictions, ``files`` per-file stats,
    ``pairs`` every pair with its file path."""

    rules: tuple[Rule, ...]
    candidates: tuple[Rule, ...]
    dropped: tuple[Rule, ...]
    files: tuple[FileStats, ...]
    pairs: tuple[tuple[str, Pair], ...]


def rank(rules: Iterable[Rule]) -> list[Rule]:
    """Most evidence first; ties by text (deterministic)."""
    return sorted(rules, key=lambda r: (-r.evidence, r.text))


def learn_from_logs(sessions: Sequence[LogSession], min_evidence: int = 2, ignore: frozenset[str] = frozenset()) -> LearnResult:
    """Pair failures with corrections in every thread of ``sessions``, build and merge rules,
    count evidence (module docstring), drop contradictions, split by ``min_evidence`` (the
    user's own corrections are always kept: they are the user's word, not an inference).

    ``ignore``: tokens that never make two commands related (the project's directories).
    Deterministic: the same logs give the same rules in the same order.
    """
    files: list[FileStats] = []
    all_pairs: list[tuple[str, Pair]] = []
    failures: list[tuple[str, Step]] = []  # (evidence scope "path|thread", step)
    corrections: dict[str, set[str]] = defaultdict(set)
    sentences: dict[str, str] = {}
    for sess in sessions:
        fs = FileStats(sess.path, sess.source, sess.records, sess.skipped)
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
            pairs = find_pairs(th.steps, ignore=frozenset(ign))
            fs.pairs += len(pairs)
            all_pairs += [(scope, p) for p in pairs]
        files.append(fs)

    # tool names per prerequisite failure family, for the rule's wording
    by_rule: dict[str, list[tuple[str, Pair]]] = defaultdict(list)
    proto: dict[str, Rule] = {}
    for scope, p in all_pairs:
        r = rule_for_pair(p)
        if r is None:
            continue
        by_rule[r.id].append((scope, p))
        proto[r.id] = r  # the latest example wins
    rules: list[Rule] = []
    for rid, items in by_rule.items():
        r = proto[rid]
        explained: set[tuple[str, str]] = set()
        tools: Counter = Counter()
        for scope, p in items:
            for st in (p.failed, *p.retries):
                explained.add((scope, st.signature))
        if r.kind in ("prerequisite", "param", "command"):
            for scope, st in failures:
                if failure_key(st) == r.failure_key and (r.kind != "param" or r.key.split("\0")[0] == st.tool):
                    explained.add((scope, st.signature))
        for scope, st in failures:
            if (scope, st.signature) in explained:
                tools[st.tool] += 1
        srcs = tuple(sorted({scope.split("|", 1)[0] for scope, _ in explained}))
        if r.kind == "prerequisite":
            last = items[-1][1]
            ordered = [t for t, _ in sorted(tools.items(), key=lambda kv: (-kv[1], kv[0]))]
            r = rule_for_pair(last, ordered) or r
        rules.append(replace(r, evidence=len(explained), sources=srcs))
    for k, paths in corrections.items():
        rules.append(replace(correction_rule(sentences[k]), evidence=len(paths), sources=tuple(sorted(paths))))
    kept, dropped = drop_contradictions(rules)
    written = rank(r for r in kept if r.evidence >= min_evidence or r.kind == "correction")
    below = rank(r for r in kept if not (r.evidence >= min_evidence or r.kind == "correction"))
    for fs in files:
        fs.rules_written = sum(1 for r in written if fs.path in r.sources)
    return LearnResult(tuple(written), tuple(below), tuple(dropped), tuple(files), tuple(all_pairs))
