"""The Alembic history is one line from 0010 on: one head, and each later revision revises
exactly the one before (the rule in docs/architecture.md: a new migration takes the single
head as its ``down_revision``)."""

from __future__ import annotations

from alembic.config import Config
from alembic.script import ScriptDirectory

from headroom_core.db.engine import MIGRATIONS_DIR, make_engine, migrate


def _script() -> ScriptDirectory:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    return ScriptDirectory.from_config(cfg)


def test_one_head_and_a_line_after_the_merge():
    script = _script()
    assert len(script.get_heads()) == 1
    line = []
    rev = script.get_revision(script.get_current_head())
    while rev is not None and rev.revision != "0010_one_line":
        assert isinstance(rev.down_revision, str), (
            f"{rev.revision} revises {rev.down_revision!r}: one revision expected"
        )
        line.append(rev.revision)
        rev = script.get_revision(rev.down_revision)
    assert rev is not None, "0010_one_line is not an ancestor of the head"


def test_a_fresh_database_ends_at_the_one_head(tmp_path):
    from alembic.runtime.migration import MigrationContext

    engine = make_engine(f"sqlite:///{tmp_path / 'h.db'}")
    migrate(engine)
    with engine.connect() as conn:
        assert set(MigrationContext.configure(conn).get_current_heads()) == {_script().get_current_head()}


def test_a_database_at_any_earlier_point_migrates_to_the_one_head(tmp_path):
    """Databases written before the merge (at its old heads, or part way along a branch)."""
    from alembic import command
    from alembic.config import Config
    from alembic.runtime.migration import MigrationContext

    head = _script().get_current_head()
    for n, targets in enumerate(
        [("0001",), ("0003", "0005"), ("0006_team", "0004"), ("0002", "0004", "0006_tooldocs", "0009_ledger_outcome")]
    ):
        engine = make_engine(f"sqlite:///{tmp_path / f'h{n}.db'}")
        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            for t in targets:
                command.upgrade(cfg, t)
        migrate(engine)
        with engine.connect() as conn:
            assert set(MigrationContext.configure(conn).get_current_heads()) == {head}, targets
