"""Tables that fit the terminal, as ``headroom stats`` draws them: a simple head rule and no
side borders (every column gets the room), figures and ids on one line (never wrapped or cut),
text that folds, names cut with an ellipsis, and :func:`distinct_names` for file names that
share a long prefix (Codex's ``rollout-<date>-<uuid>.jsonl``), so two files never look alike.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import PurePath

from rich import box
from rich.table import Table

#: Characters a shared beginning must have before it is left out of the names shown.
MIN_SHARED = 8
ELLIPSIS = "…"


def table(title: str, caption: str | None = None) -> Table:
    """An empty table in the ``stats`` style: bold title on the left, a rule under the header,
    no side borders or outer padding; ``caption`` (dim, under it) e.g. names a common folder."""
    return Table(title=title, caption=caption, title_justify="left", caption_justify="left", box=box.SIMPLE_HEAD,
                 pad_edge=False, show_edge=False, title_style="bold", caption_style="dim")  # fmt: skip


def number(t: Table, name: str) -> None:
    """Add a right-aligned column of figures that is never wrapped."""
    t.add_column(name, justify="right", no_wrap=True)


def _cut_back(prefix: str) -> str:
    """``prefix`` shortened to end at a separator (``-``, ``_``, ``.``, ``/``, ``T``, a space)
    so no name is shown starting in the middle of a word or number."""
    for i in range(len(prefix) - 1, -1, -1):
        if prefix[i] in "-_./ T":
            return prefix[: i + 1]
    return ""


def distinct_names(paths: Sequence[str]) -> tuple[str, list[str]]:
    """How to show ``paths`` (files) in a narrow column: their common folder (``""`` when none)
    and, per path, the part that tells it from the others, in order.

    Each is the file name, with as many parent folders as needed to tell equal names apart;
    a beginning shared by all of them (at least :data:`MIN_SHARED` characters, cut back to a
    separator) is left out and shown as ``…``. E.g. ``rollout-2025-06-01T10-00-01-aa.jsonl`` and
    ``rollout-2025-06-01T10-00-02-bb.jsonl`` become ``…01-aa.jsonl`` and ``…02-bb.jsonl``."""
    if not paths:
        return "", []
    parts = [PurePath(p).parts for p in paths]
    depth = 1
    while True:
        names = ["/".join(ps[-depth:]) for ps in parts]
        if len(set(names)) == len(set(paths)) or depth >= max(len(ps) for ps in parts):
            break
        depth += 1
    try:
        folder = os.path.commonpath([str(PurePath(*ps[:-depth])) if len(ps) > depth else "." for ps in parts])
    except ValueError:  # absolute and relative paths mixed
        folder = ""
    folder = "" if folder in (".", "") else folder
    shared = _cut_back(os.path.commonprefix(names)) if len(set(names)) > 1 else ""
    if len(shared) >= MIN_SHARED:
        names = [ELLIPSIS + n[len(shared) :] for n in names]
    return folder, names
