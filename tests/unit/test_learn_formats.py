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
from headroom_core.learn.offline import learn_from_logs
from headroom_core.learn.readers import LogError, read_log, read_logs
from headroom_core.learn.readers.claude_code import is_subagent_file

LOGS = Path(__file__).resolve().parents[1] / "learn_logs"
CC2 = LOGS / "7d3f9a2e-41c8-4b6e-9f1d-2a8c5e0b7d14.jsonl"
SUBS = LOGS / "claude-2x-subagents" / "b81e4c07-93d2-4f5a-a6e1-0c7d2f9b3e58.jsonl"


def test_formats_are_told_by_content_not_by_name(tmp_path: Path):
    for src, source in (
        (LOGS / "codex-session-2025-08-02.jsonl", "codex"),
        (CC2, "claude-code"),
        (LOGS / "picoctf-rev_me.traj", "swe-agent"),
    ):
        renamed = tmp_path / f"log-{source}.txt"
        shutil.copy(src, renamed)
        assert read_log(renamed).source == source
    # a Claude Code prompt history is no session log: a clear error, nothing counted as malformed
    history = tmp_path / "history.jsonl"
    history.write_text(
        json.dumps({"display": "fix the build", "pastedContents": {}, "timestamp": 1755000000000, "project": "/repo"})
        + "\n"
    )
    with pytest.raises(
        LogError, match="not a Claude Code, Codex, Gemini CLI, SWE-agent, opencode or Aider session log"
    ):
        read_log(history)


def test_codex_bare_era_reads_state_markers_and_the_cwd_from_the_environment_context():
    sess = read_log(LOGS / "codex-session-2025-08-02.jsonl")
    assert (sess.source, sess.session_id, sess.cwd) == (
        "codex",
        "5b8f3c1e-2b0a-4a8e-9d57-3f1c0e7a9b21",
        "/home/user/src/cli-tool",
    )
    assert (sess.records, sess.skipped, sess.unknown) == (22, 0, 0)
    assert [s.first_line for s in sess.threads[0].steps][:2] == ["./scripts/release.sh --dry", "ls -l scripts/"]


def test_codex_forked_session_replaying_its_parent_reads_each_call_once_and_unknown_types_apart(tmp_path: Path):
    lines = (LOGS / "rollout-2025-10-14T09-12-00-0199e1b2-7c4d-7a31-9f0e-5d2c8b1a4e67.jsonl").read_text().splitlines()
    forked = tmp_path / "rollout-fork.jsonl"
    future = json.dumps({"timestamp": "2026-03-01T10:00:00Z", "type": "thread_snapshot_v9", "payload": {"x": 1}})
    forked.write_text("\n".join([*lines, *lines[1:], future]) + "\n")
    original, copy = (
        read_log(LOGS / "rollout-2025-10-14T09-12-00-0199e1b2-7c4d-7a31-9f0e-5d2c8b1a4e67.jsonl"),
        read_log(forked),
    )
    assert [s.call_id for s in copy.threads[0].steps] == [s.call_id for s in original.threads[0].steps]
    assert (copy.skipped, copy.unknown) == (0, 1)


def test_claude_code_2x_progress_records_are_valid_and_agent_progress_calls_are_read():
    sess = read_log(CC2)
    assert (sess.records, sess.skipped, sess.unknown) == (28, 0, 1)  # the one unknown: a record type from the future
    threads = {t.key.split(":", 1)[1]: t for t in sess.threads}
    sub = threads["agent:a3f9c21"]
    assert [(s.first_line, s.ok) for s in sub.steps] == [
        ("Write", True),
        ("npx tsc --noEmit", False),
        ("npm install zod", True),
        ("npx tsc --noEmit", True),
    ]
    main = [t for k, t in threads.items() if not k.startswith("agent:")][0]
    assert [s.outcome for s in main.steps if s.is_shell] == ["no-match", "failed", "ok", "timeout", "ok"]


def test_claude_code_2x_sub_agent_file_is_read_with_its_session_once(tmp_path: Path):
    sess = read_log(SUBS)
    assert len(sess.parts) == 2 and sess.parts[1].endswith("subagents/agent-af3e81b.jsonl")
    keys = [t.key.split(":", 1)[1] for t in sess.threads]
    assert keys.count("agent:af3e81b") == 1
    sub = next(t for t in sess.threads if t.key.endswith("agent:af3e81b"))
    assert [s.first_line for s in sub.steps] == [
        "make test",
        "Read",
        "uv run pytest -q",
    ]  # not doubled by the progress mirror
    assert (sess.skipped, sess.unknown) == (0, 0)
    # a folder given to the command: the sub-agent file is not read a second time on its own
    sub_file = Path(sess.parts[1])
    assert is_subagent_file(sub_file)
    alone = tmp_path / "agent-af3e81b.jsonl"
    shutil.copy(sub_file, alone)
    assert not is_subagent_file(alone) and [s.first_line for s in read_log(alone).threads[0].steps] == [
        "make test",
        "Read",
        "uv run pytest -q",
    ]


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
    env = {
        "HEADROOM_HOME": str(tmp_path / "home"),
        "CLAUDE_CONFIG_DIR": str(tmp_path / "none"),
        "CODEX_HOME": str(tmp_path / "none"),
        "COLUMNS": "250",
    }
    out = CliRunner().invoke(
        app, ["learn", "--project", str(tmp_path), "--from", str(LOGS), "--dry-run"], env=env, catch_exceptions=False
    )
    assert out.exit_code == 0, out.output
    # 16 sessions (the sub-agent file read with its session; 3 in the opencode database, 2 Aider runs; the opencode
    # JSON storage as 1 session, its message and part files not on their own; one Gemini CLI chat); truth.json is no log
    assert "16 sessions," in out.output and "0 malformed records skipped" in out.output
    assert "1 file(s) are no session log of a known agent: truth.json" in out.output
    assert "run `pip install -e '.[test]'` first" in out.output  # evidence 2 across the two attempts


# --- Claude Code 2.x: records without conversation are links of the parentUuid chain ------------

CC21 = LOGS / "e4a7c2d9-5b13-4f86-a0c2-9d1e6b3f7a58.jsonl"


def _cc(kind: str, uid: str, parent: str | None, message=None, **extra) -> dict:
    rec = {
        "type": kind,
        "uuid": uid,
        "parentUuid": parent,
        "sessionId": "s-2x",
        "cwd": "/p",
        "timestamp": "2026-01-01T00:00:00Z",
        "isSidechain": False,
        **extra,
    }
    if message is not None:
        rec["message"] = message
    return rec


def _call(uid: str, parent: str, tid: str, command: str) -> dict:
    return _cc(
        "assistant",
        uid,
        parent,
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": tid, "name": "Bash", "input": {"command": command}}],
        },
    )


def _result(uid: str, parent: str, tid: str, text: str, is_error: bool | None = None, tur=None) -> dict:
    block = {
        "type": "tool_result",
        "tool_use_id": tid,
        "content": text,
        **({"is_error": is_error} if is_error is not None else {}),
    }
    return _cc(
        "user", uid, parent, {"role": "user", "content": [block]}, **({"toolUseResult": tur} if tur is not None else {})
    )


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.mark.parametrize(
    "between",
    [
        [_cc("attachment", "x1", "u2", attachment={"type": "date", "date": "2026-01-01"})],
        [
            _cc("attachment", "x1", "u2", attachment={"type": "environment"}),
            _cc("attachment", "x2", "x1", attachment={"type": "model"}),
        ],
        [_cc("quantum-ledger-v7", "x1", "u2", payload={"anything": [1, 2]})],  # a type no release has yet
        [_cc("system", "x1", "u2", subtype="informational", content="hooks ran")],
        [_cc("user", "x1", "u2", {"role": "user", "content": []})],  # a user record with nothing in it
        [_cc("user", "x1", "u2", {"role": "system", "content": "reminder"})],  # not a user/assistant message
        [_cc("progress", "x1", "u2", data={"type": "hook_progress"}), _cc("future-thing", "x2", "x1")],
    ],
)
def test_records_without_conversation_link_a_failure_to_its_fix(tmp_path: Path, between: list[dict]):
    last = between[-1]["uuid"]
    recs = [
        _cc("user", "u1", None, {"role": "user", "content": "run the tests"}),
        _call("a1", "u1", "t1", "pytest -q"),
        _result("u2", "a1", "t1", "Exit code 127\n/bin/bash: line 1: pytest: command not found", True),
        *between,
        {
            "type": "api-request",
            "sessionId": "s-2x",
            "id": "r1",
            "params": {"model": "m"},
        },  # no uuid: outside the chain
        {
            "type": "api-request-blob",
            "sessionId": "s-2x",
            "hash": "h",
            "message": {"role": "user", "content": "not conversation"},
        },
        _call("a2", last, "t2", "uv run pytest -q"),
        _result("u3", "a2", "t2", "3 passed", False),
    ]
    sess = read_log(_write(tmp_path / "s.jsonl", recs))
    assert sess.skipped == 0
    assert [[s.first_line for s in t.steps] for t in sess.threads] == [["pytest -q", "uv run pytest -q"]]
    assert [n.text for t in sess.threads for n in t.notes] == ["run the tests"]  # the blob's message is no user message
    pairs = learn_from_logs([sess], min_evidence=1).pairs
    assert [(p.kind, p.failed.first_line, p.fixed.first_line) for _, p in pairs] == [
        ("command", "pytest -q", "uv run pytest -q")
    ]


def test_unknown_types_are_counted_but_linked_and_a_cycle_ends(tmp_path: Path):
    recs = [
        _cc("user", "u1", None, {"role": "user", "content": "go"}),
        _cc("weird", "w1", "u1"),
        _cc("weird", "w2", "w1"),
        _cc("loop", "c1", "c2"),
        _cc("loop", "c2", "c1"),
        _call("a1", "c1", "t1", "make"),
        _result("u2", "a1", "t1", "ok", False),
        _call("a2", "w2", "t2", "make test"),
        _result("u3", "a2", "t2", "ok", False),
    ]
    sess = read_log(_write(tmp_path / "s.jsonl", recs))
    assert (sess.records, sess.skipped, sess.unknown) == (9, 0, 4)
    by_first = {t.steps[0].first_line: t for t in sess.threads if t.steps}
    assert set(by_first) == {"make", "make test"}  # the cycle is its own thread, never the main one


def test_claude_code_2_1_log_reads_as_one_thread_across_attachments_and_a_compaction():
    sess = read_log(CC21)
    assert (sess.source, sess.cwd, sess.skipped, sess.unknown) == ("claude-code", "/home/user/src/shop", 0, 1)
    [thread] = [t for t in sess.threads if t.steps]
    assert [(s.first_line, s.ok) for s in thread.steps] == [
        ("pytest -q", False),
        ("uv run pytest -q", True),
        ("npm run build", False),
        ("npm run build --workspace web", True),
    ]
    # the whole output behind the <persisted-output> preview (toolUseResult) names the error; the preview holds only warnings
    assert thread.steps[2].error == 'Missing script: "build"'
    assert [n.kind for n in thread.notes] == ["user", "context"]


def test_tool_use_result_error_string_flags_a_failure_without_is_error(tmp_path: Path):
    recs = [
        _cc("user", "u1", None, {"role": "user", "content": "read it"}),
        _cc(
            "assistant",
            "a1",
            "u1",
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/p/x.txt"}}],
            },
        ),
        _result("u2", "a1", "t1", "File does not exist.", None, "Error: File does not exist."),
        _call("a2", "u2", "t2", "cat big.log"),
        _result(
            "u3",
            "a2",
            "t2",
            "<persisted-output>\nOutput too large (90KB). Full output saved to: /tmp/x.txt\n\nPreview (first 2KB):\nline 1\nline 2\n...\n</persisted-output>",
            False,
        ),
    ]
    steps = read_log(_write(tmp_path / "s.jsonl", recs)).threads[0].steps
    assert [(s.tool, s.ok) for s in steps] == [("Read", False), ("Bash", True)]
    assert steps[0].error == "File does not exist."


# --- opencode and Aider ---------------------------------------------------------------------------

OC_DB = LOGS / "opencode-1.18" / "opencode.db"
OC_JSON = LOGS / "opencode-json" / "storage" / "session" / "prj_51b2" / "ses_3a11d0c2b9ffeK4mPq8Rt2Vw6X.json"
AIDER = LOGS / "aider-0.86" / ".aider.chat.history.md"


def test_opencode_database_is_told_by_content_and_read_per_session_of_the_project(tmp_path: Path):
    renamed = tmp_path / "store.bin"
    shutil.copy(OC_DB, renamed)
    sessions = read_logs(renamed, project="/home/user/src/rates")
    assert [s.source for s in sessions] == ["opencode", "opencode"]  # the other project's session is left out
    main, sub = sessions
    assert main.cwd == "/home/user/src/rates" and main.unknown == 1 and main.skipped == 0
    steps = main.threads[0].steps
    assert [(s.first_line, s.ok) for s in steps] == [
        ("cargo build", False),
        ("cargo add serde_json", True),
        ("cargo build", True),
        ("pnpm test", False),
        ("npx vitest run", True),
    ]
    assert steps[3].error == "pnpm: not found"  # no exit code, no flag: the text says it failed
    assert [(s.tool, s.ok) for s in sub.threads[0].steps] == [("read", False), ("bash", True)]
    assert [n.text for n in main.threads[0].notes] == [
        "the rust build and the web tests fail, fix them"
    ]  # not the synthetic part
    # an SQLite file that is not opencode's is no session log
    import sqlite3

    other = tmp_path / "other.db"
    with sqlite3.connect(other) as db:
        db.execute("create table notes (id integer)")
    with pytest.raises(
        LogError, match="not a Claude Code, Codex, Gemini CLI, SWE-agent, opencode or Aider session log"
    ):
        read_logs(other)


def test_opencode_json_storage_session_file_reads_its_messages_and_parts():
    sess = read_log(OC_JSON)
    assert (sess.source, sess.cwd, sess.records, sess.skipped) == ("opencode", "/home/user/src/notes", 6, 0)
    assert [(s.first_line, s.ok, s.error) for s in sess.threads[0].steps] == [
        ("python -m pytest -q", False, "python: not found"),
        ("python3 -m pytest -q", True, ""),
    ]


def test_aider_history_runs_are_sessions_and_failures_are_read_as_far_as_it_records_them(tmp_path: Path):
    renamed = tmp_path / "notes.md"
    shutil.copy(AIDER, renamed)
    runs = read_logs(renamed)
    assert [s.source for s in runs] == ["aider", "aider"] and runs[0].started == "2026-11-18T14:02:11"
    # the auto-test is the --test-cmd of the quoted command line; each applied edit is an edit of its file
    assert [(s.first_line, s.ok) for s in runs[0].threads[0].steps] == [
        ("pytest -q", False),
        ("pip install -e '.[test]'", True),
        ("pytest -q", True),
        ("edit", True),
        ("pytest -q", False),
        ("edit", True),
        ("pytest -q", True),
    ]
    assert {s.target for s in runs[0].threads[0].steps if s.tool == "edit"} == {"money.py"}
    assert [(s.first_line, s.ok) for s in runs[1].threads[0].steps] == [
        ("ruff format --check .", True),
        ("make docs", False),
    ]
    assert [n.text for n in runs[0].threads[0].notes] == [
        "the rounding in `convert()` is wrong for negative amounts, fix it"
    ]
    assert read_logs(renamed, project="/elsewhere") == []


def test_aider_check_commands_come_from_the_quoted_command_line():
    from headroom_core.learn.readers.aider import check_commands

    line = "/usr/bin/aider --model openai/m --test-cmd python3 -B check.py --auto-test --lint-cmd 'ruff check' --message Add mul calc.py"
    assert check_commands(line) == {"aider-test": "python3 -B check.py", "aider-lint": "ruff check"}
    assert check_commands('aider --test-cmd="pytest -q"') == {"aider-test": "pytest -q"}
    assert check_commands("aider --model sonnet") == {}


def test_learn_says_why_a_test_fixed_by_an_edit_makes_no_rule(tmp_path: Path):
    project = tmp_path / "calc"
    project.mkdir()
    (project / ".aider.chat.history.md").write_text(
        "\n# aider chat started at 2026-03-01 12:00:00\n\n> aider --model openai/play-1 --test-cmd python3 -B check.py --auto-test  \n\n"
        "#### Add mul(a, b) to calc.py.  \n\nI will add mul.\n\n> Applied edit to calc.py  \n> Attempt to fix test errors? (Y)es/(N)o [Yes]: y  \n\n"
        "Fixing it.\n\n> Applied edit to calc.py  \n\nDone.\n"
    )
    env = {
        "HEADROOM_HOME": str(tmp_path / "home"),
        "CLAUDE_CONFIG_DIR": str(tmp_path / "none"),
        "CODEX_HOME": str(tmp_path / "none"),
        "XDG_DATA_HOME": str(tmp_path / "xdg"),
        "COLUMNS": "250",
    }
    out = CliRunner().invoke(
        app, ["learn", "--project", str(project), "--dry-run", "--min-evidence", "1"], env=env, catch_exceptions=False
    )
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert "1 failed call(s); 1 were fixed, but only by content-specific changes" in text, out.output
    assert "the latest: `python3 -B check.py` failed, `python3 -B check.py` then worked" in text, out.output


def test_learn_discovers_opencode_and_aider_in_their_default_places(tmp_path: Path):
    project = tmp_path / "rates"
    project.mkdir()
    data = tmp_path / "xdg"
    (data / "opencode").mkdir(parents=True)
    import sqlite3

    src = sqlite3.connect(OC_DB)
    dst = sqlite3.connect(data / "opencode" / "opencode.db")
    src.backup(dst)
    dst.execute("update session set directory = ? where directory = '/home/user/src/rates'", (str(project),))
    dst.commit()
    src.close()
    dst.close()
    shutil.copy(AIDER, project / ".aider.chat.history.md")
    env = {
        "HEADROOM_HOME": str(tmp_path / "home"),
        "CLAUDE_CONFIG_DIR": str(tmp_path / "none"),
        "CODEX_HOME": str(tmp_path / "none"),
        "XDG_DATA_HOME": str(data),
        "COLUMNS": "250",
    }
    out = CliRunner().invoke(
        app, ["learn", "--project", str(project), "--dry-run", "--min-evidence", "1"], env=env, catch_exceptions=False
    )
    assert out.exit_code == 0, out.output
    assert "4 sessions," in out.output  # two opencode sessions of the project, two Aider runs; not the other project's
    assert "run `cargo add serde_json` first" in out.output and "use `npx vitest run`" in out.output


def test_codex_exec_command_still_running_ends_in_a_later_write_stdin_with_its_exit_code(tmp_path: Path):
    def item(payload: dict) -> dict:
        return {"timestamp": "2026-06-01T00:00:01.000Z", "type": "response_item", "payload": payload}

    def call(cid: str, name: str, args: dict) -> dict:
        return item({"type": "function_call", "name": name, "call_id": cid, "arguments": json.dumps(args)})

    def out(cid: str, status: str, body: str) -> dict:
        return item(
            {
                "type": "function_call_output",
                "call_id": cid,
                "output": f"Chunk ID: 4f1a2b\nWall time: 10.0021 seconds\n{status}\nOriginal token count: 9\nOutput:\n{body}",
            }
        )

    recs = [
        {
            "timestamp": "2026-06-01T00:00:00.000Z",
            "type": "session_meta",
            "payload": {"id": "t-1", "cwd": "/p", "cli_version": "0.169.0"},
        },
        {"timestamp": "2026-06-01T00:00:00.500Z", "type": "turn_context", "payload": {"cwd": "/p", "model": "gpt-5.5"}},
        call("c1", "exec_command", {"cmd": "cargo test", "yield_time_ms": 10000}),
        out("c1", "Process running with session ID 71", "   Compiling app v0.1.0\n"),
        call("c2", "write_stdin", {"session_id": 71, "chars": ""}),
        out("c2", "Process running with session ID 71", "running 3 tests\n"),
        call("c3", "write_stdin", {"session_id": 71, "chars": ""}),
        out("c3", "Process exited with code 101", "test parse ... FAILED\nerror: test failed, to rerun pass `--lib`\n"),
        {
            "timestamp": "2026-06-01T00:00:05.000Z",
            "type": "event_msg",
            "payload": {"type": "token_count", "info": None},
        },
        call("c4", "exec_command", {"cmd": "cargo test -- --test-threads=1"}),
        out("c4", "Process exited with code 0", "test result: ok. 3 passed\n"),
    ]
    steps = read_log(_write(tmp_path / "rollout-2026-06-01T00-00-00-t-1.jsonl", recs)).threads[0].steps
    assert [(s.first_line, s.ok) for s in steps] == [("cargo test", False), ("cargo test -- --test-threads=1", True)]
    assert steps[0].error == "error: test failed, to rerun pass `--lib`"
