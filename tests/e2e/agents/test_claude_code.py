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
from pathlib import Path

import pytest

from tests.support.agents import (
    AgentRun,
    agent_exe,
    base_env,
    check_json_compressed,
    check_learn_finds_pair,
    check_live_learning,
    check_log_compressed,
    check_retrieve_answered,
    check_transcript_clean,
    check_whole_play,
    play_wrapped,
    prefix_breaks,
)
from tests.support.scripted import anthropic, play
from tests.support.upstream import RecordedRequest, Upstream


class Run(AgentRun):
    """What one wrapped Claude Code run left (:class:`AgentRun`), read as Messages API requests."""

    def outputs(self, rec: RecordedRequest) -> dict[str, play.Output]:
        """The tool outputs of ``rec`` by the play's step."""
        return play.progress(anthropic.conversation(rec.json)).outputs


def _env(up: Upstream, home: Path) -> dict[str, str]:
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
    return env


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    exe = agent_exe("claude")
    root = tmp_path_factory.mktemp("claude-code")
    return play_wrapped(root, [str(exe), "-p", play.PROMPT, "--dangerously-skip-permissions"], _env, Run)


def test_completes_the_task_with_valid_requests_only(run: Run) -> None:
    check_whole_play(run)


def test_json_and_log_outputs_reach_the_upstream_compressed(run: Run) -> None:
    outs = run.outputs(run.task_requests()[-1])
    check_json_compressed(outs["json"].text)
    check_log_compressed(outs["log"].text)
    # what the agent ran and read is untouched where there was nothing to gain
    assert play.STATS_TEXT.strip() in outs["fix"].text
    assert "tools/stats.py" in outs["read"].text


def test_headroom_retrieve_is_answered_by_the_proxy_with_the_original(run: Run) -> None:
    check_retrieve_answered(run, run.outputs)


def test_prefix_is_byte_stable_across_turns(run: Run) -> None:
    bodies = [r.text for r in run.task_requests()]
    breaks, compared = prefix_breaks(bodies)
    assert breaks == [], breaks
    assert compared >= 5 * 10  # tools, system blocks and the growing history were compared


def test_agent_transcript_never_holds_the_proxys_tools(run: Run) -> None:
    check_transcript_clean(sorted((run.home / ".claude" / "projects").rglob("*.jsonl")), "Claude Code")


def test_ledger_names_the_workspace_as_the_project(run: Run) -> None:
    projects = run.proxy.query("SELECT project, COUNT(*) FROM request_outcomes GROUP BY project")
    assert projects, "no ledger rows"
    assert {p for p, _ in projects} == {str(run.task.workspace)}, projects


def test_live_learning_records_the_failed_then_fixed_pair(run: Run) -> None:
    check_live_learning(run)


def test_learn_finds_the_pair_in_claude_codes_own_session_log(run: Run) -> None:
    check_learn_finds_pair(run)


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
