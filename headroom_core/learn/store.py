"""The learner's database side: evidence, persisted rules, recent failures, lines fed back.

One SQLAlchemy session per call (a unit of work); every query is filtered by project, so one
project's rules and failures never reach another's requests. Concurrent proxy threads may try
to insert the same row: the primary keys decide, and the loser's ``IntegrityError`` is expected.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
import time
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Iterable, Sequence

from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from headroom_core.learn.models import LearnedRule, LearnEvidence, LearnFailure, LearnFedBack
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


#: Seconds a project seen with no recent failure is taken to have none (by this process; its
#: own writes end that at once): the past-failures block is asked for on every request.
QUIET_SECONDS = 5.0
_quiet: dict[tuple[int, str], float] = {}


class LearnStore:
    """Evidence, rules and failures in the database behind ``sessions``."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self.sessions = sessions

    def _noisy(self, project: str) -> None:
        _quiet.pop((id(self.sessions.kw.get("bind")), project), None)

    # -- evidence and rules -------------------------------------------------------------------

    def add_evidence(self, project: str, session_key: str, phash: str, rule: Rule, threshold: int, now: datetime | None = None) -> bool:
        """Count one pair for ``rule`` (once per session: a pair already counted is ignored) and
        persist the rule when its distinct pairs reach ``threshold``, unless the reverse command
        rule also has evidence (a contradiction: both are then dropped). Returns True when the
        rule is persisted (or updated) by this call."""
        now = now or utcnow()
        with self.sessions() as s:
            if s.get(LearnEvidence, (project, session_key, phash)) is None:
                s.add(LearnEvidence(project=project, session_key=session_key, pair_hash=phash, rule_id=rule.id, rule_kind=rule.kind,
                                    rule_key=rule.key, text=rule.text, supersede_key=rule.supersede_key,
                                    failure_key=rule.failure_key, created_at=now))
                try:
                    s.commit()
                except IntegrityError:
                    s.rollback()
                    return False
            else:
                return False
            n = s.scalar(select(func.count()).select_from(LearnEvidence).where(LearnEvidence.project == project, LearnEvidence.rule_id == rule.id)) or 0
            if rule.reverse_key:
                rev = s.scalar(select(func.count()).select_from(LearnEvidence).where(
                    LearnEvidence.project == project, LearnEvidence.rule_kind == "command", LearnEvidence.rule_key == rule.reverse_key)) or 0
                if rev:
                    rev_ids = s.scalars(select(LearnEvidence.rule_id).where(LearnEvidence.project == project, LearnEvidence.rule_key == rule.reverse_key)).all()
                    s.execute(delete(LearnedRule).where(LearnedRule.project == project, LearnedRule.rule_id.in_([rule.id, *rev_ids])))
                    s.commit()
                    return False
            if n < threshold:
                return False
            self._upsert(s, project, rule, n, "live", now)
            s.commit()
            return True

    def _upsert(self, s: Session, project: str, rule: Rule, evidence: int, source: str, now: datetime) -> None:
        if rule.supersede_key:
            s.execute(delete(LearnedRule).where(LearnedRule.project == project, LearnedRule.supersede_key == rule.supersede_key,
                                                LearnedRule.rule_id != rule.id))
        row = s.get(LearnedRule, (project, rule.id))
        if row is None:
            s.add(LearnedRule(project=project, rule_id=rule.id, kind=rule.kind, rule_key=rule.key, text=rule.text,
                              supersede_key=rule.supersede_key, failure_key=rule.failure_key, evidence=evidence, source=source,
                              created_at=now, updated_at=now))
        else:
            row.text, row.evidence, row.updated_at = rule.text, max(row.evidence, evidence), now
            if row.source != source:
                row.source = "live+offline"

    def save_rules(self, project: str, rules: Iterable[Rule], source: str = "offline", now: datetime | None = None) -> int:
        """Persist rules learned offline (evidence: the larger of stored and new). Returns how
        many were given."""
        now = now or utcnow()
        n = 0
        with self.sessions() as s:
            for r in rules:
                self._upsert(s, project, r, r.evidence, source, now)
                s.flush()
                n += 1
            s.commit()
        return n

    def rules(self, project: str) -> list[StoredRule]:
        """The persisted rules of ``project``, most evidence first."""
        with self.sessions() as s:
            rows = s.scalars(select(LearnedRule).where(LearnedRule.project == project)).all()
            return sorted((StoredRule(r.rule_id, r.kind, r.text, r.evidence, r.source, r.supersede_key, r.failure_key, r.updated_at) for r in rows),
                          key=lambda r: (-r.evidence, r.text))

    def as_rules(self, project: str) -> list[Rule]:
        """The persisted rules of ``project`` as :class:`Rule` values (for the writers)."""
        with self.sessions() as s:
            rows = s.scalars(select(LearnedRule).where(LearnedRule.project == project)).all()
            return [Rule(r.kind, r.rule_key, r.text, r.supersede_key, r.failure_key, r.evidence) for r in rows]

    def evidence(self, project: str, rule_id: str) -> int:
        """Distinct live pairs (once per session) counted for a rule."""
        with self.sessions() as s:
            return s.scalar(select(func.count()).select_from(LearnEvidence).where(LearnEvidence.project == project, LearnEvidence.rule_id == rule_id)) or 0

    # -- failures and feedback ----------------------------------------------------------------

    def record_failures(self, project: str, session_key: str, failed: Sequence[Step], now: datetime | None = None) -> None:
        """Note failed calls seen in ``session_key`` (the latest occurrence's details are kept)."""
        if not failed:
            return
        self._noisy(project)
        now = now or utcnow()
        with self.sessions() as s:
            for st in failed:
                fk = failure_key(st)
                row = s.get(LearnFailure, (project, fk))
                if row is None:
                    s.add(LearnFailure(project=project, failure_key=fk, tool=st.tool[:256], command=st.command[:4000], target=st.target,
                                       args=st.args[:4000], error=st.error, count=1, sessions=1, last_session_key=session_key,
                                       first_seen_at=now, last_seen_at=now, cleared_at=None))
                    s.flush()
                    continue
                row.count += 1
                if row.last_session_key != session_key:
                    row.sessions += 1
                row.tool, row.command, row.target, row.args, row.error = st.tool[:256], st.command[:4000], st.target, st.args[:4000], st.error
                row.last_session_key, row.last_seen_at = session_key, now
            try:
                s.commit()
            except IntegrityError:
                s.rollback()

    def record_known_problems(self, project: str, problems: Sequence["KnownProblem"], now: datetime | None = None) -> int:
        """Keep failures ``headroom learn`` found no fix for (:class:`~.offline.KnownProblem`) as
        failures of ``project`` for the past-failures block, dated by the log (``when``; now when
        the log has no time). A failure already recorded at a later time is left as it is; running
        twice over the same logs changes nothing. Returns how many rows were added or updated."""
        self._noisy(project)
        now = now or utcnow()
        n = 0
        with self.sessions() as s:
            for p in problems:
                seen = _parse_time(p.when) or now
                st = p.step
                row = s.get(LearnFailure, (project, p.failure_key))
                if row is None:
                    s.add(LearnFailure(project=project, failure_key=p.failure_key, tool=st.tool[:256], command=st.command[:4000],
                                       target=st.target, args=st.args[:4000], error=st.error, count=p.count, sessions=len(p.sources),
                                       last_session_key=p.session[:64], first_seen_at=seen, last_seen_at=seen, cleared_at=None))
                    n += 1
                elif row.last_seen_at < seen:
                    row.count, row.sessions = max(row.count, p.count), max(row.sessions, len(p.sources))
                    row.error, row.last_seen_at, row.last_session_key = st.error, seen, p.session[:64]
                    n += 1
                s.flush()
            try:
                s.commit()
            except IntegrityError:
                s.rollback()
                return 0
        return n

    def clear_recovered(self, project: str, first_try: Sequence[Step], window: timedelta, now: datetime | None = None) -> int:
        """Mark failures of the last ``window`` as cleared when one of ``first_try`` (calls that
        worked without failing first) corrects them: the error stopped recurring. Returns how
        many were cleared."""
        if not first_try:
            return 0
        now = now or utcnow()
        n = 0
        with self.sessions() as s:
            rows = s.scalars(select(LearnFailure).where(LearnFailure.project == project, LearnFailure.last_seen_at >= now - window)).all()
            for row in rows:
                if row.cleared_at is not None and row.cleared_at >= row.last_seen_at:
                    continue
                f = _failed_step(row)
                if any(corrects(f, ok) for ok in first_try):
                    row.cleared_at = now
                    n += 1
            s.commit()
        return n

    def past_failure_lines(self, project: str, session_key: str, window: timedelta, max_lines: int, now: datetime | None = None) -> list[str]:
        """Up to ``max_lines`` lines for the past-failures block: the most recent failures of
        ``project`` in the last ``window`` that have not stopped recurring, each as its rule's
        sentence when a rule is known, else as "`cmd` failed (error)"; failures seen only in
        this very session and lines this session was already given are left out. The lines
        returned are recorded as given."""
        now = now or utcnow()
        quiet_key = (id(self.sessions.kw.get("bind")), project)
        if _quiet.get(quiet_key, 0.0) > time.monotonic():
            return []
        with self.sessions() as s:
            rows = s.scalars(select(LearnFailure).where(LearnFailure.project == project, LearnFailure.last_seen_at >= now - window)
                             .order_by(LearnFailure.last_seen_at.desc()).limit(50)).all()
            if not rows:
                _quiet[quiet_key] = time.monotonic() + QUIET_SECONDS
                return []
            rules = {r.failure_key: r.text for r in s.scalars(select(LearnedRule).where(LearnedRule.project == project)).all()}
            given = set(s.scalars(select(LearnFedBack.line_hash).where(LearnFedBack.session_key == session_key)).all())
            lines: list[str] = []
            for row in rows:
                if row.cleared_at is not None and row.cleared_at >= row.last_seen_at:
                    continue
                if row.sessions == 1 and row.last_session_key == session_key:
                    continue
                line = rules.get(row.failure_key) or f"`{show(_failed_step(row))}` failed ({row.error or 'error'})"
                h = _hash(line)
                if h in given or line in lines:
                    continue
                lines.append(line)
                if len(lines) >= max_lines:
                    break
            if not lines:
                return lines
            for line in lines:
                s.add(LearnFedBack(session_key=session_key, line_hash=_hash(line), created_at=now))
            try:
                s.commit()
            except IntegrityError:  # another thread gave this session the same lines just now
                s.rollback()
                return []
            return lines


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
