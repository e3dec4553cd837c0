"""Rules from failure -> fix pairs and from the user's own corrections.

A :class:`Rule` is one short sentence for an agent's instruction file plus its evidence count.
Identical rules share an id (SHA-256 of kind and key, the *content hash*) and add up their
evidence; a rule with the same failure side (``supersede_key``) but another fix replaces an
older one in the written file. Command rules that contradict each other (``A`` fixed by ``B``
and ``B`` fixed by ``A``) are both dropped.

Rules name the project's own command, file or package and the fix (``{err}`` is the one-line
error summary):

- ``command``: "`pytest tests` fails (command not found); use `python -m pytest tests`"
- ``cwd``: "`npm run build` fails when run from another folder (...); run it from `app`"
- ``setup``: "`node express.js` fails until `npm install express` has run (...); run
  `npm install express` first"
- ``stdin``: "`./chall` waits for input on stdin (...); pipe the input in: `echo AAAA | ./chall`"
- ``background``: "`python ingest.py` runs longer than the tool's time limit (...); start it in the
  background and check its output later"
- ``correction``: "User correction: “...”" (the user's own words, verbatim).

*Generic* rules teach how to use an agent's own tools, which the agent's harness already
enforces by refusing the call and saying why (:data:`GENERIC_KINDS`); they are kept out of the
written section unless asked for (``headroom learn --include-generic``):

- ``prerequisite``: "Read a file before editing it: `Edit` and `Write` fail on a file that was not
  read first ({err})" - one rule for every file. When the error does not say the file was unread
  (e.g. "String to replace not found"), the rule says to read it *again* before retrying.
- ``param``: "Always pass `prompt` to `Task`: calls without it fail ({err})"
- ``edit-range`` (SWE-agent ``edit N:M``): the replaced line range must cover the whole block.
- ``edit-indent``: a rejected edit whose retry only changed the indentation.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from headroom_core.learn.outcome import TIMEOUT, error_signature
from headroom_core.learn.pairing import Pair
from headroom_core.learn.shell import normalize_command, without_timeout
from headroom_core.learn.steps import Step

SHOW_CHARS = 90  # a command is shown up to this many characters in a rule
GENERIC_KINDS = frozenset({"prerequisite", "param", "edit-range", "edit-indent"})
_CD_THEN = re.compile(r"^cd\s+(\S+)\s*&&\s*(.+)$")
_CD_PREFIX = re.compile(r"^(?:(?:cd|pushd)\s+\S+\s*(?:&&|;)\s*)+")


@dataclass(frozen=True)
class Rule:
    """One learned rule.

    ``kind`` and ``key`` identify it (``id`` is their content hash, 12 hex digits);
    ``supersede_key`` identifies the failure it answers (a newer rule with the same one replaces
    it); ``failure_key`` matches :func:`failure_key` of the failed calls it answers (for the
    past-failures block); ``text`` the sentence (without the evidence count); ``evidence`` a
    count (see :mod:`.offline`); ``failed``/``fixed`` the latest example; ``sources`` the log
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
    def generic(self) -> bool:
        """Whether the rule teaches the use of an agent's own tools (:data:`GENERIC_KINDS`)."""
        return self.kind in GENERIC_KINDS

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


def show(step: Step, fix: bool = False) -> str:
    """A command (or tool name) as shown in a rule: first line, at most :data:`SHOW_CHARS`
    characters, ``…`` when cut or when more lines follow; backticks become quotes. With
    ``fix``, a ``timeout N`` bound the agent put on a server is left out."""
    if not step.is_shell:
        return step.tool
    line = step.first_line.replace("`", "'")
    if fix and step.outcome == TIMEOUT:
        line = without_timeout(line)
    return clip(line, len(step.command.strip().splitlines()) > 1)


def clip(line: str, more: bool = False) -> str:
    """``line`` cut to :data:`SHOW_CHARS` characters (``…`` when cut; `` …`` when ``more``)."""
    line = line.replace("`", "'")
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
    a = normalize_command(f.first_line)
    if p.kind == "command":
        b = normalize_command(s.first_line)
        m = _CD_THEN.match(b)
        if m and m.group(2).startswith(a):
            d = m.group(1)
            text = f"`{show(f)}` fails when run from another folder ({err}); run it from `{d}` (`cd {d} && {clip(a)}`)"
            return Rule("cwd", f"{a}\0{d}", text, fk, fk, 1, show(f), show(s), f.error)
        return Rule(
            "command",
            f"{a}\0{b}",
            f"`{show(f)}` fails ({err}); use `{show(s, fix=True)}`",
            fk,
            fk,
            1,
            show(f),
            show(s),
            f.error,
        )
    if p.kind == "cwd":
        d = p.detail
        a = _CD_PREFIX.sub("", a)
        text = f"`{clip(a)}` fails when run from another folder ({err}); run it from `{d}` (`cd {d} && {clip(a)}`)"
        return Rule("cwd", f"{a}\0{d}", text, fk, fk, 1, clip(a), f"cd {d} && {a}", f.error)
    if p.kind == "setup":
        b = clip(normalize_command(p.detail))
        text = f"`{show(f)}` fails until `{b}` has run ({err}); run `{b}` first"
        return Rule("setup", f"{a}\0{normalize_command(p.detail)}", text, fk, fk, 1, show(f), b, f.error)
    if p.kind == "stdin":
        feeder = clip(p.detail)
        text = f"`{show(f)}` waits for input on stdin ({err}); pipe the input in, e.g. `{feeder}`"
        return Rule("stdin", f"{a}\0stdin", text, fk, fk, 1, show(f), feeder, f.error)
    if p.kind == "background":
        text = f"`{show(f)}` runs longer than the tool's time limit ({err}); start it in the background and check its output later"
        return Rule("background", f"{a}\0background", text, fk, fk, 1, show(f), f"{show(s)} (background)", f.error)
    if p.kind == "prerequisite":
        pre = p.between[-1]
        names = _names(tools or [f.program if f.is_shell else f.tool])
        verb = "fail" if (len(tools) > 1) else "fails"
        if pre.is_read and f.is_shell:
            # an agent shell's edit command (SWE-agent str_replace_editor, edit): the text it was given was not in the file
            text = (
                f"When {names} {verb} because the text to replace is not in the file ({_err(_class_of(f.error))}), view the lines "
                "again and copy them exactly before retrying"
            )
            key = f"{f.program}\0{_class_of(f.error)}\0read"
            return Rule(
                "prerequisite",
                key,
                text,
                content_hash("prerequisite", key),
                fk,
                1,
                show(f),
                f"{show(pre)} then {show(s)}",
                f.error,
            )
        if pre.family == "read" and "read" not in error_signature(f.error):
            # the file had been read; its text had changed (e.g. "String to replace not found")
            text = f"When {names} {verb} on a file ({err}), read the file again before retrying: the edit that worked came after reading it"
            key = f"{f.family}\0{error_signature(f.error)}\0{pre.family}"
            return Rule("prerequisite", key, text, fk, fk, 1, f.tool, f"{pre.tool} then {s.tool}", f.error)
        if pre.family == "read":
            head = (
                "Read a file before editing it"
                if f.family == "edit"
                else f"Read a file before calling `{f.tool}` on it"
            )
            tail = f"{names} {verb} on a file that was not read first ({err})"
        else:
            head = f"Call `{pre.tool}` on a file before " + (
                "editing it" if f.family == "edit" else f"calling `{f.tool}` on it"
            )
            tail = f"{names} {verb} on a file until `{pre.tool}` was called on it ({err})"
        key = f"{f.family}\0{error_signature(f.error)}\0{pre.family}"
        return Rule("prerequisite", key, f"{head}: {tail}", fk, fk, 1, f.tool, f"{pre.tool} then {s.tool}", f.error)
    if p.kind == "param":
        key = f"{f.tool}\0{p.param}"
        text = f"Always pass `{p.param}` to `{f.tool}`: calls without it fail ({err})"
        return Rule("param", key, text, content_hash("param", key), fk, 1, f.tool, f"{s.tool} with {p.param}", f.error)
    if p.kind == "edit-range":
        a0, b0 = (int(x) for x in f.first_line.split()[1].split(":"))
        c = int(s.first_line.split()[1].split(":")[1])
        if c > b0:
            left = f"line {b0 + 1}" if c == b0 + 1 else f"lines {b0 + 1}-{c}"
            what = f"`edit {a0}:{b0}` left {left} of the old code in place and was rejected ({err}); the same text as `edit {a0}:{c}` worked"
        else:
            gone = f"line {b0}" if b0 == c + 1 else f"lines {c + 1}-{b0}"
            what = f"`edit {a0}:{b0}` also replaced {gone}, which had to stay, and was rejected ({err}); the same text as `edit {a0}:{c}` worked"
        text = (
            "When `edit` is rejected with a syntax error, check the line range before the new text: "
            f"it must span exactly the lines being replaced. Here {what}"
        )
        return Rule("edit-range", "edit-range", text, content_hash("edit-range"), fk, 1, show(f), show(s), f.error)
    if p.kind == "edit-indent":
        tool = f.program if f.is_shell else f.tool
        text = (
            f"When `{tool}` is rejected ({err}), check the indentation of the new text: give every line the full indentation "
            "of the code it replaces (nothing is re-indented for you); here the same text with only its indentation corrected worked"
        )
        key = f"edit-indent\0{tool}"
        return Rule("edit-indent", key, text, content_hash("edit-indent", tool), fk, 1, show(f), show(s), f.error)
    return None


def _class_of(error: str) -> str:
    """An error without the text it quotes (``old_str `…` did not appear verbatim`` ->
    ``old_str did not appear verbatim``), for rules about a kind of failure."""
    s = re.sub(r"`[^`]*`|'[^']*'|\"[^\"]*\"", "", error)
    s = re.sub(r"\s+([,.:;])", r"\1", " ".join(s.split()))
    return re.sub(r"(/[\w.@-]+)+/?", "<file>", s).rstrip(".")


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


def rank(rules: Iterable[Rule]) -> list[Rule]:
    """Most evidence first; ties by text (deterministic)."""
    return sorted(rules, key=lambda r: (-r.evidence, r.text))
