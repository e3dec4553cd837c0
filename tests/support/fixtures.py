"""pytest fixtures for end-to-end tests through a real ``mitmdump``.

Import them into ``tests/conftest.py`` (or a test module)::

    from tests.support.fixtures import *  # noqa: F401,F403

Fixtures (scope):

- ``upstream_server`` (module): one running :class:`Upstream` per test module.
- ``upstream`` (function): the same server, :meth:`~Upstream.reset` before each test.
- ``module_proxy_factory`` (module) / ``proxy_factory`` (function):
  ``make(script=None, **MitmProxy kwargs) -> MitmProxy`` (started; cleaned up at the
  end of the scope).
- ``plain_proxy`` (module): mitmdump with no script, streaming bodies
  (``stream_large_bodies=1``) so SSE passes through incrementally.
- ``headroom_proxy`` (module): mitmdump ``-s addons/headroom.py``.
- ``sessions`` (function, two params): a ``sessionmaker`` on a fresh migrated SQLite file, then
  on a fresh PostgreSQL database (:mod:`.postgres`; skipped, saying how to enable it, without one).

and the plain helper :func:`start_proxy`, usable anywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .postgres import fresh_pg_database, pg_server_url
from .proxy import ADDON_SCRIPT, MitmProxy
from .upstream import Upstream

__all__ = [
    "upstream_server",
    "upstream",
    "module_proxy_factory",
    "proxy_factory",
    "plain_proxy",
    "headroom_proxy",
    "sessions",
    "start_proxy",
    "ProxyFactory",
]

ProxyFactory = Callable[..., MitmProxy]


def start_proxy(script: str | Path | None = None, **kw: Any) -> MitmProxy:
    """Start a :class:`MitmProxy` (``script=None`` for a plain mitmdump); the caller stops it.

    Keyword arguments are :class:`MitmProxy`'s (``options``, ``env``, ``home``, ...).
    """
    return MitmProxy(script, **kw).start()


def _factory() -> Iterator[ProxyFactory]:
    started: list[MitmProxy] = []

    def make(script: str | Path | None = None, **kw: Any) -> MitmProxy:
        p = MitmProxy(script, **kw)
        started.append(p)
        return p.start()

    try:
        yield make
    finally:
        for p in reversed(started):
            p.cleanup()


@pytest.fixture(scope="module")
def upstream_server() -> Iterator[Upstream]:
    """One scripted HTTPS upstream for the whole test module."""
    with Upstream() as up:
        yield up


@pytest.fixture
def upstream(upstream_server: Upstream) -> Iterator[Upstream]:
    """The module's upstream, reset (no recorded requests, empty script) for this test."""
    upstream_server.reset()
    yield upstream_server
    upstream_server.reset()


@pytest.fixture(scope="module")
def module_proxy_factory() -> Iterator[ProxyFactory]:
    """``make(script=None, **kw) -> MitmProxy`` whose proxies live until the module ends."""
    yield from _factory()


@pytest.fixture
def proxy_factory() -> Iterator[ProxyFactory]:
    """``make(script=None, **kw) -> MitmProxy`` whose proxies are stopped after the test."""
    yield from _factory()


@pytest.fixture(scope="module")
def plain_proxy(module_proxy_factory: ProxyFactory) -> MitmProxy:
    """A plain mitmdump (no addon) that streams bodies, shared by the module."""
    return module_proxy_factory(None, options={"stream_large_bodies": "1"})


@pytest.fixture(scope="module")
def headroom_proxy(module_proxy_factory: ProxyFactory) -> MitmProxy:
    """mitmdump with ``-s addons/headroom.py``, shared by the module."""
    if not ADDON_SCRIPT.exists():
        pytest.fail(f"{ADDON_SCRIPT} does not exist")
    return module_proxy_factory(ADDON_SCRIPT)


@pytest.fixture(params=["sqlite", "postgresql"])
def sessions(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A fresh database of each kind, opened (and migrated) with ``open_database``."""
    from headroom_core.db.engine import open_database

    if request.param == "sqlite":
        yield open_database(f"sqlite:///{tmp_path / 'headroom.db'}")
        return
    server = pg_server_url()
    if server is None:
        pytest.skip(
            'needs PostgreSQL: set HEADROOM_TEST_PG_URL (eval "$(scripts/postgres start)") or install PostgreSQL'
        )
    url, drop = fresh_pg_database(server)
    try:
        yield open_database(url)
    finally:
        drop()
