"""The long-lived parts one proxy process (or one CLI command) shares: settings, database,
token counter, originals store and decision cache. Built lazily, once."""

from __future__ import annotations

import logging
import threading
from functools import cached_property
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from headroom_core.cache.decisions import DecisionCache
from headroom_core.cache.recent import RecentRequests
from headroom_core.cache.session_store import SessionStore
from headroom_core.ccr.store import OriginalsStore
from headroom_core.compress.tokens import TokenCounter
from headroom_core.compress.worker import CompressWorker
from headroom_core.db.engine import open_database
from headroom_core.db.sealed import Sealer, load_secret, secret_path
from headroom_core.extensions import Extensions
from headroom_core.ledger_journal import LedgerJournal
from headroom_core.ledger_writer import LedgerWriter
from headroom_core.readiness import Readiness
from headroom_core.settings import Settings
from headroom_core.tools.minifier import ToolsMinifier
from headroom_core.tools.order import ToolOrder

log = logging.getLogger("headroom")


class Runtime:
    """Holds the shared services for ``settings``; every attribute is created on first use.

    Raises :class:`~headroom_core.db.engine.DatabaseError` from ``sessions`` when the database
    cannot be opened or migrated, :class:`~headroom_core.db.sealed.SecretError` from ``sealer``
    when the secret key file cannot be read or created.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        #: the proxy's warm-up (``addons/headroom_options.py``); nothing to wait for otherwise
        self.ready = Readiness()

    @cached_property
    def sessions(self) -> sessionmaker[Session]:
        with self._lock:
            return open_database(self.settings.database_url)

    @cached_property
    def ledger(self) -> LedgerWriter:
        """The background writer of ledger rows (its thread starts on first use), journaling
        into ``<home>/ledger-journal`` (:mod:`headroom_core.ledger_journal`); without a journal
        (the folder cannot be written) answers wait for their rows' commits. It opens the
        database when it first writes (not here): a database that cannot be opened yet (a
        PostgreSQL server still starting) leaves every answered request in the journal until it
        can."""
        try:
            journal: LedgerJournal | None = LedgerJournal(Path(self.settings.home) / "ledger-journal")
        except OSError as e:
            log.warning("headroom: no ledger journal (%s); every answer waits for its row's commit", e)
            journal = None
        # journaled, nothing waits for a commit: rows arriving within 20 ms share one (under
        # load one commit writes many requests' rows; an idle proxy's row is in the database
        # 20 ms after its answer)
        return LedgerWriter(
            None,
            open_sessions=lambda: self.sessions,
            journal=journal,
            flush_seconds=0.02 if journal is not None else 0.0,
        )

    @cached_property
    def sealer(self) -> Sealer:
        with self._lock:
            return Sealer(load_secret(secret_path(self.settings.home, self.settings.secret_key_file)))

    @cached_property
    def counter(self) -> TokenCounter:
        return TokenCounter(self.settings.home, self.settings.tokenizer_path)

    @cached_property
    def store(self) -> OriginalsStore:
        return OriginalsStore(self.sessions, self.settings.ccr_ttl_seconds, self.settings.ccr_max_bytes, self.sealer)

    @cached_property
    def decisions(self) -> DecisionCache:
        return DecisionCache(self.sessions, self.sealer)

    @cached_property
    def tools_minifier(self) -> ToolsMinifier:
        return ToolsMinifier(self.counter, self.settings.tools_minify_exclude)

    @cached_property
    def compress_worker(self) -> CompressWorker:
        return CompressWorker(self.settings.home, self.settings.tokenizer_path)

    @cached_property
    def recent(self) -> RecentRequests:
        return RecentRequests()

    @cached_property
    def tool_order(self) -> ToolOrder:
        return ToolOrder(self.sessions)

    @cached_property
    def session_store(self) -> SessionStore:
        return SessionStore(self.sessions, self.sealer)

    @cached_property
    def extensions(self) -> Extensions[Runtime]:
        return load_extensions()


def load_extensions() -> Extensions[Runtime]:
    """The built-in retrieve and tool-docs tools, then each feature's registrations (prompt
    cache, memory, learning: each module's ``register(ext)``).

    The imports are here, not at the top: every feature module names :class:`Runtime` in its
    types, so importing them from this module's top would make an import cycle."""
    from headroom_core.cache import hooks as cache_hooks
    from headroom_core.ccr.retrieve import RetrieveTool
    from headroom_core.learn import hooks as learn_hooks
    from headroom_core.memory import hooks as memory_hooks
    from headroom_core.tools.on_demand import ToolDocsTool

    ext: Extensions[Runtime] = Extensions(tools=[RetrieveTool(), ToolDocsTool()])
    for feature in (cache_hooks, memory_hooks, learn_hooks):
        feature.register(ext)
    return ext
