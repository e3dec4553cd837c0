"""Shared pieces of the per-dialect end-to-end tests (tests/e2e/test_*_e2e.py for Gemini, hosted
Claude, Bedrock Converse, Ollama): a module-wide proxy with compression given all the time it
needs, the large tool output they compress, and the ledger rows a proxy wrote.

Import the fixtures by name into a test module (``from tests.support.dialect_e2e import
big_output, proxy``); pytest finds them there.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.support.proxy import ADDON_SCRIPT
from tests.unit.test_request_plan import github_scenario

#: Proxy options of these tests: the machine is loaded, so every plan may finish (the proxy's
#: tools are then always offered); the tests prove behaviour, not speed.
OPTIONS = {"headroom_compress_timeout_seconds": 300}


@pytest.fixture(scope="module")
def proxy(module_proxy_factory):
    """One proxy (the full addon, :data:`OPTIONS`) for the test module."""
    return module_proxy_factory(ADDON_SCRIPT, options=OPTIONS)


@pytest.fixture(scope="module")
def big_output() -> str:
    """A real large tool output (a paginated GitHub issues listing, JSON) that compresses."""
    return github_scenario("paginate-issues.json")


def ledger_rows(proxy: Any, n: int, timeout: float = 20.0, poll: float = 0.2) -> list[Any]:
    """The ``RequestOutcome`` rows of ``proxy``'s database (by id) once there are at least ``n``,
    else what there is after ``timeout`` seconds (polled every ``poll`` s): rows are written off
    the response path, so they may lag the response by a moment."""
    from sqlalchemy import select

    from headroom_core.db.engine import open_database
    from headroom_core.db.models import RequestOutcome

    sessions = open_database(f"sqlite:///{proxy.home / 'headroom.db'}")
    deadline = time.monotonic() + timeout
    while True:
        with sessions() as s:
            rows = list(s.scalars(select(RequestOutcome).order_by(RequestOutcome.id)))
        if len(rows) >= n or time.monotonic() > deadline:
            return rows
        time.sleep(poll)
