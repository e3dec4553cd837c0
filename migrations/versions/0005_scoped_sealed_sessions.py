"""scoped, sealed sessions: originals and decisions per scope, sealed at rest; session tools
and the forwarded tools text; the tool order per scope; frozen messages with normal hashes and
offloads

The four tables are caches of what the proxy sent: their old rows were stored in clear and
without a scope, so they are dropped (sessions in flight start anew once: one cache write).

Revision ID: 0005
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0001"
branch_labels = None
depends_on = None

_TABLES = ("originals", "compression_decisions", "session_state", "frozen_messages")


def upgrade() -> None:
    for t in _TABLES:
        op.drop_table(t)
    op.create_table(
        "originals",
        sa.Column("scope", sa.String(length=32), nullable=False),
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("size_bytes", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("last_used_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("scope", "key"),
    )
    op.create_index("ix_originals_last_used_at", "originals", ["last_used_at"])
    op.create_table(
        "compression_decisions",
        sa.Column("decision_hash", sa.String(length=64), nullable=False),
        sa.Column("changed", sa.Boolean(), nullable=False),
        sa.Column("result", sa.LargeBinary(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("strategy", sa.String(length=32), nullable=False),
        sa.Column("reason", sa.String(length=300), nullable=False),
        sa.Column("offload_key", sa.String(length=64), nullable=True),
        sa.Column("tokens_before", sa.Integer(), nullable=False),
        sa.Column("tokens_after", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("decision_hash"),
    )
    op.create_table(
        "session_state",
        sa.Column("session_key", sa.String(length=64), nullable=False),
        sa.Column("dialect", sa.String(length=32), nullable=False),
        sa.Column("proxy_tools", sa.Text(), nullable=False),
        sa.Column("tools_hash", sa.String(length=64), nullable=False),
        sa.Column("tools_text", sa.LargeBinary(), nullable=True),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("session_key"),
    )
    op.create_index("ix_session_state_updated_at", "session_state", ["updated_at"])
    op.create_index("ix_session_state_tools_hash", "session_state", ["tools_hash"])
    op.create_table(
        "tool_order",
        sa.Column("scope", sa.String(length=32), nullable=False),
        sa.Column("tool_id", sa.String(length=256), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("scope", "tool_id"),
    )
    op.create_table(
        "frozen_messages",
        sa.Column("session_key", sa.String(length=64), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("raw_hash", sa.String(length=64), nullable=False),
        sa.Column("norm_hash", sa.String(length=64), nullable=False),
        sa.Column("forwarded", sa.LargeBinary(), nullable=False),
        sa.Column("modified", sa.Boolean(), nullable=False),
        sa.Column("tokens_before", sa.Integer(), nullable=False),
        sa.Column("tokens_after", sa.Integer(), nullable=False),
        sa.Column("offloads", sa.Text(), nullable=False),
        sa.Column("blocks", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("session_key", "position"),
    )


def downgrade() -> None:
    raise NotImplementedError("0005 dropped clear-text caches; there is no way back to them")
