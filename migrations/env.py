"""Alembic environment: runs on the connection the caller passes (migrate-on-start), or on
``sqlalchemy.url`` from alembic's own config when run as ``alembic upgrade head``."""

from alembic import context
from sqlalchemy import engine_from_config, pool

import headroom_core.cache.models  # noqa: F401  (cache prefixes)
import headroom_core.learn.models  # noqa: F401  (learned rules, evidence, failures)
import headroom_core.memory.models  # noqa: F401  (the memories table)
from headroom_core.db.models import Base

config = context.config
target_metadata = Base.metadata


def _run(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    engine = engine_from_config(
        config.get_section(config.config_ini_section) or {}, prefix="sqlalchemy.", poolclass=pool.NullPool
    )
    with engine.connect() as conn:
        _run(conn)
