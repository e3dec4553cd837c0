"""One request's life after its plan, for HTTP and WebSocket alike (the addons translate flows
and frames into calls on it; nothing here knows mitmproxy).

A :class:`Turn` is a planned request the proxy forwarded (an HTTP request, a Responses
WebSocket ``response.create`` frame) or answered itself (refused, unreachable). What happens to
it, in this order:

1. **After forwarding, off the event loop** (:meth:`Turns.begin` schedules
   :meth:`Turn.after_forwarding` in a worker thread, in the loop's step after the request went
   out): the request's log line; the session's state stored (the plan's ``persist``; then
   :attr:`Turn.stored` is done); once the same client's previous turn's observers are done (its
   :attr:`Turn.observed`; the ordering key is the caller's: a client over HTTP,
   :func:`client_key`, a connection over WebSocket), a conversation that named its project late
   moved to it (:mod:`headroom_core.conversation_move`), the observers (live learning, memory
   capture: :func:`~headroom_core.request_plan.run_observers`), the ledger row built as far as the
   plan knows it (:func:`~headroom_core.ledger.prepare_turn`), the diagnostics (the prefix log)
   queued on one thread in the order the observers finished; then :attr:`Turn.observed` is done.
   Errors are logged, never raised; both futures always complete.
2. **The proxy's own tools** (:meth:`Turn.answer`): answered in a worker thread once the
   session's state is stored (the originals a ``headroom_retrieve`` call asks for were stored
   before the request was forwarded: :mod:`headroom_core.originals_first`).
3. **The answer's end** (:meth:`Turn.record`, the proxy's one way into the ledger): the
   response's figures added to the row and the row journaled and queued for the ledger's writer
   thread; :meth:`Turn.durable` is what the client's answer (the HTTP response, the frame that
   ends a WebSocket turn) waits for: the row durable (:func:`until_committed`: in the journal at
   once, else committed) and what the request taught written (a team's other proxy, sharing the
   database, may get the client's next turn).

The ordering contract: a client's turns are learned from in order (each turn's observers wait
for the previous turn's), a client's next request is planned once the previous one's state is
stored and learned from (HTTP: :meth:`Turns.wait_previous`, bounded), a proxy-tool answer never
cancels the store it waits for, and a failing row build never keeps the observers' future
open. ``tests/unit/test_turn.py`` checks it with plain futures.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import hashlib
import logging
from concurrent.futures import Future
from typing import Any, Callable, Coroutine, Mapping, TypeVar

from headroom_core import ledger
from headroom_core.extensions import answer_call
from headroom_core.request_plan import RequestPlan, run_diagnostics, run_observers
from headroom_core.scope import Conversation, credential
from headroom_core.wire.blocks import ToolCall, Usage
from headroom_core.wire.dialects import dialect as wire_dialect
from headroom_core.ws_conversation import Adoption

log = logging.getLogger("headroom")

T = TypeVar("T")

#: Longest a request waits for its client's previous request to finish storing (seconds).
AFTER_WAIT_SECONDS = 30.0
#: Longest an answer waits for its ledger row to be committed (seconds).
LEDGER_WAIT = 2.0
#: Longest an answer waits for the observers of its request (seconds).
TAUGHT_WAIT = 10.0
#: Clients whose latest turn's observers are kept (a done one is dropped past this many).
AFTER_KEEP = 256


def client_key(headers: Mapping[str, str], path: str) -> str:
    """Who sent a request, for ordering one client's turns: a SHA-256 hex digest of its
    credential and project header (kept in memory only). ``headers``: lowercase names."""
    return hashlib.sha256(
        f"{credential(headers, path)}\0{headers.get('x-headroom-project', '')}".encode("utf-8", "surrogatepass")
    ).hexdigest()


class Turn:
    """One planned request from its forwarding to its ledger row (module docstring).

    ``rt``: the runtime it was planned with (``ledger``, ``extensions``; None only in tests of
    the ordering); ``plan``: its plan; ``user_agent``: the client's User-Agent (the ledger's
    client); ``observe_as``: the plan the observers see, when it is not ``plan`` (a WebSocket
    frame seen as the connection's whole conversation); ``move``: the conversation this turn
    gave its project (its earlier rows move before the observers run); ``announce``: the
    request's log line, written from the worker thread (a log record costs the event loop
    ~0.2 ms: mitmproxy turns each into an ``add_log`` event for every addon).

    ``stored`` and ``observed`` are None for a turn with nothing to do after forwarding (refused,
    signed, not planned); else thread futures, completed as the module docstring says.
    """

    def __init__(
        self,
        rt: Any,
        plan: RequestPlan,
        *,
        user_agent: str = "",
        observe_as: RequestPlan | None = None,
        move: Adoption | None = None,
        announce: Callable[[], None] | None = None,
    ) -> None:
        self.rt = rt
        self.plan = plan
        self.user_agent = user_agent
        self.observe_as = observe_as
        self.move = move
        self.announce = announce
        self.stored: Future | None = None
        self.observed: Future | None = None
        #: the ledger row as far as the plan knows it, built off the loop once the observers ran
        self.prepared: ledger.PreparedTurn | None = None
        #: the answer ended (:meth:`record` ran): the row is built there if it was not prepared
        self.answered = False
        self._follow_up: asyncio.Task | None = None
        #: why the client left (:meth:`abandon`); None while it is there
        self.abandoned: str | None = None

    # -- 1. after forwarding (a worker thread) -------------------------------------------------

    def after_forwarding(self, previous: Future | None, diagnostics: concurrent.futures.Executor | None) -> None:
        """The work after forwarding (module docstring, step 1), in the calling (worker) thread:
        ``previous`` is the observers' future of the same client's previous turn (None: none
        pending), ``diagnostics`` the one-thread executor of the diagnostics (None: not run).
        Returns at once when ``previous`` is still running: the rest runs in the thread that
        completes it. Never raises."""
        stored, observed = self.stored, self.observed
        assert stored is not None and observed is not None, "Turns.begin makes the futures"
        try:
            if self.announce is not None:
                self.announce()
        except Exception:  # noqa: BLE001 - a log line never stops the bookkeeping
            pass
        try:
            if self.plan.persist is not None:
                self.plan.persist()
        except Exception:  # noqa: BLE001 - the request went on; the next turn starts anew
            log.exception("headroom: could not store the session's state for the next turn")
        finally:
            if not stored.done():  # cancelled by an awaiting task that was cancelled
                stored.set_result(None)

        def observe(_: object = None) -> None:
            try:
                self._move_conversation()
                run_observers(self.rt, self.observe_as or self.plan)
            except Exception:  # noqa: BLE001 - run_observers logs its observers' errors; anything else too
                log.exception("headroom: the observers of a request failed")
            try:
                if not self.answered:  # else the answer's end built the row itself
                    self.prepared = ledger.prepare_turn(self.plan, user_agent=self.user_agent)
            except Exception:  # noqa: BLE001 - the answer's end builds the row itself then
                log.exception("headroom: could not prepare the request's ledger row")
            finally:
                try:
                    if diagnostics is not None:  # before the next turn's observers can queue theirs
                        diagnostics.submit(run_diagnostics, self.rt, self.plan)
                except RuntimeError:  # shutting down
                    pass
                if not observed.done():
                    observed.set_result(None)

        if previous is None:
            observe()
        else:
            previous.add_done_callback(observe)  # now if done, else in the thread that finishes it

    def _move_conversation(self) -> None:
        """What the connection's earlier turns kept under its own conversation's project moves
        to the project this turn named (once the ledger's queue is written)."""
        move = self.move
        if move is None:
            return
        from headroom_core import conversation_move  # SQLAlchemy models: only when one moves

        try:
            self.rt.ledger.flush(30.0)
            moved = conversation_move.move_conversation(self.rt.sessions, move)
            log.info(
                "headroom: WebSocket conversation %s moved to its project: %s",
                move.old_project,
                {k: v for k, v in moved.items() if v},
            )
        except Exception:  # noqa: BLE001 - the rows stay where they are; traffic goes on
            log.exception("headroom: could not move the WebSocket conversation's rows to its project")

    # -- 2. the proxy's own tools ----------------------------------------------------------------

    async def until_stored(self) -> None:
        """Return once the session's state is stored (at most :data:`AFTER_WAIT_SECONDS`): the
        client's next turn may reach another proxy of a team (one database), which must find it."""
        if self.stored is not None and not self.stored.done():
            await asyncio.wait([asyncio.wrap_future(self.stored)], timeout=AFTER_WAIT_SECONDS)

    async def answer(self, call: ToolCall) -> str:
        """The result text of the model's ``call`` to one of the proxy's tools
        (:func:`~headroom_core.extensions.answer_call` in a worker thread), once the session's
        state of this request is stored (its originals were, before it was forwarded).
        Cancelling it never cancels the store."""
        if self.stored is not None and not self.stored.done():
            # shielded: a cancelled answer must not cancel the store's future through its wrapper
            await asyncio.shield(asyncio.wrap_future(self.stored))
        return await asyncio.to_thread(answer_call, self.rt, self.plan.context, call)

    async def follow_up(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` (the proxy answering its tools and sending the follow-up requests of
        this turn) as the turn's follow-up task; :meth:`abandon` cancels it. The one place a
        follow-up runs, so the one place it is stopped. Raises ``asyncio.CancelledError`` when
        the turn was abandoned (before: ``work`` never starts; meanwhile: it is cancelled where
        it waits, an HTTP request closing its connection)."""
        if self.abandoned is not None:
            work.close()
            raise asyncio.CancelledError(self.abandoned)
        task = asyncio.ensure_future(work)
        self._follow_up = task
        try:
            return await task
        finally:
            self._follow_up = None

    def abandon(self, why: str = "the client left") -> bool:
        """The client left (``why``): cancel the running :meth:`follow_up` at once, and refuse
        any later one, so no request is sent for nobody. Returns whether a running follow-up was
        cancelled. Call from the event loop."""
        if self.abandoned is None:
            self.abandoned = why
        task = self._follow_up
        return task is not None and task.cancel(why)

    # -- 3. the answer's end -------------------------------------------------------------------

    def record(
        self,
        *,
        status_code: int | None,
        usage: Usage | None = None,
        response: dict[str, Any] | None = None,
        rounds: int = 0,
        called: list[str] | None = None,
        conversation: Conversation | None = None,
        unreachable: str | None = None,
    ) -> Future | None:
        """Journal and queue the turn's ledger row for the runtime's ledger writer: returns the
        future of its commit (:func:`~headroom_core.ledger.finish_turn`), None when nothing was
        queued (the error is logged: the ledger never breaks traffic). Call once, at the
        answer's end.

        ``usage`` and ``called`` (the tool names the model called) are read from ``response``
        (a non-streamed response object, through the plan's dialect) when not given;
        ``rounds``: the proxy's follow-ups. ``conversation``: the conversation the row belongs to
        when it is not the plan's (a WebSocket connection that named its project after this
        turn was planned). ``unreachable``: why the upstream could not be reached (the row then
        says so and counts nothing saved: the request reached no model)."""
        self.answered = True
        try:
            prepared = self.prepared or ledger.prepare_turn(self.plan, user_agent=self.user_agent)
            plan = prepared.plan
            wire = wire_dialect(plan.dialect) if plan.dialect is not None else None
            if usage is None:
                usage = wire.usage(response) if wire is not None and response else Usage()
            if called is None:
                called = [c.name for c in wire.response_tool_calls(response)] if wire is not None and response else []
            if conversation is not None:
                prepared = _under(prepared, conversation)
            if unreachable is not None:
                prepared = _unreachable(prepared, unreachable)
            return ledger.finish_turn(
                prepared, status_code=status_code, usage=usage, rounds=rounds, called=called, writer=self.rt.ledger
            )
        except Exception:  # noqa: BLE001 - the ledger never breaks traffic
            log.exception("headroom: could not record the request outcome")
            return None

    def durable(
        self, committed: Future | None, where: str | Callable[[], str], *, taught: bool = True
    ) -> Coroutine[Any, Any, None] | None:
        """What the answer's end waits for: :func:`until_committed` of ``committed`` (the row's
        commit, :meth:`record`) and, with ``taught``, of the turn's observers; None when both
        are done (nothing to await: a sync hook stays sync). ``where``: the flow for a log line."""
        observed = self.observed if taught else None
        if (committed is None or committed.done()) and (observed is None or observed.done()):
            return None
        return until_committed(committed, where, observed)


def _under(prepared: ledger.PreparedTurn, conversation: Conversation) -> ledger.PreparedTurn:
    """``prepared`` as the row of ``conversation``'s project (as if planned under it)."""
    project = conversation.scope.project
    prepared.entry.rows[-1]["project"] = project[:512]
    return dataclasses.replace(
        prepared, plan=dataclasses.replace(prepared.plan, project=project, conversation=conversation)
    )


def _unreachable(prepared: ledger.PreparedTurn, why: str) -> ledger.PreparedTurn:
    """``prepared`` as the row of a request whose upstream could not be reached (``why``): action
    and outcome ``unreachable``, nothing compressed or saved, no tool figures."""
    row = prepared.entry.rows[-1]
    row.update(
        action="unreachable", outcome="unreachable", reason=why[:300],
        tokens_before=0, tokens_after=0, blocks_compressed=0, body_bytes_after=row.get("body_bytes_before", 0), detail="[]",
    )  # fmt: skip
    return dataclasses.replace(prepared, plan=dataclasses.replace(prepared.plan, tools=None))


class Turns:
    """The turns of one addon: per ordering key, the observers' future of its latest turn, and
    the one thread the diagnostics run on. :meth:`close` at shutdown."""

    def __init__(self) -> None:
        #: per ordering key: the observers' run of its latest turn
        self._after: dict[str, Future] = {}
        #: the diagnostics (the prefix log) of every turn, one at a time in the order their
        #: observers finished (a key's observers run in its turns' order, so its turns are recorded
        #: in order); a backlog waits in this queue, nothing waits for it
        self._diagnostics = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="headroom-diagnostics"
        )

    async def wait_previous(self, key: str) -> None:
        """Return once the previous turn of ``key`` stored its session's state and was learned
        from (its observers' future), at most :data:`AFTER_WAIT_SECONDS` (a stuck store never
        stops traffic): a request planned after it sees both."""
        before = self._after.get(key)
        if before is not None and not before.done():
            await asyncio.wait([asyncio.wrap_future(before)], timeout=AFTER_WAIT_SECONDS)

    def begin(
        self,
        rt: Any,
        plan: RequestPlan,
        *,
        key: str,
        user_agent: str,
        observe_as: RequestPlan | None = None,
        move: Adoption | None = None,
        announce: Callable[[], None] | None = None,
    ) -> Turn:
        """A forwarded turn (:class:`Turn`'s arguments), its work after forwarding scheduled in a
        worker thread in the running event loop's NEXT step: mitmproxy writes the request
        upstream in this one, right after the hook returns; a worker thread taking the GIL
        meanwhile slowed that write by ~4 ms a request (``bench/bench_proxy.py``). Its observers
        follow those of ``key``'s previous turn. Call from the event loop."""
        turn = Turn(rt, plan, user_agent=user_agent, observe_as=observe_as, move=move, announce=announce)
        # thread futures: nothing wakes the event loop when they complete unless a hook awaits one
        turn.stored, turn.observed = Future(), Future()
        before = self._after.get(key)
        previous = before if before is not None and not before.done() else None
        loop = asyncio.get_running_loop()
        loop.call_soon(loop.run_in_executor, None, turn.after_forwarding, previous, self._diagnostics)
        self._after[key] = turn.observed
        if len(self._after) > AFTER_KEEP:  # keys whose latest observers are done: forgotten
            self._after = {k: f for k, f in self._after.items() if not f.done()}
        return turn

    def close(self) -> None:
        """At shutdown: diagnostics not yet run are dropped."""
        self._diagnostics.shutdown(wait=False, cancel_futures=True)


async def until_committed(
    committed: Future | None, where: str | Callable[[], str], taught: Future | asyncio.Future | None = None
) -> None:
    """Return once ``committed`` (the future :meth:`~headroom_core.ledger_writer.LedgerWriter.submit`
    returned) and ``taught`` (the request's observers' run, a thread's or the event loop's
    future) are done, each or both None, or after :data:`LEDGER_WAIT` / :data:`TAUGHT_WAIT`
    seconds (logged with ``where``, the flow's description, or a function giving it: called only
    then). Waits for both at once; never cancels them, never raises.

    An answer goes to the client once its ledger row is durable: in the ledger journal, which
    takes microseconds and needs no wait (:mod:`headroom_core.ledger_journal`), else committed;
    a proxy killed at any moment has every answered request on disk (in the journal, written to
    the database by the next start)."""
    waits = [
        (f, s, what)
        for f, s, what in (
            (committed, LEDGER_WAIT, "the ledger row is not committed"),
            (taught, TAUGHT_WAIT, "learning from the request is not written"),
        )
        if f is not None and not f.done()
    ]
    if len(waits) == 1:  # the usual case: no task for a second wait
        await _bounded(*waits[0], where)
    elif waits:
        await asyncio.gather(*(_bounded(f, s, what, where) for f, s, what in waits))


async def _bounded(f: Future | asyncio.Future, seconds: float, what: str, where: str | Callable[[], str]) -> None:
    done, _ = await asyncio.wait({asyncio.wrap_future(f)}, timeout=seconds)
    if not done:
        log.warning(
            "headroom: %s: %s after %.0f s; answering anyway", where() if callable(where) else where, what, seconds
        )
