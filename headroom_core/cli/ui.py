"""Terminal output shared by the ``headroom`` commands: one-line errors, lines meant to be
copied (never hard-wrapped), money and token figures, and progress for long steps.

Rich wraps text at the terminal's width by inserting newlines; a command split that way breaks
when pasted. Everything a user may copy goes through :func:`copyable` (``soft_wrap``: the
terminal folds it visually, the text keeps one line).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.markup import escape

err = Console(stderr=True, emoji=False)
out = Console(emoji=False)  # hex such as a fingerprint holds ":CD:"-like pairs


def fail(command: str, message: str) -> None:
    """Print ``headroom <command>: <message>`` on standard error as one line (never wrapped;
    ``message`` is plain text, not markup)."""
    err.print(f"[red]headroom {command}:[/] {escape(' '.join(str(message).split()))}", soft_wrap=True, highlight=False)


def note(command: str, message: str, *, style: str = "yellow") -> None:
    """A one-line warning or note on standard error (``message`` is plain text)."""
    err.print(
        f"[{style}]headroom {command}:[/] {escape(' '.join(str(message).split()))}", soft_wrap=True, highlight=False
    )


def copyable(text: str, console: Console | None = None, *, markup: bool = True) -> None:
    """Print ``text`` (rich markup allowed unless ``markup`` is False) without inserting line
    breaks, so commands in it paste back whole."""
    (console or out).print(text, soft_wrap=True, markup=markup, highlight=False)


def usd(v: float | None) -> str:
    """Money in USD for a table cell: ``$1,234``, ``$12.34``, ``$0.0123``; ``-`` for None."""
    if v is None:
        return "-"
    a = abs(v)
    if a >= 1000:
        s = f"${a:,.0f}"
    elif a >= 1 or a == 0:
        s = f"${a:,.2f}"
    else:
        s = f"${a:.4f}"
    return f"-{s}" if v < 0 else s


def tokens(n: int | None) -> str:
    """A token count with thousands separators (``1,234,567``); ``-`` for None."""
    return "-" if n is None else f"{n:,}"


def compact(n: float) -> str:
    """A compact count: ``950``, ``12.3k``, ``4.5M``."""
    for unit, div in (("M", 1e6), ("k", 1e3)):
        if abs(n) >= div:
            return f"{n / div:.1f}{unit}"
    return f"{n:.0f}"


def pct(v: float | None) -> str:
    """A share 0..1 as ``12.3%``; ``-`` for None."""
    return f"{100 * v:.1f}%" if v is not None else "-"


@contextlib.contextmanager
def status(message: str, *, console: Console | None = None, quiet: bool = False) -> Iterator[Callable[[str], None]]:
    """A spinner with ``message`` on standard error while a long step runs (nothing when
    ``quiet`` or standard error is not a terminal). Yields a function that replaces the message
    (the step's next phase; a no-op without a spinner). Messages are plain text."""
    c = console or err
    if quiet or not c.is_terminal:
        yield lambda _message: None
        return
    with c.status(escape(message), spinner="dots") as st:
        yield lambda m: st.update(escape(m))
