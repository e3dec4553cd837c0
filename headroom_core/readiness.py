"""Whether a proxy's runtime has what its first plan needs, and a bounded wait for it.

A proxy listens as soon as mitmproxy starts, while its warm-up (database opened and migrated,
secret key, vocabulary, compressors and the compression worker: ``addons/headroom_options.py``)
still runs in a thread. A request arriving then waits for the warm-up *before* its compression
time starts (``compress_timeout_seconds`` bounds the plan, not the wait), so it is compressed
like any later one; past :data:`READY_WAIT_SECONDS` it goes on untouched and the reason is logged
once per runtime.
"""

from __future__ import annotations

import asyncio
import logging
import threading

log = logging.getLogger("headroom")

#: Seconds a request waits for the warm-up before it goes on untouched. A cold start on a busy
#: two-core machine is ready in a few seconds (bench/bench_capacity.py prints it); clients wait
#: minutes for an answer (Claude Code's and the SDKs' default timeouts are 10 minutes), so 30 s
#: of waiting at most once per proxy start costs no request.
READY_WAIT_SECONDS = 30.0


class Readiness:
    """The warm-up's end, awaited from any event loop and set from any thread. Thread-safe.

    A runtime nobody warms (a CLI command, a test) has nothing to wait for: ``ended`` is true
    until :meth:`begin` (the proxy's warm-up starting), then again once :meth:`end` was called,
    whether the warm-up succeeded or failed (a failed one is not waited for: requests then fail
    open on their own); ``ready`` only when it succeeded."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ended = True
        self._failure: str | None = None
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._late_told = False

    @property
    def ended(self) -> bool:
        """Whether the warm-up is over (done or failed)."""
        return self._ended

    @property
    def ready(self) -> bool:
        """Whether the warm-up is over and succeeded."""
        return self._ended and self._failure is None

    def begin(self) -> None:
        """The warm-up starts: requests wait (:meth:`wait`) until :meth:`end`."""
        with self._lock:
            self._ended, self._failure = False, None

    def end(self, failure: str | None = None) -> None:
        """Mark the warm-up over (``failure``: why it failed, else None) and wake every waiter."""
        with self._lock:
            self._ended, self._failure = True, failure
            waiters, self._waiters = self._waiters, []
        for loop, fut in waiters:
            loop.call_soon_threadsafe(_wake, fut)

    async def wait(self, limit_s: float) -> bool:
        """Wait up to ``limit_s`` seconds for the warm-up to end; True when it has. Never raises
        (a cancelled caller is cancelled as usual). On False, the first late request of this
        runtime logs why it goes on untouched; later ones are silent."""
        if self._ended:
            return True
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if self._ended:
                return True
            self._waiters.append((loop, fut))
        try:
            await asyncio.wait_for(fut, limit_s)
            return True
        except asyncio.TimeoutError:
            with self._lock:
                told, self._late_told = self._late_told, True
            if not told:
                log.warning(
                    "headroom: the proxy was still warming up (database, vocabulary, compressors) %.0f s after a request came; "
                    "requests go upstream uncompressed until it is ready (logged once)", limit_s,
                )  # fmt: skip
            return self._ended
        finally:
            with self._lock:
                if (loop, fut) in self._waiters:
                    self._waiters.remove((loop, fut))


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
