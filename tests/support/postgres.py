"""The shared test PostgreSQL server (``HEADROOM_TEST_PG_URL``, as ``.ci/run`` sets it from
``scripts/postgres start``) and a fresh database on it per test or module. For a private
server whose log is one run's alone, see :mod:`tests.support.pg_cluster`."""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from pathlib import Path

import pytest

from .proxy import REPO_ROOT

PG_SCRIPT = REPO_ROOT / "scripts" / "postgres"


def pg_server_url() -> str | None:
    """The URL of a running test PostgreSQL server: ``HEADROOM_TEST_PG_URL``, or one started with
    ``scripts/postgres start`` when PostgreSQL is installed here; None when neither."""
    url = os.environ.get("HEADROOM_TEST_PG_URL")
    if url:
        return url
    if not any(Path("/usr/lib/postgresql").glob("*/bin/initdb")):
        return None
    out = subprocess.run(["bash", str(PG_SCRIPT), "start"], capture_output=True, text=True, timeout=180)
    m = re.search(r"HEADROOM_TEST_PG_URL=(\S+)", out.stdout)
    if out.returncode != 0 or not m:
        pytest.fail(f"scripts/postgres start failed ({out.returncode}):\n{out.stderr}")
    os.environ["HEADROOM_TEST_PG_URL"] = m.group(1)
    return m.group(1)


def fresh_pg_database(server_url: str) -> tuple[str, callable]:
    """Create a database named ``headroom_t_<hex>`` on the server; returns its URL and a dropper."""
    import psycopg
    from sqlalchemy.engine import make_url

    u = make_url(server_url)
    name = "headroom_t_" + uuid.uuid4().hex[:12]
    dsn = u.set(drivername="postgresql", database="postgres").render_as_string(hide_password=False)
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')

    def drop() -> None:
        from headroom_core.db import engine as db_engine

        url = u.set(database=name).render_as_string(hide_password=False)
        eng = db_engine._engines.pop(url, None)
        if eng is not None:
            eng.dispose()
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    return u.set(database=name).render_as_string(hide_password=False), drop
