"""Tables of the failure learner (created by migration ``0003_learn``; ``learn_generations`` by
``0007_learn_generation``).

- :class:`LearnEvidence`: one failure -> correction pair seen live, counted once per session.
- :class:`LearnedRule`: a rule that reached its evidence threshold (live) or came from
  ``headroom learn`` (offline); per project.
- :class:`LearnFailure`: a failure seen live, per project, for the past-failures block.
- :class:`LearnFedBack`: which past-failure lines a session was already given.
- :class:`LearnGeneration`: per project, a counter every write of failures or rules adds one to.

Project keys are those of :func:`headroom_core.project.resolve_project` (the agent's working
directory, or the ``x-headroom-project`` header); nothing is ever shared across projects.
Commands and errors are redacted (:func:`headroom_core.learn.steps.redact`) before they get here.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, DateTime, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from headroom_core.db.models import Base

#: What a NUL character of a rule key is stored as (PostgreSQL's text cannot hold NUL).
NUL_STORED = "\u2400"


class RuleKey(TypeDecorator):
    """Text whose NUL characters (the separators of a rule's key, :class:`~headroom_core.learn.rules.Rule`)
    are stored as U+2400 SYMBOL FOR NULL and read back as NUL: PostgreSQL's ``text`` cannot hold
    NUL (psycopg raises ``DataError``), SQLite could. Comparisons bind the same way."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value, dialect):
        return None if value is None else value.replace("\0", NUL_STORED)

    def process_result_value(self, value, dialect):
        return None if value is None else value.replace(NUL_STORED, "\0")


class LearnEvidence(Base):
    """A pair (``pair_hash``: SHA-256 of the failed and the fixing call) supporting rule
    ``rule_id`` in ``project``, seen in ``session_key``: the primary key makes each pair count
    once per session. ``rule_kind``/``rule_key``/``text``/... describe the rule so it can be
    persisted when the evidence reaches the threshold."""

    __tablename__ = "learn_evidence"
    __table_args__ = (Index("ix_learn_evidence_rule", "project", "rule_id"),)

    project: Mapped[str] = mapped_column(String(512), primary_key=True)
    session_key: Mapped[str] = mapped_column(String(64), primary_key=True)
    pair_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    rule_id: Mapped[str] = mapped_column(String(64))
    rule_kind: Mapped[str] = mapped_column(String(32))
    rule_key: Mapped[str] = mapped_column(RuleKey)
    text: Mapped[str] = mapped_column(Text)
    supersede_key: Mapped[str] = mapped_column(String(64))
    failure_key: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime)


class LearnedRule(Base):
    """A persisted rule of ``project``: ``text`` (one sentence, no evidence count), ``evidence``
    (live: distinct pairs, once per session; offline: see :mod:`headroom_core.learn.rules`),
    ``source`` ``"live"`` or ``"offline"``."""

    __tablename__ = "learned_rules"

    project: Mapped[str] = mapped_column(String(512), primary_key=True)
    rule_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(32))
    rule_key: Mapped[str] = mapped_column(RuleKey)
    text: Mapped[str] = mapped_column(Text)
    supersede_key: Mapped[str] = mapped_column(String(64))
    failure_key: Mapped[str] = mapped_column(String(64), index=True)
    evidence: Mapped[int] = mapped_column(Integer)
    source: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(DateTime)
    updated_at: Mapped[datetime] = mapped_column(DateTime)


class LearnFailure(Base):
    """A failure seen live in ``project``: ``failure_key`` (:func:`~headroom_core.learn.rules.failure_key`),
    ``tool``/``command``/``target``/``args`` of the latest occurrence (redacted), ``error``, how
    often (``count``), in how many sessions, when first/last, the last session, and
    ``cleared_at`` when the corrected call later worked on its first try (the error stopped
    recurring)."""

    __tablename__ = "learn_failures"
    __table_args__ = (Index("ix_learn_failures_recent", "project", "last_seen_at"),)

    project: Mapped[str] = mapped_column(String(512), primary_key=True)
    failure_key: Mapped[str] = mapped_column(String(64), primary_key=True)
    tool: Mapped[str] = mapped_column(String(256))
    command: Mapped[str] = mapped_column(Text)
    target: Mapped[str] = mapped_column(Text)
    args: Mapped[str] = mapped_column(Text)
    error: Mapped[str] = mapped_column(Text)
    count: Mapped[int] = mapped_column(Integer)
    sessions: Mapped[int] = mapped_column(Integer)
    last_session_key: Mapped[str] = mapped_column(String(64))
    first_seen_at: Mapped[datetime] = mapped_column(DateTime)
    last_seen_at: Mapped[datetime] = mapped_column(DateTime)
    cleared_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)


class LearnFedBack(Base):
    """Session ``session_key`` was given the past-failure line ``line_hash`` (so a line is fed
    back once per session; the frozen prefix keeps it in later turns)."""

    __tablename__ = "learn_fed_back"

    session_key: Mapped[str] = mapped_column(String(64), primary_key=True)
    line_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(DateTime)


class LearnGeneration(Base):
    """How many times ``project``'s failures or rules were written (``generation``, +1 in the
    same transaction as each write): a proxy that remembers what it read of them reads this one
    row to know whether any proxy on the database wrote since (``migrations/versions/0007_learn_generation.py``)."""

    __tablename__ = "learn_generations"

    project: Mapped[str] = mapped_column(String(512), primary_key=True)
    generation: Mapped[int] = mapped_column(BigInteger)
