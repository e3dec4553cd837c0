"""The ``memories`` table (created by ``migrations/versions/0002_memory.py``)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, DateTime, Float, Index, Integer, LargeBinary, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from headroom_core.db.models import Base

KINDS = ("fact", "rule", "preference", "pitfall")


class Memory(Base):
    """One thing an agent learned about a project, shared by every agent on that project.

    - ``id``: 12 lowercase hex digits (random), what the model passes to ``memory_update`` /
      ``memory_delete`` and what the injected block shows.
    - ``text``: one self-contained statement, secrets already redacted; ``text_hash`` the
      SHA-256 hex of its normalised form (exact-duplicate check without embeddings).
    - ``kind``: one of :data:`KINDS`.
    - ``project``: the project key (``headroom_core.project.resolve_project``); a memory is only
      ever read back for requests of the same project.
    - ``source``: the agent that saved it (User-Agent product, ``cli``, ``import``).
    - ``evidence``: how many times it was saved (near-duplicates merge into one row).
    - ``value``: usefulness in [0, 1] at ``max(last_used_at, updated_at)``; it decays with a
      half-life from there and rises on use (``headroom_core.memory.ranking``).
    - ``archived``: kept, but never injected or searched by the model.
    - ``embedding``: float32 little-endian bytes of the L2-normalised sentence embedding
      (384 dimensions for all-MiniLM-L6-v2), or None until the model has embedded it;
      ``embedding_model`` names the model that made it.
    Times are naive UTC.
    """

    __tablename__ = "memories"
    __table_args__ = (
        Index("ix_memories_project_archived_updated", "project", "archived", "updated_at"),
        Index("ix_memories_project_text_hash", "project", "text_hash"),
    )

    id: Mapped[str] = mapped_column(String(16), primary_key=True)
    text: Mapped[str] = mapped_column(Text)
    text_hash: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(16))
    project: Mapped[str] = mapped_column(String(512))
    source: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime)
    updated_at: Mapped[datetime] = mapped_column(DateTime)
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    evidence: Mapped[int] = mapped_column(Integer, default=1)
    value: Mapped[float] = mapped_column(Float, default=0.5)
    archived: Mapped[bool] = mapped_column(Boolean, default=False)
    embedding: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    embedding_model: Mapped[str | None] = mapped_column(String(64), nullable=True)
