"""``headroom proxy --openai-upstream`` with the API's base URL (``https://host/v1``, as users
copy it from their OPENAI_BASE_URL) works end to end: the real ``openai`` SDK through the
OpenAI base-URL port reaches the local upstream at ``/v1/...``. A URL the reverse listener
cannot honour (a gateway path, no scheme) is refused by the CLI with one line naming the
option, before anything starts."""

from __future__ import annotations

import os
import subprocess

import httpx
import pytest

from tests.e2e.test_base_url_e2e import HEADROOM, _free_run
from tests.support.upstream import Reply


@pytest.fixture(scope="module")
def v1_proxy(tmp_path_factory, upstream_server):
    home = tmp_path_factory.mktemp("upstream-url-home")
    port = _free_run()
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env["HEADROOM_HOME"] = str(home)
    args = [HEADROOM, "proxy", "--detach", "--port", str(port), "--anthropic-port", "0", "--openai-upstream", f"{upstream_server.url}/v1/",
            "--set", f"ssl_verify_upstream_trusted_ca={upstream_server.cert_path}"]  # fmt: skip
    out = subprocess.run(args, env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    yield {"port": port, "env": env}
    subprocess.run([HEADROOM, "proxy", "--stop", "--port", str(port)], env=env, capture_output=True, timeout=60)


def test_a_base_url_ending_in_v1_is_accepted_and_requests_keep_their_path(v1_proxy, upstream):
    import openai

    upstream.script(Reply.text("through /v1"))
    client = openai.OpenAI(
        base_url=f"http://127.0.0.1:{v1_proxy['port'] + 2}/v1",
        api_key="test-key",
        max_retries=0,
        http_client=httpx.Client(trust_env=False, timeout=60),
    )
    r = client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert r.choices[0].message.content == "through /v1"
    (rec,) = upstream.requests
    assert rec.path_only == "/v1/chat/completions"


@pytest.mark.parametrize(
    "url, says",
    [
        (
            "https://gateway.example/openai/v1",
            "--openai-upstream 'https://gateway.example/openai/v1': the path '/openai/v1' is not supported",
        ),
        ("api.openai.com/v1", "--openai-upstream 'api.openai.com/v1': give an http(s) URL"),
    ],
)
def test_an_upstream_the_listener_cannot_honour_is_refused_in_one_line(tmp_path, url, says):
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("HEADROOM_")}, "HEADROOM_HOME": str(tmp_path)}
    out = subprocess.run(
        [HEADROOM, "proxy", "--port", str(_free_run()), "--openai-upstream", url],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and says in lines[0], out.stderr
