"""An answer goes to the client once its ledger row is committed (HTTP response, or the frame
that ends a WebSocket turn): a proxy killed at any moment has every answered request on disk.
It also waits for what its request taught (live learning, memory capture: the observers, run
after forwarding): the client's next turn may reach another proxy of a team (one database),
which must find it, as one proxy's next request does."""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Future

log = logging.getLogger("headroom")

#: Longest an answer waits for its ledger row to be committed (seconds).
LEDGER_WAIT = 2.0
#: Longest an answer waits for the observers of its request (seconds).
TAUGHT_WAIT = 10.0


async def until_committed(committed: Future | None, where: str, taught: Future | asyncio.Future | None = None) -> None:
    """Return once ``committed`` (the future :meth:`~headroom_core.ledger_writer.LedgerWriter.submit`
    returned) and ``taught`` (the request's observers' run, a thread's or the event loop's
    future) are done, each or both None, or after
    :data:`LEDGER_WAIT` / :data:`TAUGHT_WAIT` seconds (logged with ``where``, the flow's
    description). Waits for both at once; never cancels them, never raises."""
    await asyncio.gather(
        _bounded(committed, LEDGER_WAIT, where, "the ledger row is not committed"),
        _bounded(taught, TAUGHT_WAIT, where, "learning from the request is not written"),
    )


async def _bounded(f: Future | asyncio.Future | None, seconds: float, where: str, what: str) -> None:
    if f is None or f.done():
        return
    done, _ = await asyncio.wait({asyncio.wrap_future(f)}, timeout=seconds)
    if not done:
        log.warning("headroom: %s: %s after %.0f s; answering anyway", where, what, seconds)
