"""``headroom learn`` over real session logs (../shared/corpus) and small hand-made ones: readers,
pairing, rules, the command itself (typer's runner on the real CLI, a real SQLite database)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from headroom_core.cli.main import app
from headroom_core.learn.offline import learn_from_logs
from headroom_core.learn.pairing import find_pairs
from headroom_core.learn.readers import read_log
from headroom_core.learn.readers.claude_code import project_dir_name
from headroom_core.learn.rules import drop_contradictions, rule_for_pair
from headroom_core.learn.signals import find_signals
from headroom_core.learn.steps import make_step, program
from headroom_core.learn.writers import START
from tests.conftest import corpus_dir

READ_RULE = (
    "Read a file before editing it: `Edit`, `Write` and `MultiEdit` fail on a file that was not read first "
    "(File has not been read yet. Read it first before writing to it)"
)
RANGE_RULE = (
    "When `edit` is rejected with a syntax error, check the line range before the new text: it must span exactly the lines "
    "being replaced. Here `edit 287:295` left line 296 of the old code in place and was rejected (E999 SyntaxError: "
    "unmatched ')'); the same text as `edit 287:296` worked"
)
HAND_WRITTEN = "Always run `pnpm lint` before committing."


@pytest.fixture
def claude_layout(tmp_path: Path) -> dict[str, str | Path]:
    """The Claude Code corpus copied into a CLAUDE_CONFIG_DIR layout for a project folder with a
    hand-written CLAUDE.local.md; the environment for the command."""
    project = tmp_path / "work" / "Demo"
    project.mkdir(parents=True)
    (project / "CLAUDE.local.md").write_text(f"# Local notes\n\n{HAND_WRITTEN}\n")
    logs = tmp_path / "claude" / "projects" / project_dir_name(project)
    logs.mkdir(parents=True)
    for p in corpus_dir("claude-code-sessions").glob("*.jsonl"):
        shutil.copy(p, logs / p.name)
    env = {
        "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"),
        "HEADROOM_HOME": str(tmp_path / "home"),
        "CODEX_HOME": str(tmp_path / "codex"),
        "COLUMNS": "200",
    }
    return {"project": project, "env": env}


def run(args: list[str], env: dict, input: str | None = None):
    return CliRunner().invoke(app, ["learn", *args], env=env, input=input, catch_exceptions=False)


# --- the real corpus ----------------------------------------------------------------------------


def test_claude_code_corpus_gives_only_a_generic_read_before_edit_rule_and_one_known_problem():
    paths = sorted(corpus_dir("claude-code-sessions").glob("*.jsonl"))
    sessions = [read_log(p) for p in paths]
    res = learn_from_logs(sessions, min_evidence=2)
    # "read before edit" is enforced by Claude Code itself: generic, kept out by default
    assert res.rules == ()
    assert [(r.kind, r.text, r.evidence) for r in res.generic] == [("prerequisite", READ_RULE, 10)]
    stats = {
        Path(f.path).name: (f.records, f.skipped, f.unknown, f.failures, f.pairs, f.rules_written, f.problems)
        for f in res.files
    }
    # fe5e1c67: 23 results flagged is_error, one of them a grep that found nothing ("Error", no output)
    assert stats == {"5c0375b4.jsonl": (53, 0, 0, 3, 2, 0, 0), "fe5e1c67.jsonl": (438, 0, 0, 22, 5, 0, 4)}
    kinds = sorted(p.kind for _, p in res.pairs)
    assert kinds == ["param", "prerequisite", "prerequisite", "prerequisite", "retry", "retry", "retry"]
    # every Edit-before-Read pair was fixed by reading the very file, then editing it
    for _, p in res.pairs:
        if p.kind == "prerequisite":
            assert p.between[-1].tool == "Read" and p.between[-1].target == p.failed.target == p.fixed.target
    assert [r.kind for r in res.candidates] == ["param"]
    # the build that never worked again is a known problem, not a rule
    assert [(k.shown, k.error, k.count) for k in res.problems] == [
        ("npm run build", "TypeError: generate is not a function", 4)
    ]
    assert res.why_nothing(2).startswith("Nothing to write: 25 failed call(s);")
    assert "generic rule(s) about the agent's own tools kept out (--include-generic writes them)" in res.why_nothing(2)
    with_generic = learn_from_logs(sessions, min_evidence=2, include_generic=True)
    assert [(r.text, r.evidence) for r in with_generic.rules] == [(READ_RULE, 10)] and with_generic.generic == ()


def test_swe_agent_pairs_the_rejected_edit_with_the_corrected_one():
    sess = read_log(corpus_dir("swe-agent") / "pydicom-1458.traj")
    (thread,) = sess.threads
    assert [s.ok for s in thread.steps] == [True, True, False, True, True, False, False, False, True, True, True, True]
    pairs = find_pairs(thread.steps)
    assert [p.kind for p in pairs] == ["edit-range", "retry"]
    pair = pairs[0]
    assert (pair.failed.index, pair.fixed.index) == (7, 8)
    assert pair.failed.first_line == "edit 287:295" and pair.fixed.first_line == "edit 287:296"
    assert pair.failed.error == "E999 SyntaxError: unmatched ')'"
    assert pair.failed.target == "/pydicom__pydicom/pydicom/pixel_data_handlers/numpy_handler.py"
    assert [r.index for r in pair.retries] == [5, 6]  # the earlier rejected attempts of the same edit
    # the failing reproduction script and its later success are a content fix (the code was
    # edited in between): a pair, but no rule
    assert thread.steps[2].error == (
        "AttributeError: Unable to convert the pixel data as the following required elements are missing from the dataset: PixelRepresentation"
    )
    assert (pairs[1].failed.index, pairs[1].fixed.index) == (2, 9) and rule_for_pair(pairs[1]) is None
    res = learn_from_logs([sess])
    assert res.rules == () and [(r.text, r.evidence) for r in res.generic] == [(RANGE_RULE, 2)]
    assert [(r.text, r.evidence) for r in learn_from_logs([sess], include_generic=True).rules] == [(RANGE_RULE, 2)]


def test_learn_command_on_claude_code_layout_writes_once_and_keeps_hand_written_text(claude_layout):
    project, env = claude_layout["project"], claude_layout["env"]
    target = project / "CLAUDE.local.md"
    default = run(["--project", str(project), "--dry-run"], env)
    assert default.exit_code == 0, default.output
    assert "Nothing to write: 25 failed call(s)" in default.output and "No file changed." in default.output
    assert "Known problems" in default.output and "generate is not a function" in default.output
    dry = run(["--project", str(project), "--dry-run", "--include-generic"], env)
    assert dry.exit_code == 0, dry.output
    assert "+- Read a file before editing it" in dry.output and "--dry-run: nothing written." in dry.output
    assert target.read_text() == f"# Local notes\n\n{HAND_WRITTEN}\n"
    assert not (Path(env["HEADROOM_HOME"]) / "headroom.db").exists()  # a dry run creates nothing
    # on a narrow terminal the diff's lines stay whole (copied into a file, they must paste back)
    narrow = run(["--project", str(project), "--dry-run", "--include-generic"], {**env, "COLUMNS": "40"})
    added = [ln for ln in narrow.output.splitlines() if ln.startswith("+- ")]
    assert (
        len(added) == 1
        and added[0].startswith(f"+- {READ_RULE} _(evidence: 10)_ <!-- headroom:rule ")
        and added[0].endswith("-->")
    )

    declined = run(["--project", str(project), "--include-generic"], env, input="n\n")
    assert "Nothing written." in declined.output and START not in target.read_text()

    first = run(["--project", str(project), "--yes", "--include-generic"], env)
    assert first.exit_code == 0, first.output
    assert f"wrote {target}" in first.output and "1 rule(s) kept in the database" in first.output
    text = target.read_text()
    assert text.startswith(f"# Local notes\n\n{HAND_WRITTEN}\n\n{START}\n")
    rule_lines = [ln for ln in text.splitlines() if ln.startswith("- ")]
    assert len(rule_lines) == 1
    assert rule_lines[0].startswith(f"- {READ_RULE} _(evidence: 10)_ <!-- headroom:rule ")

    second = run(["--project", str(project), "--yes", "--include-generic"], env)
    assert second.exit_code == 0
    assert "Nothing to change" in second.output
    assert target.read_text() == text

    listed = run(["--project", str(project), "--list"], env)
    assert "Read a file before editing it" in listed.output and "offline" in listed.output


def test_several_targets_and_session_filter(claude_layout):
    project, env = claude_layout["project"], claude_layout["env"]
    r = run(
        ["--project", str(project), "--yes", "--include-generic", "--target", "AGENTS.md", "--target", "claude"], env
    )
    assert r.exit_code == 0, r.output
    for name in ("AGENTS.md", "CLAUDE.md"):
        assert READ_RULE in (project / name).read_text()
    assert START not in (project / "CLAUDE.local.md").read_text()
    only = run(
        ["--project", str(project), "--dry-run", "--include-generic", "--session", "5c0375b4", "--target", "GEMINI.md"],
        env,
    )
    assert "5c0375b4.jsonl" in only.output and "fe5e1c67.jsonl" not in only.output
    assert "Nothing to write: 3 failed call(s)" in only.output and "below the evidence threshold of 2" in only.output
    bad = run(["--project", str(project), "--target", "README.md"], env)
    assert bad.exit_code != 0 and "unknown target" in bad.output


# --- hand-made logs: formats and signals the corpus lacks ------------------------------------------


def _claude_record(kind: str, content, uid: str, parent: str | None, **extra) -> str:
    role = "assistant" if kind == "assistant" else "user"
    rec = {
        "type": kind,
        "uuid": uid,
        "parentUuid": parent,
        "sessionId": "s-hand",
        "cwd": "/p",
        "timestamp": "2025-01-01T00:00:00Z",
        "isSidechain": False,
        "message": {"role": role, "content": content},
        **extra,
    }
    return json.dumps(rec)


def test_malformed_records_are_skipped_and_unknown_types_counted_apart(tmp_path: Path):
    lines = [
        _claude_record("user", "run the build", "u1", None),
        _claude_record(
            "assistant",
            [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "npm run build"}}],
            "a1",
            "u1",
        ),
        "{not json",
        json.dumps({"type": "telemetry-blob", "x": 1}),
        json.dumps([1, 2, 3]),
        _claude_record(
            "user",
            [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "is_error": True,
                    "content": "npm ERR! missing script: build",
                }
            ],
            "u2",
            "a1",
        ),
        _claude_record(
            "assistant",
            [{"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "pnpm run build"}}],
            "a2",
            "u2",
        ),
        _claude_record("user", [{"type": "tool_result", "tool_use_id": "t2", "content": "built in 2s"}], "u3", "a2"),
        _claude_record("user", "No, don't use npm in this repo. Use pnpm instead.", "u4", "u3"),
        _claude_record("user", "[Request interrupted by user]", "u5", "u4"),
    ]
    log = tmp_path / "hand.jsonl"
    log.write_text("\n".join(lines) + "\n")
    sess = read_log(log)
    # a line that is not JSON and a JSON array are malformed; a well-formed record of a type
    # the reader does not know is not
    assert (sess.records, sess.skipped, sess.unknown) == (10, 2, 1)
    kinds = [s.kind for s in find_signals(sess.threads[0])]
    assert kinds == ["tool_error", "correction", "interrupt"]
    res = learn_from_logs([sess], min_evidence=1)
    texts = [r.text for r in res.rules]
    assert "User correction: “No, don't use npm in this repo. Use pnpm instead.”" in texts
    # npm has no build script here, pnpm builds: another program doing the same job
    assert [p.kind for _, p in res.pairs] == ["command"]
    assert "`npm run build` fails (npm ERR! missing script: build); use `pnpm run build`" in texts
    env = {
        "HEADROOM_HOME": str(tmp_path / "home"),
        "CLAUDE_CONFIG_DIR": str(tmp_path / "none"),
        "CODEX_HOME": str(tmp_path / "none"),
        "COLUMNS": "200",
    }
    out = run(["--project", str(tmp_path), "--from", str(log), "--dry-run"], env)
    assert out.exit_code == 0 and "2 malformed records skipped, 1 records of unknown types ignored" in out.output


def test_codex_rollout_pairs_shell_commands_by_exit_code(tmp_path: Path):
    def item(payload):
        return json.dumps({"timestamp": "2025-06-01T10:00:00Z", "type": "response_item", "payload": payload})

    def shell(cid, cmd):
        return item(
            {
                "type": "function_call",
                "name": "shell",
                "call_id": cid,
                "arguments": json.dumps({"command": ["bash", "-lc", cmd]}),
            }
        )

    def out(cid, text, code):
        return item(
            {
                "type": "function_call_output",
                "call_id": cid,
                "output": json.dumps({"output": text, "metadata": {"exit_code": code, "duration_seconds": 0.1}}),
            }
        )

    lines = [
        json.dumps(
            {"timestamp": "2025-06-01T10:00:00Z", "type": "session_meta", "payload": {"id": "c-1", "cwd": "/repo"}}
        ),
        item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "run the tests"}]}),
        shell("c1", "pytest tests -q"),
        out("c1", "bash: pytest: command not found\n", 127),
        shell("c2", "python -m pytest tests -q"),
        out("c2", "3 passed in 0.1s\n", 0),
        shell("c3", "grep -rn 'Error:' src"),
        out("c3", "src/a.py:3: raise ValueError: bad\n", 0),
        json.dumps(
            {
                "timestamp": "2025-06-01T10:01:00Z",
                "type": "event_msg",
                "payload": {"type": "turn_aborted", "reason": "interrupted"},
            }
        ),
        json.dumps({"type": "mystery", "payload": {}}),
    ]
    log = tmp_path / "rollout-2025-06-01T10-00-00-c-1.jsonl"
    log.write_text("\n".join(lines) + "\n")
    sess = read_log(log)
    assert sess.source == "codex" and sess.cwd == "/repo" and (sess.skipped, sess.unknown) == (0, 1)
    steps = sess.threads[0].steps
    assert [s.ok for s in steps] == [False, True, True]  # exit code 0 wins over an "Error:" line in grep output
    (pair,) = find_pairs(steps)
    assert rule_for_pair(pair).text == "`pytest tests -q` fails (command not found); use `python -m pytest tests -q`"
    assert [s.kind for s in find_signals(sess.threads[0])] == ["tool_error", "interrupt"]


def test_pairing_rules_for_shell_commands():
    def st(cmd, ok, err="", i=0):
        return make_step("Bash", {"command": cmd}, "" if ok else err, is_error=not ok, index=i)

    assert program("python -m pytest tests") == program("pytest tests") == "pytest"
    # same program, a shared substantive token: paired
    (p,) = find_pairs(
        [st("pytest tests", False, "bash: pytest: command not found"), st("python -m pytest tests", True, i=1)]
    )
    assert p.kind == "command"
    # different program: not a pair; identical retry: not a pair
    # a command that only looks teaches nothing: creating what it looked for is no lesson
    assert [
        p.kind
        for p in find_pairs(
            [st("ls -la types/", False, "No such file or directory"), st("mkdir -p types && ls -la types/", True)]
        )
    ] == ["retry"]
    assert find_pairs([st("make test", False, "Error 1"), st("make test", True)]) == []
    # only a flag and filler in common, far apart: not a pair
    assert (
        find_pairs([st("grep -rn foo src/app.ts", False, "error: x"), st("grep -c bar lib/other/thing.py", True)]) == []
    )
    # too far apart (more than 5 calls later): not a pair
    far = (
        [st("pytest tests", False, "command not found")]
        + [st(f"echo {i}", True, i=i) for i in range(1, 7)]
        + [st("python -m pytest tests", True, i=7)]
    )
    assert find_pairs(far) == []


def test_contradictory_pairs_are_dropped_and_secrets_redacted():
    a = make_step("Bash", {"command": "npm test"}, "sh: 1: jest: not found", is_error=True)
    b = make_step("Bash", {"command": "npm run test"}, "ok")
    r1 = rule_for_pair(find_pairs([a, b])[0])
    a2 = make_step("Bash", {"command": "npm run test"}, "sh: 1: jest: not found", is_error=True)
    b2 = make_step("Bash", {"command": "npm test"}, "ok")
    r2 = rule_for_pair(find_pairs([a2, b2])[0])
    kept, dropped = drop_contradictions([r1, r2])
    assert kept == [] and {r.id for r in dropped} == {r1.id, r2.id}
    s = make_step(
        "Bash",
        {"command": "curl -H 'Authorization: Bearer sk-ant-api03-abcdefghijklmnopqrstuv' https://x"},
        "curl: (6) fatal: x",
        is_error=True,
    )
    assert "sk-ant" not in s.command and "sk-ant" not in s.args and "***" in s.command
