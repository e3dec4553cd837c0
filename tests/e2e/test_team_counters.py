"""Rows that several proxies of a team write at once: nothing fails on a primary key, no
increment is lost.

- per-tool usage (``tool_usage``, :func:`headroom_core.ledger._count_tools`): one atomic upsert
  per tool (:func:`headroom_core.db.upsert.upsert` with ``add=``);
- the live learner (:class:`headroom_core.learn.store.LearnStore`): evidence of one rule from
  many sessions at once persists the rule once with all of it; failures of the same call are all
  counted; a past-failure line is given to a session once. Real databases: SQLite (WAL) and PostgreSQL
(``HEADROOM_TEST_PG_URL`` or ``scripts/postgres``; skipped with the reason where there is none)."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

from sqlalchemy import select

from headroom_core.db.models import ToolUsage
from headroom_core.learn.models import LearnFailure
from headroom_core.learn.rules import Rule
from headroom_core.learn.steps import Step
from headroom_core.learn.store import LearnStore
from headroom_core.ledger import _count_tools
from headroom_core.ledger_entry import Entry
from headroom_core.ledger_writer import write_entries

THREADS = 8
ROUNDS = 25


def _at_once(work) -> None:
    """Run ``work(n)`` in THREADS threads released together; re-raise what any raised."""
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)

    def run(n: int) -> None:
        try:
            start.wait()
            work(n)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def _hammer(sessions) -> None:
    """Each thread counts the same tools ROUNDS times, each time in its own transaction."""

    def work(n: int) -> None:
        for _ in range(ROUNDS):
            # each its own transaction, as ledger writers of several proxies make them;
            # offered: Bash, Read (in either order); called: Bash
            e = Entry()
            offered = ["Bash", "Read"] if n % 2 else ["Read", "Bash"]
            _count_tools(e, "claude-code", "/team/p", offered, ["Bash"], datetime(2026, 1, 1))
            write_entries(sessions, [e])

    _at_once(work)
    with sessions() as s:
        rows = {
            r.tool_name: (r.offered, r.called)
            for r in s.scalars(select(ToolUsage).where(ToolUsage.project == "/team/p"))
        }
    assert rows == {"Bash": (THREADS * ROUNDS, THREADS * ROUNDS), "Read": (THREADS * ROUNDS, 0)}


RULE = Rule(
    "command",
    "pytest\0python -m pytest",
    "Run the tests with `python -m pytest`, not `pytest`.",
    "sup-pytest",
    "fail-pytest",
)
FAILED = Step(
    tool="Bash",
    command="pytest",
    target="",
    args="pytest tests",
    keys=frozenset(),
    ok=False,
    error="pytest: command not found",
    index=0,
)


def _learn(sessions) -> None:
    """Each thread is one session: a pair of evidence for RULE, the failing call ROUNDS times,
    then the past-failure lines of one shared session."""
    store = LearnStore(sessions)
    given: list[list[str]] = []

    def work(n: int) -> None:
        store.add_evidence("/team/p", f"session-{n}", f"pair-{n}", RULE, threshold=2)
        for _ in range(ROUNDS):
            store.record_failures("/team/p", f"session-{n}", [FAILED])
        given.append(store.past_failure_lines("/team/p", "session-new", timedelta(days=1), 5))

    _at_once(work)
    (rule,) = store.rules("/team/p")
    assert (rule.text, rule.evidence, rule.source) == (RULE.text, THREADS, "live")  # once, with every session's pair
    assert store.evidence("/team/p", RULE.id) == THREADS
    with sessions() as s:
        (failure,) = s.scalars(select(LearnFailure)).all()
    assert failure.count == THREADS * ROUNDS and 1 < failure.sessions <= THREADS * ROUNDS
    lines = [line for got in given for line in got]
    assert lines and len(lines) == len(set(lines))  # each line given to the session once, by one writer


def test_tool_usage_counted_concurrently(sessions):
    _hammer(sessions)


def test_learner_rows_written_concurrently(sessions):
    _learn(sessions)
