"""initial: originals, decisions, sessions, frozen messages, request outcomes, tool usage

Revision ID: 0001
Revises:
Create Date: 2026-11-30 04:06:09.124118
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "compression_decisions",
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("changed", sa.Boolean(), nullable=False),
        sa.Column("result_text", sa.Text(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("strategy", sa.String(length=32), nullable=False),
        sa.Column("reason", sa.String(length=300), nullable=False),
        sa.Column("offload_key", sa.String(length=64), nullable=True),
        sa.Column("tokens_before", sa.Integer(), nullable=False),
        sa.Column("tokens_after", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("content_hash"),
    )
    op.create_table(
        "frozen_messages",
        sa.Column("session_key", sa.String(length=64), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("client_hash", sa.String(length=64), nullable=False),
        sa.Column("forwarded_text", sa.Text(), nullable=True),
        sa.Column("tokens_before", sa.Integer(), nullable=False),
        sa.Column("tokens_after", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("session_key", "position"),
    )
    op.create_table(
        "originals",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("size_bytes", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("last_used_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )
    with op.batch_alter_table("originals", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_originals_last_used_at"), ["last_used_at"], unique=False)

    op.create_table(
        "request_outcomes",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("dialect", sa.String(length=32), nullable=False),
        sa.Column("client", sa.String(length=64), nullable=False),
        sa.Column("model", sa.String(length=128), nullable=False),
        sa.Column("session_key", sa.String(length=64), nullable=False),
        sa.Column("project", sa.String(length=512), nullable=False),
        sa.Column("action", sa.String(length=32), nullable=False),
        sa.Column("reason", sa.String(length=300), nullable=False),
        sa.Column("body_bytes_before", sa.Integer(), nullable=False),
        sa.Column("body_bytes_after", sa.Integer(), nullable=False),
        sa.Column("tokens_before", sa.Integer(), nullable=False),
        sa.Column("tokens_after", sa.Integer(), nullable=False),
        sa.Column("blocks_compressed", sa.Integer(), nullable=False),
        sa.Column("tools_tokens_before", sa.Integer(), nullable=False),
        sa.Column("tools_tokens_after", sa.Integer(), nullable=False),
        sa.Column("retrieve_rounds", sa.Integer(), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("usage_input_tokens", sa.Integer(), nullable=True),
        sa.Column("usage_output_tokens", sa.Integer(), nullable=True),
        sa.Column("usage_cache_read_tokens", sa.Integer(), nullable=True),
        sa.Column("usage_cache_write_tokens", sa.Integer(), nullable=True),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("request_outcomes", schema=None) as batch_op:
        batch_op.create_index("ix_request_outcomes_created_at", ["created_at"], unique=False)

    op.create_table(
        "session_state",
        sa.Column("session_key", sa.String(length=64), nullable=False),
        sa.Column("dialect", sa.String(length=32), nullable=False),
        sa.Column("retrieve_tool", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("session_key"),
    )
    op.create_table(
        "tool_usage",
        sa.Column("client", sa.String(length=64), nullable=False),
        sa.Column("project", sa.String(length=512), nullable=False),
        sa.Column("tool_name", sa.String(length=256), nullable=False),
        sa.Column("offered", sa.Integer(), nullable=False),
        sa.Column("called", sa.Integer(), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("client", "project", "tool_name"),
    )


def downgrade() -> None:
    op.drop_table("tool_usage")
    op.drop_table("session_state")
    with op.batch_alter_table("request_outcomes", schema=None) as batch_op:
        batch_op.drop_index("ix_request_outcomes_created_at")

    op.drop_table("request_outcomes")
    with op.batch_alter_table("originals", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_originals_last_used_at"))

    op.drop_table("originals")
    op.drop_table("frozen_messages")
    op.drop_table("compression_decisions")
