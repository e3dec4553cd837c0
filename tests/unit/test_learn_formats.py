"""Session-log formats the corpus lacks, on the hand-made logs in ``tests/learn_logs`` (written in
each agent's own format: Codex rollouts of both eras, Claude Code 2.x with ``progress`` records
and sub-agent files, SWE-agent 1.x, its retry loop and EnIGMA): told apart by content, every valid
record read, sub-agents read once."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from headroom_core.cli.main import app
from headroom_core.learn.readers import LogError, read_log
from headroom_core.learn.readers.claude_code import is_subagent_file

LOGS = Path(__file__).resolve().parents[1] / "learn_logs"
CC2 = LOGS / "7d3f9a2e-41c8-4b6e-9f1d-2a8c5e0b7d14.jsonl"
SUBS = LOGS / "claude-2x-subagents" / "b81e4c07-93d2-4f5a-a6e1-0c7d2f9b3e58.jsonl"


def test_formats_are_told_by_content_not_by_name(tmp_path: Path):
    for src, source in ((LOGS / "codex-session-2025-08-02.jsonl", "codex"), (CC2, "claude-code"), (LOGS / "picoctf-rev_me.traj", "swe-agent")):
        renamed = tmp_path / f"log-{source}.txt"
        shutil.copy(src, renamed)
        assert read_log(renamed).source == source
    # a Claude Code prompt history is no session log: a clear error, nothing counted as malformed
    history = tmp_path / "history.jsonl"
    history.write_text(json.dumps({"display": "fix the build", "pastedContents": {}, "timestamp": 1755000000000, "project": "/repo"}) + "\n")
    with pytest.raises(LogError, match="not a Claude Code, Codex or SWE-agent session log"):
        read_log(history)


def test_codex_bare_era_reads_state_markers_and_the_cwd_from_the_environment_context():
    sess = read_log(LOGS / "codex-session-2025-08-02.jsonl")
    assert (sess.source, sess.session_id, sess.cwd) == ("codex", "5b8f3c1e-2b0a-4a8e-9d57-3f1c0e7a9b21", "/home/user/src/cli-tool")
    assert (sess.records, sess.skipped, sess.unknown) == (22, 0, 0)
    assert [s.first_line for s in sess.threads[0].steps][:2] == ["./scripts/release.sh --dry", "ls -l scripts/"]


def test_codex_forked_session_replaying_its_parent_reads_each_call_once_and_unknown_types_apart(tmp_path: Path):
    lines = (LOGS / "rollout-2025-10-14T09-12-00-0199e1b2-7c4d-7a31-9f0e-5d2c8b1a4e67.jsonl").read_text().splitlines()
    forked = tmp_path / "rollout-fork.jsonl"
    future = json.dumps({"timestamp": "2026-03-01T10:00:00Z", "type": "thread_snapshot_v9", "payload": {"x": 1}})
    forked.write_text("\n".join([*lines, *lines[1:], future]) + "\n")
    original, copy = read_log(LOGS / "rollout-2025-10-14T09-12-00-0199e1b2-7c4d-7a31-9f0e-5d2c8b1a4e67.jsonl"), read_log(forked)
    assert [s.call_id for s in copy.threads[0].steps] == [s.call_id for s in original.threads[0].steps]
    assert (copy.skipped, copy.unknown) == (0, 1)


def test_claude_code_2x_progress_records_are_valid_and_agent_progress_calls_are_read():
    sess = read_log(CC2)
    assert (sess.records, sess.skipped, sess.unknown) == (28, 0, 1)  # the one unknown: a record type from the future
    threads = {t.key.split(":", 1)[1]: t for t in sess.threads}
    sub = threads["agent:a3f9c21"]
    assert [(s.first_line, s.ok) for s in sub.steps] == [("Write", True), ("npx tsc --noEmit", False), ("npm install zod", True),
                                                        ("npx tsc --noEmit", True)]
    main = [t for k, t in threads.items() if not k.startswith("agent:")][0]
    assert [s.outcome for s in main.steps if s.is_shell] == ["no-match", "failed", "ok", "timeout", "ok"]


def test_claude_code_2x_sub_agent_file_is_read_with_its_session_once(tmp_path: Path):
    sess = read_log(SUBS)
    assert len(sess.parts) == 2 and sess.parts[1].endswith("subagents/agent-af3e81b.jsonl")
    keys = [t.key.split(":", 1)[1] for t in sess.threads]
    assert keys.count("agent:af3e81b") == 1
    sub = next(t for t in sess.threads if t.key.endswith("agent:af3e81b"))
    assert [s.first_line for s in sub.steps] == ["make test", "Read", "uv run pytest -q"]  # not doubled by the progress mirror
    assert (sess.skipped, sess.unknown) == (0, 0)
    # a folder given to the command: the sub-agent file is not read a second time on its own
    sub_file = Path(sess.parts[1])
    assert is_subagent_file(sub_file)
    alone = tmp_path / "agent-af3e81b.jsonl"
    shutil.copy(sub_file, alone)
    assert not is_subagent_file(alone) and [s.first_line for s in read_log(alone).threads[0].steps] == ["make test", "Read", "uv run pytest -q"]


def test_claude_code_progress_mirror_is_the_sub_agent_when_its_file_is_gone(tmp_path: Path):
    shutil.copy(SUBS, tmp_path / SUBS.name)  # the session without its subagents/ folder
    sess = read_log(tmp_path / SUBS.name)
    sub = next(t for t in sess.threads if t.key.endswith("agent:af3e81b"))
    assert [s.first_line for s in sub.steps] == ["make test", "Read", "uv run pytest -q"]


def test_swe_agent_retry_loop_reads_each_attempt_once():
    sess = read_log(LOGS / "fmt__fmt-77.traj")
    assert [t.key for t in sess.threads] == ["fmt__fmt-77:attempt0", "fmt__fmt-77:attempt1"]
    assert sess.records == 8 and sess.skipped == 0


def test_enigma_state_as_a_json_string_and_its_own_commands():
    sess = read_log(LOGS / "picoctf-rev_me.traj")
    assert sess.cwd == "/__home__user__ctf_rev_me"
    steps = sess.threads[0].steps
    assert [s.outcome for s in steps] == ["ok", "ok", "ok", "failed", "ok", "ok", "ok", "failed", "ok", "ok"]
    assert steps[7].error == "Wrong flag!"


def test_the_command_reads_a_folder_of_mixed_logs(tmp_path: Path):
    env = {"HEADROOM_HOME": str(tmp_path / "home"), "CLAUDE_CONFIG_DIR": str(tmp_path / "none"), "CODEX_HOME": str(tmp_path / "none"),
           "COLUMNS": "250"}
    out = CliRunner().invoke(app, ["learn", "--project", str(tmp_path), "--from", str(LOGS), "--dry-run"], env=env, catch_exceptions=False)
    assert out.exit_code == 0, out.output
    # 8 sessions (the sub-agent file read with its session); truth.json is no log
    assert "8 sessions," in out.output and "0 malformed records skipped" in out.output
    assert "1 file(s) are no session log of a known agent: truth.json" in out.output
    assert "run `pip install -e '.[test]'` first" in out.output  # evidence 2 across the two attempts
