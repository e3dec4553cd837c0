"""The past-failures block is asked for on every request; the store answers "nothing new for
this session" from memory with one primary-key read (the project's write generation), while
what it gives stays what the database holds: its own writes and another proxy's are seen by the
next request. A real SQLite file."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from sqlalchemy import event, text

from headroom_core.db.engine import open_database
from headroom_core.learn.offline import KnownProblem
from headroom_core.learn.rules import Rule, failure_key
from headroom_core.learn.steps import Step
from headroom_core.learn.store import TRUST_SECONDS, LearnStore

PROJECT = "/work/projects/recent"
DAY = timedelta(days=1)


def failed(cmd: str, error: str) -> Step:
    return Step(tool="Bash", command=cmd, target="", args=cmd, keys=frozenset(), ok=False, error=error, index=0)


PYTEST = failed("pytest tests", "pytest: command not found")
TWINE = failed("twine check dist/*", "No module named twine")


def statements(sessions) -> list[str]:
    """The SQL statements the store's engine runs from now on (a live list)."""
    seen: list[str] = []
    event.listen(sessions.kw["bind"], "before_cursor_execute", lambda *a: seen.append(a[2]))
    return seen


def two_proxies(tmp_path: Path) -> tuple[LearnStore, LearnStore]:
    """Two stores on one database file with an engine each, as two proxy processes have."""
    here = LearnStore(open_database(f"sqlite:///{tmp_path / 'team.db'}"))
    there = LearnStore(open_database(f"sqlite:///{tmp_path}/./team.db"))  # another URL: another engine
    assert here.sessions.kw["bind"] is not there.sessions.kw["bind"]
    return here, there


def test_nothing_new_is_answered_from_memory_and_own_writes_are_seen_at_once(tmp_path: Path):
    store = LearnStore(open_database(f"sqlite:///{tmp_path / 'h.db'}"))
    store.record_failures(PROJECT, "earlier", [PYTEST])
    assert store.past_failure_lines(PROJECT, "s1", DAY, 5) == ["`pytest tests` failed (pytest: command not found)"]
    sql = statements(store.sessions)
    for _ in range(3):
        assert store.past_failure_lines(PROJECT, "s1", DAY, 5) == []  # given once
    assert len(sql) == 3 and all("FROM learn_generations" in q for q in sql)  # one read of one row each
    # this process learns more: the next request of the session gets it, no wait
    store.record_failures(PROJECT, "earlier", [TWINE])
    assert store.past_failure_lines(PROJECT, "s1", DAY, 5) == ["`twine check dist/*` failed (No module named twine)"]
    # a rule for a failure already given is a new line (its sentence), given at once too
    rule = Rule(
        "command", "pytest tests", "`pytest tests` fails; use `python -m pytest tests`", "", failure_key(PYTEST), 5
    )
    store.save_rules(PROJECT, [rule])
    assert store.past_failure_lines(PROJECT, "s1", DAY, 5) == [rule.text]
    # another session of the project still gets everything, once
    assert sorted(store.past_failure_lines(PROJECT, "s2", DAY, 5)) == sorted(
        [rule.text, "`twine check dist/*` failed (No module named twine)"]
    )
    assert store.past_failure_lines(PROJECT, "s2", DAY, 5) == []


def test_another_proxys_write_is_seen_by_the_next_request(tmp_path: Path):
    here, there = two_proxies(tmp_path)
    here.record_failures(PROJECT, "earlier", [PYTEST])
    assert here.past_failure_lines(PROJECT, "s1", DAY, 5) == ["`pytest tests` failed (pytest: command not found)"]
    assert here.past_failure_lines(PROJECT, "s1", DAY, 5) == []  # remembered
    there.record_failures(PROJECT, "elsewhere", [TWINE])
    assert here.past_failure_lines(PROJECT, "s1", DAY, 5) == ["`twine check dist/*` failed (No module named twine)"]
    # a rule written by the other proxy shows at once, and a failure it cleared
    rule = Rule(
        "command", "pytest tests", "`pytest tests` fails; use `python -m pytest tests`", "", failure_key(PYTEST), 5
    )
    there.save_rules(PROJECT, [rule])
    assert here.past_failure_lines(PROJECT, "s1", DAY, 5) == [rule.text]
    fixed = Step(
        tool="Bash",
        command="python -m pytest tests",
        target="",
        args="python -m pytest tests",
        keys=frozenset(),
        ok=True,
        error="",
        index=1,
    )
    assert here.past_failure_lines(PROJECT, "s3", DAY, 5) != []  # remembered: something to give
    assert there.clear_recovered(PROJECT, [fixed], DAY) >= 1
    fresh = LearnStore(open_database(f"sqlite:///{tmp_path}/././team.db"))  # nothing remembered
    assert here.past_failure_lines(PROJECT, "s4", DAY, 5) == fresh.past_failure_lines(
        PROJECT, "s5", DAY, 5
    )  # cleared ones not given


def test_a_session_given_lines_by_another_proxy_is_not_given_them_again(tmp_path: Path):
    here, there = two_proxies(tmp_path)
    here.record_failures(PROJECT, "earlier", [PYTEST])
    assert there.past_failure_lines(PROJECT, "s1", DAY, 5) == ["`pytest tests` failed (pytest: command not found)"]
    assert here.past_failure_lines(PROJECT, "s1", DAY, 5) == []  # not in this process's memory: the database decides
    assert here.past_failure_lines("/work/projects/other", "s1", DAY, 5) == []


def test_evidence_and_known_problems_of_another_proxy_are_seen(tmp_path: Path):
    here, there = two_proxies(tmp_path)
    here.record_failures(PROJECT, "earlier", [PYTEST])
    assert here.past_failure_lines(PROJECT, "s1", DAY, 5) == ["`pytest tests` failed (pytest: command not found)"]
    assert here.past_failure_lines(PROJECT, "s1", DAY, 5) == []  # remembered
    # live evidence reaching the threshold: the failure's line becomes the rule's sentence
    rule = Rule(
        "command",
        "pytest tests\0python -m pytest tests",
        "`pytest tests` fails; use `python -m pytest tests`",
        "sup",
        failure_key(PYTEST),
        1,
    )
    assert there.add_evidence(PROJECT, "other", "pair1", rule, 1)
    assert here.past_failure_lines(PROJECT, "s1", DAY, 5) == [rule.text]
    assert here.past_failure_lines(PROJECT, "s3", DAY, 5) == [rule.text]
    assert here.past_failure_lines(PROJECT, "s3", DAY, 5) == []  # remembered
    # evidence for the reverse command: a contradiction deletes the rule, the plain line is new to s3
    rev = Rule("command", "python -m pytest tests\0pytest tests", "reverse", "sup2", failure_key(PYTEST), 1)
    assert not there.add_evidence(PROJECT, "other", "pair2", rev, 1)
    assert here.past_failure_lines(PROJECT, "s3", DAY, 5) == ["`pytest tests` failed (pytest: command not found)"]
    assert here.past_failure_lines(PROJECT, "s3", DAY, 5) == []  # remembered
    # a problem `headroom learn` found in logs on another machine
    there.record_known_problems(
        PROJECT, [KnownProblem(failure_key(TWINE), TWINE.command, TWINE.error, 2, ("log",), TWINE, "", "logsess")]
    )
    assert here.past_failure_lines(PROJECT, "s3", DAY, 5) == ["`twine check dist/*` failed (No module named twine)"]


def test_a_write_that_does_not_count_is_seen_after_the_trusted_seconds(tmp_path: Path):
    # a proxy of the version before the write generation (a rolling upgrade) writes failures
    # without counting them: the memory is read afresh after TRUST_SECONDS all the same
    here, there = two_proxies(tmp_path)
    here.record_failures(PROJECT, "earlier", [PYTEST])
    assert here.past_failure_lines(PROJECT, "s1", DAY, 5) == ["`pytest tests` failed (pytest: command not found)"]
    with there.sessions() as s:
        s.execute(text("UPDATE learn_generations SET generation = generation - 1"))  # undo the count of the next write
        s.commit()
    there.record_failures(PROJECT, "elsewhere", [TWINE])
    assert here.past_failure_lines(PROJECT, "s1", DAY, 5) == []  # trusted: the generation did not move
    mem = here._memory()
    mem.recent[PROJECT] = replace(mem.recent[PROJECT], read_at=time.monotonic() - TRUST_SECONDS)
    assert here.past_failure_lines(PROJECT, "s1", DAY, 5) == ["`twine check dist/*` failed (No module named twine)"]
