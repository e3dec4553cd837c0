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

from headroom_core.cli import agent_env as ae
from headroom_core.cli.proxy_process import pid_file
from headroom_core.compress import markers
from tests.support.proxy import free_port
from tests.unit.test_request_plan import anthropic_request, github_scenario

AGENTS = Path(__file__).resolve().parents[1] / "agents"
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
        args = [
            HEADROOM,
            "wrap",
            "--port",
            str(port),
            "--set",
            f"ssl_verify_upstream_trusted_ca={upstream_server.cert_path}",
        ]
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
    out = wrapped(
        [NODE, str(AGENTS / "tiny_agent.js"), str(body)], LLM_URL=f"{upstream.url}/v1/messages", EXIT_CODE="3"
    )
    assert out.returncode == 3, out.stderr
    assert out.stdout.startswith("status 200: upstream saw 3 messages"), out.stdout + out.stderr
    assert "NODE_EXTRA_CA_CERTS" in out.stderr
    _assert_compressed(upstream, big_output, "tiny-node-agent/1.0")


def test_python_agent_through_wrap(wrapped, upstream, big_output, tmp_path):
    body = _body_file(tmp_path, big_output)
    out = wrapped(
        [sys.executable, str(AGENTS / "tiny_agent.py"), str(body)], LLM_URL=f"{upstream.url}/v1/messages", EXIT_CODE="5"
    )
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
    own.write_text(
        ca.read_text().replace("mitmproxy", "corp").split("-----END CERTIFICATE-----")[0]
        + "-----END CERTIFICATE-----\n"
    )
    out = wrapped([sys.executable, "-c", probe], NODE_EXTRA_CA_CERTS=str(own))
    env = json.loads(out.stdout)
    assert env["NODE_EXTRA_CA_CERTS"] == str(bundle) and own.read_text().strip() in bundle.read_text()


def test_wrap_reports_ledger_per_agent(wrapped, upstream, big_output, tmp_path):
    body = _body_file(tmp_path, big_output)
    wrapped([sys.executable, str(AGENTS / "tiny_agent.py"), str(body)], LLM_URL=f"{upstream.url}/v1/messages")
    out = subprocess.run(
        [HEADROOM, "stats", "--json"],
        env={**os.environ, "HEADROOM_HOME": str(wrapped.home)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    agents = {a["key"]: a for a in json.loads(out.stdout)["by"]["agent"]}
    assert agents["tiny-python-agent"]["compressed"] >= 1 and agents["tiny-python-agent"]["tokens_saved"] > 0


def test_missing_command_exits_127_before_any_proxy_starts(tmp_path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env["HEADROOM_HOME"] = str(tmp_path)
    out = subprocess.run(
        [HEADROOM, "wrap", "--port", str(port), "no-such-agent-xyz", "--flag"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 127
    assert out.stderr.strip() == "headroom wrap: command not found: no-such-agent-xyz"
    from headroom_core.cli.proxy_process import ProxyAddress, probe

    assert probe(ProxyAddress("127.0.0.1", port)) == "none" and not pid_file(tmp_path, port).exists()
    assert not (tmp_path / "run").exists() and not (tmp_path / "headroom.db").exists()


def test_agent_gets_default_signal_dispositions(wrapped):
    # Python ignores SIGPIPE and SIGXFSZ; an ignored signal survives exec
    out = wrapped(["sh", "-c", "yes | head -1; grep SigIgn /proc/self/status"], no_proxy=None)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == "y" and "Broken pipe" not in out.stderr
    ignored = int(out.stdout.split("SigIgn:")[1].split()[0], 16)
    assert not ignored & (1 << (13 - 1)) and not ignored & (1 << (25 - 1))  # SIGPIPE 13, SIGXFSZ 25 (Linux)


def test_ctrl_c_while_the_proxy_starts_leaves_nothing(tmp_path):
    import signal
    import sqlite3
    import time

    from headroom_core.cli.proxy_process import ProxyAddress, probe

    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env["HEADROOM_HOME"] = str(tmp_path)
    # the proxy stays warming while its database is locked (another process migrating it, say):
    # the Ctrl-C surely lands before it is ready, however fast or loaded the machine
    lock = sqlite3.connect(tmp_path / "headroom.db", isolation_level=None)
    lock.execute("BEGIN EXCLUSIVE")
    try:
        wrap = subprocess.Popen(
            [HEADROOM, "wrap", "--port", str(port), "true"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        pidf = pid_file(tmp_path, port)
        deadline = time.monotonic() + 120
        while not pidf.exists() and wrap.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert pidf.exists(), "the proxy did not start"
        proxy_pid = int(pidf.read_text())
        wrap.send_signal(signal.SIGINT)  # what Ctrl-C sends to the foreground process
        _, err = wrap.communicate(timeout=60)
    finally:
        lock.close()
    assert wrap.returncode == 130, err
    assert "interrupted while the proxy was starting; it is stopped, nothing was run" in err
    assert not pidf.exists()
    deadline = time.monotonic() + 60  # its shutdown is slow on a loaded machine, not a leak
    while time.monotonic() < deadline:
        try:
            os.kill(proxy_pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the proxy (pid {proxy_pid}) still runs")
    assert probe(ProxyAddress("127.0.0.1", port)) == "none"


def test_profiles_and_no_proxy(tmp_path):
    assert ae.profile_for(["claude", "--resume"]).trust == ("NODE_EXTRA_CA_CERTS",)
    assert ae.profile_for(["codex"]).trust[0] == "CODEX_CA_CERTIFICATE"
    assert ae.profile_for(["aider"]).runtime == "python"
    assert ae.profile_for(["/usr/bin/python3", "x.py"]).runtime == "python"
    script = tmp_path / "my-agent"
    script.write_text("#!/usr/bin/env node\nconsole.log(1)\n")
    assert ae.profile_for([str(script)], which=lambda c: c).runtime == "node"
    # what the banner calls them: a known agent by its name, else the command and its runtime
    assert ae.profile_for(["claude"]).label() == "Claude Code"
    assert ae.profile_for(["python3", "x.py"]).label() == "python3 (a Python program)"
    assert ae.profile_for([str(script)], which=lambda c: c).label() == "my-agent (a Node program)"
    assert ae.profile_for(["curl"], which=lambda c: None).label() == "curl (runtime not recognised)"
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
    out = subprocess.run(
        [HEADROOM, "proxy", "--detach", "--port", str(port)], env=env, capture_output=True, text=True, timeout=120
    )
    try:
        assert out.returncode == 0, out.stderr
        assert probe(ProxyAddress("127.0.0.1", port)) == "headroom"
        again = subprocess.run(
            [HEADROOM, "proxy", "--detach", "--port", str(port)], env=env, capture_output=True, text=True, timeout=60
        )
        assert again.returncode == 1 and "a Headroom proxy already runs there" in again.stderr
    finally:
        stop = subprocess.run(
            [HEADROOM, "proxy", "--stop", "--port", str(port)], env=env, capture_output=True, text=True, timeout=60
        )
    assert stop.returncode == 0 and "stopped the proxy" in stop.stderr
    assert probe(ProxyAddress("127.0.0.1", port)) == "none"
    assert not pid_file(tmp_path, port).exists()


def test_stop_and_doctor_find_background_proxies_on_any_port(tmp_path):
    from headroom_core.cli.proxy_process import ProxyAddress, probe

    ports = [free_port(), free_port()]
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env.update(HEADROOM_HOME=str(tmp_path), COLUMNS="200")
    try:
        for p in ports:
            out = subprocess.run(
                [
                    HEADROOM,
                    "proxy",
                    "--detach",
                    "--port",
                    str(p),
                    "--anthropic-port",
                    "0",
                    "--openai-port",
                    "0",
                    "--google-port",
                    "0",
                ],
                env=env,
                capture_output=True,
                text=True,
                timeout=180,
            )
            assert out.returncode == 0, out.stderr
        (tmp_path / "run" / "proxy-1.pid").write_text("999999\n")  # a proxy that died long ago
        doc = subprocess.run(
            [HEADROOM, "doctor", "--no-models", "--json"], env=env, capture_output=True, text=True, timeout=120
        )
        found = {c["name"]: c for c in json.loads(doc.stdout)}
        for p in ports:
            assert (
                found[f"background proxy :{p}"]["level"] == "ok"
                and f"answers at http://127.0.0.1:{p}" in found[f"background proxy :{p}"]["detail"]
            )
        assert (
            found["background proxy :1"]["level"] == "warn" and "not running" in found["background proxy :1"]["detail"]
        )
        assert "proxy" not in found  # no guess at 8080 when background proxies are known
    finally:
        stop = subprocess.run([HEADROOM, "proxy", "--stop"], env=env, capture_output=True, text=True, timeout=120)
    assert stop.returncode == 0, stop.stderr
    for p in ports:
        assert f"stopped the proxy on port {p}" in stop.stderr and probe(ProxyAddress("127.0.0.1", p)) == "none"
    assert "removed 1 stale pid file(s)" in stop.stderr and list((tmp_path / "run").iterdir()) == []
    again = subprocess.run([HEADROOM, "proxy", "--stop"], env=env, capture_output=True, text=True, timeout=60)
    assert again.returncode == 1 and "no background proxy running" in again.stderr


def test_corporate_tls_proxy_ca_is_trusted_upstream(tmp_path, upstream, big_output, proxy_factory):
    """HTTPS_PROXY names a TLS-intercepting proxy (a plain mitmdump with its own CA) and the
    agent's SSL_CERT_FILE names that CA: the Headroom proxy wrap starts goes through it and
    trusts it, so the request arrives (not 502 "Certificate verify failed")."""
    corp = proxy_factory(None)  # its own confdir: its own CA; it reaches the test upstream with ssl_insecure
    port = free_port()
    drop = {*ae.CERT_VARS, *ae.BUNDLE_VARS}
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy") and k not in drop}
    env.update(
        HEADROOM_HOME=str(tmp_path),
        COLUMNS="200",
        HTTPS_PROXY=corp.url,
        SSL_CERT_FILE=str(corp.ca_path),
        NODE_EXTRA_CA_CERTS=str(tmp_path / "gone.pem"),
    )
    body = _body_file(tmp_path, big_output)
    cmd = [
        HEADROOM,
        "wrap",
        "--port",
        str(port),
        "--no-proxy",
        "",
        sys.executable,
        str(AGENTS / "tiny_agent.py"),
        str(body),
    ]
    try:
        out = subprocess.run(
            cmd, env={**env, "LLM_URL": f"{upstream.url}/v1/messages"}, capture_output=True, text=True, timeout=180
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("status 200: upstream saw 3 messages"), out.stdout + out.stderr
        assert f"via {corp.url}" in out.stderr and f"trusting {corp.ca_path.resolve()} upstream" in out.stderr
        assert f"headroom wrap: NODE_EXTRA_CA_CERTS={tmp_path / 'gone.pem'} names no file" in out.stderr
        _assert_compressed(upstream, big_output, "tiny-python-agent/1.0")
        assert "/v1/messages" in corp.log_text()  # it really went through the corporate proxy
        bundle = (tmp_path / "upstream-ca-bundle.pem").read_text()
        assert (
            corp.ca_path.read_text().strip() in bundle and bundle.count("BEGIN CERTIFICATE") > 10
        )  # system roots + the corporate CA
    finally:
        subprocess.run([HEADROOM, "proxy", "--stop", "--port", str(port)], env=env, capture_output=True, timeout=60)
