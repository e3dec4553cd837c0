"""Inline SVG charts for the stats page: pure functions from figures to SVG text (no
JavaScript, nothing fetched), so the page renders the same in any browser or a DOM dump."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape


def _fmt(n: float) -> str:
    """A compact count: 950, 12.3k, 4.5M."""
    n = float(n)
    for unit, div in (("M", 1e6), ("k", 1e3)):
        if abs(n) >= div:
            return f"{n / div:.1f}{unit}"
    return f"{n:.0f}"


def change(before: float, after: float, share: str) -> str:
    """The change from ``before`` to ``after`` in words for a chart label: ``−1.2k (40%)`` when it
    shrank, ``+999 (125% more)`` when it grew, ``±0`` when equal: one sign, never two."""
    if after < before:
        return f"−{_fmt(before - after)} ({share})"
    if after > before:
        return f"+{_fmt(after - before)} ({share} more)" if before else f"+{_fmt(after - before)}"
    return "±0"


def stacked_bars(
    labels: Sequence[str],
    lower: Sequence[int],
    upper: Sequence[int],
    *,
    lower_name: str,
    upper_name: str,
    width: int = 930,
    height: int = 240,
) -> str:
    """Vertical bars, one per label, ``lower`` at the bottom and ``upper`` stacked on it.

    Returns an ``<svg>`` element (string) with a legend; each bar's ``<rect>`` carries
    ``data-label`` and ``data-value`` so tests and tools can read the figures back.
    """
    pad_l, pad_b, pad_t = 56, 40, 28
    inner_w, inner_h = width - pad_l - 10, height - pad_b - pad_t
    peak = max([a + b for a, b in zip(lower, upper)] + [1])
    n = max(len(labels), 1)
    slot = inner_w / n
    bar = max(min(slot * 0.7, 48), 2)
    parts = [
        f'<svg class="chart" role="img" viewBox="0 0 {width} {height}" width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">'
    ]
    for i in range(5):
        y = pad_t + inner_h * i / 4
        parts.append(f'<line x1="{pad_l}" x2="{width - 10}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        parts.append(
            f'<text x="{pad_l - 6}" y="{y + 4:.1f}" text-anchor="end" class="axis">{_fmt(peak * (4 - i) / 4)}</text>'
        )
    every = max(1, n // 10)
    for i, (label, lo, up) in enumerate(zip(labels, lower, upper)):
        x = pad_l + slot * i + (slot - bar) / 2
        h_lo = inner_h * lo / peak
        h_up = inner_h * up / peak
        y_lo = pad_t + inner_h - h_lo
        lab = escape(label)
        parts.append(
            f'<rect class="lower" x="{x:.1f}" y="{y_lo:.1f}" width="{bar:.1f}" height="{h_lo:.1f}" data-label="{lab}" data-series="{escape(lower_name)}" data-value="{lo}"><title>{lab}: {escape(lower_name)} {lo:,}</title></rect>'
        )
        parts.append(
            f'<rect class="upper" x="{x:.1f}" y="{y_lo - h_up:.1f}" width="{bar:.1f}" height="{h_up:.1f}" data-label="{lab}" data-series="{escape(upper_name)}" data-value="{up}"><title>{lab}: {escape(upper_name)} {up:,}</title></rect>'
        )
        if i % every == 0:
            parts.append(
                f'<text x="{x + bar / 2:.1f}" y="{height - pad_b + 16}" text-anchor="middle" class="axis">{lab[5:] if len(lab) == 10 else lab}</text>'
            )
    parts.append(
        f'<rect class="lower" x="{pad_l}" y="6" width="12" height="12"/><text x="{pad_l + 18}" y="16" class="legend">{escape(lower_name)}</text>'
    )
    parts.append(
        f'<rect class="upper" x="{pad_l + 240}" y="6" width="12" height="12"/><text x="{pad_l + 258}" y="16" class="legend">{escape(upper_name)}</text>'
    )
    parts.append("</svg>")
    return "".join(parts)


def paired_hbars(labels: Sequence[str], before: Sequence[int], after: Sequence[int], *, width: int = 930) -> str:
    """Horizontal bar pairs per label: ``before`` (full bar) and ``after`` (inner bar), with
    the saving in tokens and percent written beside each. Returns an ``<svg>`` element."""
    row, pad_l, pad_t = 34, 150, 26
    height = pad_t + row * max(len(labels), 1) + 10
    inner_w = width - pad_l - 170
    peak = max(list(before) + [1])
    parts = [
        f'<svg class="chart" role="img" viewBox="0 0 {width} {height}" width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">'
    ]
    parts.append(
        f'<rect class="before" x="{pad_l}" y="6" width="12" height="12"/><text x="{pad_l + 18}" y="16" class="legend">before</text>'
    )
    parts.append(
        f'<rect class="after" x="{pad_l + 90}" y="6" width="12" height="12"/><text x="{pad_l + 108}" y="16" class="legend">after</text>'
    )
    for i, (label, b, a) in enumerate(zip(labels, before, after)):
        y = pad_t + row * i
        wb, wa = inner_w * b / peak, inner_w * a / peak
        lab = escape(label)
        pct = f"{100 * abs(b - a) / b:.0f}%" if b else "-"
        parts.append(f'<text x="{pad_l - 8}" y="{y + 18}" text-anchor="end" class="axis">{lab}</text>')
        parts.append(
            f'<rect class="before" x="{pad_l}" y="{y + 4}" width="{wb:.1f}" height="22" data-label="{lab}" data-series="before" data-value="{b}"><title>{lab}: before {b:,}</title></rect>'
        )
        parts.append(
            f'<rect class="after" x="{pad_l}" y="{y + 9}" width="{wa:.1f}" height="12" data-label="{lab}" data-series="after" data-value="{a}"><title>{lab}: after {a:,}</title></rect>'
        )
        parts.append(f'<text x="{pad_l + inner_w + 8}" y="{y + 19}" class="axis">{change(b, a, pct)}</text>')
    parts.append("</svg>")
    return "".join(parts)
