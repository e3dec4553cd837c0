"""Ready from the first request (issue 33): through a real ``mitmdump -s addons/headroom.py``, a
request sent the moment the proxy listens (its warm-up still running: database migrated, secret
key, vocabulary, compressors, the compression worker) is compressed exactly as the same tool
output is in a later conversation, and ``/health`` says ready only once the warm-up is done."""

from __future__ import annotations

from tests.support.clients import anthropic_client, http_client
from tests.support.proxy import ADDON_SCRIPT
from tests.unit.test_request_plan import anthropic_request, github_scenario

MODEL = "claude-sonnet-4-5"


def _send(client, body: dict) -> None:
    client.messages.create(
        model=MODEL, max_tokens=100, system=body["system"], tools=body["tools"], messages=body["messages"]
    )


def test_a_request_at_once_after_start_is_compressed_like_a_later_one(upstream, proxy_factory):
    big = github_scenario("paginate-issues.json")
    # a compression time shorter than a cold warm-up on a busy machine: the wait for the warm-up
    # must not count against it
    px = proxy_factory(ADDON_SCRIPT, options={"headroom_compress_timeout_seconds": 3})
    client = anthropic_client(upstream, px, timeout=120)
    # no wait for "headroom: ready": the harness returns once the port listens and the CA exists
    _send(client, anthropic_request(big))
    px.wait_for_log(r"headroom: ready", timeout=120, since_start=True)
    later = anthropic_request(big)
    later["system"][0]["text"] = "You are another coding agent."  # another conversation: planned afresh
    _send(client, later)
    first, second = upstream.requests
    assert first.json["system"][0]["text"] == "You are a coding agent."
    sent_first = first.json["messages"][2]["content"][0]["content"]
    sent_later = second.json["messages"][2]["content"][0]["content"]
    assert sent_first == sent_later and len(sent_first) < len(big) / 2
    log = px.log_text(since_start=True)
    assert "took over" not in log and "warming up" not in log
    with http_client(px) as c:
        health = c.get("http://headroom.localhost/health").json()
    assert health["ready"] is True
