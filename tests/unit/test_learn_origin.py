"""Rules found in another project's logs (``headroom learn --from``) are written under a heading
that says where they come from, never among the failures of the project's own sessions (issue 34,
item 11). The command runs on the real CLI with hand-made Codex rollouts and a real SQLite file."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from headroom_core.cli.main import app
from headroom_core.learn.rules import Rule, content_hash
from headroom_core.learn.writers import FROM, INTRO, OLD_INTROS, START, merge_rules, origin_of, parse

RULE = "`pytest tests -q` fails (command not found); use `python -m pytest tests -q`"


def rollout(path: Path, sid: str, cwd: str) -> Path:
    """A Codex rollout run in ``cwd``: ``pytest`` is not found, ``python -m pytest`` passes."""

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
        json.dumps({"timestamp": "2025-06-01T10:00:00Z", "type": "session_meta", "payload": {"id": sid, "cwd": cwd}}),
        item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "run the tests"}]}),
        shell("c1", "pytest tests -q"), out("c1", "bash: pytest: command not found\n", 127),
        shell("c2", "python -m pytest tests -q"), out("c2", "3 passed in 0.1s\n", 0),
    ]  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def learn(project: Path, logs: Path, tmp_path: Path):
    env = {"HEADROOM_HOME": str(tmp_path / "home"), "CLAUDE_CONFIG_DIR": str(tmp_path / "none"), "CODEX_HOME": str(tmp_path / "none"),
           "XDG_DATA_HOME": str(tmp_path / "none"), "COLUMNS": "200"}  # fmt: skip
    return CliRunner().invoke(
        app, ["learn", "--project", str(project), "--from", str(logs), "--yes"], env=env, catch_exceptions=False
    )


def section_lines(project: Path) -> list[str]:
    text = (project / "CLAUDE.local.md").read_text()
    return text[text.index(START) :].splitlines()


def test_rules_from_another_projects_logs_go_under_a_heading_naming_it(tmp_path: Path):
    project = tmp_path / "mine"
    project.mkdir()
    logs = tmp_path / "logs"
    for i in (1, 2):
        rollout(logs / f"rollout-2025-06-01T10-00-0{i}-o{i}.jsonl", f"o{i}", "/srv/other-app")
    res = learn(project, logs, tmp_path)
    assert res.exit_code == 0, res.output
    lines = section_lines(project)
    heading = f"{FROM}sessions of another project (/srv/other-app)"
    assert heading in lines
    item = next(i for i, ln in enumerate(lines) if ln.startswith(f"- {RULE} "))
    assert item > lines.index(heading)  # under it, not among this project's failures
    assert lines[lines.index(INTRO) + 1 : lines.index(heading)] == [""]  # nothing of its own above


def test_the_same_rule_seen_in_the_projects_own_sessions_moves_up(tmp_path: Path):
    project = tmp_path / "mine"
    project.mkdir()
    other, own = tmp_path / "other", tmp_path / "own"
    for i in (1, 2):
        rollout(other / f"rollout-2025-06-01T10-00-0{i}-o{i}.jsonl", f"o{i}", "/srv/other-app")
        rollout(own / f"rollout-2025-06-02T10-00-0{i}-m{i}.jsonl", f"m{i}", str(project / "sub"))
    assert learn(project, other, tmp_path).exit_code == 0
    assert learn(project, own, tmp_path).exit_code == 0
    lines = section_lines(project)
    assert not [ln for ln in lines if ln.startswith(FROM)]
    assert lines[lines.index(INTRO) + 2].startswith(f"- {RULE} ")


def rule(text: str, evidence: int) -> Rule:
    return Rule("command", text, text, content_hash("sk", text), content_hash("fk", text), evidence)


def test_sections_round_trip_and_stay_stable():
    a, b, c = rule("own rule", 3), rule("rule from elsewhere", 5), rule("rule from a log without project", 2)
    text = merge_rules("", [a, b, c], {b.id: origin_of(["/x/app"], "/me"), c.id: origin_of([""], "/me")})
    sec = parse(text)
    assert {e.text: e.origin for e in sec.entries} == {
        "own rule": "", "rule from elsewhere": "sessions of another project (/x/app)",
        "rule from a log without project": "logs that name no project (headroom learn --from)",
    }  # fmt: skip
    assert sec.own == ()  # the headings are not taken for the user's own lines
    assert merge_rules(text, [a, b, c]) == text  # merging again (no origins known) moves nothing


def test_origin_of_names_the_project_folders():
    assert origin_of(["/me", "/x"], "/me") == ""
    assert origin_of(["/me/sub/dir"], "/me/") == ""
    assert origin_of(["/me2"], "/me") == "sessions of another project (/me2)"
    assert origin_of(["/b", "/a", "/a/"], "/me") == "sessions of other projects (/a, /b)"


def test_a_file_with_the_earlier_intro_keeps_no_stray_line():
    old = f"{START}\n## Learned from past failures\n\n{OLD_INTROS[0]}\n\n- x _(evidence: 2)_ <!-- headroom:rule 0123456789ab  -->\n<!-- headroom:learned:end -->\n"
    assert parse(old).own == ()
    assert INTRO in merge_rules(old, [rule("new", 2)]) and OLD_INTROS[0] not in merge_rules(old, [rule("new", 2)])
