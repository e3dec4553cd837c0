"""Failures nothing fixed become known problems: listed by ``headroom learn``, kept in the
database (a real SQLite file) and fed back by the proxy's past-failures block, once, dated by
the log, never twice for the same logs."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from typer.testing import CliRunner

from headroom_core.cli.main import app
from headroom_core.db.engine import open_database
from headroom_core.learn.offline import learn_from_logs
from headroom_core.learn.readers import read_log
from headroom_core.learn.store import LearnStore

LOGS = Path(__file__).resolve().parents[1] / "learn_logs"
PROJECT = "/work/projects/ledger"


def test_known_problems_are_kept_and_fed_back_once(tmp_path: Path):
    res = learn_from_logs(
        [read_log(LOGS / "ledger__ledger-212.traj"), read_log(LOGS / "codex-session-2025-08-02.jsonl")]
    )
    assert [(p.shown, p.error, p.count) for p in res.problems] == [
        ("python -m pytest tests/test_export.py -x", "timed out after 30 seconds", 1),
        ("python -m twine check dist/*", "/usr/bin/python: No module named twine", 1),
    ]
    store = LearnStore(open_database(f"sqlite:///{tmp_path / 'h.db'}"))
    now = datetime(2025, 8, 2, 15, 0, 0)
    assert store.record_known_problems(PROJECT, list(res.problems), now=now) == 2
    assert store.record_known_problems(PROJECT, list(res.problems), now=now) == 0  # the same logs again: nothing new
    # the Codex failure is dated by its log (14:03 that day), the trajectory has no times (now)
    lines = store.past_failure_lines(PROJECT, "next-session", timedelta(hours=6), 5, now=now)
    assert sorted(lines) == [
        "`python -m pytest tests/test_export.py -x` failed (timed out after 30 seconds)",
        "`python -m twine check dist/*` failed (/usr/bin/python: No module named twine)",
    ]
    assert store.past_failure_lines(PROJECT, "next-session", timedelta(hours=6), 5, now=now) == []  # once per session
    assert (
        store.past_failure_lines("/work/projects/other", "s", timedelta(hours=6), 5, now=now) == []
    )  # never another project's
    # a day later only failures seen recently are fed: the logs' own times count
    assert store.past_failure_lines(PROJECT, "later", timedelta(hours=6), 5, now=now + timedelta(days=1)) == []


def test_the_command_keeps_known_problems_only_when_not_a_dry_run(tmp_path: Path):
    env = {
        "HEADROOM_HOME": str(tmp_path / "home"),
        "CLAUDE_CONFIG_DIR": str(tmp_path / "none"),
        "CODEX_HOME": str(tmp_path / "none"),
        "COLUMNS": "200",
    }
    project = tmp_path / "ledger"
    project.mkdir()
    args = ["learn", "--project", str(project), "--from", str(LOGS / "ledger__ledger-212.traj")]
    dry = CliRunner().invoke(app, [*args, "--dry-run"], env=env, catch_exceptions=False)
    assert dry.exit_code == 0 and "python -m pytest tests/test_export.py -x" in dry.output
    assert not (tmp_path / "home" / "headroom.db").exists()
    kept = CliRunner().invoke(app, [*args, "--yes"], env=env, catch_exceptions=False)
    assert kept.exit_code == 0, kept.output
    assert "1 known problem(s) kept for the past-failures feed." in kept.output
    store = LearnStore(open_database(f"sqlite:///{tmp_path / 'home' / 'headroom.db'}"))
    assert store.past_failure_lines(str(project), "s2", timedelta(hours=6), 3) == [
        "`python -m pytest tests/test_export.py -x` failed (timed out after 30 seconds)"
    ]


def test_a_script_the_agent_wrote_failing_is_no_project_problem(tmp_path: Path):
    import json

    def step(action: str, obs: str) -> dict:
        return {
            "action": action,
            "observation": obs,
            "response": "",
            "thought": "",
            "state": {"open_file": "n/a", "working_dir": "/testbed"},
        }

    traj = {
        "trajectory": [
            step("create /testbed/reproduce_issue.py", "[File: /testbed/reproduce_issue.py (1 lines total)]"),
            step("python /testbed/reproduce_issue.py", "Traceback (most recent call last):\nValueError: the bug"),
            step(
                "python -m pytest tests/test_io.py",
                "ImportError while loading conftest '/testbed/tests/conftest.py'.\nE   ModuleNotFoundError: No module named 'lxml'",
            ),
            step("submit", "diff --git a/x b/x"),
        ],
        "history": [],
        "info": {"exit_status": "submitted"},
    }
    path = tmp_path / "repro.traj"
    path.write_text(json.dumps(traj))
    res = learn_from_logs([read_log(path)])
    assert [p.shown for p in res.problems] == ["python -m pytest tests/test_io.py"]
