"""The real Claude Code (pinned by ``scripts/agents``) through ``headroom wrap``, playing the
scripted task (:mod:`tests.support.scripted.play`) against a local HTTPS upstream that speaks the
Messages API strictly, on a scratch workspace.

One run per module (a few seconds of agent time); each test checks one property of it with the
right value: the task completes; the JSON array and the build log reach the upstream compressed;
``headroom_retrieve`` is answered by the proxy, never seen by the agent; the prompt-cache prefix
holds across turns; the ledger names the workspace as the project; live learning and ``headroom
learn`` over the agent's own session log both find the failed -> fixed pair.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from headroom_core.compress import markers
from tests.support.agents import HEADROOM, Wrapped, agent_exe, base_env, prefix_breaks
from tests.support.proxy import free_port
from tests.support.scripted import ScriptedModel, anthropic, make_workspace, play
from tests.support.upstream import RecordedRequest, Upstream

RUN_TIMEOUT = 300  # seconds for the whole agent run (it takes a few)


@dataclass(frozen=True)
class Run:
    """What one wrapped Claude Code run left: its process result, the upstream's records, the
    scripted model, the task, the proxy and the agent's HOME."""

    proc: subprocess.CompletedProcess[str]
    requests: list[RecordedRequest]
    model: ScriptedModel
    task: play.Task
    proxy: Wrapped
    home: Path

    def task_requests(self) -> list[RecordedRequest]:
        """The Messages API requests of the task's conversation (side requests left out), in order."""
        main = {i for i, mv in self.model.moves if not isinstance(mv, play.Side)}
        return [r for r in self.requests if r.index in main]

    def outputs(self, rec: RecordedRequest) -> dict[str, play.Output]:
        """The tool outputs of ``rec`` by the play's step."""
        return play.progress(anthropic.conversation(rec.json)).outputs


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    exe = agent_exe("claude")
    root = tmp_path_factory.mktemp("claude-code")
    task = make_workspace(root / "workspace")
    home = root / "home"
    home.mkdir()
    with Upstream() as up:
        model = ScriptedModel(task).install(up)
        assert up.cert_path is not None
        proxy = Wrapped(root / "headroom-home", free_port(), up.cert_path)
        env = base_env(
            HOME=str(home),  # Claude Code keeps its config and session logs in ~/.claude
            IS_SANDBOX="1",  # --dangerously-skip-permissions as root
            ANTHROPIC_BASE_URL=up.url,
            ANTHROPIC_API_KEY="sk-ant-test-not-a-key",
            DISABLE_AUTOUPDATER="1",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",  # no telemetry hosts (no network here)
            TERM="dumb",
        )
        env.pop("CLAUDE_CONFIG_DIR", None)
        try:
            proc = proxy.run([str(exe), "-p", play.PROMPT, "--dangerously-skip-permissions"], env=env, cwd=task.workspace, timeout=RUN_TIMEOUT)
        finally:
            proxy.stop()
        return Run(proc, up.requests, model, task, proxy, home)


def _why(run: Run) -> str:
    moves = [(i, type(mv).__name__, getattr(mv, "step", "")) for i, mv in run.model.moves]
    return f"rc={run.proc.returncode}\nstdout: {run.proc.stdout[-1500:]}\nstderr: {run.proc.stderr[-1500:]}\ninvalid: {run.model.invalid}\nmoves: {moves}"


def test_completes_the_task_with_valid_requests_only(run: Run) -> None:
    assert run.proc.returncode == 0, _why(run)
    assert play.FINAL_SENTINEL in run.proc.stdout, _why(run)
    assert run.model.invalid == [], _why(run)
    steps = [getattr(mv, "step", "final") for _, mv in run.model.moves if not isinstance(mv, play.Side)]
    assert steps == ["json", "log", "read", "fail", "fix", "retrieve", "final"], _why(run)


def test_json_and_log_outputs_reach_the_upstream_compressed(run: Run) -> None:
    last = run.task_requests()[-1]
    outs = run.outputs(last)
    records, log = play.records_text(), play.build_log_text()
    got_json, got_log = outs["json"].text, outs["log"].text
    # the JSON array: at least 60% smaller (the target), with a retrieval marker
    assert len(got_json) <= 0.4 * len(records), (len(got_json), len(records), got_json[:500])
    assert markers.find_marker_keys(got_json), got_json[:500]
    # the build log: smaller, both error lines kept verbatim
    assert len(got_log) < 0.6 * len(log), (len(got_log), len(log))
    for line in log.splitlines():
        if ": error: " in line:
            assert line in got_log
    # what the agent ran and read is untouched where there was nothing to gain
    assert play.STATS_TEXT.strip() in outs["fix"].text
    assert "tools/stats.py" in outs["read"].text


def test_headroom_retrieve_is_answered_by_the_proxy_with_the_original(run: Run) -> None:
    reqs = run.task_requests()
    with_retrieve = [r for r in reqs if "retrieve" in run.outputs(r)]
    assert with_retrieve, _why(run)
    answer = run.outputs(with_retrieve[0])["retrieve"].text
    # the key the model asked for is the JSON array's: its original items come back
    assert '"name": "item-150"' in answer and '"name": "item-300"' in answer, answer[:500]
    assert "headroom" not in run.proc.stdout.lower().replace(play.FINAL_SENTINEL.lower(), "")


def test_prefix_is_byte_stable_across_turns(run: Run) -> None:
    bodies = [r.text for r in run.task_requests()]
    breaks, compared = prefix_breaks(bodies)
    assert breaks == [], breaks
    assert compared >= 5 * 10  # tools, system blocks and the growing history were compared


def test_agent_transcript_never_holds_the_proxys_tools(run: Run) -> None:
    logs = sorted((run.home / ".claude" / "projects").rglob("*.jsonl"))
    assert logs, "Claude Code wrote no session log under the test HOME"
    text = "\n".join(p.read_text(errors="replace") for p in logs)
    assert "python3 tools/stats.py" in text  # the log is the session's
    assert "headroom_retrieve" not in text
    assert "headroom omitted" not in text


def test_ledger_names_the_workspace_as_the_project(run: Run) -> None:
    projects = run.proxy.query("SELECT project, COUNT(*) FROM request_outcomes GROUP BY project")
    assert projects, "no ledger rows"
    assert {p for p, _ in projects} == {str(run.task.workspace)}, projects


def test_live_learning_records_the_failed_then_fixed_pair(run: Run) -> None:
    rows = run.proxy.query("SELECT project, rule_kind, text FROM learn_evidence")
    mine = [(k, t) for p, k, t in rows if p == str(run.task.workspace)]
    assert any("tools/stats.py" in t for _, t in mine), rows


def test_learn_finds_the_pair_in_claude_codes_own_session_log(run: Run) -> None:
    out = subprocess.run(
        [HEADROOM, "learn", "--project", str(run.task.workspace), "--dry-run", "--min-evidence", "1"],
        env=base_env(HOME=str(run.home), HEADROOM_HOME=str(run.proxy.home), COLUMNS="200"),
        cwd=run.task.workspace, capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "tools/stats.py" in out.stdout, out.stdout + out.stderr


def test_upstream_saw_claude_codes_own_wire_shape(run: Run) -> None:
    """Facts of this release the proxy must live with (kept as a test so a new pin shows them)."""
    first = run.task_requests()[0]
    assert first.path.startswith("/v1/messages")
    assert first.header("anthropic-version") == "2023-06-01"
    body = first.json
    roles = [m["role"] for m in body["messages"]]
    # 2.1.33x: the environment block (with the working directory) is a system-role message
    # under a per-turn-control beta, or <system-reminder> text of the first user turn without it
    env_text = json.dumps(body["messages"])
    assert f"Primary working directory: {run.task.workspace}" in env_text
    assert roles[0] == "user"
