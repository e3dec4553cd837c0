"""Keeping the cyclic garbage collector's pauses short in a long-running proxy.

CPython's full (generation 2) collection walks every container object the process tracks. After
the warm-up (mitmproxy, SQLAlchemy, the cl100k_base vocabulary) that is ~110-125 ms on the 2-core
test machine, with the embedding model and torch loaded more, and it runs on whichever thread
allocates when the threshold trips: a request's plan, or the event loop relaying a flow, stops
for that long. Objects loaded at start-up live as long as the process, so walking them finds
nothing. :func:`freeze_long_lived` moves every object tracked at that moment into the permanent
generation (``gc.freeze()``, Python 3.7+; the approach Instagram described for its web servers,
https://instagram-engineering.com/copy-on-write-friendly-python-garbage-collection-ad6ed5233ddf),
so later full collections walk only what was made after it. Reference counting still frees
frozen objects; only a reference cycle already garbage at freeze time would stay, so the
collector runs once first.

The young generation's threshold stays CPython's (700): raising it to 10,000 cut the plan's CPU
time in-process, but under load (bench/bench_load.py) cyclic garbage holding parsed requests
then lived until the rarer full collections: resident memory at the end of 10,000 requests
613 MiB instead of 332.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger("headroom")


def freeze_long_lived(what: str) -> int:
    """Collect once, then exclude every object now tracked from future collections.

    Call at a quiet point right after loading something that lives as long as the process
    (``what`` names it for the log). Returns the number of objects now frozen (all freezes so
    far). The collection itself holds the GIL for as long as one full collection (~0.1-0.3 s).
    Never raises.
    """
    t0 = time.perf_counter()
    try:
        gc.collect()
        gc.freeze()
    except Exception:  # noqa: BLE001 - only a missed optimisation
        log.exception("headroom: could not freeze the objects of %s", what)
        return 0
    n = gc.get_freeze_count()
    log.debug("headroom: %d long-lived objects frozen after %s (%.0f ms)", n, what, (time.perf_counter() - t0) * 1000)
    return n


#: Bodies at least this large (bytes) are planned and stored with the cyclic collector paused.
PAUSE_MIN_BYTES = 4 << 20

_pause_lock = threading.Lock()
_pausers = 0
_was_enabled = False


@contextmanager
def paused(when: bool = True) -> Iterator[None]:
    """Pause the cyclic garbage collector while the block runs (``when`` False: leave it).

    The walk of one huge request (a long agent session: 60,000 messages, ~1 million parsed JSON
    objects alive at once) allocates millions of objects; each full collection it trips walks
    all of them, and the young generation's threshold trips one every few hundred thousand
    allocations: ~40% of such a plan and of storing its session's state went to collections
    that found nothing (parsed JSON holds no reference cycles; reference counting frees it).
    Paused, nothing is collected meanwhile in any thread (cyclic garbage waits the few seconds
    of the block). Counted across threads: the collector runs again once the last block that
    paused it ends, and only if it was running before the first. Never raises."""
    global _pausers, _was_enabled
    if not when:
        yield
        return
    with _pause_lock:
        if _pausers == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _pausers += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pausers -= 1
            if _pausers == 0 and _was_enabled:
                gc.enable()
