"""Declarative SQLAlchemy models. Every table is created by an Alembic migration in ``migrations/``."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, DateTime, Index, Integer, LargeBinary, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from headroom_core.db.types import AnyText


class Base(DeclarativeBase):
    """Base of all Headroom tables."""


class Original(Base):
    """An offloaded original, byte-exact, under its retrieval key (24 hex digits of SHA-256).

    ``size_bytes`` is the UTF-8 size of ``text``; ``last_used_at`` drives LRU eviction and the
    time-to-live (both in the originals store).
    """

    __tablename__ = "originals"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    text: Mapped[str] = mapped_column(AnyText)  # any JSON string, lone surrogates included
    kind: Mapped[str] = mapped_column(String(32))
    size_bytes: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    last_used_at: Mapped[datetime] = mapped_column(DateTime, index=True)


class CompressionDecision(Base):
    """A compression decision cached by content hash, so a block compresses to the same bytes
    on every later turn (and after restarts): the prompt-cache prefix stays byte-stable.

    ``content_hash`` is the SHA-256 hex of the compressor version, kind and input text;
    ``changed`` False records "leave it as it is" (``result_text`` is then empty).
    """

    __tablename__ = "compression_decisions"

    content_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    changed: Mapped[bool] = mapped_column(Boolean)
    result_text: Mapped[str] = mapped_column(AnyText)  # any JSON string, lone surrogates included
    kind: Mapped[str] = mapped_column(String(32))
    strategy: Mapped[str] = mapped_column(String(32))
    reason: Mapped[str] = mapped_column(String(300))
    offload_key: Mapped[str | None] = mapped_column(String(64), nullable=True)
    tokens_before: Mapped[int] = mapped_column(Integer)
    tokens_after: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime)


class SessionState(Base):
    """What the proxy has added to one client session (so it stays added, at the same place).

    ``session_key`` is derived from the request (DESIGN.md: system prompt and first user message)
    or given by the ``x-headroom-session`` header.
    """

    __tablename__ = "session_state"

    session_key: Mapped[str] = mapped_column(String(64), primary_key=True)
    dialect: Mapped[str] = mapped_column(String(32))
    retrieve_tool: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    updated_at: Mapped[datetime] = mapped_column(DateTime)


class RequestOutcome(Base):
    """One record per LLM request that passed the proxy: the savings ledger.

    Token figures: ``tokens_before``/``tokens_after`` are our estimates of the considered tool
    outputs, ``tools_tokens_*`` of the ``tools`` definitions (cl100k_base unless configured); ``usage_*`` are the provider's own figures from the response
    (None when the response gave none). ``detail`` is JSON text: per-block kinds and reasons.
    """

    __tablename__ = "request_outcomes"
    __table_args__ = (Index("ix_request_outcomes_created_at", "created_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    dialect: Mapped[str] = mapped_column(String(32))
    client: Mapped[str] = mapped_column(String(64))
    model: Mapped[str] = mapped_column(String(128))
    session_key: Mapped[str] = mapped_column(String(64))
    project: Mapped[str] = mapped_column(String(512), default="global")
    action: Mapped[str] = mapped_column(String(32))  # compressed | unchanged | bypass | rejected | error
    reason: Mapped[str] = mapped_column(String(300))
    body_bytes_before: Mapped[int] = mapped_column(Integer)
    body_bytes_after: Mapped[int] = mapped_column(Integer)
    tokens_before: Mapped[int] = mapped_column(Integer)
    tokens_after: Mapped[int] = mapped_column(Integer)
    blocks_compressed: Mapped[int] = mapped_column(Integer)
    tools_tokens_before: Mapped[int] = mapped_column(Integer, default=0)
    tools_tokens_after: Mapped[int] = mapped_column(Integer, default=0)
    retrieve_rounds: Mapped[int] = mapped_column(Integer, default=0)
    status_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    usage_input_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    usage_output_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    usage_cache_read_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    usage_cache_write_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    detail: Mapped[str] = mapped_column(Text, default="")


class ToolUsage(Base):
    """Per tool name, client and project: how often the tool was offered in a request and how
    often the model called it. The evidence for offering rarely used tools on demand only."""

    __tablename__ = "tool_usage"

    client: Mapped[str] = mapped_column(String(64), primary_key=True)
    project: Mapped[str] = mapped_column(String(512), primary_key=True)
    tool_name: Mapped[str] = mapped_column(String(256), primary_key=True)
    offered: Mapped[int] = mapped_column(Integer, default=0)
    called: Mapped[int] = mapped_column(Integer, default=0)
    last_seen_at: Mapped[datetime] = mapped_column(DateTime)


class FrozenMessage(Base):
    """One message of a session as the client sent it (``client_hash``, SHA-256 hex of its exact
    JSON text) and, when the proxy changed it, the exact JSON text the proxy sent instead
    (``forwarded_text``; None when it went unchanged), with the estimated tokens of the tool
    outputs the proxy changed in it, before and after (so replays count in the ledger). Later turns re-send the same bytes for
    the same client message, so the provider's cached prefix holds (DESIGN.md step 3)."""

    __tablename__ = "frozen_messages"

    session_key: Mapped[str] = mapped_column(String(64), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    client_hash: Mapped[str] = mapped_column(String(64))
    forwarded_text: Mapped[str | None] = mapped_column(Text, nullable=True)
    tokens_before: Mapped[int] = mapped_column(Integer, default=0)
    tokens_after: Mapped[int] = mapped_column(Integer, default=0)
    updated_at: Mapped[datetime] = mapped_column(DateTime)
