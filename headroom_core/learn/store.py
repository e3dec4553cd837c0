"""The learner's database side: evidence, persisted rules, recent failures, lines fed back.

One SQLAlchemy session per call (a unit of work); every query is filtered by project, so one
project's rules and failures never reach another's requests. Concurrent proxy threads, and the
proxies of a team on one PostgreSQL, write the same rows at once: rows are written with
``INSERT … ON CONFLICT`` (:mod:`headroom_core.db.upsert`), so the primary keys decide, counters
lose no increment and the database logs no unique-constraint error.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Iterable, Sequence

from sqlalchemy import bindparam, case, delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from headroom_core.db.engine import core_connection
from headroom_core.db.upsert import dialect_insert, insert_ignore, upsert
from headroom_core.learn.models import LearnedRule, LearnEvidence, LearnFailure, LearnFedBack, LearnGeneration
from headroom_core.learn.pairing import corrects
from headroom_core.learn.rules import Rule, failure_key, show
from headroom_core.learn.steps import Step

if TYPE_CHECKING:
    from headroom_core.learn.offline import KnownProblem


def utcnow() -> datetime:
    """Naive UTC now (the database columns are naive UTC)."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


@dataclass(frozen=True)
class StoredRule:
    """A persisted rule as :func:`LearnStore.rules` returns it."""

    rule_id: str
    kind: str
    text: str
    evidence: int
    source: str
    supersede_key: str
    failure_key: str
    updated_at: datetime


def _hash(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


def pair_hash(failed: Step, fixed: Step) -> str:
    """Identity of a pair: the failed and the fixing call's signatures."""
    return _hash(failed.signature, fixed.signature)


#: Seconds a read of a project's recent failures is trusted at most, even with its write
#: generation unchanged: a backstop for writers that do not count (a proxy of an older version
#: during a rolling upgrade, a restored ``learn_generations`` table).
TRUST_SECONDS = 60.0
#: Sessions whose lines already given are remembered in memory.
GIVEN_SESSIONS = 4096


@dataclass(frozen=True)
class _Candidate:
    """A recent failure as a past-failures line: the line, its hash (as recorded in
    ``learn_fed_back``), when it was last seen, whether it is still recurring (not cleared
    since), and the one session it was seen in (None: seen in several)."""

    line: str
    line_hash: str
    last_seen_at: datetime
    recurring: bool
    only_session: str | None


@dataclass(frozen=True)
class _Recent:
    """A project's recent failures as read from the database: ``since`` the window start they
    were read with, at the project's write ``generation`` (:class:`~.models.LearnGeneration`),
    at ``read_at`` (``time.monotonic()`` seconds)."""

    since: datetime
    generation: int
    read_at: float
    candidates: tuple[_Candidate, ...]


class _Memory:
    """What this process read of one database's recent failures (per project, valid while the
    project's write generation is the same, at most :data:`TRUST_SECONDS`) and the lines each
    session was given (per session key, at most :data:`GIVEN_SESSIONS`)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.recent: dict[str, _Recent] = {}
        self.given: OrderedDict[str, frozenset[str]] = OrderedDict()

    def remember_given(self, key: str, hashes: frozenset[str]) -> None:
        with self.lock:
            self.given[key] = hashes
            self.given.move_to_end(key)
            while len(self.given) > GIVEN_SESSIONS:
                self.given.popitem(last=False)


def _wrote(s: Session, project: str) -> None:
    """Add one to ``project``'s write generation in the transaction of ``s``. Call it last,
    after the write's other statements (flushed): a writer then holds the generation row's lock
    only while it waits for nothing else, so the row adds no deadlock."""
    upsert(s, LearnGeneration, {"project": project, "generation": 1}, ["project"], update=(), add=("generation",))


#: built once: the ORM's statement building and session cost ~10 times the query itself
_GENERATION = select(LearnGeneration.generation).where(LearnGeneration.project == bindparam("project"))


def _generation(sessions: sessionmaker[Session], project: str) -> int:
    """``project``'s write generation (0 before its first write), read on a connection of the
    engine (SQLAlchemy Core: one primary-key read, its compiled form cached)."""
    with core_connection(sessions) as c:
        return c.execute(_GENERATION, {"project": project}).scalar() or 0


#: per database (its engine, or the sessionmaker when it has no bind): what this process read
_memories: "weakref.WeakKeyDictionary[object, _Memory]" = weakref.WeakKeyDictionary()
_memories_lock = threading.Lock()


class LearnStore:
    """Evidence, rules and failures in the database behind ``sessions``."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self.sessions = sessions

    def _memory(self) -> _Memory:
        db = self.sessions.kw.get("bind") or self.sessions
        with _memories_lock:
            mem = _memories.get(db)
            if mem is None:
                mem = _memories[db] = _Memory()
            return mem

    # -- evidence and rules -------------------------------------------------------------------

    def add_evidence(
        self, project: str, session_key: str, phash: str, rule: Rule, threshold: int, now: datetime | None = None
    ) -> bool:
        """Count one pair for ``rule`` (once per session: a pair already counted is ignored) and
        persist the rule when its distinct pairs reach ``threshold``, unless the reverse command
        rule also has evidence (a contradiction: both are then dropped). Returns True when the
        rule is persisted (or updated) by this call."""
        now = now or utcnow()
        with self.sessions() as s:
            row = dict(
                project=project,
                session_key=session_key,
                pair_hash=phash,
                rule_id=rule.id,
                rule_kind=rule.kind,
                rule_key=rule.key,
                text=rule.text,
                supersede_key=rule.supersede_key,
                failure_key=rule.failure_key,
                created_at=now,
            )
            if not insert_ignore(s, LearnEvidence, row, ["project", "session_key", "pair_hash"]):
                s.rollback()
                return False
            s.commit()
            n = (
                s.scalar(
                    select(func.count())
                    .select_from(LearnEvidence)
                    .where(LearnEvidence.project == project, LearnEvidence.rule_id == rule.id)
                )
                or 0
            )
            if rule.reverse_key:
                rev = (
                    s.scalar(
                        select(func.count())
                        .select_from(LearnEvidence)
                        .where(
                            LearnEvidence.project == project,
                            LearnEvidence.rule_kind == "command",
                            LearnEvidence.rule_key == rule.reverse_key,
                        )
                    )
                    or 0
                )
                if rev:
                    rev_ids = s.scalars(
                        select(LearnEvidence.rule_id).where(
                            LearnEvidence.project == project, LearnEvidence.rule_key == rule.reverse_key
                        )
                    ).all()
                    s.execute(
                        delete(LearnedRule).where(
                            LearnedRule.project == project, LearnedRule.rule_id.in_([rule.id, *rev_ids])
                        )
                    )
                    _wrote(s, project)
                    s.commit()
                    return False
            if n < threshold:
                return False
            self._upsert(s, project, rule, n, "live", now)
            _wrote(s, project)
            s.commit()
            return True

    def _upsert(self, s: Session, project: str, rule: Rule, evidence: int, source: str, now: datetime) -> None:
        if rule.supersede_key:
            s.execute(
                delete(LearnedRule).where(
                    LearnedRule.project == project,
                    LearnedRule.supersede_key == rule.supersede_key,
                    LearnedRule.rule_id != rule.id,
                )
            )
        ins = dialect_insert(s, LearnedRule)
        if ins is not None:  # one statement: proxies persisting the same rule at once both succeed
            stmt = ins.values(
                project=project,
                rule_id=rule.id,
                kind=rule.kind,
                rule_key=rule.key,
                text=rule.text,
                supersede_key=rule.supersede_key,
                failure_key=rule.failure_key,
                evidence=evidence,
                source=source,
                created_at=now,
                updated_at=now,
            )
            new = stmt.excluded
            s.execute(
                stmt.on_conflict_do_update(
                    index_elements=["project", "rule_id"],
                    set_={
                        "text": new.text,
                        "updated_at": new.updated_at,
                        "evidence": case(
                            (LearnedRule.evidence > new.evidence, LearnedRule.evidence), else_=new.evidence
                        ),
                        "source": case((LearnedRule.source == new.source, LearnedRule.source), else_="live+offline"),
                    },
                )
            )
            return
        row = s.get(LearnedRule, (project, rule.id))
        if row is None:
            s.add(
                LearnedRule(
                    project=project,
                    rule_id=rule.id,
                    kind=rule.kind,
                    rule_key=rule.key,
                    text=rule.text,
                    supersede_key=rule.supersede_key,
                    failure_key=rule.failure_key,
                    evidence=evidence,
                    source=source,
                    created_at=now,
                    updated_at=now,
                )
            )
        else:
            row.text, row.evidence, row.updated_at = rule.text, max(row.evidence, evidence), now
            if row.source != source:
                row.source = "live+offline"

    def save_rules(
        self, project: str, rules: Iterable[Rule], source: str = "offline", now: datetime | None = None
    ) -> int:
        """Persist rules learned offline (evidence: the larger of stored and new). Returns how
        many were given."""
        now = now or utcnow()
        n = 0
        with self.sessions() as s:
            for r in sorted(rules, key=lambda r: r.id):  # one order for every writer: no crosswise row locks
                self._upsert(s, project, r, r.evidence, source, now)
                s.flush()
                n += 1
            if n:
                _wrote(s, project)
            s.commit()
        return n

    def rules(self, project: str) -> list[StoredRule]:
        """The persisted rules of ``project``, most evidence first."""
        with self.sessions() as s:
            rows = s.scalars(select(LearnedRule).where(LearnedRule.project == project)).all()
            return sorted(
                (
                    StoredRule(
                        r.rule_id, r.kind, r.text, r.evidence, r.source, r.supersede_key, r.failure_key, r.updated_at
                    )
                    for r in rows
                ),
                key=lambda r: (-r.evidence, r.text),
            )

    def as_rules(self, project: str) -> list[Rule]:
        """The persisted rules of ``project`` as :class:`Rule` values (for the writers)."""
        with self.sessions() as s:
            rows = s.scalars(select(LearnedRule).where(LearnedRule.project == project)).all()
            return [Rule(r.kind, r.rule_key, r.text, r.supersede_key, r.failure_key, r.evidence) for r in rows]

    def evidence(self, project: str, rule_id: str) -> int:
        """Distinct live pairs (once per session) counted for a rule."""
        with self.sessions() as s:
            return (
                s.scalar(
                    select(func.count())
                    .select_from(LearnEvidence)
                    .where(LearnEvidence.project == project, LearnEvidence.rule_id == rule_id)
                )
                or 0
            )

    # -- failures and feedback ----------------------------------------------------------------

    def record_failures(
        self, project: str, session_key: str, failed: Sequence[Step], now: datetime | None = None
    ) -> None:
        """Note failed calls seen in ``session_key`` (the latest occurrence's details are kept)."""
        if not failed:
            return
        now = now or utcnow()
        with self.sessions() as s:
            if self._count_failures(s, project, session_key, failed, now):
                _wrote(s, project)
                s.commit()
                return
            for st in failed:
                fk = failure_key(st)
                row = s.get(LearnFailure, (project, fk))
                if row is None:
                    s.add(
                        LearnFailure(
                            project=project,
                            failure_key=fk,
                            tool=st.tool[:256],
                            command=st.command[:4000],
                            target=st.target,
                            args=st.args[:4000],
                            error=st.error,
                            count=1,
                            sessions=1,
                            last_session_key=session_key,
                            first_seen_at=now,
                            last_seen_at=now,
                            cleared_at=None,
                        )
                    )
                    s.flush()
                    continue
                row.count += 1
                if row.last_session_key != session_key:
                    row.sessions += 1
                row.tool, row.command, row.target, row.args, row.error = (
                    st.tool[:256],
                    st.command[:4000],
                    st.target,
                    st.args[:4000],
                    st.error,
                )
                row.last_session_key, row.last_seen_at = session_key, now
            try:
                s.flush()
                _wrote(s, project)
                s.commit()
            except IntegrityError:
                s.rollback()

    @staticmethod
    def _count_failures(s: Session, project: str, session_key: str, failed: Sequence[Step], now: datetime) -> bool:
        """:meth:`record_failures` as one upsert per failure, in failure-key order (so two
        writers never wait on each other's rows crosswise); False, doing nothing, on a backend
        without ``ON CONFLICT``."""
        if dialect_insert(s, LearnFailure) is None:
            return False
        for st in sorted(failed, key=failure_key):
            stmt = dialect_insert(s, LearnFailure).values(
                project=project,
                failure_key=failure_key(st),
                tool=st.tool[:256],
                command=st.command[:4000],
                target=st.target,
                args=st.args[:4000],
                error=st.error,
                count=1,
                sessions=1,
                last_session_key=session_key,
                first_seen_at=now,
                last_seen_at=now,
                cleared_at=None,
            )
            new = stmt.excluded
            s.execute(
                stmt.on_conflict_do_update(
                    index_elements=["project", "failure_key"],
                    set_={
                        "count": LearnFailure.count + 1,
                        "sessions": LearnFailure.sessions
                        + case((LearnFailure.last_session_key == new.last_session_key, 0), else_=1),
                        **{
                            c: getattr(new, c)
                            for c in ("tool", "command", "target", "args", "error", "last_session_key", "last_seen_at")
                        },
                    },
                )
            )
        return True

    def record_known_problems(
        self, project: str, problems: Sequence["KnownProblem"], now: datetime | None = None
    ) -> int:
        """Keep failures ``headroom learn`` found no fix for (:class:`~.offline.KnownProblem`) as
        failures of ``project`` for the past-failures block, dated by the log (``when``; now when
        the log has no time). A failure already recorded at a later time is left as it is; running
        twice over the same logs changes nothing. Returns how many rows were added or updated."""
        now = now or utcnow()
        for _attempt in range(2):  # a row a proxy inserted meanwhile fails the first; the second finds it
            n = self._record_known(project, problems, now)
            if n is not None:
                return n
        return 0

    def _record_known(self, project: str, problems: Sequence["KnownProblem"], now: datetime) -> int | None:
        """:meth:`record_known_problems` in one transaction; None when it lost a race (rolled back)."""
        n = 0
        with self.sessions() as s:
            try:
                for p in problems:
                    seen = _parse_time(p.when) or now
                    st = p.step
                    row = s.get(LearnFailure, (project, p.failure_key))
                    if row is None:
                        s.add(
                            LearnFailure(
                                project=project,
                                failure_key=p.failure_key,
                                tool=st.tool[:256],
                                command=st.command[:4000],
                                target=st.target,
                                args=st.args[:4000],
                                error=st.error,
                                count=p.count,
                                sessions=len(p.sources),
                                last_session_key=p.session[:64],
                                first_seen_at=seen,
                                last_seen_at=seen,
                                cleared_at=None,
                            )
                        )
                        n += 1
                    elif row.last_seen_at < seen:
                        row.count, row.sessions = max(row.count, p.count), max(row.sessions, len(p.sources))
                        row.error, row.last_seen_at, row.last_session_key = st.error, seen, p.session[:64]
                        n += 1
                    s.flush()  # a row a proxy inserted meanwhile raises here
                if n:
                    _wrote(s, project)
                s.commit()
            except IntegrityError:
                s.rollback()
                return None
        return n

    def clear_recovered(
        self, project: str, first_try: Sequence[Step], window: timedelta, now: datetime | None = None
    ) -> int:
        """Mark failures of the last ``window`` as cleared when one of ``first_try`` (calls that
        worked without failing first) corrects them: the error stopped recurring. Returns how
        many were cleared."""
        if not first_try:
            return 0
        now = now or utcnow()
        n = 0
        with self.sessions() as s:
            rows = s.scalars(
                select(LearnFailure).where(LearnFailure.project == project, LearnFailure.last_seen_at >= now - window)
            ).all()
            for row in rows:
                if row.cleared_at is not None and row.cleared_at >= row.last_seen_at:
                    continue
                f = _failed_step(row)
                if any(corrects(f, ok) for ok in first_try):
                    row.cleared_at = now
                    n += 1
            if n:
                s.flush()
                _wrote(s, project)
            s.commit()
        return n

    def past_failure_lines(
        self, project: str, session_key: str, window: timedelta, max_lines: int, now: datetime | None = None
    ) -> list[str]:
        """Up to ``max_lines`` lines for the past-failures block: the most recent failures of
        ``project`` in the last ``window`` that have not stopped recurring, each as its rule's
        sentence when a rule is known, else as "`cmd` failed (error)"; failures seen only in
        this very session and lines this session was already given are left out. The lines
        returned are recorded as given.

        Most requests have nothing new to give: what this process read of the project (kept
        while the project's write generation, one row, shows no write by any proxy since) and
        the lines it knows the session was given decide that with one primary-key read (and a
        fresh read at least every :data:`TRUST_SECONDS`); anything
        that may be given is read afresh and recorded in the database."""
        now = now or utcnow()
        since = now - window
        mem = self._memory()
        recent = self._recent(mem, project, since)
        todo = [
            c for c in recent.candidates if c.recurring and c.last_seen_at >= since and c.only_session != session_key
        ]
        if not todo:
            return []
        with mem.lock:
            known = mem.given.get(session_key)
        if known is not None and all(c.line_hash in known for c in todo):
            return []
        return self._give(mem, project, session_key, since, max_lines, now)

    def _recent(self, mem: _Memory, project: str, since: datetime) -> _Recent:
        """The project's recent failures as lines, from memory while no proxy wrote them since
        (the generation is read before the failures: a write between the two reads only makes
        the next request read them again)."""
        generation = _generation(self.sessions, project)
        with mem.lock:
            got = mem.recent.get(project)
        read_at = time.monotonic()
        if (
            got is not None
            and got.generation == generation
            and got.since <= since
            and read_at - got.read_at < TRUST_SECONDS
        ):
            return got
        with self.sessions() as s:
            got = _Recent(since, generation, read_at, _candidates(s, project, since))
        with mem.lock:
            mem.recent[project] = got
        return got

    def _give(
        self, mem: _Memory, project: str, session_key: str, since: datetime, max_lines: int, now: datetime
    ) -> list[str]:
        """:meth:`past_failure_lines` read afresh from the database, the lines given recorded."""
        with self.sessions() as s:
            candidates = _candidates(s, project, since)
            given = set(s.scalars(select(LearnFedBack.line_hash).where(LearnFedBack.session_key == session_key)).all())
            chosen: dict[str, str] = {}  # line hash -> line, in the candidates' order
            for c in candidates:
                if not c.recurring or c.only_session == session_key or c.line_hash in given or c.line_hash in chosen:
                    continue
                chosen[c.line_hash] = c.line
                if len(chosen) >= max_lines:
                    break
            fresh: set[str] = set()
            if chosen:
                # a line another thread (or proxy) gave this session just now is not given again
                # (in hash order: two requests of one session insert the same rows in one order,
                # so neither waits for a row the other holds while holding one it wants)
                fresh = {
                    h
                    for h in sorted(chosen)
                    if insert_ignore(
                        s,
                        LearnFedBack,
                        dict(session_key=session_key, line_hash=h, created_at=now),
                        ["session_key", "line_hash"],
                    )
                }
                s.commit()
        mem.remember_given(session_key, frozenset(given | fresh))
        return [line for h, line in chosen.items() if h in fresh]


def _candidates(s: Session, project: str, since: datetime) -> tuple[_Candidate, ...]:
    """The 50 failures of ``project`` seen most recently since ``since``, as lines."""
    rows = s.scalars(
        select(LearnFailure)
        .where(LearnFailure.project == project, LearnFailure.last_seen_at >= since)
        .order_by(LearnFailure.last_seen_at.desc())
        .limit(50)
    ).all()
    rules = (
        {r.failure_key: r.text for r in s.scalars(select(LearnedRule).where(LearnedRule.project == project)).all()}
        if rows
        else {}
    )
    return tuple(_candidate(row, rules) for row in rows)


def _candidate(row: LearnFailure, rules: dict[str, str]) -> _Candidate:
    line = rules.get(row.failure_key) or f"`{show(_failed_step(row))}` failed ({row.error or 'error'})"
    return _Candidate(
        line,
        _hash(line),
        row.last_seen_at,
        row.cleared_at is None or row.cleared_at < row.last_seen_at,
        row.last_session_key if row.sessions == 1 else None,
    )


def _parse_time(when: str) -> datetime | None:
    """Naive UTC of an ISO 8601 time (``...Z`` or with an offset), or None."""
    if not when:
        return None
    try:
        t = datetime.fromisoformat(when.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t.astimezone(timezone.utc).replace(tzinfo=None) if t.tzinfo else t


def _failed_step(row: LearnFailure) -> Step:
    try:
        keys = frozenset(json.loads(row.args)) if row.args.startswith("{") else frozenset()
    except ValueError:
        keys = frozenset()
    return Step(row.tool, row.command, row.target, row.args, keys, False, row.error, 0)
