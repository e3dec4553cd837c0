"""The ledger's token figures of a request's ``tools`` array, counted in the background.

A tool list the process has not counted before (a new session's, one with an MCP server more,
the first after a restart) takes 0.1-0.2 s to count (377 KB of tool definitions, twice: as the
client sent it and as forwarded). Only the ledger row needs the figures, and the client's answer
waits for that row: counting starts when the plan decides the ``tools`` text, in a thread of its
own (the tokenizer runs without the GIL), so it overlaps the rest of the plan and the upstream's
answer instead of following them.
"""

from __future__ import annotations

import logging
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
    Counting starts on construction, in the background; :attr:`tokens_before` /
    :attr:`tokens_after` / :attr:`tokens_proxy` (tokens) wait for it, :attr:`future` resolves to
    ``(before, after, proxy)`` once counted. ``after`` includes the proxy's tools;
    :attr:`tokens_client_after` leaves them out (the client's tools as forwarded). A text that
    cannot be counted counts 0 (logged): the ledger row is written all the same. Never raises."""

    before: str
    after: str
    reason: str
    counter: TokenCounter
    proxy: str = ""
    future: Future = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "future", _COUNTING.submit(self._count))

    def _count(self) -> tuple[int, int, int]:
        try:
            before = self.counter.count(self.before) if self.before else 0
            after = before if self.after == self.before else self.counter.count(self.after) if self.after else 0
            proxy = self.counter.count(self.proxy) if self.proxy else 0
            return before, after, proxy
        except Exception:  # noqa: BLE001 - figures for the ledger only
            log.warning("headroom: the tools text could not be counted; the ledger records 0 tokens for it", exc_info=True)
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
