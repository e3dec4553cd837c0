"""learn: live evidence, learned rules, recent failures, past-failure lines fed back

Revision ID: 0003
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0001"
branch_labels = ("learn",)
depends_on = None


def upgrade() -> None:
    op.create_table(
        "learn_evidence",
        sa.Column("project", sa.String(length=512), nullable=False),
        sa.Column("session_key", sa.String(length=64), nullable=False),
        sa.Column("pair_hash", sa.String(length=64), nullable=False),
        sa.Column("rule_id", sa.String(length=64), nullable=False),
        sa.Column("rule_kind", sa.String(length=32), nullable=False),
        sa.Column("rule_key", sa.Text(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("supersede_key", sa.String(length=64), nullable=False),
        sa.Column("failure_key", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("project", "session_key", "pair_hash"),
    )
    with op.batch_alter_table("learn_evidence", schema=None) as batch_op:
        batch_op.create_index("ix_learn_evidence_rule", ["project", "rule_id"], unique=False)
    op.create_table(
        "learned_rules",
        sa.Column("project", sa.String(length=512), nullable=False),
        sa.Column("rule_id", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("rule_key", sa.Text(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("supersede_key", sa.String(length=64), nullable=False),
        sa.Column("failure_key", sa.String(length=64), nullable=False),
        sa.Column("evidence", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("project", "rule_id"),
    )
    with op.batch_alter_table("learned_rules", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_learned_rules_failure_key"), ["failure_key"], unique=False)
    op.create_table(
        "learn_failures",
        sa.Column("project", sa.String(length=512), nullable=False),
        sa.Column("failure_key", sa.String(length=64), nullable=False),
        sa.Column("tool", sa.String(length=256), nullable=False),
        sa.Column("command", sa.Text(), nullable=False),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("args", sa.Text(), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("sessions", sa.Integer(), nullable=False),
        sa.Column("last_session_key", sa.String(length=64), nullable=False),
        sa.Column("first_seen_at", sa.DateTime(), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(), nullable=False),
        sa.Column("cleared_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("project", "failure_key"),
    )
    with op.batch_alter_table("learn_failures", schema=None) as batch_op:
        batch_op.create_index("ix_learn_failures_recent", ["project", "last_seen_at"], unique=False)
    op.create_table(
        "learn_fed_back",
        sa.Column("session_key", sa.String(length=64), nullable=False),
        sa.Column("line_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("session_key", "line_hash"),
    )


def downgrade() -> None:
    op.drop_table("learn_fed_back")
    with op.batch_alter_table("learn_failures", schema=None) as batch_op:
        batch_op.drop_index("ix_learn_failures_recent")
    op.drop_table("learn_failures")
    with op.batch_alter_table("learned_rules", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_learned_rules_failure_key"))
    op.drop_table("learned_rules")
    with op.batch_alter_table("learn_evidence", schema=None) as batch_op:
        batch_op.drop_index("ix_learn_evidence_rule")
    op.drop_table("learn_evidence")
