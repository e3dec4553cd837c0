"""``headroom wrap`` end to end: a real Node program and a real Python program (tests/agents/)
call a local HTTPS "LLM host" through a proxy that ``wrap`` starts itself, with no set-up but
``wrap``'s own; the upstream sees the tool output compressed; the agent's exit code comes back.

The LLM host is on 127.0.0.1, which ``wrap`` would normally leave out of the proxy (NO_PROXY
for local addresses), so these runs pass ``--no-proxy ''`` — what a user with a local LLM
server does — and tell the proxy to trust the test upstream's self-signed certificate.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from headroom_core.ccr import markers
from headroom_core.cli import agent_env as ae
from headroom_core.cli.proxy_process import pid_file
from tests.support.proxy import free_port
from tests.test_request_plan import anthropic_request, github_scenario

AGENTS = Path(__file__).resolve().parent / "agents"
HEADROOM = str(Path(sys.executable).parent / "headroom")
NODE = shutil.which("node") or "/usr/bin/node"


@pytest.fixture(scope="module")
def big_output() -> str:
    return github_scenario("paginate-issues.json")


@pytest.fixture(scope="module")
def wrapped(tmp_path_factory, upstream_server):
    """A HEADROOM_HOME, a free port, and ``run(cmd, **env)`` that calls ``headroom wrap``;
    stops the proxy ``wrap`` started when the module ends."""
    home = tmp_path_factory.mktemp("wrap-home")
    port = free_port()
    # a typical user's environment: no proxy, no CA variables of its own
    drop = {*ae.CERT_VARS, *ae.BUNDLE_VARS}
    base = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy") and k not in drop}
    base.update(HEADROOM_HOME=str(home), COLUMNS="200")

    def run(cmd: list[str], *, no_proxy: str | None = "", **extra: str) -> subprocess.CompletedProcess[str]:
        args = [HEADROOM, "wrap", "--port", str(port), "--set", f"ssl_verify_upstream_trusted_ca={upstream_server.cert_path}"]
        if no_proxy is not None:
            args += ["--no-proxy", no_proxy]
        return subprocess.run(args + cmd, env={**base, **extra}, capture_output=True, text=True, timeout=120)

    run.home, run.port = home, port  # type: ignore[attr-defined]
    yield run
    subprocess.run([HEADROOM, "proxy", "--stop", "--port", str(port)], env=base, capture_output=True, timeout=30)


def _body_file(tmp_path: Path, big_output: str) -> Path:
    # a question of its own per test: a new session, so the tool output is in the live zone
    p = tmp_path / "body.json"
    p.write_text(json.dumps(anthropic_request(big_output, question=f"Which issues are still open? ({tmp_path.name})")))
    return p


def _assert_compressed(upstream, big_output: str, user_agent: str) -> None:
    (rec,) = upstream.requests
    assert rec.header("user-agent") == user_agent
    sent = rec.json["messages"][2]["content"][0]["content"]
    assert len(sent) < len(big_output) / 2
    assert set(markers.find_marker_keys(sent)) == {markers.offload_key(big_output)}


@pytest.mark.skipif(not Path(NODE).exists(), reason="node is not installed (apt-get install nodejs)")
def test_node_agent_through_wrap(wrapped, upstream, big_output, tmp_path):
    body = _body_file(tmp_path, big_output)
    out = wrapped([NODE, str(AGENTS / "tiny_agent.js"), str(body)], LLM_URL=f"{upstream.url}/v1/messages", EXIT_CODE="3")
    assert out.returncode == 3, out.stderr
    assert out.stdout.startswith("status 200: upstream saw 3 messages"), out.stdout + out.stderr
    assert "NODE_EXTRA_CA_CERTS" in out.stderr
    _assert_compressed(upstream, big_output, "tiny-node-agent/1.0")


def test_python_agent_through_wrap(wrapped, upstream, big_output, tmp_path):
    body = _body_file(tmp_path, big_output)
    out = wrapped([sys.executable, str(AGENTS / "tiny_agent.py"), str(body)], LLM_URL=f"{upstream.url}/v1/messages", EXIT_CODE="5")
    assert out.returncode == 5, out.stderr
    assert out.stdout.startswith("status 200: upstream saw 3 messages"), out.stdout + out.stderr
    assert "SSL_CERT_FILE" in out.stderr
    _assert_compressed(upstream, big_output, "tiny-python-agent/1.0")


def test_wrap_reuses_the_running_proxy_and_sets_the_environment(wrapped, upstream, big_output, tmp_path):
    wrapped([sys.executable, "-c", "pass"])  # make sure a proxy runs
    pid = pid_file(wrapped.home, wrapped.port).read_text()
    probe = "import json, os; print(json.dumps(dict(os.environ)))"
    out = wrapped([sys.executable, "-c", probe], no_proxy=None, NO_PROXY="corp.internal")
    assert out.returncode == 0, out.stderr
    assert "started the proxy" not in out.stderr
    assert pid_file(wrapped.home, wrapped.port).read_text() == pid
    env = json.loads(out.stdout)
    url = f"http://127.0.0.1:{wrapped.port}"
    assert env["HTTPS_PROXY"] == env["https_proxy"] == env["HTTP_PROXY"] == url
    assert env["NO_PROXY"] == "corp.internal,localhost,127.0.0.1,::1"
    ca = Path(wrapped.home) / "mitmproxy" / "mitmproxy-ca-cert.pem"
    assert env["NODE_EXTRA_CA_CERTS"] == str(ca)
    bundle = Path(env["SSL_CERT_FILE"])
    assert env["REQUESTS_CA_BUNDLE"] == env["CODEX_CA_CERTIFICATE"] == str(bundle)
    text = bundle.read_text()
    assert ca.read_text().strip() in text and text.count("BEGIN CERTIFICATE") > 10  # system roots + the CA
    # a user's own extra CA for Node is kept: NODE_EXTRA_CA_CERTS then names the bundle, which holds it
    own = tmp_path / "corp-ca.pem"
    own.write_text(ca.read_text().replace("mitmproxy", "corp").split("-----END CERTIFICATE-----")[0] + "-----END CERTIFICATE-----\n")
    out = wrapped([sys.executable, "-c", probe], NODE_EXTRA_CA_CERTS=str(own))
    env = json.loads(out.stdout)
    assert env["NODE_EXTRA_CA_CERTS"] == str(bundle) and own.read_text().strip() in bundle.read_text()


def test_wrap_reports_ledger_per_agent(wrapped, upstream, big_output, tmp_path):
    body = _body_file(tmp_path, big_output)
    wrapped([sys.executable, str(AGENTS / "tiny_agent.py"), str(body)], LLM_URL=f"{upstream.url}/v1/messages")
    out = subprocess.run([HEADROOM, "stats", "--json"], env={**os.environ, "HEADROOM_HOME": str(wrapped.home)}, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    agents = {a["key"]: a for a in json.loads(out.stdout)["by"]["agent"]}
    assert agents["tiny-python-agent"]["compressed"] >= 1 and agents["tiny-python-agent"]["tokens_saved"] > 0


def test_missing_command_exits_127(wrapped):
    out = wrapped(["no-such-agent-xyz"])
    assert out.returncode == 127
    assert "command not found: no-such-agent-xyz" in out.stderr


def test_profiles_and_no_proxy(tmp_path):
    assert ae.profile_for(["claude", "--resume"]).trust == ("NODE_EXTRA_CA_CERTS",)
    assert ae.profile_for(["codex"]).trust[0] == "CODEX_CA_CERTIFICATE"
    assert ae.profile_for(["aider"]).runtime == "python"
    assert ae.profile_for(["/usr/bin/python3", "x.py"]).runtime == "python"
    script = tmp_path / "my-agent"
    script.write_text("#!/usr/bin/env node\nconsole.log(1)\n")
    assert ae.profile_for([str(script)], which=lambda c: c).runtime == "node"
    assert ae.no_proxy_value({"no_proxy": "corp, localhost"}, None) == "corp,localhost,127.0.0.1,::1"
    assert ae.no_proxy_value({"NO_PROXY": "corp"}, "") == ""
    from headroom_core.cli.proxy_process import ProxyAddress
    from headroom_core.cli.wrap_cmd import upstream_mode

    own = ProxyAddress("127.0.0.1", 8080)
    assert upstream_mode({"HTTPS_PROXY": "http://corp:3128"}, own) == "upstream:http://corp:3128"
    assert upstream_mode({"HTTPS_PROXY": "http://127.0.0.1:8080"}, own) is None
    assert upstream_mode({}, own) is None


def test_proxy_detach_and_stop(tmp_path):
    from headroom_core.cli.proxy_process import ProxyAddress, probe

    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env["HEADROOM_HOME"] = str(tmp_path)
    out = subprocess.run([HEADROOM, "proxy", "--detach", "--port", str(port)], env=env, capture_output=True, text=True, timeout=120)
    try:
        assert out.returncode == 0, out.stderr
        assert probe(ProxyAddress("127.0.0.1", port)) == "headroom"
        again = subprocess.run([HEADROOM, "proxy", "--detach", "--port", str(port)], env=env, capture_output=True, text=True, timeout=60)
        assert again.returncode == 1 and "already in use (a Headroom proxy)" in again.stderr
    finally:
        stop = subprocess.run([HEADROOM, "proxy", "--stop", "--port", str(port)], env=env, capture_output=True, text=True, timeout=60)
    assert stop.returncode == 0 and "stopped the proxy" in stop.stderr
    assert probe(ProxyAddress("127.0.0.1", port)) == "none"
    assert not pid_file(tmp_path, port).exists()
