"""Readiness: requests wait for the proxy's warm-up (bounded), woken from the warm-up's thread."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time

from headroom_core.readiness import Readiness


def test_nothing_to_wait_for_unless_a_warm_up_began():
    r = Readiness()
    assert r.ended and r.ready
    assert asyncio.run(r.wait(0.0)) is True


def test_a_waiting_request_is_woken_by_the_warm_up_thread():
    r = Readiness()
    r.begin()
    assert not r.ended and not r.ready

    async def main() -> tuple[bool, float]:
        t0 = time.monotonic()
        threading.Timer(0.2, r.end).start()
        ok = await asyncio.gather(*(r.wait(600) for _ in range(5)))
        return all(ok), time.monotonic() - t0

    ok, waited = asyncio.run(main())
    assert ok and 0.2 <= waited < 600 and r.ready
    assert r._waiters == []


def test_a_failed_warm_up_ends_the_wait_but_is_not_ready():
    r = Readiness()
    r.begin()
    r.end("DatabaseError: no such host")
    assert r.ended and not r.ready
    assert asyncio.run(r.wait(600)) is True


def test_past_the_limit_a_request_goes_on_and_the_reason_is_logged_once(caplog):
    r = Readiness()
    r.begin()

    async def main() -> list[bool]:
        return [await r.wait(0.01), await r.wait(0.01)]

    with caplog.at_level(logging.WARNING, logger="headroom"):
        assert asyncio.run(main()) == [False, False]
    late = [m for m in caplog.messages if "still warming up" in m]
    assert len(late) == 1 and "logged once" in late[0]
    assert r._waiters == []
    r.end()
    assert asyncio.run(r.wait(0.0)) is True


def test_the_wait_for_the_warm_up_is_not_counted_in_the_compression_time(runtime):
    """A request planned while the warm-up still runs gets its whole compression time after it:
    the warm-up takes longer than the timeout, yet the request is compressed as it is later."""
    from headroom_core.request_plan import plan_request_async
    from tests.unit.test_request_plan import anthropic_request, github_scenario

    big = github_scenario("paginate-issues.json")
    body = json.dumps(anthropic_request(big)).encode()
    headers = {"content-type": "application/json", "x-api-key": "k", "anthropic-version": "2023-06-01"}
    runtime.ready.begin()

    async def main():
        # the warm-up ends 3 s on, after the 2 s the plan may take (it takes ~0.1 s)
        threading.Timer(3.0, runtime.ready.end).start()
        return await plan_request_async(runtime, "POST", "/v1/messages", headers, body, 2.0)

    t0 = time.monotonic()
    early = asyncio.run(main())
    assert time.monotonic() - t0 >= 3.0  # it did wait for the warm-up
    assert early.action == "rewrite" and early.code == "planned" and early.bytes_after < len(body) / 2, early.reason
