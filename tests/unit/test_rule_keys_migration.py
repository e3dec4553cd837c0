"""Migration ``0006_team``: a SQLite database written before it (rule keys holding NUL, which
PostgreSQL's text cannot) is rewritten to the stored form (U+2400), and the learner reads the
same rules back, keys with NUL; downgrading restores the NUL. Real SQLite, real Alembic."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from headroom_core.db.engine import MIGRATIONS_DIR, open_database
from headroom_core.learn.models import NUL_STORED
from headroom_core.learn.store import LearnStore

KEY = "pytest\0python -m pytest"


def _cfg(conn) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["connection"] = conn
    return cfg


def test_rule_keys_written_with_nul_before_0006_are_rewritten_and_read_back(tmp_path):
    url = f"sqlite:///{tmp_path / 'headroom.db'}"
    eng = sa.create_engine(url)
    now = datetime(2026, 1, 1)
    with eng.begin() as conn:
        command.upgrade(_cfg(conn), "0005")
        command.upgrade(_cfg(conn), "0003")
        conn.execute(
            sa.text(
                "INSERT INTO learned_rules VALUES ('/p', 'r1', 'command', :k, 'Use python -m pytest.', 's', 'f', 2, 'live', :t, :t)"
            ),
            {"k": KEY, "t": now},
        )
        conn.execute(
            sa.text(
                "INSERT INTO learn_evidence VALUES ('/p', 's1', 'h1', 'r1', 'command', :k, 'Use python -m pytest.', 's', 'f', :t)"
            ),
            {"k": KEY, "t": now},
        )
    eng.dispose()

    (rule,) = LearnStore(open_database(url)).as_rules("/p")  # migrates the rest (0006_team)
    assert rule.key == KEY
    with eng.begin() as conn:
        stored = [
            r[0]
            for r in conn.execute(
                sa.text("SELECT rule_key FROM learned_rules UNION ALL SELECT rule_key FROM learn_evidence")
            )
        ]
        assert stored == [KEY.replace("\0", NUL_STORED)] * 2
        command.downgrade(_cfg(conn), "0005")
        assert [r[0] for r in conn.execute(sa.text("SELECT rule_key FROM learned_rules"))] == [KEY]
