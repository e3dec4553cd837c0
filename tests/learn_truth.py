"""The hand-checked truth table of ``headroom learn`` over real and hand-made session logs, shared
by ``tests/unit/test_learn_truth.py`` (which holds it) and ``bench/bench_learn.py`` (which prints it).

``tests/learn_logs/truth.json`` names each log by a label (``corpus/...`` in ``../shared/corpus``,
``cases/...`` in ``../shared/cases/learn``, ``fixtures/...`` in ``tests/learn_logs``) and gives,
checked by reading the log: the failed calls, the malformed records (0 for every valid log),
the failure -> fix pairs, the lessons (pairs that teach a rule: kind, failed command, fix), the
known problems; and a verdict for every rule text the learner may write (``right``: specific
and correct; ``generic``: correct advice about the agent's own tools, written only with
``--include-generic``; ``wrong``: never acceptable).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from headroom_core.learn.offline import learn_from_logs
from headroom_core.learn.readers import read_log

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
TRUTH = REPO / "tests" / "learn_logs" / "truth.json"
BASES = {"corpus": SHARED / "corpus", "cases": SHARED / "cases" / "learn", "fixtures": REPO / "tests" / "learn_logs"}


def load_truth() -> dict:
    """The truth table (``{"logs": {label: {...}}, "verdicts": {rule text: verdict}}``)."""
    return json.loads(TRUTH.read_text(encoding="utf-8"))


def log_path(label: str) -> Path:
    """The file a label names."""
    prefix, rest = label.split("/", 1)
    return BASES[prefix] / rest


@dataclass(frozen=True)
class Measured:
    """What the learner finds in one log on its own (every rule, threshold 1, generic included)."""

    label: str
    agent: str
    records: int
    failures: int
    malformed: int
    unknown: int
    pairs: int
    lessons: tuple[tuple[str, str, str], ...]
    rules: tuple[tuple[str, str, int], ...]  # (kind, text, evidence)
    problems: tuple[str, ...]

    def as_truth(self) -> dict:
        return {
            "agent": self.agent,
            "failures": self.failures,
            "malformed": self.malformed,
            "pairs": self.pairs,
            "lessons": [list(x) for x in self.lessons],
            "problems": list(self.problems),
        }


def measure(label: str) -> Measured:
    """Run the learner on one log (module docstring)."""
    sess = read_log(log_path(label))
    res = learn_from_logs([sess], min_evidence=1, include_generic=True)
    lessons = tuple(
        (p.kind, p.failed.first_line, p.detail if p.kind in ("setup", "cwd", "stdin") else p.fixed.first_line)
        for _, p in res.pairs
        if p.kind != "retry"
    )
    return Measured(
        label,
        sess.source,
        sess.records,
        sum(f.failures for f in res.files),
        sess.skipped,
        sess.unknown,
        len(res.pairs),
        lessons,
        tuple((r.kind, r.text, r.evidence) for r in res.rules),
        tuple(p.shown for p in res.problems),
    )
