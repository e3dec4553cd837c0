"""The work after forwarding (addons/headroom_llm.py): a client's next request chains onto the
``observed`` future of its previous one, so that future must always complete, also when a
proxy-tool answer waiting for the session's store was cancelled."""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "addons"))

import headroom_llm  # noqa: E402
from headroom_core.request_plan import Action, RequestPlan  # noqa: E402
from headroom_core.wire.blocks import ToolCall  # noqa: E402


def _plan() -> RequestPlan:
    return RequestPlan(Action.PASSTHROUGH, "test: nothing to store or observe")


def test_observers_still_finish_when_the_store_future_was_cancelled():
    stored: concurrent.futures.Future = concurrent.futures.Future()
    observed: concurrent.futures.Future = concurrent.futures.Future()
    assert stored.cancel()  # what a cancelled `await` on its asyncio wrapper did
    headroom_llm._after_forwarding(None, _plan(), stored, observed, None)
    assert observed.result(timeout=5) is None


def test_observers_finish_once_after_the_previous_request_of_the_client():
    stored: concurrent.futures.Future = concurrent.futures.Future()
    observed: concurrent.futures.Future = concurrent.futures.Future()
    previous: concurrent.futures.Future = concurrent.futures.Future()
    headroom_llm._after_forwarding(None, _plan(), stored, observed, previous)
    assert stored.done() and not observed.done()  # waits for the client's previous turn
    previous.set_result(None)
    assert observed.result(timeout=5) is None


def test_a_cancelled_proxy_tool_answer_leaves_the_store_future_alone():
    async def scenario() -> tuple[bool, bool]:
        done_in_thread: concurrent.futures.Future = concurrent.futures.Future()
        st = headroom_llm.FlowState(_plan(), 0.0)
        st.stored = done_in_thread
        traffic = headroom_llm.LLMTraffic(None)  # type: ignore[arg-type]  # state unused before the store is done
        task = asyncio.ensure_future(traffic._answer(st, ToolCall("c1", "headroom_retrieve", {})))
        await asyncio.sleep(0.01)
        task.cancel()  # the client went away while the answer waited for the store
        await asyncio.gather(task, return_exceptions=True)
        return done_in_thread.cancelled()

    assert not asyncio.run(scenario())


def test_the_ledger_row_is_prepared_before_the_observers_future_completes():
    stored: concurrent.futures.Future = concurrent.futures.Future()
    observed: concurrent.futures.Future = concurrent.futures.Future()
    seen: list[bool] = []
    headroom_llm._after_forwarding(None, _plan(), stored, observed, None, lambda: seen.append(observed.done()))
    assert seen == [False] and observed.result(timeout=5) is None


def test_a_failing_prepare_still_completes_the_observers_future():
    stored: concurrent.futures.Future = concurrent.futures.Future()
    observed: concurrent.futures.Future = concurrent.futures.Future()

    def boom() -> None:
        raise ValueError("cannot build the row")

    headroom_llm._after_forwarding(None, _plan(), stored, observed, None, boom)
    assert observed.result(timeout=5) is None
