"""Each case in ``../shared/cases/learn`` (minimal logs of faults seen on real public logs) with the
outcome its README gives, through the readers, the pairing, the rules and the command."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from headroom_core.cli.main import app
from headroom_core.learn.offline import learn_from_logs
from headroom_core.learn.pairing import find_pairs
from headroom_core.learn.readers import read_log
from tests.learn_truth import SHARED

CASES = SHARED / "cases" / "learn"


def case(name: str) -> Path:
    p = CASES / name
    if not p.exists():
        pytest.skip(f"case {p} is absent (the shared cases sit beside the repository as ../shared/cases)")
    return p


def everything(path: Path):
    """Every rule the learner can make of one log: threshold 1, generic rules included."""
    return learn_from_logs([read_log(path)], min_evidence=1, include_generic=True)


def test_grep_that_finds_nothing_is_no_failure_and_teaches_nothing():
    sess = read_log(case("rollout-grep-nomatch.jsonl"))
    steps = sess.threads[0].steps
    assert [(s.first_line, s.outcome) for s in steps] == [
        ("grep -i install readme.md", "no-match"),
        ("grep -i require readme.md", "ok"),
    ]
    res = everything(case("rollout-grep-nomatch.jsonl"))
    assert (res.files[0].failures, res.pairs, res.rules, res.candidates, res.problems) == (0, (), (), (), ())
    assert res.why_nothing(1).startswith("No failed tool call in 1 session(s)")


def test_a_package_installed_by_another_program_is_a_prerequisite_never_a_syntax_check():
    res = everything(case("rollout-fix-by-other-program.jsonl"))
    assert [(p.kind, p.failed.first_line, p.detail) for _, p in res.pairs] == [
        ("setup", "node express.js", "npm install express")
    ]
    assert [r.text for r in res.rules] == [
        "`node express.js` fails until `npm install express` has run (Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'express' "
        "imported from /p/express.js); run `npm install express` first"
    ]
    assert not any("--check" in r.text for r in (*res.rules, *res.candidates))


def test_an_indentation_only_retry_is_a_pair_and_a_rule_about_indentation():
    sess = read_log(case("indent-fix.traj"))
    steps = sess.threads[0].steps
    assert [s.ok for s in steps] == [False, True] and steps[0].error == "E999 IndentationError: unexpected indent"
    (pair,) = find_pairs(steps)
    assert (pair.kind, pair.failed.index, pair.fixed.index) == ("edit-indent", 0, 1)
    default = learn_from_logs([sess], min_evidence=1)
    assert default.rules == () and [r.kind for r in default.generic] == [
        "edit-indent"
    ]  # tool advice: kept out unless asked
    (rule,) = everything(case("indent-fix.traj")).rules
    assert rule.text.startswith(
        "When `edit` is rejected (E999 IndentationError: unexpected indent), check the indentation of the new text"
    )


def test_an_older_codex_rollout_is_read_by_content_whatever_its_name():
    path = case("codex-bare-items.jsonl")
    sess = read_log(path)
    assert (sess.source, sess.session_id, sess.records, sess.skipped, sess.unknown) == ("codex", "s1", 5, 0, 0)
    steps = sess.threads[0].steps
    assert [(s.first_line, s.ok) for s in steps] == [("npm run start", False), ("npm run test", True)]
    res = everything(path)
    # npm run test does another job: no pair, no rule; the missing start script stays a known problem
    assert (res.files[0].failures, res.pairs, res.rules) == (1, (), ())
    assert [(k.shown, k.error) for k in res.problems] == [("npm run start", 'Missing script: "start"')]


def test_the_command_on_the_cases_folder_says_what_it_found(tmp_path: Path):
    case("codex-bare-items.jsonl")
    env = {
        "HEADROOM_HOME": str(tmp_path / "home"),
        "CLAUDE_CONFIG_DIR": str(tmp_path / "none"),
        "CODEX_HOME": str(tmp_path / "none"),
        "COLUMNS": "250",
    }
    out = CliRunner().invoke(
        app,
        ["learn", "--project", str(tmp_path), "--from", str(CASES), "--min-evidence", "1", "--dry-run"],
        env=env,
        catch_exceptions=False,
    )
    assert out.exit_code == 0, out.output
    assert "run `npm install express` first" in out.output and "node --check" not in out.output.split("Session logs")[1]
    assert "0 malformed records skipped, 0 records of unknown types ignored" in out.output
    assert "Known problems" in out.output and "npm run start" in out.output
    assert "Generic rules about the agent's own tools" in out.output  # the indentation rule, not written
