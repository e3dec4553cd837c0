"""The time a plan may add, in-process with a real runtime (plan_request_async, as the addons call
it): past its share of ``compress_timeout_seconds`` the walk compresses nothing new and finishes
on the decisions it has (the session's earlier messages and tools replayed), says so in its
reason and logs it once; with time the same request is compressed."""

from __future__ import annotations

import asyncio
import json
import logging

from headroom_core.plan_codes import Action, Code
from headroom_core.request_plan import plan_request_async
from tests.support.many_messages import AGENT_HEADERS
from tests.unit.test_request_plan import anthropic_request


def log_output(lines: int = 4000) -> str:
    return "\n".join(
        f"2026-12-02 10:{i // 60 % 60:02d}:{i % 60:02d} INFO worker-{i % 7} request {i} served in {i % 13} ms"
        for i in range(lines)
    )


def warm(rt) -> None:
    """What the proxy loads before it lets requests in (headroom_options: the database, the
    secret key, the extensions), as a first plan of another conversation."""
    rt.sessions, rt.sealer, rt.extensions
    asyncio.run(
        plan_request_async(
            rt,
            "POST",
            "/v1/messages",
            AGENT_HEADERS,
            json.dumps(anthropic_request("warm-up " * 50, "Hi")).encode(),
            600.0,
        )
    )


def test_past_its_time_a_plan_finishes_on_the_decisions_it_has(runtime, caplog):
    warm(runtime)
    body = json.dumps(anthropic_request(log_output())).encode()
    with caplog.at_level(logging.WARNING, logger="headroom"):
        late = asyncio.run(
            plan_request_async(runtime, "POST", "/v1/messages", AGENT_HEADERS, body, 0.000001, defer=True)
        )
    assert late.code is Code.FALLBACK and late.reason.startswith("compression timed out after"), late.reason
    assert "1 new tool outputs sent whole" in late.reason
    assert [r.getMessage() for r in caplog.records if "timed out" in r.getMessage()] == [
        caplog.records[0].getMessage()
    ]  # once
    sent = json.loads(late.body or body)
    client = json.loads(body)
    assert sent["messages"] == client["messages"]  # the output went whole
    assert [t["name"] for t in sent["tools"]] == [
        "github_api",
        "headroom_retrieve",
    ]  # the session's tools, fixed at its first request
    if late.persist is not None:
        late.persist()
    # with time, the next turn of the session decides the output it sent whole
    on_time = asyncio.run(plan_request_async(runtime, "POST", "/v1/messages", AGENT_HEADERS, body, 600.0, defer=True))
    assert on_time.code is Code.PLANNED and on_time.action is Action.REWRITE, on_time.reason
    assert [t["name"] for t in json.loads(on_time.body or b"{}")["tools"]] == ["github_api", "headroom_retrieve"]
