"""``headroom stats``: the savings ledger in the terminal.

Plain ``headroom stats`` fits 80 columns: the summary (tokens and money), a bar chart of the
tokens saved per day over the last 30 days, and compact tables per agent, project and content
kind. ``--wide`` prints every column; ``--by`` one breakdown; ``--csv`` and ``--json`` the
figures for other programs. Reading never creates a database.
"""

from __future__ import annotations

import csv
import json
import sys
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Optional

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from headroom_core.cli import ui
from headroom_core.cli.dbopen import open_existing, safe_url
from headroom_core.cli.term_chart import day_bars, last_days
from headroom_core.settings import SettingsError, load_settings

if TYPE_CHECKING:
    from headroom_core import ledger

console = Console()

TITLES = {
    "agent": "per agent",
    "client": "per client",
    "project": "per project",
    "dialect": "per dialect",
    "model": "per model",
    "action": "per action",
    "day": "per day (UTC)",
}
CHART_DAYS = 30
_BREAKDOWNS = ("agent", "project", "kind", "day", "dialect", "model")


def _table(title: str) -> Table:
    return Table(
        title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, title_style="bold"
    )


def _num(t: Table, name: str) -> None:
    t.add_column(name, justify="right", no_wrap=True)


def summary_table(x: "ledger.Totals", url: str, wide: bool) -> Table:
    """The ledger's totals: one figure per line, tokens and money (``wide`` adds the source
    of each figure)."""
    t = _table("Headroom savings ledger")
    t.show_header = False
    t.add_column("figure", no_wrap=True)
    t.add_column("value", justify="right", no_wrap=True)
    if wide:
        t.add_column("source")
    priced = x.priced_requests
    rows = [
        ("requests (compressed)", f"{x.requests:,} ({x.compressed:,})", ""),
        ("tokens saved", f"{x.tokens_saved:,} ({ui.pct(x.saved_share)})", "estimated"),
        ("  tool outputs, before → after", f"{x.tokens_before:,} → {x.tokens_after:,}", "estimated"),
        (
            "  tool definitions, before → after",
            f"{x.tools_tokens_before:,} → {x.tools_tokens_after:,}",
            "estimated: the client's tools",
        ),
        (
            "proxy tools added",
            f"{x.proxy_tools_tokens:,}",
            "estimated: headroom_retrieve and memory tools, for retrieval; not in the saving",
        ),
        (
            "cost saved",
            f"{ui.usd(x.cost_saved_usd if priced else None)} ({ui.pct(x.cost_saved_share)})",
            "estimate: tokens saved at each request's own prompt rate",
        ),
        (
            "cost paid (prompt + output)",
            f"{ui.usd(x.cost_usd if priced else None)}",
            f"provider usage of {priced:,} priced requests",
        ),
        ("prompt tokens sent", f"{x.usage_prompt_tokens:,}", f"provider usage of {x.usage_requests:,} responses"),
        (
            "  input / cache read / cache write",
            f"{x.usage_input_tokens:,} / {x.usage_cache_read_tokens:,} / {x.usage_cache_write_tokens:,}",
            "provider usage",
        ),
        ("saved of the whole prompt", ui.pct(x.saved_share_of_prompt), "provider usage + estimated saving"),
        ("prompt-cache hit rate", ui.pct(x.cache_hit_rate), "cache read / prompt tokens"),
        ("output tokens", f"{x.usage_output_tokens:,}", "provider usage"),
        ("retrieval rounds", f"{x.retrieve_rounds:,}", "follow-ups the proxy made for its own tools"),
    ]
    for a, b, c in rows:
        t.add_row(a, b, c) if wide else t.add_row(a, b)
    return t


def group_table(title: str, first: str, rows: list[tuple[str, "ledger.Totals"]], wide: bool) -> Table:
    """One breakdown of :func:`headroom_core.ledger.totals`: compact (fits 80 columns; long
    names are shortened with an ellipsis, numbers never) or ``wide`` (every figure)."""
    t = _table(title)
    t.add_column(first, overflow="fold" if wide else "ellipsis", no_wrap=not wide, min_width=8)
    cols: tuple[str, ...]
    if wide:
        cols = (
            "requests",
            "compressed",
            "est. before",
            "est. after",
            "est. saved",
            "saved %",
            "$ saved",
            "$ paid",
            "prompt (provider)",
            "saved % of prompt",
            "cache read",
            "cache write",
            "cache hit",
        )
    else:
        cols = ("requests", "tokens saved", "saved %", "$ saved", "cache hit")
    for c in cols:
        _num(t, c)
    for g, x in rows:
        saved_usd = ui.usd(x.cost_saved_usd if x.priced_requests else None)
        if wide:
            t.add_row(
                g, f"{x.requests:,}", f"{x.compressed:,}", f"{x.tokens_before + x.tools_tokens_before:,}", f"{x.tokens_after + x.tools_tokens_after:,}",
                f"{x.tokens_saved:,}", ui.pct(x.saved_share), saved_usd, ui.usd(x.cost_usd if x.priced_requests else None), f"{x.usage_prompt_tokens:,}",
                ui.pct(x.saved_share_of_prompt), f"{x.usage_cache_read_tokens:,}", f"{x.usage_cache_write_tokens:,}", ui.pct(x.cache_hit_rate),
            )  # fmt: skip
        else:
            t.add_row(
                g, f"{x.requests:,}", f"{x.tokens_saved:,}", ui.pct(x.saved_share), saved_usd, ui.pct(x.cache_hit_rate)
            )
    return t


def kind_table(rows: list[tuple[str, "ledger.KindTotals"]], wide: bool) -> Table:
    """Per content kind (estimated tokens; money at each request's own prompt rate)."""
    t = _table("per content kind (estimated)")
    t.add_column("kind", overflow="fold" if wide else "ellipsis", no_wrap=not wide, min_width=8)
    cols = (
        ("blocks", "compressed", "reused", "before", "after", "saved", "saved %", "$ saved")
        if wide
        else ("blocks", "before", "saved", "saved %", "$ saved")
    )
    for c in cols:
        _num(t, c)
    for k, x in rows:
        if wide:
            t.add_row(
                k,
                f"{x.blocks:,}",
                f"{x.compressed:,}",
                f"{x.reused:,}",
                f"{x.tokens_before:,}",
                f"{x.tokens_after:,}",
                f"{x.tokens_saved:,}",
                ui.pct(x.saved_share),
                ui.usd(x.cost_saved_usd),
            )
        else:
            t.add_row(
                k,
                f"{x.blocks:,}",
                f"{x.tokens_before:,}",
                f"{x.tokens_saved:,}",
                ui.pct(x.saved_share),
                ui.usd(x.cost_saved_usd),
            )
    return t


def uncompressed_table(rows: list[tuple[str, int]], total: int) -> Table:
    """How many requests went out uncompressed and why (:func:`headroom_core.ledger.uncompressed`),
    with each reason's share of all ``total`` requests; fits 80 columns."""
    from headroom_core.outcomes import label

    t = _table("went out uncompressed, by reason")
    t.add_column("reason", overflow="ellipsis", no_wrap=True, min_width=8)
    _num(t, "requests")
    _num(t, "of all")
    for k, n in rows:
        t.add_row(label(k), f"{n:,}", ui.pct(n / total if total else None))
    if not rows:
        t.add_row("none: every request was planned", "0", ui.pct(0.0 if total else None))
    return t


def write_csv(out, snap: dict, only: str | None) -> None:
    """The snapshot as CSV on ``out``: one row per breakdown entry (``breakdown``, ``key``, then
    every figure; ``breakdown`` ``total`` is the whole ledger). ``only`` keeps one breakdown."""
    rows: list[dict] = []
    if only is None and snap.get("totals"):
        rows.append({"breakdown": "total", "key": "all", **snap["totals"]})
    for g in [only] if only else _BREAKDOWNS:
        rows += [{"breakdown": g, **r} for r in snap["by"].get(g, [])]
    fields: list[str] = []
    for r in rows:
        fields += [k for k in r if k not in fields]
    w = csv.DictWriter(out, fieldnames=fields or ["breakdown", "key"], lineterminator="\n")
    w.writeheader()
    w.writerows(rows)


def stats(
    by: Optional[str] = typer.Option(
        None, help="Only one breakdown: agent, project, kind, day, client, dialect, model or action."
    ),
    wide: bool = typer.Option(
        False, "--wide", help="Every column (needs a wide terminal); the default fits 80 columns."
    ),
    tools: bool = typer.Option(False, "--tools", help="Per-tool usage: how often each tool was offered and called."),
    as_json: bool = typer.Option(
        False, "--json", help="Print the ledger as JSON (what http://headroom.localhost/stats serves)."
    ),
    as_csv: bool = typer.Option(
        False, "--csv", help="Print the ledger as CSV: one row per breakdown entry (with --by: that breakdown)."
    ),
    days: Optional[int] = typer.Option(None, min=1, help="Only the last N days (N ≥ 1)."),
    db_url: Optional[str] = typer.Option(None, help="Read this database instead of the configured one."),
) -> None:
    """Print the savings ledger: tokens and money saved, prompt tokens, cache hit rate.

    Tokens saved are estimated (our counts); prompt tokens are measured (the provider's usage); money prices each request's usage with the price table (setting `prices`), and the money saved is an estimate: the tokens removed at the request's own average prompt rate.
    """
    from headroom_core import ledger
    from headroom_core.db.engine import DatabaseError
    from headroom_core.pricing import PriceTable

    if by is not None and by not in (*ledger.GROUPS, "kind"):
        ui.fail("stats", f"--by {by!r}: choose one of {', '.join((*ledger.GROUPS, 'kind'))}")
        raise typer.Exit(2)
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    since = now - timedelta(days=days) if days else None
    try:
        settings = load_settings({"db_url": db_url} if db_url else None)
        prices = PriceTable(user=settings.prices)
        sessions = open_existing(settings.database_url)
    except (SettingsError, DatabaseError) as e:
        ui.fail("stats", str(e))
        raise typer.Exit(2) from e
    if sessions is None:
        if as_json:
            print(
                json.dumps(
                    {"totals": None, "by": {}, "notes": {"database": f"none yet at {safe_url(settings.database_url)}"}},
                    indent=2,
                )
            )
            return
        if as_csv:
            write_csv(sys.stdout, {"totals": None, "by": {}}, by)
            return
        ui.copyable(
            f"No requests recorded yet: there is no database at {safe_url(settings.database_url)} (the proxy creates it on first start: `headroom proxy`, or `headroom wrap <agent>`).",
            markup=False,
        )
        return
    try:
        if as_json or as_csv:
            snap = ledger.snapshot(sessions, since=since, prices=prices)
            if as_json:
                print(json.dumps(snap, indent=2))
            else:
                if by in ("client", "action"):
                    snap["by"][by] = [
                        {"key": k, **t.as_dict()} for k, t in ledger.totals(sessions, by, since=since, prices=prices)
                    ]
                write_csv(sys.stdout, snap, by)
            return
        if tools:
            t = _table("per tool")
            t.add_column("tool", overflow="ellipsis", no_wrap=True, min_width=8)
            t.add_column("client", overflow="ellipsis", no_wrap=True)
            t.add_column("project", overflow="ellipsis", no_wrap=True)
            _num(t, "offered")
            _num(t, "called")
            for r in ledger.tool_usage(sessions):
                t.add_row(r.tool_name, r.client, r.project, f"{r.offered:,}", f"{r.called:,}")
            console.print(t)
            return
        if by is None:
            whole = ledger.totals(sessions, since=since, prices=prices)
            console.print(summary_table(whole[0][1], safe_url(settings.database_url), wide))
            if whole[0][1].proxy_tools_tokens:
                console.print(
                    f"proxy tools added: {whole[0][1].proxy_tools_tokens:,} tokens, for retrieval (headroom_retrieve, memory tools; "
                    "counted apart from your tools' definitions)",
                    style="dim",
                    highlight=False,
                )
            late = ledger.late_totals(sessions, since=since)
            if late["requests"]:
                console.print(
                    f"compressed late: {late['outputs']:,} earlier tool outputs a compression timeout had sent whole "
                    f"({late['tokens_before']:,} → {late['tokens_after']:,} tokens, estimated), where the saving paid for the cache write; "
                    f"{late['kept']:,} kept whole", style="dim", highlight=False,
                )  # fmt: skip
            console.print()
            console.print(uncompressed_table(ledger.uncompressed(sessions, since=since), whole[0][1].requests))
            console.print(f"database: {safe_url(settings.database_url)}", overflow="fold", style="dim", highlight=False)
            per_day = {k: t.tokens_saved for k, t in ledger.totals(sessions, "day", since=since, prices=prices)}
            n = min(days or CHART_DAYS, CHART_DAYS)
            series = [(d, max(v, 0.0)) for d, v in last_days(per_day, n, now.date())]
            console.print()
            console.print(day_bars(series, title=f"tokens saved per day, last {n} days (UTC)"))
        for g in [by] if by else ["agent", "project", "kind"]:
            console.print()
            if g == "kind":
                console.print(kind_table(ledger.kind_totals(sessions, since=since, prices=prices), wide))
            else:
                console.print(group_table(TITLES[g], g, ledger.totals(sessions, g, since=since, prices=prices), wide))
    except DatabaseError as e:
        ui.fail("stats", str(e))
        raise typer.Exit(2) from e
    console.print()
    console.print(
        "estimated: our token counts (cl100k_base unless configured); provider: the usage in the responses; "
        "$: usage priced per model (setting `prices`), $ saved = tokens saved at each request's own prompt rate (an estimate); "
        "cache hit = cache read / prompt tokens." + ("" if wide else " More columns: --wide; per day: --by day.")
    )


def register(app: typer.Typer) -> None:
    """Add ``headroom stats`` to the CLI."""
    app.command("stats")(stats)
