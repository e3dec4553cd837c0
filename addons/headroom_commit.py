"""An answer goes to the client once its ledger row is committed (HTTP response, or the frame
that ends a WebSocket turn): a proxy killed at any moment has every answered request on disk."""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Future

log = logging.getLogger("headroom")

#: Longest an answer waits for its ledger row to be committed (seconds).
LEDGER_WAIT = 2.0


async def until_committed(committed: Future, where: str) -> None:
    """Return once ``committed`` (the future :meth:`~headroom_core.ledger_writer.LedgerWriter.submit`
    returned) is done, or after :data:`LEDGER_WAIT` seconds (logged with ``where``, the flow's
    description). Never cancels the commit, never raises."""
    done, _ = await asyncio.wait({asyncio.wrap_future(committed)}, timeout=LEDGER_WAIT)
    if not done:
        log.warning("headroom: %s: the ledger row is not committed after %.0f s; answering anyway", where, LEDGER_WAIT)
