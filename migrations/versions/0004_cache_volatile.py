"""cache: distinct prompt prefixes per project and the prefixes each session used

Revision ID: 0004
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0001"
branch_labels = ("cache_volatile",)
depends_on = None


def upgrade() -> None:
    op.create_table(
        "cache_prefixes",
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("project", sa.String(length=512), nullable=False),
        sa.Column("dialect", sa.String(length=32), nullable=False),
        sa.Column("system_text", sa.Text(), nullable=False),
        sa.Column("tools_json", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("fingerprint"),
    )
    with op.batch_alter_table("cache_prefixes", schema=None) as batch_op:
        batch_op.create_index("ix_cache_prefixes_project_seen", ["project", "last_seen_at"], unique=False)
    op.create_table(
        "cache_session_prefixes",
        sa.Column("session_key", sa.String(length=64), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("project", sa.String(length=512), nullable=False),
        sa.Column("dialect", sa.String(length=32), nullable=False),
        sa.Column("client", sa.String(length=64), nullable=False),
        sa.Column("previous_fingerprint", sa.String(length=64), nullable=True),
        sa.Column("similarity", sa.Float(), nullable=True),
        sa.Column("changes", sa.Text(), nullable=False),
        sa.Column("first_seen_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("session_key", "fingerprint"),
    )
    with op.batch_alter_table("cache_session_prefixes", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_cache_session_prefixes_project"), ["project"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("cache_session_prefixes", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_cache_session_prefixes_project"))
    op.drop_table("cache_session_prefixes")
    with op.batch_alter_table("cache_prefixes", schema=None) as batch_op:
        batch_op.drop_index("ix_cache_prefixes_project_seen")
    op.drop_table("cache_prefixes")
