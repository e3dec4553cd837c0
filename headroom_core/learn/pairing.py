"""Failed call -> corrected call: the pairing both the live learner and ``headroom learn`` use.

Pure functions over :class:`~headroom_core.learn.steps.Step` sequences (one thread of one
session, in call order). A successful call *corrects* an earlier failed one when:

- **shell commands**: the same effective program (:func:`~.steps.program`: ``pytest tests`` and
  ``python -m pytest tests`` are both ``pytest``), not the identical command (an identical retry
  succeeded because something else changed), and either an edit distance of at most 40 % of the
  longer first line or a shared substantive token (not a flag, not a filler word such as
  ``grep``/``cat``, not the project's own directory);
- **other tools**: the same family (``Edit``/``MultiEdit``/``Write`` are one) on the same file, or,
  for calls without a file, the missing parameter the error named now given (or arguments within
  the same 40 % edit distance).

Each success corrects at most one failure (the nearest before it, within :data:`WINDOW` calls);
the earlier failures it also corrects in that window are the pair's ``retries`` (the attempts
that preceded the fix). The 40 % threshold and the window are this project's choices, tuned on
the corpus in ``../shared/corpus`` (see the learn tests).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from headroom_core.learn.steps import Step, levenshtein, normalize_command, program, substantive_tokens

WINDOW = 5  # a correction must come within this many calls after the failure
MAX_DISTANCE_RATIO = 0.40
_EDIT_RANGE = re.compile(r"^edit (\d+):(\d+)$")
_MISSING_PARAM = re.compile(r"parameter `([^`]+)` is missing|missing (?:required )?(?:parameter|argument|field)s?:? ['\"`]?(\w+)", re.I)


@dataclass(frozen=True)
class Pair:
    """A failed call and the successful call that corrected it.

    ``kind``: ``"command"`` (shell command corrected), ``"edit-range"`` (SWE-agent ``edit N:M``
    whose range was corrected), ``"prerequisite"`` (the same call worked after another call on
    the same file, ``between``: e.g. ``Read`` before ``Edit``), ``"param"`` (a missing required
    parameter given), ``"retry"`` (a content-specific correction that makes no general rule).
    ``retries``: earlier failures the fix also answers, oldest first.
    """

    failed: Step
    fixed: Step
    kind: str
    between: tuple[Step, ...] = ()
    retries: tuple[Step, ...] = ()
    param: str = ""


def missing_param(error: str) -> str:
    """The parameter an input-validation error says is missing, or ``""``."""
    m = _MISSING_PARAM.search(error)
    return (m.group(1) or m.group(2) or "") if m else ""


def _similar(a: str, b: str) -> bool:
    longest = max(len(a), len(b)) or 1
    limit = int(MAX_DISTANCE_RATIO * longest)
    return levenshtein(a, b, limit) <= limit


def corrects(f: Step, s: Step, ignore: frozenset[str] = frozenset()) -> bool:
    """Whether the successful ``s`` corrects the failed ``f`` (rules in the module docstring).
    ``ignore``: tokens that never count as shared (the project's directory)."""
    if f.ok or not s.ok or f.is_shell != s.is_shell:
        return False
    if f.is_shell:
        pf = program(f.command)
        if not pf or pf != program(s.command):
            return False
        if normalize_command(f.command) == normalize_command(s.command):
            return False
        if _similar(f.first_line, s.first_line):
            return True
        return bool(substantive_tokens(f.command, ignore) & substantive_tokens(s.command, ignore))
    if f.family != s.family:
        return False
    if f.target or s.target:
        return f.target == s.target
    p = missing_param(f.error)
    if p:
        return p in s.keys and p not in f.keys
    return f.tool == s.tool and f.args != s.args and _similar(f.args[:300], s.args[:300])


def _kind(f: Step, s: Step, between: tuple[Step, ...]) -> tuple[str, str]:
    if f.is_shell:
        if program(f.command) == "edit":
            mf, ms = _EDIT_RANGE.match(f.first_line), _EDIT_RANGE.match(s.first_line)
            body_f, body_s = f.command.strip().split("\n", 1)[1:], s.command.strip().split("\n", 1)[1:]
            if mf and ms and mf.group(1) == ms.group(1) and mf.group(2) != ms.group(2) and body_f == body_s:
                return "edit-range", ""
            return "retry", ""
        if normalize_command(f.first_line) == normalize_command(s.first_line):
            return "retry", ""  # only a heredoc / multi-line body changed
        return "command", ""
    if f.target and between:
        return "prerequisite", ""
    p = missing_param(f.error)
    if p and p in s.keys:
        return "param", p
    return "retry", ""


def find_pairs(steps: Sequence[Step], window: int = WINDOW, ignore: frozenset[str] = frozenset()) -> list[Pair]:
    """Every failure -> correction pair in ``steps`` (one thread, call order), in the order of
    the corrections. Runs in O(n * window) comparisons."""
    pairs: list[Pair] = []
    used: set[int] = set()
    for j, s in enumerate(steps):
        if not s.ok:
            continue
        lo = max(0, j - window)
        for i in range(j - 1, lo - 1, -1):
            f = steps[i]
            if i in used or f.ok:
                continue
            between = tuple(
                b for b in steps[i + 1 : j] if b.ok and f.target and b.target == f.target and b.family != f.family
            )
            if not f.is_shell and f.args == s.args and not between:
                continue  # the same call simply worked the second time: nothing to learn
            if not corrects(f, s, ignore):
                continue
            retries = tuple(
                r for k, r in enumerate(steps[lo:i], lo)
                if k not in used and not r.ok and (r.signature == f.signature or corrects(r, s, ignore))
            )
            used.add(i)
            used.update(k for k in range(lo, i) if steps[k] in retries)
            kind, param = _kind(f, s, between)
            pairs.append(Pair(f, s, kind, between, retries, param))
            break
    return pairs
