"""ledger: request_outcomes.outcome, proxy_tools_tokens and facts

``outcome``: why a request went out as it did, as a class (``compressed``, ``unchanged``,
``timeout``, ``fallback``, ``internal_error``, ``not_parsed``, ``too_large``, ``bypass``,
``compress_off``, ``signed``, ``not_ready``, ``unreachable``; :mod:`headroom_core.outcomes`),
so ``stats`` and the page count the requests that went out uncompressed and why.
``proxy_tools_tokens``: the estimated tokens of the proxy's own tool definitions added to the
request (``headroom_retrieve``, the memory tools), counted apart from the client's tools.
``facts``: JSON, what ``headroom show`` needs beyond the per-block ``detail`` (the request's
scope id, its prefix compared with the previous turn). Earlier rows keep NULL / 0.

Chained after 0008_ledger_entry_id (the newest head when written; 0002, 0003, 0004 and
0006_tooldocs are other heads).

Revision ID: 0009_ledger_outcome
Revises: 0008_ledger_entry_id
"""

import sqlalchemy as sa
from alembic import op

revision = "0009_ledger_outcome"
down_revision = "0008_ledger_entry_id"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("request_outcomes") as b:
        b.add_column(sa.Column("outcome", sa.String(length=32), nullable=True))
        b.add_column(sa.Column("proxy_tools_tokens", sa.Integer(), nullable=False, server_default="0"))
        b.add_column(sa.Column("facts", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("request_outcomes") as b:
        b.drop_column("facts")
        b.drop_column("proxy_tools_tokens")
        b.drop_column("outcome")
