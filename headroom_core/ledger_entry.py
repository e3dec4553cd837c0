"""One answered request's ledger entry: its ``request_outcomes`` rows and its ``tool_usage``
counts, as the ledger writer commits them and the ledger journal keeps them."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


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
    #: the entry's id (32 hex characters, ``uuid4``), in its rows' ``entry_id`` column and its
    #: journal line (:mod:`headroom_core.ledger_journal`)
    id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def add(self, row: dict[str, Any]) -> None:
        """Queue ``row`` (the values of one ``request_outcomes`` row) with this entry."""
        row["entry_id"] = self.id
        self.rows.append(row)
