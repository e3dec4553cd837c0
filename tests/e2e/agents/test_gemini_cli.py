"""The real Gemini CLI (pinned by ``scripts/agents``) through ``headroom wrap gemini``, playing the
scripted task (:mod:`tests.support.scripted.play`) against a local HTTPS upstream that speaks the
Gemini API strictly (:mod:`tests.support.scripted.gemini`), on a scratch workspace.

API-key mode: ``GEMINI_API_KEY`` and ``GOOGLE_GEMINI_BASE_URL`` (what 0.61 reads for the Gemini
API's base URL: packages/core/src/core/contentGenerator.ts) pointed at the upstream; ``wrap``
sets nothing Gemini-specific (the proxy and its CA only). One run per module; each test checks
one property of it with the right value: the task completes; the JSON array and the build log
reach the upstream compressed; ``headroom_retrieve`` is answered by the proxy, never seen by the
agent (nor in its own session log, ``~/.gemini/tmp/<project>/chats/``); the prompt-cache prefix
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
from tests.support.scripted import gemini, play
from tests.support.upstream import RecordedRequest, Upstream

#: Gemini CLI's user settings for a quiet headless run: no usage statistics, no update checks,
#: the API-key sign-in chosen, no folder-trust prompt.
SETTINGS = {
    "privacy": {"usageStatisticsEnabled": False},
    "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
    "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
}


class Run(AgentRun):
    """What one wrapped Gemini CLI run left (:class:`AgentRun`), read as generation requests."""

    def outputs(self, rec: RecordedRequest) -> dict[str, play.Output]:
        """The tool outputs of ``rec`` by the play's step."""
        return play.progress(gemini.conversation(rec.json)).outputs


def _env(up: Upstream, home: Path) -> dict[str, str]:
    env = base_env(
        HOME=str(home),  # Gemini CLI keeps its settings and session logs in ~/.gemini
        GEMINI_API_KEY="AIza-test-not-a-key",
        GOOGLE_GEMINI_BASE_URL=up.url,
        GEMINI_CLI_NO_RELAUNCH="true",  # one process (no relaunch with a bigger heap)
        TERM="dumb",
    )
    for k in ("GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_CLOUD_PROJECT", "GEMINI_MODEL"):
        env.pop(k, None)
    return env


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    exe = agent_exe("gemini")
    root = tmp_path_factory.mktemp("gemini-cli")
    home = root / "home"
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps(SETTINGS))
    return play_wrapped(root, [str(exe), "-p", play.PROMPT, "--approval-mode", "yolo"], _env, Run)


def test_completes_the_task_with_valid_requests_only(run: Run) -> None:
    check_whole_play(run)


def test_json_and_log_outputs_reach_the_upstream_compressed(run: Run) -> None:
    outs = run.outputs(run.task_requests()[-1])
    got_json = outs["json"].text
    # the JSON array inside Gemini CLI's envelope: at least 60% smaller, with a retrieval marker
    check_json_compressed(got_json)
    assert got_json.startswith("<untrusted_context>\nOutput: ") and got_json.endswith(
        "</untrusted_context>"
    )  # the envelope as sent
    check_log_compressed(outs["log"].text)
    assert play.STATS_TEXT.strip() in outs["fix"].text
    assert "tools/stats.py" in outs["read"].text


def test_headroom_retrieve_is_answered_by_the_proxy_with_the_original(run: Run) -> None:
    check_retrieve_answered(run, run.outputs)


def test_prefix_is_byte_stable_across_turns(run: Run) -> None:
    bodies = [r.text for r in run.task_requests()]
    breaks, compared = prefix_breaks(bodies, ("tools", "contents"))
    assert breaks == [], breaks
    assert compared >= 5 * 5
    systems = {json.dumps(json.loads(b).get("systemInstruction"), sort_keys=True) for b in bodies}
    assert len(systems) == 1  # the system instruction reached the upstream the same every turn


def test_agent_transcript_never_holds_the_proxys_tools(run: Run) -> None:
    check_transcript_clean(sorted((run.home / ".gemini" / "tmp").rglob("chats/*.json*")), "Gemini CLI")


def test_ledger_names_the_workspace_as_the_project(run: Run) -> None:
    rows = run.proxy.query(
        "SELECT project, dialect, COUNT(*) FROM request_outcomes WHERE dialect = 'gemini' GROUP BY project, dialect"
    )
    assert rows, "no ledger rows"
    assert {p for p, _, _ in rows} == {str(run.task.workspace)}, rows


def test_live_learning_records_the_failed_then_fixed_pair(run: Run) -> None:
    check_live_learning(run)


def test_learn_finds_the_pair_in_gemini_clis_own_session_log(run: Run) -> None:
    check_learn_finds_pair(run)


def test_upstream_saw_gemini_clis_own_wire_shape(run: Run) -> None:
    """Facts of this release the proxy must live with (kept as a test so a new pin shows them)."""
    first = run.task_requests()[0]
    assert (
        "/models/" in first.path
        and first.path.split("?")[0].endswith(":streamGenerateContent")
        and "alt=sse" in first.path
    )
    body = first.json
    assert set(body) >= {"contents", "systemInstruction", "tools"}
    # 0.61: the environment (with the workspace) is a user content of its own before the prompt
    assert str(run.task.workspace) in json.dumps(body["contents"][0])
