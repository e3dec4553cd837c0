"""The real Claude Code in Vertex AI mode and in Bedrock mode through ``headroom wrap``, nothing
else configured: ``CLAUDE_CODE_USE_VERTEX`` with ``ANTHROPIC_VERTEX_BASE_URL`` (auth skipped),
and ``CLAUDE_CODE_USE_BEDROCK`` with ``ANTHROPIC_BEDROCK_BASE_URL`` (auth skipped: unsigned
InvokeModel requests; and SigV4-signed with AWS keys in the environment, the proxy re-signing
with the same keys, ``HEADROOM_BEDROCK_RESIGN=1``, the upstream checking every signature as AWS
does), each playing the scripted task (:mod:`tests.support.scripted.play`)
against a local HTTPS upstream that answers those routes with the Messages adapter
(:mod:`tests.support.scripted.hosted_claude`).

One run per host; each test checks one property of it: the task completes with valid requests
only; the JSON array reaches the upstream compressed on the host's route; the prompt-cache
prefix holds across turns; the ledger names the workspace as the project, with the host's
dialect and the model from the path.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from headroom_core.compress import markers
from tests.support.agents import AgentRun, agent_exe, base_env, play_wrapped, prefix_breaks
from tests.support.scripted import anthropic, play
from tests.support.upstream import Upstream

HOSTS = {
    "vertex": ("vertex-anthropic", ":streamRawPredict"),
    "bedrock": ("bedrock-invoke", "/invoke-with-response-stream"),
    "bedrock-sigv4": ("bedrock-invoke", "/invoke-with-response-stream"),
}
#: the dummy AWS keys of the SigV4 run (the agent's and the proxy's environment, the upstream's check)
AKID, SECRET = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"


@dataclass(frozen=True)
class Run(AgentRun):
    host: str


def _env(host: str, up: Upstream, home: str) -> dict[str, str]:
    common = dict(
        HOME=home, IS_SANDBOX="1", DISABLE_AUTOUPDATER="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", TERM="dumb"
    )
    if host == "vertex":
        env = base_env(**common, CLAUDE_CODE_USE_VERTEX="1", ANTHROPIC_VERTEX_BASE_URL=f"{up.url}/v1", CLAUDE_CODE_SKIP_VERTEX_AUTH="1",
                       ANTHROPIC_VERTEX_PROJECT_ID="proj-1", CLOUD_ML_REGION="us-east5")  # fmt: skip
    elif host == "bedrock":
        env = base_env(
            **common,
            CLAUDE_CODE_USE_BEDROCK="1",
            ANTHROPIC_BEDROCK_BASE_URL=up.url,
            CLAUDE_CODE_SKIP_BEDROCK_AUTH="1",
            AWS_REGION="us-east-1",
        )
    else:  # SigV4: the agent signs, the proxy (started by wrap with this environment) re-signs
        up.aws_secrets = {AKID: SECRET}
        env = base_env(**common, CLAUDE_CODE_USE_BEDROCK="1", ANTHROPIC_BEDROCK_BASE_URL=up.url, AWS_REGION="us-east-1", HEADROOM_BEDROCK_RESIGN="1",
                       AWS_EC2_METADATA_DISABLED="true")  # fmt: skip
    for k in (
        "CLAUDE_CONFIG_DIR",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_API_KEY",
        "AWS_BEARER_TOKEN_BEDROCK",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
    ):
        env.pop(k, None)
    if host == "bedrock-sigv4":
        env.update(AWS_ACCESS_KEY_ID=AKID, AWS_SECRET_ACCESS_KEY=SECRET)
    return env


@pytest.fixture(scope="module", params=list(HOSTS))
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Run:
    host = request.param
    exe = agent_exe("claude")
    root = tmp_path_factory.mktemp(f"claude-code-{host}")

    def env(up: Upstream, home: Path) -> dict[str, str]:
        return _env(host, up, str(home))

    return play_wrapped(
        root, [str(exe), "-p", play.PROMPT, "--dangerously-skip-permissions"], env, lambda *a: Run(*a, host=host)
    )


def _why(run: Run) -> str:
    paths = sorted({r.path_only for r in run.requests})
    return f"{run.why()}\npaths: {paths}"


def test_completes_the_task_with_valid_requests_only(run: Run) -> None:
    assert run.proc.returncode == 0, _why(run)
    assert play.FINAL_SENTINEL in run.proc.stdout, _why(run)
    # on these hosts Claude Code first tries its per-turn system message without the beta that
    # allows it; refused (as the scripted Messages API does), it falls back to user-turn text
    assert all(".role: Input should be 'user' or 'assistant'" in m for _, m in run.model.invalid), _why(run)
    assert len(run.model.invalid) <= 1, _why(run)
    steps = [getattr(mv, "step", "final") for _, mv in run.model.moves if not isinstance(mv, play.Side)]
    assert steps[:2] == ["json", "log"] and steps[-1] == "final", _why(run)


def test_sigv4_requests_reach_the_upstream_validly_signed(run: Run) -> None:
    if run.host != "bedrock-sigv4":
        pytest.skip("a SigV4 run only")
    signed = [
        r
        for r in run.task_requests()
        if (r.header("authorization") or "").startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    ]
    assert signed and len(signed) == len(run.task_requests()), _why(run)
    assert all(r.signature == "" for r in run.requests if r.signature is not None), [r.signature for r in run.requests]
    reasons = {r for (r,) in run.proxy.query("SELECT reason FROM request_outcomes WHERE action = 'compressed'")}
    assert reasons and all("re-signed" in r for r in reasons), reasons


def test_json_output_reaches_the_hosts_route_compressed(run: Run) -> None:
    reqs = run.task_requests()
    assert reqs and all(r.path_only.endswith(HOSTS[run.host][1]) for r in reqs), _why(run)
    got = play.progress(anthropic.conversation({**reqs[-1].json, "model": "m"})).outputs["json"].text
    records = play.records_text()
    assert len(got) <= 0.4 * len(records) and markers.find_marker_keys(got), got[:500]


def test_prefix_is_byte_stable_across_turns(run: Run) -> None:
    breaks, compared = prefix_breaks([r.text for r in run.task_requests()])
    assert breaks == [], breaks
    assert compared >= 3 * 10


def test_ledger_names_the_workspace_the_dialect_and_the_model(run: Run) -> None:
    rows = run.proxy.query("SELECT project, dialect, action FROM request_outcomes")
    assert rows, "no ledger rows"
    assert {p for p, _, _ in rows if not p.startswith("conversation:")} == {str(run.task.workspace)}, rows
    # probes outside the task (with AWS keys Claude Code first checks them with a small request)
    # name no directory: each is its own conversation
    probes = sum(isinstance(mv, play.Side) for _, mv in run.model.moves)
    assert sum(p.startswith("conversation:") for p, _, _ in rows) <= probes, (rows, probes)
    assert {d for _, d, _ in rows} == {HOSTS[run.host][0]} and "compressed" in {a for _, _, a in rows}, rows
