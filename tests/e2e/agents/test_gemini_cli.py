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
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from headroom_core.compress import markers
from tests.support.agents import HEADROOM, Wrapped, agent_exe, base_env, prefix_breaks
from tests.support.proxy import free_port
from tests.support.scripted import ScriptedModel, gemini, make_workspace, play
from tests.support.upstream import RecordedRequest, Upstream

RUN_TIMEOUT = 300  # seconds for the whole agent run (it takes a few)
#: Gemini CLI's user settings for a quiet headless run: no usage statistics, no update checks,
#: the API-key sign-in chosen, no folder-trust prompt.
SETTINGS = {
    "privacy": {"usageStatisticsEnabled": False},
    "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
    "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
}


@dataclass(frozen=True)
class Run:
    """What one wrapped Gemini CLI run left: its process result, the upstream's records, the
    scripted model, the task, the proxy and the agent's HOME."""

    proc: subprocess.CompletedProcess[str]
    requests: list[RecordedRequest]
    model: ScriptedModel
    task: play.Task
    proxy: Wrapped
    home: Path

    def task_requests(self) -> list[RecordedRequest]:
        """The generation requests of the task's conversation (side requests left out), in order."""
        main = {i for i, mv in self.model.moves if not isinstance(mv, play.Side)}
        return [r for r in self.requests if r.index in main]

    def outputs(self, rec: RecordedRequest) -> dict[str, play.Output]:
        """The tool outputs of ``rec`` by the play's step."""
        return play.progress(gemini.conversation(rec.json)).outputs


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    exe = agent_exe("gemini")
    root = tmp_path_factory.mktemp("gemini-cli")
    task = make_workspace(root / "workspace")
    home = root / "home"
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps(SETTINGS))
    with Upstream() as up:
        model = ScriptedModel(task).install(up)
        assert up.cert_path is not None
        proxy = Wrapped(root / "headroom-home", free_port(), up.cert_path)
        env = base_env(
            HOME=str(home),  # Gemini CLI keeps its settings and session logs in ~/.gemini
            GEMINI_API_KEY="AIza-test-not-a-key",
            GOOGLE_GEMINI_BASE_URL=up.url,
            GEMINI_CLI_NO_RELAUNCH="true",  # one process (no relaunch with a bigger heap)
            TERM="dumb",
        )
        for k in ("GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_CLOUD_PROJECT", "GEMINI_MODEL"):
            env.pop(k, None)
        try:
            proc = proxy.run([str(exe), "-p", play.PROMPT, "--approval-mode", "yolo"], env=env, cwd=task.workspace, timeout=RUN_TIMEOUT)
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
    # the JSON array inside Gemini CLI's envelope: at least 60% smaller, with a retrieval marker
    assert len(got_json) <= 0.4 * len(records), (len(got_json), len(records), got_json[:500])
    assert markers.find_marker_keys(got_json), got_json[:500]
    assert got_json.startswith("<untrusted_context>\nOutput: ") and got_json.endswith("</untrusted_context>")  # the envelope as sent
    # the build log: smaller, both error lines kept verbatim
    assert len(got_log) < 0.6 * len(log), (len(got_log), len(log))
    for line in log.splitlines():
        if ": error: " in line:
            assert line in got_log
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
    breaks, compared = prefix_breaks(bodies, ("tools", "contents"))
    assert breaks == [], breaks
    assert compared >= 5 * 5
    systems = {json.dumps(json.loads(b).get("systemInstruction"), sort_keys=True) for b in bodies}
    assert len(systems) == 1  # the system instruction reached the upstream the same every turn


def test_agent_transcript_never_holds_the_proxys_tools(run: Run) -> None:
    logs = sorted((run.home / ".gemini" / "tmp").rglob("chats/*.json*"))
    assert logs, "Gemini CLI wrote no session log under the test HOME"
    text = "\n".join(p.read_text(errors="replace") for p in logs)
    assert "python3 tools/stats.py" in text  # the log is the session's
    assert "headroom_retrieve" not in text
    assert "headroom omitted" not in text


def test_ledger_names_the_workspace_as_the_project(run: Run) -> None:
    rows = run.proxy.query("SELECT project, dialect, COUNT(*) FROM request_outcomes WHERE dialect = 'gemini' GROUP BY project, dialect")
    assert rows, "no ledger rows"
    assert {p for p, _, _ in rows} == {str(run.task.workspace)}, rows


def test_live_learning_records_the_failed_then_fixed_pair(run: Run) -> None:
    rows = run.proxy.query("SELECT project, rule_kind, text FROM learn_evidence")
    mine = [(k, t) for p, k, t in rows if p == str(run.task.workspace)]
    assert any("tools/stats.py" in t for _, t in mine), rows


def test_learn_finds_the_pair_in_gemini_clis_own_session_log(run: Run) -> None:
    out = subprocess.run(
        [HEADROOM, "learn", "--project", str(run.task.workspace), "--dry-run", "--min-evidence", "1"],
        env=base_env(HOME=str(run.home), HEADROOM_HOME=str(run.proxy.home), COLUMNS="200"),
        cwd=run.task.workspace, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "tools/stats.py" in out.stdout, out.stdout + out.stderr


def test_upstream_saw_gemini_clis_own_wire_shape(run: Run) -> None:
    """Facts of this release the proxy must live with (kept as a test so a new pin shows them)."""
    first = run.task_requests()[0]
    assert "/models/" in first.path and first.path.split("?")[0].endswith(":streamGenerateContent") and "alt=sse" in first.path
    body = first.json
    assert set(body) >= {"contents", "systemInstruction", "tools"}
    # 0.61: the environment (with the workspace) is a user content of its own before the prompt
    assert str(run.task.workspace) in json.dumps(body["contents"][0])
