"""Counters that several proxies of a team write at once lose no increment: per-tool usage
(``tool_usage``, :func:`headroom_core.ledger._count_tools`) is one atomic upsert per tool
(:func:`headroom_core.db.upsert.upsert` with ``add=``), so concurrent writers neither fail on the
primary key nor overwrite each other's counts. Real databases: SQLite (WAL) and PostgreSQL
(``HEADROOM_TEST_PG_URL`` or ``scripts/postgres``; skipped with the reason where there is none)."""

from __future__ import annotations

import threading
from datetime import datetime

import pytest
from sqlalchemy import select

from headroom_core.db.engine import open_database
from headroom_core.db.models import ToolUsage
from headroom_core.ledger import _count_tools
from tests.test_memory_store import fresh_pg_database, pg_server_url

THREADS = 8
ROUNDS = 25


def _hammer(sessions) -> None:
    """Each thread counts the same tools ROUNDS times, each time in its own transaction."""
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)

    def work(n: int) -> None:
        try:
            start.wait()
            for _ in range(ROUNDS):
                with sessions.begin() as s:  # offered: Bash, Read (in either order); called: Bash
                    offered = ["Bash", "Read"] if n % 2 else ["Read", "Bash"]
                    _count_tools(s, "claude-code", "/team/p", offered, ["Bash"], datetime(2026, 1, 1))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with sessions() as s:
        rows = {r.tool_name: (r.offered, r.called) for r in s.scalars(select(ToolUsage).where(ToolUsage.project == "/team/p"))}
    assert rows == {"Bash": (THREADS * ROUNDS, THREADS * ROUNDS), "Read": (THREADS * ROUNDS, 0)}


def test_tool_usage_counted_concurrently_on_sqlite(tmp_path):
    _hammer(open_database(f"sqlite:///{tmp_path / 'headroom.db'}"))


def test_tool_usage_counted_concurrently_on_postgresql():
    server = pg_server_url()
    if server is None:
        pytest.skip("needs PostgreSQL: set HEADROOM_TEST_PG_URL (eval \"$(scripts/postgres start)\") or install PostgreSQL")
    url, drop = fresh_pg_database(server)
    try:
        _hammer(open_database(url))
    finally:
        drop()
