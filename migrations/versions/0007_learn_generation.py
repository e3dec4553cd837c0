"""learn: per project, a generation counter of its failures and rules

Every write of ``learn_failures`` or ``learned_rules`` adds one to the project's row in the
same transaction, so a proxy that remembers what it read (the past-failures block is asked for
on every request) sees any proxy's write by reading one row. Projects without a row are at 0.

Revision ID: 0007_learn_generation
Revises: 0006_team
"""

import sqlalchemy as sa
from alembic import op

revision = "0007_learn_generation"
down_revision = "0006_team"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "learn_generations",
        sa.Column("project", sa.String(length=512), nullable=False),
        sa.Column("generation", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("project"),
    )


def downgrade() -> None:
    op.drop_table("learn_generations")
