"""A port that is busy because a Headroom proxy already uses it, through the ``headroom`` command
as a process: the check whether a port is free (``headroom proxy``, ``wrap``, ``doctor``) is
answered by the running proxy itself on its base-URL ports too, never forwarded to their
upstream, and the message names what listens there (the base-URL port of the proxy on port P),
not "another program"."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.proxy import free_port
from tests.support.upstream import Upstream

HEADROOM = str(Path(sys.executable).parent / "headroom")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _free_run(n: int = 4) -> int:
    """A port P with P … P+n-1 free a moment ago."""
    for _ in range(50):
        p = free_port()
        if p + n < 65535 and all(_free(p + i) for i in range(n)):
            return p
    raise RuntimeError("no run of free ports")


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([HEADROOM, *args], env=env, capture_output=True, text=True, timeout=180)


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory, upstream_server: Upstream) -> Iterator[dict[str, Any]]:
    """``headroom proxy --detach`` on P with its base-URL ports P+1 … P+3 forwarding to the
    local test upstream."""
    home = tmp_path_factory.mktemp("busy-ports-home")
    port = _free_run()
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEADROOM_") and not k.lower().endswith("_proxy")}
    env |= {"HEADROOM_HOME": str(home), "COLUMNS": "100"}
    up = upstream_server.url
    out = _run(env, "proxy", "--detach", "--port", str(port), "--anthropic-upstream", up, "--openai-upstream", up, "--google-upstream", up,
               "--set", f"ssl_verify_upstream_trusted_ca={upstream_server.cert_path}")  # fmt: skip
    assert out.returncode == 0, out.stderr
    yield {"home": home, "port": port, "env": env}
    _run(env, "proxy", "--stop", "--port", str(port))


def test_a_base_url_port_is_named_and_the_probe_never_reaches_the_upstream(running, upstream):
    p, env = running["port"], running["env"]
    out = _run(env, "proxy", "--port", str(free_port()), "--anthropic-port", str(p + 1))
    assert out.returncode == 1 and len(out.stderr.splitlines()) == 1, out.stderr
    assert out.stderr.strip() == (
        f"headroom proxy: port {p + 1} (the Anthropic base-URL port, --anthropic-port; 0 turns it off) is busy: "
        f"it is the Anthropic base-URL port of the Headroom proxy on port {p} (stop that proxy, or choose another port)"
    )
    out = _run(env, "wrap", "--port", str(p + 2), "true")
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip() == (
        f"headroom wrap: http://127.0.0.1:{p + 2} is the OpenAI base-URL port of the Headroom proxy on port {p}, not a proxy port: "
        f"use --port {p}, or choose another --port"
    )
    out = _run(env, "doctor", "--port", str(p + 3), "--no-models", "--json")
    proxy = {c["name"]: c for c in json.loads(out.stdout)}["proxy"]
    assert proxy == {
        "name": "proxy", "level": "warn", "detail": f"http://127.0.0.1:{p + 3} is the Google base-URL port of the Headroom proxy on port {p}, not a proxy port",
        "fix": f"agents use it as a base URL; check the proxy itself: `headroom doctor --port {p}`",
    }  # fmt: skip
    out = _run(env, "proxy", "--port", str(p), "--anthropic-port", "0", "--openai-port", "0", "--google-port", "0")
    assert out.returncode == 1 and f"port {p} is busy: a Headroom proxy already runs there" in out.stderr
    assert upstream.requests == []  # five probes of the proxy's ports: not one request upstream


def test_the_base_url_port_still_forwards_every_path_of_the_api(running, upstream):
    """Only a target naming the reserved host is the proxy's own: the API's own ``/health``
    (origin form, as a base-URL client sends it) still goes upstream."""
    p = running["port"]
    r = httpx.get(f"http://127.0.0.1:{p + 1}/health", trust_env=False, timeout=30)
    assert "service" not in r.text  # the upstream's answer, not the proxy's /health
    assert [(q.method, q.path) for q in upstream.requests] == [("GET", "/health")]
