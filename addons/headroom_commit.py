"""An answer goes to the client once its ledger row is durable (HTTP response, or the frame
that ends a WebSocket turn): in the ledger journal, which takes microseconds and needs no wait
(:mod:`headroom_core.ledger_journal`), else committed; a proxy killed at any moment has every
answered request on disk (in the journal, written to the database by the next start).
It also waits for what its request taught (live learning, memory capture: the observers, run
after forwarding): the client's next turn may reach another proxy of a team (one database),
which must find it, as one proxy's next request does."""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Future
from typing import Callable

log = logging.getLogger("headroom")

#: Longest an answer waits for its ledger row to be committed (seconds).
LEDGER_WAIT = 2.0
#: Longest an answer waits for the observers of its request (seconds).
TAUGHT_WAIT = 10.0


async def until_committed(committed: Future | None, where: str | Callable[[], str], taught: Future | asyncio.Future | None = None) -> None:
    """Return once ``committed`` (the future :meth:`~headroom_core.ledger_writer.LedgerWriter.submit`
    returned) and ``taught`` (the request's observers' run, a thread's or the event loop's
    future) are done, each or both None, or after
    :data:`LEDGER_WAIT` / :data:`TAUGHT_WAIT` seconds (logged with ``where``, the flow's
    description, or a function giving it: called only then). Waits for both at once; never
    cancels them, never raises."""
    waits = [(f, s, what) for f, s, what in ((committed, LEDGER_WAIT, "the ledger row is not committed"), (taught, TAUGHT_WAIT, "learning from the request is not written")) if f is not None and not f.done()]
    if len(waits) == 1:  # the usual case: no task for a second wait
        await _bounded(*waits[0], where)
    elif waits:
        await asyncio.gather(*(_bounded(f, s, what, where) for f, s, what in waits))


async def _bounded(f: Future | asyncio.Future, seconds: float, what: str, where: str | Callable[[], str]) -> None:
    done, _ = await asyncio.wait({asyncio.wrap_future(f)}, timeout=seconds)
    if not done:
        log.warning("headroom: %s: %s after %.0f s; answering anyway", where() if callable(where) else where, what, seconds)
