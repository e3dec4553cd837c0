"""Storage: SQLAlchemy models, the engine and sessions, Alembic migrate-on-start."""
