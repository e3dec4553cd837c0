"""learn: rule keys stored without NUL (PostgreSQL's text cannot hold it)

A rule's key separates its parts with NUL; the ``rule_key`` columns of ``learn_evidence`` and
``learned_rules`` now store each NUL as U+2400 (:class:`headroom_core.learn.models.RuleKey`).
Rows written before (only SQLite could hold them) are rewritten so comparisons still match.

Revision ID: 0006_team
Revises: 0005, 0003 (which made the learn tables)

0003 was a ``depends_on`` until 0010_one_line joined the branches; as a revised revision it
means the same to a database (Alembic takes a dependency out of the heads once its dependant
is applied) and lets the history be merged into one line.
"""

import sqlalchemy as sa
from alembic import op

revision = "0006_team"
down_revision = ("0005", "0003")
branch_labels = None
depends_on = None

NUL_STORED = "\u2400"


def _rewrite(table: str, keys: tuple[str, ...], to_stored: bool) -> None:
    conn = op.get_bind()
    t = sa.table(table, *(sa.column(k) for k in keys), sa.column("rule_key"))
    old, new = ("\0", NUL_STORED) if to_stored else (NUL_STORED, "\0")
    for row in conn.execute(sa.select(t)).mappings().all():
        if old in (row["rule_key"] or ""):
            conn.execute(
                sa.update(t).where(*(t.c[k] == row[k] for k in keys)).values(rule_key=row["rule_key"].replace(old, new))
            )


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        return  # it never held a NUL: those writes failed
    _rewrite("learn_evidence", ("project", "session_key", "pair_hash"), True)
    _rewrite("learned_rules", ("project", "rule_id"), True)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        return
    _rewrite("learn_evidence", ("project", "session_key", "pair_hash"), False)
    _rewrite("learned_rules", ("project", "rule_id"), False)
