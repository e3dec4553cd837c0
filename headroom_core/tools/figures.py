"""The ledger's token figures of a request's ``tools`` array, counted in the background.

A tool list the process has not counted before (a new session's, one with an MCP server more,
the first after a restart) takes 0.1-0.2 s to count (377 KB of tool definitions, twice: as the
client sent it and as forwarded). Only the ledger row needs the figures, and the client's answer
waits for that row: counting runs in threads of their own (the tokenizer runs without the GIL)
and starts once the request is on its way (:meth:`ToolsFigures.start`, from the plan's
``persist`` job), so it overlaps the upstream's answer instead of competing with the plan and
the forwarding for the processor (both threads count the pieces of a long text: on a two-core
machine they took both cores while a new session's plan ran), or when a figure is first asked.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from headroom_core.compress.tokens import TokenCounter

log = logging.getLogger("headroom")

#: Threads that count tools texts (two: counting releases the GIL; a third would only queue).
_COUNTING = ThreadPoolExecutor(max_workers=2, thread_name_prefix="headroom-count")


@dataclass(frozen=True)
class ToolsFigures:
    """The ``tools`` array as the client sent it (``before``) and as forwarded (``after``), JSON
    texts, and why it changed (``reason``); ``proxy``: the JSON texts of the proxy's own tool
    definitions in ``after`` (``headroom_retrieve``, the memory tools), joined, "" when none.
    Counting starts with :meth:`start` (or the first figure asked), in the background; :attr:`tokens_before` /
    :attr:`tokens_after` / :attr:`tokens_proxy` (tokens) wait for it, :attr:`future` resolves to
    ``(before, after, proxy)`` once counted. ``after`` includes the proxy's tools;
    :attr:`tokens_client_after` leaves them out (the client's tools as forwarded). A text that
    cannot be counted counts 0 (logged): the ledger row is written all the same. Never raises."""

    before: str
    after: str
    reason: str
    counter: TokenCounter
    proxy: str = ""
    _future: Future | None = field(init=False, default=None, repr=False, compare=False)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock, repr=False, compare=False)

    def start(self) -> Future:
        """Start counting (once; later calls return the same future) and return its future,
        which resolves to ``(before, after, proxy)``."""
        with self._lock:
            if self._future is None:
                object.__setattr__(self, "_future", _COUNTING.submit(self._count))
            assert self._future is not None
            return self._future

    @property
    def future(self) -> Future:
        """The counting's future (counting starts now if it has not)."""
        return self._future if self._future is not None else self.start()

    def _count(self) -> tuple[int, int, int]:
        try:
            before = self.counter.count(self.before) if self.before else 0
            after = before if self.after == self.before else self.counter.count(self.after) if self.after else 0
            proxy = self.counter.count(self.proxy) if self.proxy else 0
            return before, after, proxy
        except Exception:  # noqa: BLE001 - figures for the ledger only
            log.warning(
                "headroom: the tools text could not be counted; the ledger records 0 tokens for it", exc_info=True
            )
            return 0, 0, 0

    @property
    def counted(self) -> bool:
        """Whether both figures are known (reading them will not wait)."""
        return self.future.done()

    @property
    def tokens_before(self) -> int:
        return self.future.result()[0]

    @property
    def tokens_after(self) -> int:
        return self.future.result()[1]

    @property
    def tokens_proxy(self) -> int:
        """Tokens of the proxy's own tool definitions (counted on their own)."""
        return self.future.result()[2]

    @property
    def tokens_client_after(self) -> int:
        """Tokens of the client's tools as forwarded: :attr:`tokens_after` without the proxy's
        tools (never below 0; the two texts are counted apart, so a token at their seam may
        differ by one)."""
        return max(0, self.tokens_after - self.tokens_proxy)
