"""``docker/compose.team.yaml`` (PostgreSQL, two proxies, the example agent), checked like
``docker/compose.yaml`` (tests/e2e/test_docker_files.py; hadolint covers the one Dockerfile both use):

- it validates against the Compose Specification's JSON schema (vendored in ``docker/schema/``),
  anchors and merge keys resolved as Compose resolves them;
- it wires a team: both proxies on the one PostgreSQL service (URL, user and password of that
  service), one secret key file and one CA on a volume only the proxies mount, the second proxy
  started once the first is healthy (so the key and the CA are made once), each agent through
  its proxy trusting the published public CA, nothing published beyond the host;
- without a Docker engine, the real entrypoint script runs both proxies with the compose file's
  own environment (its volumes as folders, its database as a throwaway PostgreSQL): the second
  proxy uses the first one's CA and key, and the example agent's ``run.sh`` through B sees the
  request the agent sent through A in the team totals;
- with a Docker engine (``docker info`` answers and ``docker compose`` exists), ``docker compose
  up`` of the real file: the agents exit 0 and agent-b reports both requests. Skipped, with the
  reason, where there is no engine (it also needs the network: it pulls ``postgres`` and builds
  the image).
"""

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
COMPOSE = DOCKER / "compose.team.yaml"
BIN = Path(sys.executable).parent
PROXIES = ("headroom-a", "headroom-b")
AGENTS = ("agent", "agent-b")


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def test_team_compose_file_matches_the_compose_spec_schema(compose):
    schema = json.loads((DOCKER / "schema" / "compose-spec.json").read_text())
    errors = sorted(Draft202012Validator(schema).iter_errors(compose), key=str)
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors)
    broken = {
        **compose,
        "services": {
            **compose["services"],
            "headroom-b": {**compose["services"]["headroom-b"], "depends_on": {"headroom-a": {"condition": "soon"}}},
        },
    }
    assert list(Draft202012Validator(schema).iter_errors(broken))


def _mounts(service: dict) -> dict[str, str]:
    """volume name -> mount path (with ``:ro`` kept) of a service."""
    return {v.split(":", 1)[0]: v.split(":", 1)[1] for v in service.get("volumes", [])}


def test_team_compose_wires_two_proxies_to_one_database_key_and_ca(compose):
    svc = compose["services"]
    db, a, b = svc["db"], svc["headroom-a"], svc["headroom-b"]
    assert (DOCKER / a["build"]["context"] / a["build"]["dockerfile"]).is_file()
    assert b["image"] == a["image"]  # one image, built once
    assert a["environment"] == b["environment"]
    env = a["environment"]
    # the database is the db service, with its user, password and database
    m = re.fullmatch(r"postgresql\+psycopg://([^:]+):([^@]+)@db:5432/(\w+)", env["HEADROOM_DB_URL"])
    assert m, env["HEADROOM_DB_URL"]
    assert m.groups() == (
        db["environment"]["POSTGRES_USER"],
        db["environment"]["POSTGRES_PASSWORD"],
        db["environment"]["POSTGRES_DB"],
    )
    assert "pg_isready" in " ".join(db["healthcheck"]["test"])
    for p in (a, b):
        assert p["depends_on"]["db"]["condition"] == "service_healthy"
        assert p["healthcheck"]["test"] == ["CMD", "headroom-entrypoint", "healthcheck"]
        assert p["cap_drop"] == ["ALL"] and p["ports"][0].startswith("127.0.0.1:")
    assert b["depends_on"]["headroom-a"]["condition"] == "service_healthy"  # key and CA made once, by A
    # one key and one CA (private key included) on a volume of the proxies only
    team = {v for v, path in _mounts(a).items() if path == "/team"}
    assert team == {v for v, path in _mounts(b).items() if path == "/team"} and len(team) == 1
    assert env["HEADROOM_SECRET_KEY_FILE"].startswith("/team/") and env["HEADROOM_CONFDIR"].startswith("/team/")
    assert _mounts(a)["headroom-a-data"] == "/data" and _mounts(b)["headroom-b-data"] == "/data"  # own caches
    assert _mounts(a)["headroom-ca"] == _mounts(b)["headroom-ca"] == "/ca"
    hosts = {p["ports"][0].split(":")[1] for p in (a, b)}
    assert len(hosts) == 2  # two host ports
    for name, proxy in zip(AGENTS, PROXIES):
        agent = svc[name]
        assert (DOCKER / agent["build"] / "Dockerfile").is_file()
        aenv = agent["environment"]
        assert aenv["HTTPS_PROXY"] == aenv["HTTP_PROXY"] == f"http://{proxy}:8080"
        assert agent["depends_on"][proxy]["condition"] == "service_healthy"
        assert _mounts(agent) == {"headroom-ca": "/headroom-ca:ro"}  # no key, no database, no CA key
        assert aenv["HEADROOM_CA"] == aenv["NODE_EXTRA_CA_CERTS"] == "/headroom-ca/headroom-ca.pem"
    assert svc["agent-b"]["depends_on"]["agent"]["condition"] == "service_completed_successfully"
    assert set(compose["volumes"]) == {v for s in svc.values() for v in _mounts(s)}
    text = (DOCKER / "Dockerfile").read_text()
    assert re.search(r"chown 10001:10001 [^\n]*/team", text)  # the volume starts owned by the proxy's user


def _health(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", str(DOCKER / "entrypoint.sh"), "healthcheck"], env=env, capture_output=True, text=True, timeout=60
    )


def _pg_url() -> tuple[str, callable] | None:
    from tests.support.postgres import fresh_pg_database, pg_server_url

    server = pg_server_url()
    return None if server is None else fresh_pg_database(server)


def test_team_entrypoints_share_key_ca_and_database_without_docker(compose, tmp_path, upstream):
    pg = _pg_url()
    if pg is None:
        pytest.skip(
            'needs PostgreSQL: set HEADROOM_TEST_PG_URL (eval "$(scripts/postgres start)") or install PostgreSQL'
        )
    url, drop = pg
    folders = {"/team": tmp_path / "team", "/ca": tmp_path / "ca"}
    base = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy") and not k.startswith("HEADROOM_")}
    base["PATH"] = f"{BIN}:{base.get('PATH', '/usr/bin:/bin')}"
    procs, envs, logs = [], [], []
    try:
        for name in PROXIES:
            service = compose["services"][name]
            env = dict(base)
            for k, v in service["environment"].items():
                for inside, outside in folders.items():
                    v = v.replace(inside + "/", f"{outside}/") if v.startswith(inside + "/") else v
                env[k] = v
            env.update(
                HEADROOM_DB_URL=url,  # the compose file's points at its db service
                HEADROOM_HOME=str(tmp_path / name / "data"),
                HEADROOM_CA_EXPORT=str(folders["/ca"] / name),  # each one's published copy, compared below
                HEADROOM_LISTEN_HOST="127.0.0.1",
                HEADROOM_LISTEN_PORT=str(free_port()),
            )
            log = open(tmp_path / f"{name}.log", "wb")
            logs.append(log)
            proc = subprocess.Popen(
                ["sh", str(DOCKER / "entrypoint.sh"), "--set", f"ssl_verify_upstream_trusted_ca={upstream.cert_path}"],
                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
            procs.append(proc)
            envs.append(env)
            deadline = time.monotonic() + 300  # B starts once A is healthy, as compose does
            while _health(env).returncode != 0:
                assert proc.poll() is None, (tmp_path / f"{name}.log").read_text()
                assert time.monotonic() < deadline, (tmp_path / f"{name}.log").read_text()
                time.sleep(1)
        team = folders["/team"]
        assert (team / "secret.key").stat().st_size == 32 and (team / "mitmproxy" / "mitmproxy-ca.pem").is_file()
        published = [(folders["/ca"] / n / "headroom-ca.pem").read_bytes() for n in PROXIES]
        assert published[0] == published[1] == (team / "mitmproxy" / "mitmproxy-ca-cert.pem").read_bytes()  # one CA
        assert not (tmp_path / "headroom-a" / "data" / "secret.key").exists()

        outputs = []
        for env in envs:  # the agent through A, then agent-b through B
            agent_env = {
                **base,
                "HTTPS_PROXY": f"http://127.0.0.1:{env['HEADROOM_LISTEN_PORT']}",
                "HTTP_PROXY": f"http://127.0.0.1:{env['HEADROOM_LISTEN_PORT']}",
                "NO_PROXY": "",
                "HEADROOM_CA": str(folders["/ca"] / "headroom-a" / "headroom-ca.pem"),  # the one CA serves for both
                "LLM_URL": f"{upstream.url}/v1/messages",
                "TMPDIR": str(tmp_path),
            }
            for k in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_DIR"):
                agent_env.pop(k, None)
            out = subprocess.run(
                ["sh", str(DOCKER / "example-agent" / "run.sh")],
                env=agent_env,
                capture_output=True,
                text=True,
                timeout=180,
            )
            assert out.returncode == 0, out.stdout + out.stderr
            outputs.append(out.stdout)
        assert "LLM host answered 200" in outputs[0] and "LLM host answered 200" in outputs[1]
        counts = [int(re.search(r"headroom: (\d+) requests", o).group(1)) for o in outputs]
        assert counts == [1, 2]  # B's totals hold the request A recorded: one database
        assert len(upstream.requests) == 2 and all(
            "headroom omitted" in r.json["messages"][2]["content"][0]["content"] for r in upstream.requests
        )
    finally:
        for p in procs:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(30)
        for log in logs:
            log.close()
        drop()


def _docker_reason() -> str:
    """Why ``docker compose`` cannot run here ("" when it can)."""
    if shutil.which("docker") is None:
        return "no docker command"
    info = subprocess.run(
        ["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True, timeout=60
    )
    if info.returncode != 0:
        return f"no Docker engine: {(info.stderr.strip().splitlines() or ['docker info failed'])[-1]}"
    if subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=60).returncode != 0:
        return "no 'docker compose' plugin"
    return ""


def test_team_compose_up_with_docker(tmp_path):
    why = _docker_reason()
    if why:
        pytest.skip(f"{why} (the compose run needs a Docker engine and the network)")
    project = f"headroom-team-test-{os.getpid()}"
    cmd = ["docker", "compose", "-p", project, "-f", str(COMPOSE)]
    env = {**os.environ, "POSTGRES_PASSWORD": "team-test", "ANTHROPIC_API_KEY": ""}
    try:
        up = subprocess.run(
            [*cmd, "up", "--build", "--abort-on-container-exit", "--exit-code-from", "agent-b"],
            env=env,
            capture_output=True,
            text=True,
            timeout=3600,
        )
        logs = subprocess.run(
            [*cmd, "logs", "--no-color", *AGENTS], env=env, capture_output=True, text=True, timeout=120
        ).stdout
        assert up.returncode == 0, up.stdout[-4000:] + up.stderr[-4000:]
        # without an API key the LLM host answers 401, but both requests went through the team
        assert re.search(r"agent-b.*headroom: 2 requests", logs), logs[-4000:]
    finally:
        subprocess.run([*cmd, "down", "-v"], env=env, capture_output=True, timeout=600)
