"""The truth table: ``headroom learn`` on every real log in ``../shared/corpus``, every case in
``../shared/cases/learn`` and every hand-made log in ``tests/learn_logs`` finds the failed calls,
pairs, lessons and known problems a person counted by reading the log, counts no valid record as
malformed, and writes only rules judged right (generic ones marked so). ``bench/bench_learn.py``
prints the same table."""

from __future__ import annotations

import pytest

from headroom_core.learn.rules import GENERIC_KINDS
from tests.learn_truth import load_truth, log_path, measure

TRUTH = load_truth()


@pytest.mark.parametrize("label", sorted(TRUTH["logs"]))
def test_log_matches_the_hand_checked_truth(label: str):
    if not log_path(label).exists():
        pytest.skip(f"{log_path(label)} is absent (the shared corpus and cases sit beside the repository as ../shared)")
    want = TRUTH["logs"][label]
    got = measure(label)
    assert got.agent == want["agent"]
    assert got.malformed == want["malformed"] == 0
    assert got.failures == want["failures"]
    assert got.pairs == want["pairs"]
    assert [list(x) for x in got.lessons] == want["lessons"]
    assert list(got.problems) == want["problems"]
    for kind, text, _ in got.rules:
        verdict = TRUTH["verdicts"].get(text)
        assert verdict is not None, f"rule without a verdict: {text}"
        assert verdict != "wrong", f"wrong rule: {text}"
        assert (verdict == "generic") == (kind in GENERIC_KINDS), text


def test_every_verdict_belongs_to_a_rule_or_is_a_known_wrong_one():
    """The table holds no stale verdicts: each right or generic text is still produced by some log."""
    produced = {text for label in TRUTH["logs"] if log_path(label).exists() for _, text, _ in measure(label).rules}
    if not all(log_path(label).exists() for label in TRUTH["logs"]):
        pytest.skip("../shared is absent: some rules cannot be produced here")
    stale = [t for t, v in TRUTH["verdicts"].items() if v != "wrong" and t not in produced]
    assert stale == []
