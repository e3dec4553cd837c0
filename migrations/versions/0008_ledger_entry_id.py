"""ledger: request_outcomes.entry_id, the answered request a row belongs to

The proxy journals each answered request's row (with this id) before the answer goes out and
commits it to the database in the background; a restart after ``kill -9`` writes the journaled
rows whose id the database lacks (:mod:`headroom_core.ledger_journal`). Earlier rows keep NULL.

Revision ID: 0008_ledger_entry_id
Revises: 0007_learn_generation
"""

import sqlalchemy as sa
from alembic import op

revision = "0008_ledger_entry_id"
down_revision = "0007_learn_generation"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("request_outcomes") as b:
        b.add_column(sa.Column("entry_id", sa.String(length=32), nullable=True))
    op.create_index("ix_request_outcomes_entry_id", "request_outcomes", ["entry_id"])


def downgrade() -> None:
    op.drop_index("ix_request_outcomes_entry_id", table_name="request_outcomes")
    with op.batch_alter_table("request_outcomes") as b:
        b.drop_column("entry_id")
