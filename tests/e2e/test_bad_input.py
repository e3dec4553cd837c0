"""Bad input found by a new user's session: each passes byte-identical or gets a clear error."""

from __future__ import annotations

import gzip
import hashlib
import json

import pytest

from headroom_core.settings import SettingsError, load_settings
from headroom_core.wire.detect import detect
from tests.support.clients import http_client
from tests.support.proxy import ADDON_SCRIPT
from tests.unit.test_request_plan import anthropic_request


def test_detect_refuses_non_utf8_and_too_deep_json():
    body = json.dumps({"model": "m", "messages": []})
    assert detect("POST", "/v1/messages", body.encode("utf-16")).reason == "body is not UTF-8"
    assert detect("POST", "/v1/messages", b"\xef\xbb\xbf" + body.encode()).dialect is None  # a BOM is not JSON
    deep = ('{"model":"m","messages":[' + "[" * 100_000 + "]" * 100_000 + "]}").encode()
    assert detect("POST", "/v1/messages", deep).dialect is None


@pytest.mark.parametrize(
    "key,value", [("max_body_bytes", "-1"), ("min_tokens", "-5"), ("ccr_ttl_seconds", "-3"), ("db_url", "not a url")]
)
def test_settings_refuse_negative_numbers_and_bad_urls(key, value):
    with pytest.raises(SettingsError, match=key):
        load_settings({key: value}, env={})


@pytest.mark.parametrize("line,said", [
    ("max_body_bytes = 0", "max_body_bytes = 0 must be at least 1 (bytes)"),  # before: every LLM request got 413
    ("min_saving_ratio = 7.5", "min_saving_ratio = 7.5 must be at least 0 and below 1"),
])  # fmt: skip
def test_a_setting_out_of_its_range_stops_the_proxy_in_one_line(tmp_path, line, said):
    """``headroom proxy`` with such a config.toml exits 2 with one line naming the file, the
    key and the range, and starts nothing."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from tests.support.proxy import free_port

    (tmp_path / "config.toml").write_text(line + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEADROOM_") and not k.lower().endswith("_proxy")}
    port = free_port()
    out = subprocess.run([str(Path(sys.executable).parent / "headroom"), "proxy", "--port", str(port)], env={**env, "HEADROOM_HOME": str(tmp_path)},
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.returncode == 2 and out.stderr.splitlines() == [out.stderr.strip()], out.stderr
    assert out.stderr.startswith(f"headroom proxy: {tmp_path / 'config.toml'}: {said}")
    assert not (tmp_path / "run" / f"proxy-{port}.pid").exists()


@pytest.fixture(scope="module")
def proxy(module_proxy_factory):
    return module_proxy_factory(ADDON_SCRIPT, options={"headroom_bogus_option": "1"})


def test_unknown_content_encoding_and_broken_gzip_pass_untouched(upstream, proxy):
    body = json.dumps(anthropic_request("x" * 5000)).encode()
    for encoding, raw in (("foo", body), ("gzip", body), ("gzip", gzip.compress(body)[:-5])):
        upstream.reset()
        with http_client(proxy) as c:
            c.post(
                upstream.url + "/v1/messages",
                content=raw,
                headers={"content-type": "application/json", "content-encoding": encoding},
            )
        rec = upstream.requests[0]
        assert rec.sha256 == hashlib.sha256(raw).hexdigest() and rec.header("content-encoding") == encoding


def test_valid_gzip_body_is_decoded_compressed_and_reencoded(upstream, proxy):
    from tests.unit.test_request_plan import github_scenario

    body = json.dumps(anthropic_request(github_scenario("paginate-issues.json"))).encode()
    with http_client(proxy) as c:
        c.post(
            upstream.url + "/v1/messages",
            content=gzip.compress(body),
            headers={"content-type": "application/json", "content-encoding": "gzip"},
        )
    rec = upstream.requests[0]
    assert rec.header("content-encoding") == "gzip"
    sent = json.loads(gzip.decompress(rec.body))
    assert len(json.dumps(sent)) < len(body) / 2 and sent["messages"][:2] == json.loads(body)["messages"][:2]


def test_tool_with_a_non_string_name_is_recorded(upstream, proxy):
    body = {
        "model": "m",
        "max_tokens": 5,
        "tools": [{"name": 5, "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": "hi"}],
    }
    raw = json.dumps(body).encode()
    with http_client(proxy) as c:
        r = c.post(upstream.url + "/v1/messages", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 200 and upstream.requests[0].sha256 == hashlib.sha256(raw).hexdigest()
    proxy.wait_for_log(r"unknown option\(s\) headroom_bogus_option ignored", timeout=10)
    assert "could not record" not in proxy.log_text()
