"""The turn lifecycle (headroom_core/turn.py) in-process, with plain futures and real threads:
a client's turns are learned from in its order, both futures of a turn always complete (also
when a waiter cancelled the store's), a proxy-tool answer never cancels the store, the ledger
row is built before the observers' future completes, and the one ledger entry point writes the
row the plan and the response say (a real database through a real ledger writer)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from types import SimpleNamespace

import pytest
from sqlalchemy import select

from headroom_core import ledger
from headroom_core import turn as turn_mod
from headroom_core.db.engine import open_database
from headroom_core.db.models import RequestOutcome, ToolUsage
from headroom_core.ledger_writer import LedgerWriter
from headroom_core.request_plan import Action, RequestPlan
from headroom_core.scope import Conversation, Scope
from headroom_core.turn import Turn, Turns, until_committed
from headroom_core.wire.blocks import ToolCall, Usage
from headroom_core.wire.detect import Dialect

BODY = {
    "model": "claude-sonnet-4",
    "messages": [{"role": "user", "content": "hi"}],
    "tools": [{"name": "Bash", "input_schema": {}}],
}


def _plan(context: object = None, **kw) -> RequestPlan:
    return RequestPlan(Action.PASSTHROUGH, "test: nothing to store", context=context, **kw)  # type: ignore[arg-type]


def _futures(t: Turn) -> Turn:
    t.stored, t.observed = concurrent.futures.Future(), concurrent.futures.Future()
    return t


class _Recorder:
    """A runtime whose observers and diagnostics note which request they saw, in order; an
    observer waits for ``hold[name]`` when there is one."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.diagnosed: list[str] = []
        self.hold: dict[str, threading.Event] = {}
        self.extensions = SimpleNamespace(observers=[self._observe], diagnostics=[self._diagnose])

    def _observe(self, rt: object, ctx: str) -> None:
        if ctx in self.hold:
            assert self.hold[ctx].wait(5)
        self.seen.append(ctx)

    def _diagnose(self, rt: object, ctx: str) -> None:
        self.diagnosed.append(ctx)


def test_observers_still_finish_when_the_store_future_was_cancelled():
    t = _futures(Turn(None, _plan()))
    assert t.stored is not None and t.stored.cancel()  # what a cancelled `await` on its asyncio wrapper did
    t.after_forwarding(None, None)
    assert t.observed is not None and t.observed.result(timeout=5) is None


def test_observers_wait_for_the_previous_turn_of_the_client():
    previous: concurrent.futures.Future = concurrent.futures.Future()
    t = _futures(Turn(None, _plan()))
    t.after_forwarding(previous, None)
    assert t.stored is not None and t.observed is not None
    assert t.stored.done() and not t.observed.done()  # stored at once; learning waits for the client's previous turn
    previous.set_result(None)
    assert t.observed.result(timeout=5) is None


def test_the_ledger_row_is_prepared_before_the_observers_future_completes():
    t = _futures(Turn(None, _plan(dialect=Dialect.ANTHROPIC_MESSAGES, client_body=BODY), user_agent="claude-cli/1.0"))
    assert t.observed is not None
    seen: list[object] = []
    t.observed.add_done_callback(lambda _: seen.append(t.prepared))
    t.after_forwarding(None, None)
    assert t.observed.result(timeout=5) is None
    (prepared,) = seen
    assert (
        isinstance(prepared, ledger.PreparedTurn) and prepared.offered == ("Bash",) and prepared.client == "claude-cli"
    )


def test_no_row_is_prepared_once_the_answer_built_its_own():
    t = _futures(Turn(None, _plan()))
    t.answered = True
    t.after_forwarding(None, None)
    assert t.observed is not None and t.observed.result(timeout=5) is None and t.prepared is None


def test_a_failing_row_build_still_completes_the_observers_future(monkeypatch):
    def boom(*a: object, **k: object) -> None:
        raise ValueError("cannot build the row")

    monkeypatch.setattr(ledger, "prepare_turn", boom)
    t = _futures(Turn(None, _plan()))
    t.after_forwarding(None, None)
    assert t.observed is not None and t.observed.result(timeout=5) is None and t.prepared is None


def test_a_cancelled_proxy_tool_answer_leaves_the_store_future_alone():
    async def scenario() -> bool:
        t = _futures(Turn(None, _plan()))
        task = asyncio.ensure_future(t.answer(ToolCall("c1", "headroom_retrieve", {})))
        await asyncio.sleep(0.01)
        task.cancel()  # the client went away while the answer waited for the store
        await asyncio.gather(task, return_exceptions=True)
        assert t.stored is not None
        return t.stored.cancelled()

    assert not asyncio.run(scenario())


def test_a_clients_turns_are_learned_from_in_its_order_and_other_clients_go_on():
    rt = _Recorder()
    rt.hold["a1"] = threading.Event()

    async def scenario() -> None:
        turns = Turns()
        try:
            a1 = turns.begin(rt, _plan("a1"), key="client a", user_agent="")
            a2 = turns.begin(rt, _plan("a2"), key="client a", user_agent="")
            b1 = turns.begin(rt, _plan("b1"), key="client b", user_agent="")
            assert a1.observed is not None and a2.observed is not None and b1.observed is not None
            await asyncio.wait_for(asyncio.wrap_future(b1.observed), 5)  # client b does not wait for client a
            assert rt.seen == ["b1"] and not a2.observed.done()
            wait = asyncio.ensure_future(turns.wait_previous("client a"))  # a3 is planned after a2 was learned from
            await asyncio.sleep(0.05)
            assert not wait.done()
            rt.hold["a1"].set()
            await asyncio.wait_for(wait, 5)
            assert a1.observed.done() and a2.observed.done() and rt.seen == ["b1", "a1", "a2"]
            await asyncio.wait_for(turns.wait_previous("client a"), 5)  # nothing pending: at once
            await asyncio.to_thread(turns._diagnostics.submit(lambda: None).result, 5)
            assert rt.diagnosed == ["b1", "a1", "a2"]  # in the order the observers finished
        finally:
            turns.close()

    asyncio.run(scenario())


def test_waiting_for_a_stuck_previous_turn_is_bounded(monkeypatch):
    monkeypatch.setattr(turn_mod, "AFTER_WAIT_SECONDS", 0.05)
    rt = _Recorder()
    rt.hold["stuck"] = threading.Event()

    async def scenario() -> None:
        turns = Turns()
        try:
            turns.begin(rt, _plan("stuck"), key="k", user_agent="")
            await asyncio.wait_for(turns.wait_previous("k"), 5)  # gives up after AFTER_WAIT_SECONDS
        finally:
            rt.hold["stuck"].set()
            turns.close()

    asyncio.run(scenario())


def test_durable_is_none_when_nothing_is_pending_and_waits_for_row_and_observers():
    done: concurrent.futures.Future = concurrent.futures.Future()
    done.set_result(None)
    t = Turn(None, _plan())
    assert t.durable(None, "w") is None and t.durable(done, "w") is None
    t.observed = concurrent.futures.Future()
    assert t.durable(done, "w", taught=False) is None
    waiting = t.durable(done, "w")
    assert waiting is not None

    async def scenario() -> None:
        task = asyncio.ensure_future(waiting)
        await asyncio.sleep(0.01)
        assert not task.done()
        assert t.observed is not None
        t.observed.set_result(None)
        await asyncio.wait_for(task, 5)

    asyncio.run(scenario())


def test_until_committed_gives_up_after_its_bound_and_never_cancels(monkeypatch, caplog):
    monkeypatch.setattr(turn_mod, "LEDGER_WAIT", 0.05)
    never: concurrent.futures.Future = concurrent.futures.Future()
    asyncio.run(until_committed(never, lambda: "the flow"))
    assert not never.cancelled() and "the flow: the ledger row is not committed" in caplog.text


def test_follow_up_is_cancelled_by_abandon():
    async def scenario() -> None:
        t = Turn(None, _plan())
        started = asyncio.Event()

        async def work() -> None:
            started.set()
            await asyncio.sleep(30)

        running = asyncio.ensure_future(t.follow_up(work()))
        await started.wait()
        assert t.abandon("stream reset by client (CANCEL)")
        with pytest.raises(asyncio.CancelledError):
            await running
        assert t.abandoned == "stream reset by client (CANCEL)"

    asyncio.run(scenario())


def test_an_abandoned_turn_starts_no_follow_up():
    """The client left before the proxy got to its follow-up: the work never starts (no request
    for nobody), and the awaiting hook sees the cancellation."""

    async def scenario() -> None:
        t = Turn(None, _plan())
        assert not t.abandon("Client disconnected.")  # nothing ran: nothing cancelled, but remembered
        ran: list[bool] = []

        async def work() -> None:
            ran.append(True)

        with pytest.raises(asyncio.CancelledError):
            await t.follow_up(work())
        assert ran == [] and t.abandoned == "Client disconnected."

    asyncio.run(scenario())


# -- the one ledger entry point ------------------------------------------------------------------


@pytest.fixture
def db(tmp_path):
    sessions = open_database(f"sqlite:///{tmp_path / 'h.db'}")
    writer = LedgerWriter(sessions)
    yield sessions, writer
    writer.close(5.0)


def _rows(sessions, writer: LedgerWriter) -> tuple[list[RequestOutcome], list[tuple]]:
    writer.flush(10.0)  # the tool counts too
    with sessions() as s:
        rows = list(s.execute(select(RequestOutcome)).scalars())
        tools = sorted((t.project, t.tool_name, t.offered, t.called) for t in s.execute(select(ToolUsage)).scalars())
    return rows, tools


def test_record_reads_usage_and_calls_from_the_response_and_prepared_or_not_writes_the_same_row(db):
    sessions, writer = db
    rt = SimpleNamespace(ledger=writer, extensions=SimpleNamespace(observers=[], diagnostics=[]))
    plan = RequestPlan(Action.REWRITE, "compressed 1 block", Dialect.ANTHROPIC_MESSAGES, client_body=BODY, project="/src/app", session_key="s",
                       bytes_before=900, bytes_after=400)  # fmt: skip
    resp = {
        "content": [{"type": "tool_use", "id": "t2", "name": "Bash", "input": {}}],
        "usage": {"input_tokens": 7, "output_tokens": 2},
    }
    prepared = _futures(Turn(rt, plan, user_agent="claude-cli/1.0"))
    prepared.after_forwarding(None, None)
    assert prepared.prepared is not None
    for t in (prepared, Turn(rt, plan, user_agent="claude-cli/1.0")):
        committed = t.record(status_code=200, response=resp)
        assert committed is not None and t.answered
        committed.result(timeout=10)
    rows, tools = _rows(sessions, writer)
    cols = [
        {
            c.name: getattr(r, c.name)
            for c in RequestOutcome.__table__.columns
            if c.name not in ("id", "created_at", "entry_id")
        }
        for r in rows
    ]
    assert len(cols) == 2 and cols[0] == cols[1]
    c = cols[0]
    assert (
        c["status_code"],
        c["usage_input_tokens"],
        c["usage_output_tokens"],
        c["action"],
        c["body_bytes_after"],
        c["client"],
    ) == (200, 7, 2, "compressed", 400, "claude-cli")
    assert tools == [("/src/app", "Bash", 2, 2)]


def test_record_under_the_conversation_that_named_its_project_and_unreachable(db):
    sessions, writer = db
    rt = SimpleNamespace(ledger=writer)
    plan = RequestPlan(Action.REWRITE, "compressed", Dialect.ANTHROPIC_MESSAGES, client_body=BODY, project="conversation:abc", session_key="s",
                       bytes_before=900, bytes_after=400)  # fmt: skip
    named = Conversation(Scope("/src/app", "", "0" * 32), "s")
    t = Turn(rt, plan, user_agent="claude-cli/1.0")
    t.record(status_code=200, usage=Usage(input_tokens=3), called=[], conversation=named).result(timeout=10)  # type: ignore[union-attr]
    u = Turn(rt, plan, user_agent="claude-cli/1.0")
    u.record(status_code=502, usage=Usage(), called=[], unreachable="upstream h:1 unreachable: refused").result(
        timeout=10
    )  # type: ignore[union-attr]
    rows, tools = _rows(sessions, writer)
    by = {r.status_code: r for r in rows}
    assert by[200].project == "/src/app" and by[200].action == "compressed" and by[200].usage_input_tokens == 3
    assert (by[502].project, by[502].action, by[502].outcome, by[502].body_bytes_after, by[502].tokens_after) == (
        "conversation:abc",
        "unreachable",
        "unreachable",
        900,
        0,
    )
    assert by[502].reason == "upstream h:1 unreachable: refused"
    assert ("/src/app", "Bash", 1, 0) in tools and ("conversation:abc", "Bash", 1, 0) in tools


def test_record_never_raises():
    t = Turn(SimpleNamespace(), _plan())  # a runtime without a ledger writer
    assert t.record(status_code=200) is None and t.answered
