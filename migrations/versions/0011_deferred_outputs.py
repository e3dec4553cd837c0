"""session state: frozen_messages.deferred, the tool outputs a message went with whole for want
of time

A compression that times out sends the request on with earlier decisions only (the fallback);
each new tool output it could not compress goes whole, and that is recorded as its decision
(strategy ``deferred``) so every proxy of a team sends the same bytes. ``deferred`` (JSON list of
paths inside the message; NULL: none) marks those outputs in the session's frozen messages, so
a later turn with time can compress them once, where the cost model says it pays (issue 33,
``headroom_core/cache/late.py``). Earlier rows keep NULL.

Revision ID: 0011_deferred_outputs
Revises: 0010_one_line
"""

import sqlalchemy as sa
from alembic import op

revision = "0011_deferred_outputs"
down_revision = "0010_one_line"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("frozen_messages") as b:
        b.add_column(sa.Column("deferred", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("frozen_messages") as b:
        b.drop_column("deferred")
