"""Declarative SQLAlchemy models. Every table is created by an Alembic migration in ``migrations/``."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, DateTime, Index, Integer, LargeBinary, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    """Base of all Headroom tables."""


class Original(Base):
    """An offloaded original, byte-exact and sealed (:mod:`headroom_core.db.sealed`), under its
    retrieval key (24 hex digits of SHA-256) within the scope that stored it (project and client
    identity, :class:`headroom_core.scope.Scope`): a key is found only from that scope.

    ``size_bytes`` is the UTF-8 size of the text; ``last_used_at`` drives LRU eviction and the
    time-to-live (both in the originals store).
    """

    __tablename__ = "originals"

    scope: Mapped[str] = mapped_column(String(32), primary_key=True)
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    data: Mapped[bytes] = mapped_column(LargeBinary)
    kind: Mapped[str] = mapped_column(String(32))
    size_bytes: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    last_used_at: Mapped[datetime] = mapped_column(DateTime, index=True)


class CompressionDecision(Base):
    """A compression decision cached by content, so a block compresses to the same bytes on
    every later turn (and after restarts): the prompt-cache prefix stays byte-stable.

    ``decision_hash`` is the keyed hash of the scope, compressor version, kind hint and input
    text (decisions carry what the query of their scope chose, so scopes never share them);
    ``changed`` False records "leave it as it is" (``result`` is then empty); ``result`` is the
    sealed compressed text.
    """

    __tablename__ = "compression_decisions"

    decision_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    changed: Mapped[bool] = mapped_column(Boolean)
    result: Mapped[bytes] = mapped_column(LargeBinary)
    kind: Mapped[str] = mapped_column(String(32))
    strategy: Mapped[str] = mapped_column(String(32))
    reason: Mapped[str] = mapped_column(String(300))
    offload_key: Mapped[str | None] = mapped_column(String(64), nullable=True)
    tokens_before: Mapped[int] = mapped_column(Integer)
    tokens_after: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime)


class SessionState(Base):
    """What the proxy decided for one client session, so it stays the same for the session.

    ``session_key`` (:func:`headroom_core.cache.session.session_key`) already holds the scope.
    ``proxy_tools``: JSON list of the proxy's tool names, fixed at the session's first request;
    ``tools_hash``/``tools_text``: the normal hash of the ordered tools and the sealed ``tools``
    array text sent for them (without ``cache_control``); ``tool_skeletons``: JSON object
    ``{"skeletons": [...], "seen": [...]}``: the client's tools sent as skeletons among those
    decided (tools on demand; NULL: none); ``revision`` grows with every
    write, so a proxy sharing the database sees that its copy in memory is stale.
    """

    __tablename__ = "session_state"

    session_key: Mapped[str] = mapped_column(String(64), primary_key=True)
    dialect: Mapped[str] = mapped_column(String(32))
    proxy_tools: Mapped[str] = mapped_column(Text, default="[]")
    tools_hash: Mapped[str] = mapped_column(String(64), default="", index=True)
    tools_text: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    tool_skeletons: Mapped[str | None] = mapped_column(Text, nullable=True)
    revision: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    updated_at: Mapped[datetime] = mapped_column(DateTime, index=True)


class RequestOutcome(Base):
    """One record per LLM request that passed the proxy: the savings ledger.

    Token figures: ``tokens_before``/``tokens_after`` are our estimates of the considered tool
    outputs, ``tools_tokens_*`` of the ``tools`` definitions (cl100k_base unless configured); ``usage_*`` are the provider's own figures from the response
    (None when the response gave none). ``detail`` is JSON text: per-block kinds and reasons.
    """

    __tablename__ = "request_outcomes"
    __table_args__ = (
        Index("ix_request_outcomes_created_at", "created_at"),
        Index("ix_request_outcomes_entry_id", "entry_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    dialect: Mapped[str] = mapped_column(String(32))
    client: Mapped[str] = mapped_column(String(64))
    model: Mapped[str] = mapped_column(String(128))
    session_key: Mapped[str] = mapped_column(String(64))
    project: Mapped[str] = mapped_column(String(512))
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
    #: the ledger entry (one answered request) the row belongs to: a random hex id, also written
    #: in the proxy's ledger journal, so a restart writes exactly the journaled rows the database
    #: lacks (:mod:`headroom_core.ledger_journal`); None for rows written before it existed
    entry_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    #: why the request went out as it did, as a class (:mod:`headroom_core.outcomes`); None for
    #: rows written before it existed
    outcome: Mapped[str | None] = mapped_column(String(32), nullable=True)
    #: estimated tokens of the proxy's own tool definitions added to the request (not in
    #: ``tools_tokens_after``, which counts the client's tools as forwarded)
    proxy_tools_tokens: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    #: JSON: what ``headroom show`` reads beyond ``detail`` (scope id, prefix facts); None before
    facts: Mapped[str | None] = mapped_column(Text, nullable=True)


class ToolUsage(Base):
    """Per tool name, client and project: how often the tool was offered in a request and how
    often the model called it; ``offered_since_called``: the requests that offered it since the
    model last called it (all of them if it never did). The evidence for offering rarely used
    tools on demand only (:mod:`headroom_core.tools.on_demand`)."""

    __tablename__ = "tool_usage"

    client: Mapped[str] = mapped_column(String(64), primary_key=True)
    project: Mapped[str] = mapped_column(String(512), primary_key=True)
    tool_name: Mapped[str] = mapped_column(String(256), primary_key=True)
    offered: Mapped[int] = mapped_column(Integer, default=0)
    called: Mapped[int] = mapped_column(Integer, default=0)
    offered_since_called: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    last_seen_at: Mapped[datetime] = mapped_column(DateTime)


class ToolOrder(Base):
    """The order tools go upstream in, per scope: ``seq`` is the place of ``tool_id`` (a tool's
    name) in the order the scope first sent its tools; tools first seen later come after.
    Equal tool sets then go upstream in one order, however the client lists them, in every
    session of the scope (:mod:`headroom_core.tools.order`)."""

    __tablename__ = "tool_order"

    scope: Mapped[str] = mapped_column(String(32), primary_key=True)
    tool_id: Mapped[str] = mapped_column(String(256), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime)


class ToolSkeletonSet(Base):
    """Tools on demand, per scope: which tools the scope's sessions send as skeletons
    (``skeletons``) among the tools decided so far (``seen``), both JSON lists of tool ids. A new
    session inherits it while the scope's prompt cache may be warm, so sessions of one working
    stretch send the same ``tools`` (:mod:`headroom_core.tools.on_demand`)."""

    __tablename__ = "tool_skeleton_sets"

    scope: Mapped[str] = mapped_column(String(32), primary_key=True)
    skeletons: Mapped[str] = mapped_column(Text, default="[]")
    seen: Mapped[str] = mapped_column(Text, default="[]")
    updated_at: Mapped[datetime] = mapped_column(DateTime)


class FrozenMessage(Base):
    """One message of a session: keyed hashes of the client's exact JSON text (``raw_hash``) and
    of its content modulo ``cache_control`` (``norm_hash``), the sealed JSON text the proxy sent
    (``forwarded``) and whether it differs from the client's (``modified``), with
    the estimated tokens of the tool outputs the proxy changed in it, before and after (so
    replays count in the ledger), ``offloads`` (JSON ``[[key, path], …]``: the originals its
    markers name), ``blocks`` (JSON ``[[kind, tool, before, after], …]``: its changed tool
    outputs, so a replay counts under their kinds) and ``deferred`` (JSON ``[path, …]``: its tool
    outputs sent whole for want of time, to be decided again; NULL: none). Later turns re-send the same bytes for the same client message, so the
    provider's cached prefix holds (docs/architecture.md step 3)."""

    __tablename__ = "frozen_messages"

    session_key: Mapped[str] = mapped_column(String(64), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    raw_hash: Mapped[str] = mapped_column(String(64))
    norm_hash: Mapped[str] = mapped_column(String(64))
    forwarded: Mapped[bytes] = mapped_column(LargeBinary)
    modified: Mapped[bool] = mapped_column(Boolean, default=False)
    tokens_before: Mapped[int] = mapped_column(Integer, default=0)
    tokens_after: Mapped[int] = mapped_column(Integer, default=0)
    offloads: Mapped[str] = mapped_column(Text, default="[]")
    blocks: Mapped[str] = mapped_column(Text, default="[]")
    deferred: Mapped[str | None] = mapped_column(Text, nullable=True)
    updated_at: Mapped[datetime] = mapped_column(DateTime)
