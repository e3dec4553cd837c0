"""A long agent session through a real mitmdump on an Anthropic base-URL port (a fresh-user test:
a 13.7 MB body of 60,000 tiny tool turns took 30.7 s, past ``compress_timeout_seconds``).

- With a budget the plan cannot meet (``compress_timeout_seconds`` 0.000001, the test knob), the
  request goes upstream byte for byte as the client sent it, answered; the ledger row says the
  compression timed out (outcome ``timeout``) and the proxy logs it once.
- With the default budget a 60,000-message body is answered: the upstream gets the client's
  bytes (nothing in it to compress, no proxy tools for a client that is not an agent), the same
  body again and under a new ``x-headroom-session`` too, and the proxy's own writes of the
  session's state (60,000 rows) never trip its database lock-wait budget.

No wall-clock assertions: the timings are ``bench/bench_plan.py --cases many``'s."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.support.dialect_e2e import ledger_rows
from tests.support.many_messages import BASH, tool_turns
from tests.support.proxy import ADDON_SCRIPT, free_port
from tests.support.upstream import Reply

HEADERS = {
    "content-type": "application/json",
    "anthropic-version": "2023-06-01",
    "x-api-key": "test-key",
    "user-agent": "python-httpx/0.28",
}
#: The proxy offers no tools of its own (``headroom_retrieve`` only to bodies of a GB and more):
#: a request it does not compress goes upstream as sent, whether its plan finished in time or not.
NO_PROXY_TOOLS = {"headroom_retrieve_min_bytes": 1 << 30}
LOCKED = "the database was locked"


def body(n: int, big_output: str | None = None) -> bytes:
    """A Messages API body of ``n`` tiny tool turns; with ``big_output``, its last turn is one
    more ``Bash`` call whose result is that text (something the proxy would compress)."""
    msgs = tool_turns(n)
    if big_output is not None:
        msgs = tool_turns(n - 2 if n % 2 else n - 3)
        msgs.append(
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "toolu_big",
                        "name": "Bash",
                        "input": {"command": "journalctl -u app --no-pager"},
                    }
                ],
            }
        )
        msgs.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_big", "content": big_output}]}
        )
    return json.dumps(
        {"model": "claude-sonnet-4-20250514", "max_tokens": 512, "tools": [BASH], "messages": msgs},
        separators=(",", ":"),
    ).encode()


def service_log(lines: int = 3000) -> str:
    """A service's log (repetitive, so the proxy would shorten it)."""
    return "\n".join(
        f"2026-12-02 10:{i // 60 % 60:02d}:{i % 60:02d} INFO worker-{i % 7} request {i} served in {i % 13} ms"
        for i in range(lines)
    )


def base_proxy(proxy_factory, upstream, **options):
    """A Headroom proxy with an Anthropic base-URL port (``.base``) forwarding to ``upstream``,
    offering no tools of its own (:data:`NO_PROXY_TOOLS`)."""
    base = free_port()
    px = proxy_factory(
        ADDON_SCRIPT,
        options={**NO_PROXY_TOOLS, **options},
        args=["--mode", "regular", "--mode", f"reverse:{upstream.url}@{base}"],
    )
    px.base = base
    return px


def post(px, content: bytes, headers: dict[str, str] = HEADERS) -> httpx.Response:
    with httpx.Client(timeout=300) as c:
        return c.post(f"http://127.0.0.1:{px.base}/v1/messages", content=content, headers=headers)


def test_a_plan_past_a_small_budget_goes_upstream_as_sent(upstream, proxy_factory):
    px = base_proxy(proxy_factory, upstream, headroom_compress_timeout_seconds="0.000001")
    sent = body(60_000, big_output=service_log())
    upstream.script(Reply.text("checked"))
    r = post(px, sent)
    assert r.status_code == 200 and r.json()["content"][0]["text"] == "checked"
    (got,) = upstream.requests_to("/v1/messages")
    (row,) = ledger_rows(px, 1)
    # byte-identical: the log went whole (with time it goes shortened), nothing else changed; the
    # plan either stopped compressing and finished on earlier decisions (code fallback) or was
    # still going at the budget's end (abandoned): the reason says which
    assert got.body == sent, row.reason
    assert row.outcome == "timeout" and "compression timed out" in row.reason, (row.outcome, row.reason)
    assert row.body_bytes_before == row.body_bytes_after == len(sent)
    said = [line for line in px.log_text().splitlines() if "compression timed out" in line]
    assert len(said) == 1, said


def test_sixty_thousand_messages_are_answered_as_sent(upstream, proxy_factory):
    px = base_proxy(proxy_factory, upstream)
    sent = body(60_000)
    assert len(sent) > 10_000_000
    asks = [("first", HEADERS), ("again", HEADERS), ("new session", {**HEADERS, "x-headroom-session": "many-other"})]
    for name, headers in asks:
        upstream.script(Reply.text(f"answer {name}"))
        r = post(px, sent, headers)
        assert r.status_code == 200 and r.json()["content"][0]["text"] == f"answer {name}", name
        assert upstream.last.body == sent, name
    rows = ledger_rows(px, 3)
    # planned in time on any ordinary machine: unchanged (a machine too loaded for 10 s: timeout)
    assert [row.body_bytes_before for row in rows] == [len(sent)] * 3
    assert {row.outcome for row in rows} <= {"unchanged", "timeout"}, [(row.outcome, row.reason) for row in rows]
    assert LOCKED not in px.log_text(), [line for line in px.log_text().splitlines() if LOCKED in line]


@pytest.mark.parametrize("n", [1, 2, 7])
def test_the_bodies_end_with_the_users_message(n):
    msgs = json.loads(body(n))["messages"]
    assert len(msgs) == n and msgs[-1]["role"] == "user"
    big = json.loads(body(n + 3, big_output="x"))["messages"]
    assert big[-1]["content"][0]["content"] == "x" and big[-1]["role"] == "user"
