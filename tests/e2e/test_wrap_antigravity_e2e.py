"""``headroom wrap antigravity`` end to end: with no ``antigravity`` program on the PATH it runs the
Antigravity CLI, ``agy`` (here a stand-in with the traits that matter: it reads ``HTTPS_PROXY``
and takes its roots from ``SSL_CERT_FILE``, as the Go binary does on Linux, and sends what agy
sends, a Code Assist ``/v1internal:streamGenerateContent?alt=sse`` with a Gemini body in its
``request`` envelope). Nothing else is configured: the request reaches the host through the
proxy with its tool output compressed inside the envelope, and the agent's exit code comes back."""

from __future__ import annotations

import json
import os
import stat
import sys

from headroom_core.cli import agent_env as ae
from headroom_core.compress import markers
from tests.e2e.test_wrap_e2e import big_output, wrapped  # noqa: F401 - fixtures

AGY = """#!{python}
import json, os, sys, urllib.request
body = open(sys.argv[-1], "rb").read()
req = urllib.request.Request(os.environ["LLM_URL"], data=body, method="POST", headers={{"content-type": "application/json", "user-agent": "antigravity-cli-standin/1.0", "authorization": "Bearer ya29.test"}})
try:
    with urllib.request.urlopen(req, timeout=60) as r:
        status = r.status
except urllib.error.HTTPError as e:
    status = e.code
print("status", status, "via", os.environ.get("HTTPS_PROXY"), "roots", os.environ.get("SSL_CERT_FILE"))
sys.exit(4)
"""


def test_wrap_antigravity_runs_agy_and_its_code_assist_request_is_compressed(wrapped, upstream, big_output, tmp_path):  # noqa: F811
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    agy = bin_dir / "agy"
    agy.write_text(AGY.format(python=sys.executable))
    agy.chmod(agy.stat().st_mode | stat.S_IXUSR)
    inner = {
        "contents": [
            {"role": "user", "parts": [{"text": f"Which issues are open? ({tmp_path.name})"}]},
            {
                "role": "model",
                "parts": [{"functionCall": {"name": "run_shell_command", "args": {"command": "gh issue list --json"}}}],
            },
            {
                "role": "user",
                "parts": [{"functionResponse": {"name": "run_shell_command", "response": {"output": big_output}}}],
            },
        ],
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "run_shell_command",
                        "description": "Run a command.",
                        "parametersJsonSchema": {"type": "object"},
                    }
                ]
            }
        ],
    }
    body = tmp_path / "body.json"
    body.write_text(
        json.dumps({"model": "gemini-3-pro-preview", "project": "p-1", "user_prompt_id": "u1", "request": inner})
    )
    path = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    out = wrapped(
        ["antigravity", str(body)], LLM_URL=f"{upstream.url}/v1internal:streamGenerateContent?alt=sse", PATH=path
    )
    assert out.returncode == 4, out.stderr
    assert "Antigravity CLI" in out.stderr and "SSL_CERT_FILE" in out.stderr
    assert out.stdout.startswith("status 404 via http://127.0.0.1:"), (
        out.stdout
    )  # the host's own answer, through the proxy
    (rec,) = upstream.requests
    assert (
        rec.path == "/v1internal:streamGenerateContent?alt=sse"
        and rec.header("user-agent") == "antigravity-cli-standin/1.0"
    )
    sent = rec.json["request"]["contents"][2]["parts"][0]["functionResponse"]["response"]["output"]
    assert len(sent) < len(big_output) / 2 and markers.offload_key(big_output) in markers.find_marker_keys(sent)
    assert {k: rec.json[k] for k in ("model", "project", "user_prompt_id")} == {
        "model": "gemini-3-pro-preview",
        "project": "p-1",
        "user_prompt_id": "u1",
    }


def test_antigravity_names_and_alias():
    assert ae.profile_for(["agy"]).name == ae.profile_for(["antigravity"]).name == "Antigravity CLI"
    assert ae.profile_for(["agy"]).trust == ("SSL_CERT_FILE",)
    found = {"agy": "/x/agy"}
    assert ae.agent_command(["antigravity", "-p", "hi"], found.get) == ["agy", "-p", "hi"]
    assert ae.agent_command(["antigravity"], {**found, "antigravity": "/x/antigravity"}.get) == [
        "antigravity"
    ]  # the editor itself
    assert ae.agent_command(["gemini", "-p"], found.get) == ["gemini", "-p"]
