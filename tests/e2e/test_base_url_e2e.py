"""Base-URL agents end to end: ``headroom proxy`` listens as the Anthropic and OpenAI base URLs
(mitmproxy reverse modes) beside its proxy port; the real ``anthropic`` and ``openai`` SDKs,
configured with nothing but ``base_url`` (no proxy, no CA), reach the local test upstream
through it and the upstream sees the tool output compressed. An API call sent to the proxy
port itself gets the provider's error shape naming the base URL to use, and is recorded
nowhere (not in the ledger)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from headroom_core.compress import markers
from tests.support.proxy import free_port
from tests.support.upstream import Reply
from tests.unit.test_request_plan import anthropic_request, github_scenario

HEADROOM = str(Path(sys.executable).parent / "headroom")


def _free_run(n: int = 4) -> int:
    """A port P with P, P+1 … P+n-1 free a moment ago."""
    for _ in range(50):
        p = free_port()
        if p + n < 65535 and all(_free(p + i) for i in range(n)):
            return p
    raise RuntimeError("no run of free ports")


def _free(port: int) -> bool:
    import socket

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


@pytest.fixture(scope="module")
def base_proxy(tmp_path_factory, upstream_server):
    """``headroom proxy --detach`` on P (proxy), P+1 (Anthropic base URL), P+2 (OpenAI base
    URL) and P+3 (Google's Gemini API base URL), each forwarding to the local test upstream."""
    home = tmp_path_factory.mktemp("base-url-home")
    port = _free_run()
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env["HEADROOM_HOME"] = str(home)
    args = [HEADROOM, "proxy", "--detach", "--port", str(port), "--anthropic-upstream", upstream_server.url, "--openai-upstream", upstream_server.url,
            "--google-upstream", upstream_server.url, "--set", f"ssl_verify_upstream_trusted_ca={upstream_server.cert_path}"]  # fmt: skip
    out = subprocess.run(args, env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    assert (
        f"ANTHROPIC_BASE_URL=http://127.0.0.1:{port + 1}" in out.stderr
        and f"OPENAI_BASE_URL=http://127.0.0.1:{port + 2}/v1" in out.stderr
    )
    assert f"GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:{port + 3}" in out.stderr
    yield {"home": home, "port": port, "env": env}
    subprocess.run([HEADROOM, "proxy", "--stop", "--port", str(port)], env=env, capture_output=True, timeout=60)


def _ledger_rows(home: Path, expect: int) -> int:
    from headroom_core.db.engine import open_database
    from headroom_core.db.models import RequestOutcome

    sessions = open_database(f"sqlite:///{home / 'headroom.db'}")
    n = -1
    for _ in range(100):  # the row is written after the response went out
        with sessions() as s:
            n = s.query(RequestOutcome).count()
        if n >= expect:
            break
        time.sleep(0.1)
    return n


def _settled_rows(home: Path) -> int:
    """The ledger rows once earlier answers' rows are all committed (the count unchanged for
    half a second: they are committed within milliseconds of their answers)."""
    n, same_since = _ledger_rows(home, 0), time.monotonic()
    while time.monotonic() - same_since < 0.5:
        time.sleep(0.1)
        m = _ledger_rows(home, 0)
        if m != n:
            n, same_since = m, time.monotonic()
    return n


def test_anthropic_sdk_with_base_url(base_proxy, upstream):
    import anthropic

    big = github_scenario("paginate-issues.json")
    body = anthropic_request(big, question="Which issues are open? (base url)")
    upstream.script(Reply.text("open: 3", input_tokens=900, output_tokens=5))
    client = anthropic.Anthropic(
        base_url=f"http://127.0.0.1:{base_proxy['port'] + 1}",
        api_key="test-key",
        max_retries=0,
        http_client=httpx.Client(trust_env=False, timeout=60),
    )
    msg = client.messages.create(
        model="claude-sonnet-4-5", max_tokens=50, system=body["system"], tools=body["tools"], messages=body["messages"]
    )
    assert msg.content[0].text == "open: 3"
    (rec,) = upstream.requests
    assert rec.path_only == "/v1/messages" and rec.header("host") == f"127.0.0.1:{upstream.port}"
    sent = rec.json["messages"][2]["content"][0]["content"]
    assert len(sent) < len(big) / 2 and set(markers.find_marker_keys(sent)) == {markers.offload_key(big)}


def test_openai_sdk_with_base_url(base_proxy, upstream):
    import openai

    upstream.script(Reply.text("hello from upstream"))
    client = openai.OpenAI(
        base_url=f"http://127.0.0.1:{base_proxy['port'] + 2}/v1",
        api_key="test-key",
        max_retries=0,
        http_client=httpx.Client(trust_env=False, timeout=60),
    )
    r = client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert r.choices[0].message.content == "hello from upstream"
    (rec,) = upstream.requests
    assert rec.path_only == "/v1/chat/completions"


def test_api_call_to_the_proxy_port_gets_provider_error_and_is_not_recorded(base_proxy, upstream):
    import anthropic
    import openai

    port = base_proxy["port"]
    before = _settled_rows(base_proxy["home"])  # the earlier tests' requests on this proxy
    a = anthropic.Anthropic(
        base_url=f"http://127.0.0.1:{port}",
        api_key="test-key",
        max_retries=0,
        http_client=httpx.Client(trust_env=False, timeout=60),
    )
    with pytest.raises(anthropic.BadRequestError) as ai:
        a.messages.create(model="claude-sonnet-4-5", max_tokens=10, messages=[{"role": "user", "content": "x" * 5000}])
    assert ai.value.status_code == 400
    body = ai.value.body
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert f"ANTHROPIC_BASE_URL=http://127.0.0.1:{port + 1}" in body["error"]["message"]
    assert f"HTTPS_PROXY=http://127.0.0.1:{port}" in body["error"]["message"]
    o = openai.OpenAI(
        base_url=f"http://127.0.0.1:{port}/v1",
        api_key="test-key",
        max_retries=0,
        http_client=httpx.Client(trust_env=False, timeout=60),
    )
    with pytest.raises(openai.BadRequestError) as oi:
        o.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    err = oi.value.body
    assert isinstance(err, dict) and f"OPENAI_BASE_URL=http://127.0.0.1:{port + 2}/v1" in err["message"]
    assert upstream.requests == []  # nothing reached the model
    time.sleep(1.0)  # a ledger row would have been written by now
    assert _ledger_rows(base_proxy["home"], before + 1) == before
    # the stats page is still served on the proxy port
    with httpx.Client(trust_env=False, timeout=30) as c:
        page = c.get(f"http://127.0.0.1:{port}/")
        stats = c.get(f"http://127.0.0.1:{port}/stats")
    assert page.status_code == 200 and "<h1>Headroom savings</h1>" in page.text
    assert stats.status_code == 200 and "totals" in stats.json()


def test_busy_or_invalid_port_is_reported_before_the_banner(base_proxy, tmp_path):
    env = {**base_proxy["env"], "HEADROOM_HOME": str(tmp_path)}
    port = base_proxy["port"]
    busy = subprocess.run([HEADROOM, "proxy", "--port", str(port)], env=env, capture_output=True, text=True, timeout=60)
    assert busy.returncode == 1
    assert busy.stderr.strip() == (
        f"headroom proxy: port {port} is busy: a Headroom proxy already runs there (started with --detach, it stops "
        f"with `headroom proxy --stop --port {port}`; started in a terminal, with Ctrl-C there)"
    )
    other = free_port()
    import socket

    with socket.socket() as s:  # another program on the Anthropic base-URL port
        s.bind(("127.0.0.1", other + 1))
        s.listen()
        out = subprocess.run(
            [HEADROOM, "proxy", "--port", str(other), "--openai-port", "0"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert out.returncode == 1 and "headroom proxy on" not in out.stderr
    assert out.stderr.startswith(
        f"headroom proxy: port {other + 1} (the Anthropic base-URL port, --anthropic-port; 0 turns it off) on 127.0.0.1 is busy (another program listens there"
    )
    bad = subprocess.run([HEADROOM, "proxy", "--port", "70000"], env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "less than or equal to 65535" in bad.stderr and "headroom proxy on" not in bad.stderr
    host = subprocess.run(
        [HEADROOM, "proxy", "--listen-host", "192.0.2.1", "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert host.returncode == 1 and host.stderr.startswith(
        "headroom proxy: '192.0.2.1' is not an address of this machine"
    )
    assert not (tmp_path / "headroom.db").exists()


def test_gemini_api_through_the_google_base_url_port_is_compressed(base_proxy, upstream_server):
    """A Gemini ``generateContent`` request sent to the Google base-URL port (plain HTTP, as
    Gemini CLI does with ``GOOGLE_GEMINI_BASE_URL``) reaches the upstream over HTTPS with its
    tool output compressed, and is answered in Gemini's shape."""
    rows = json.dumps(
        [{"id": i, "name": f"item-{i}", "state": "open" if i % 9 else "closed", "size": i * 17} for i in range(300)],
        indent=1,
    )
    body = {
        "systemInstruction": {"parts": [{"text": "You are a coding agent. Working directory: /srv/gem"}]},
        "tools": [
            {"functionDeclarations": [{"name": "run_shell_command", "parametersJsonSchema": {"type": "object"}}]}
        ],
        "contents": [
            {"role": "user", "parts": [{"text": "list the items"}]},
            {
                "role": "model",
                "parts": [{"functionCall": {"name": "run_shell_command", "args": {"command": "ls"}, "id": "c1"}}],
            },
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"name": "run_shell_command", "id": "c1", "response": {"output": rows}}}
                ],
            },
        ],
    }
    before = len(upstream_server.requests)
    url = f"http://127.0.0.1:{base_proxy['port'] + 3}/v1beta/models/gemini-2.5-pro:generateContent"
    r = httpx.post(url, json=body, headers={"x-goog-api-key": "AIza-test-not-a-key"}, timeout=60, trust_env=False)
    assert r.status_code == 200, r.text
    assert r.json()["candidates"][0]["content"]["role"] == "model"
    got = [q for q in upstream_server.requests[before:] if q.path_only.endswith(":generateContent")]
    assert got, "the upstream saw no generateContent request"
    sent = got[-1].json["contents"][2]["parts"][0]["functionResponse"]["response"]["output"]
    assert len(sent) < len(rows) / 3 and "headroom_retrieve key=" in sent
