"""A bar chart of the last N days for the terminal (rich ``Text``), as ``headroom stats`` shows
it: one column per day, bars drawn with the eighth-block characters, a y-axis with the peak,
and the first, middle and last dates below. Fits ``2 * days + 10`` columns (70 for 30 days).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, timedelta

from rich.text import Text

from headroom_core.cli.ui import compact

_EIGHTHS = " ▁▂▃▄▅▆▇█"


def last_days(values: Mapping[str, float], days: int, today: date) -> list[tuple[str, float]]:
    """``[(YYYY-MM-DD, value)]`` for the ``days`` days ending ``today``, oldest first; days
    missing from ``values`` are 0."""
    return [
        ((today - timedelta(days=i)).isoformat(), float(values.get((today - timedelta(days=i)).isoformat(), 0)))
        for i in range(days - 1, -1, -1)
    ]


def day_bars(series: list[tuple[str, float]], *, title: str, height: int = 8, style: str = "green") -> Text:
    """The chart of ``series`` (``[(YYYY-MM-DD, value)]``, oldest first, values ≥ 0) with
    ``title`` above; ``height`` rows of bars. Each day is two columns wide (a bar and a gap)."""
    peak = max([v for _, v in series] + [0.0])
    label_w = max(len(compact(peak)), 1) + 1
    t = Text(title + "\n", style="bold")
    for row in range(height, 0, -1):
        t.append(compact(peak).rjust(label_w - 1) + "┤" if row == height else " " * (label_w - 1) + "│", style="dim")
        for _, v in series:
            eighths = round(8 * height * v / peak) if peak > 0 else 0
            fill = min(max(eighths - 8 * (row - 1), 0), 8)
            t.append(_EIGHTHS[fill] if fill else " ", style=style)
            t.append(" ")
        t.append("\n")
    t.append(" " * (label_w - 1) + "└" + "─" * (2 * len(series)) + "\n", style="dim")
    if series:
        first, mid, last = series[0][0][5:], series[len(series) // 2][0][5:], series[-1][0][5:]
        line = [" "] * (2 * len(series))
        for pos, lab in ((0, first), (2 * (len(series) // 2), mid), (2 * len(series) - len(last), last)):
            for i, ch in enumerate(lab):
                if 0 <= pos + i < len(line):
                    line[pos + i] = ch
        t.append(" " * label_w + "".join(line).rstrip(), style="dim")
    return t
