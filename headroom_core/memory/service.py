"""The memory of one proxy process: opens the store off the request path, loads the embedding
model in the background, and keeps memory failures away from traffic.

- The store opens in a background thread; a request waits for it at most :data:`OPEN_WAIT_SECONDS`.
  When the database cannot be opened, memory is off (one clear log line) and the proxy retries
  every :data:`RETRY_SECONDS`; traffic flows meanwhile.
- Until the embedding model is loaded (or when it cannot be), search is text search; the log says
  so once.
- Uses of memories (injections) are recorded on a background worker, and archiving runs there at
  most every :data:`MAINTAIN_SECONDS`.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Iterable

from sqlalchemy import text as sql_text
from sqlalchemy.engine import make_url

from headroom_core.compress.embeddings import Embedder, embedder
from headroom_core.memory.store import MemoryStore

if TYPE_CHECKING:
    from headroom_core.runtime import Runtime

log = logging.getLogger("headroom")

OPEN_WAIT_SECONDS = 3.0
RETRY_SECONDS = 30.0
ERROR_LOG_SECONDS = 60.0
MAINTAIN_SECONDS = 3600.0


def _hide(url: str) -> str:
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001
        return "<unparseable URL>"


class MemoryService:
    """Memory for the runtime ``rt`` (see the module docstring). ``store()`` returns the open
    :class:`MemoryStore` or None (memory off, disabled, or not open yet)."""

    def __init__(self, rt: "Runtime") -> None:
        s = rt.settings
        self._rt = weakref.ref(rt)
        self.settings = s
        self.enabled = s.memory
        self.url = s.memory_db_url or s.database_url
        self.embedder: Embedder = embedder(s.memory_model_path)
        self._store: MemoryStore | None = None
        self._opening = threading.Event()
        self._opened = threading.Event()
        self._next_try = 0.0
        self._last_open_error = ""
        self._lock = threading.Lock()
        self._last_error_log = 0.0
        self._said_text_mode = ""
        self._last_maintain = time.monotonic()
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="headroom-memory")
        if self.enabled:
            self.embedder.start()

    # -- opening ---------------------------------------------------------------------------

    def store(self, wait: float = OPEN_WAIT_SECONDS) -> MemoryStore | None:
        if not self.enabled:
            return None
        if self._store is not None:
            return self._store
        with self._lock:
            start = not self._opening.is_set() and time.monotonic() >= self._next_try
            if start:
                self._opening.set()
                self._opened.clear()
                threading.Thread(target=self._open, name="headroom-memory-open", daemon=True).start()
        if self._opening.is_set() and wait > 0:
            self._opened.wait(wait)
        return self._store

    def _open(self) -> None:
        try:
            rt = self._rt()
            if rt is None:
                return
            if self.url == rt.settings.database_url:
                sessions = rt.sessions
            else:
                from headroom_core.db.engine import open_database

                sessions = open_database(self.url)
            with sessions() as s:
                s.execute(sql_text("SELECT 1"))
            s_ = self.settings
            self._store = MemoryStore(
                sessions,
                self.embedder,
                dedup_similarity=s_.memory_dedup_similarity,
                half_life_days=s_.memory_half_life_days,
                archive_below=s_.memory_archive_below,
                archive_min_age_days=s_.memory_archive_min_age_days,
            )
            log.info("headroom memory: on, store %s", _hide(self.url))
        except Exception as e:  # noqa: BLE001 - memory off, traffic flows
            self._next_try = time.monotonic() + RETRY_SECONDS
            msg = f"{type(e).__name__}: {e}".splitlines()[0][:300]
            if msg != self._last_open_error:
                log.error(
                    "headroom memory: off: cannot open the memory store %s (%s); requests go on without memory, retrying every %d s",
                    _hide(self.url), msg, int(RETRY_SECONDS),
                )  # fmt: skip
                self._last_open_error = msg
        finally:
            self._opening.clear()
            self._opened.set()

    # -- the memory tools are decided by the setting, once per session ------------------------

    def offered(self) -> bool:
        """Whether a session that starts now gets the memory tools: memory is on. Not whether
        the store is open at this moment: the session keeps its tools for all its turns (the
        cached ``tools`` prefix), and a call made while the store cannot be reached is answered
        with an error that says so."""
        return self.enabled

    # -- failures and modes ----------------------------------------------------------------

    def store_failed(self, what: str, e: BaseException) -> None:
        """Log a store failure during a request (at most one line a minute)."""
        now = time.monotonic()
        if now - self._last_error_log >= ERROR_LOG_SECONDS:
            self._last_error_log = now
            log.error(
                "headroom memory: %s failed (%s: %s); the request goes on without memory",
                what,
                type(e).__name__,
                str(e).splitlines()[0][:200] if str(e) else "",
            )

    def note_search_mode(self, store: MemoryStore) -> None:
        """Say in the log that search is textual until the model is loaded (once while it loads,
        once more if loading failed)."""
        if store.vector_mode:
            return
        why = f"it could not be loaded: {self.embedder.error}" if self.embedder.error else "it is still loading"
        if why != self._said_text_mode:
            self._said_text_mode = why
            log.warning(
                "headroom memory: embedding model not available (%s); memory search falls back to text search", why
            )

    # -- background work -------------------------------------------------------------------

    def touch_later(self, store: MemoryStore, ids: Iterable[str]) -> None:
        """Record uses of ``ids`` off the request path; archive stale memories now and then."""
        ids = list(ids)
        do_maintain = time.monotonic() - self._last_maintain >= MAINTAIN_SECONDS
        if do_maintain:
            self._last_maintain = time.monotonic()

        def work() -> None:
            try:
                if ids:
                    store.touch(ids)
                if do_maintain:
                    n = store.maintain()
                    if n:
                        log.info("headroom memory: archived %d memories of low value", n)
            except Exception as e:  # noqa: BLE001
                self.store_failed("recording memory use", e)

        self._worker.submit(work)

    def drain(self, timeout: float = 10.0) -> None:
        """Wait until queued background work is done (tests, shutdown)."""
        self._worker.submit(lambda: None).result(timeout)


_services: "weakref.WeakKeyDictionary[Runtime, MemoryService]" = weakref.WeakKeyDictionary()
_services_lock = threading.Lock()


def service(rt: "Runtime") -> MemoryService:
    """The :class:`MemoryService` of runtime ``rt`` (created on first use)."""
    with _services_lock:
        svc = _services.get(rt)
        if svc is None:
            svc = _services[rt] = MemoryService(rt)
        return svc
