"""One answered request's ledger entry: its ``request_outcomes`` rows and its ``tool_usage``
counts, as the ledger writer commits them and the ledger journal keeps them."""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

#: Entry ids: 20 random hex characters per process (``uuid4``), then a 12-digit hex counter: as
#: unique as a ``uuid4`` per entry, without a system call per request.
_PREFIX = uuid.uuid4().hex[:20]
_COUNTER = itertools.count()


def new_entry_id() -> str:
    """A fresh entry id: 32 hex characters, unique across processes and restarts."""
    return f"{_PREFIX}{next(_COUNTER):012x}"


@dataclass
class Entry:
    """One request's ledger write: its ``request_outcomes`` row (column name → value, every
    column of :class:`RequestOutcome` but the key) and ``(tool name, offered, called)`` counts
    for ``client`` and ``project``.

    Rows are column values, not ORM objects: building a mapped object costs about as much as the
    whole request's plan for a small request, and the writer inserts them in one executemany."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    client: str = ""
    project: str = ""
    tools: dict[str, list[int]] = field(default_factory=dict)
    seen_at: datetime | None = None
    #: the entry's id (32 hex characters, :func:`new_entry_id`), in its rows' ``entry_id`` column
    #: and its journal line (:mod:`headroom_core.ledger_journal`)
    id: str = field(default_factory=new_entry_id)

    def add(self, row: dict[str, Any]) -> None:
        """Queue ``row`` (the values of one ``request_outcomes`` row) with this entry."""
        row["entry_id"] = self.id
        self.rows.append(row)
