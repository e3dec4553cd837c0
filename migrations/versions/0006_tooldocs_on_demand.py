"""tools on demand: per tool, the requests that offered it since the model last called it;
per session and per scope, the client's tools sent as skeletons

Existing ``tool_usage`` rows of tools never called start with every request that offered them
(exact); rows of tools called at some point start at 0 (when is not known).

Revision ID: 0006_tooldocs
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006_tooldocs"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tool_usage", schema=None) as batch_op:
        batch_op.add_column(sa.Column("offered_since_called", sa.Integer(), nullable=False, server_default="0"))
    op.execute("UPDATE tool_usage SET offered_since_called = CASE WHEN called = 0 THEN offered ELSE 0 END")
    with op.batch_alter_table("session_state", schema=None) as batch_op:
        batch_op.add_column(sa.Column("tool_skeletons", sa.Text(), nullable=True))
    op.create_table(
        "tool_skeleton_sets",
        sa.Column("scope", sa.String(length=32), nullable=False),
        sa.Column("skeletons", sa.Text(), nullable=False),
        sa.Column("seen", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("scope"),
    )


def downgrade() -> None:
    op.drop_table("tool_skeleton_sets")
    with op.batch_alter_table("session_state", schema=None) as batch_op:
        batch_op.drop_column("tool_skeletons")
    with op.batch_alter_table("tool_usage", schema=None) as batch_op:
        batch_op.drop_column("offered_since_called")
