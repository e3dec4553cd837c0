"""The requests the proxy planned last, kept in memory so the next turn of the same
conversation pays only for what is new in it.

A client resends its whole conversation on every turn. The parse of the previous request
(:class:`~headroom_core.wire.view.BodyView`), the keyed hashes of its messages and what the tools
step made of its ``tools`` are kept here; the next request of the same client finds them by
the start of its body (which holds the conversation's first message) and reuses whatever its
bytes show to be unchanged. Everything kept is an optimisation: a miss only costs time.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from headroom_core.wire.view import BodyView

#: Characters of a body's start that, with the client's credential, find its predecessor.
HEAD_CHARS = 512
#: Bodies smaller than this are parsed afresh every time (keeping them would gain nothing).
MIN_CHARS = 16 * 1024


@dataclass(frozen=True)
class RecentRequest:
    """One planned request: its ``view``, ``scope`` (:class:`headroom_core.scope.Scope`) and
    ``session_key``, the keyed ``hashes`` of its conversation elements, and ``tools`` (what the
    tools step returned, with the session's tools state it started from), for reuse."""

    view: BodyView
    scope: Any
    session_key: str
    hashes: tuple[str, ...]
    tools: Any = None


def _index(credential: str, project: str, text: str) -> str:
    h = hashlib.blake2b(digest_size=16)
    for part in (credential, project, text[:HEAD_CHARS]):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()


class RecentRequests:
    """The last ``size`` large requests, by client credential, project header and body start."""

    def __init__(self, size: int = 16) -> None:
        self._items: OrderedDict[str, RecentRequest] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def find(self, credential: str, project: str, text: str) -> RecentRequest | None:
        """The latest request whose body started like ``text`` (same credential and project
        header), or None."""
        if len(text) < MIN_CHARS:
            return None
        with self._lock:
            return self._items.get(_index(credential, project, text))

    def remember(self, credential: str, project: str, item: RecentRequest) -> None:
        """Keep ``item`` as the latest request of its kind (the oldest go beyond ``size``)."""
        text = item.view.text
        if len(text) < MIN_CHARS:
            return
        key = _index(credential, project, text)
        with self._lock:
            self._items[key] = item
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)
