"""merge every branch into one line: from here on each migration revises the one before

Until 0009 each feature branched from 0001 or a later revision, so the history had five heads
(0002, 0003, 0004, 0006_tooldocs, 0009_ledger_outcome). This revision changes no table; it
joins them, and every later migration takes the single head as its ``down_revision``
(``alembic heads`` prints one revision; tests/unit/test_migrations_linear.py checks it).

(0003 was joined by 0006_team, which now revises it instead of depending on it.)

Revision ID: 0010_one_line
Revises: 0002, 0004, 0006_tooldocs, 0009_ledger_outcome
"""

revision = "0010_one_line"
down_revision = ("0002", "0004", "0006_tooldocs", "0009_ledger_outcome")
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
