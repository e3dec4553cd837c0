"""``headroom show [REQUEST]``: what the proxy did to one recorded request (issue 34).

Each tool output it considered, before and after (kind, decision, reason, tokens, and the texts
where they are stored), what was replayed from earlier turns, the prefix compared with the
previous turn of its session, and the provider's cache read/write for it. Compact output fits
80 columns; ``--wide`` shows longer texts and every column; ``--json`` everything, texts whole.
The same report is the stats page's ``/request?id=REQUEST`` view. Reading never creates a
database.
"""

from __future__ import annotations

import json
from typing import Any, Optional

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from headroom_core.cli import ui
from headroom_core.cli.dbopen import open_existing, safe_url
from headroom_core.settings import SettingsError, load_settings

console = Console()

#: Lines of each before/after text shown: compact, ``--wide``.
EXCERPT_LINES = (4, 30)


def _n(v: Any) -> str:
    return "-" if v is None else f"{v:,}"


def _change(before: int, after: int) -> str:
    return f"{before:,} → {after:,}"


def prefix_line(p: dict[str, Any] | None) -> str:
    """The prefix facts in one sentence."""
    if p is None:
        return "not recorded for this request (an older row, or not planned)"
    if not p.get("known"):
        return f"first turn of its session ({p.get('messages', 0)} messages): nothing to compare with"
    parts = [
        f"{p['same_messages']} of {p['messages']} messages sent as last turn sent them ({p['same_bytes']:,} bytes the same, tools included)"
    ]
    parts.append("tools the same" if p.get("tools_same") else "tools CHANGED")
    if p.get("system_same") is not None:
        parts.append("system prompt the same" if p["system_same"] else "system prompt CHANGED")
    first = p.get("first_difference") or ""
    parts.append(f"first difference: {first}" if first else "no difference")
    if p.get("previous_id") is not None:
        parts.append(f"previous request #{p['previous_id']}")
    return "; ".join(parts)


def _excerpt(text: str | None, lines: int, cut: bool) -> str:
    if text is None:
        return "(not stored)"
    got = text.splitlines() or [""]
    more = len(got) - lines
    out = "\n".join(got[:lines])
    if more > 0:
        out += f"\n… {more:,} more lines"
    elif cut:
        out += "\n… (cut)"
    return out


def render(r: dict[str, Any], wide: bool) -> None:
    """Print the report ``r`` (:func:`headroom_core.show.report`)."""
    head = Table(
        title=f"Request #{r['id']}",
        title_justify="left",
        show_header=False,
        box=box.SIMPLE,
        pad_edge=False,
        show_edge=False,
        title_style="bold",
    )
    head.add_column("what", no_wrap=True)
    head.add_column("value", overflow="fold")
    u = r["usage"]
    rows = [
        ("when (UTC)", r["at"] or "-"),
        ("agent, model", f"{r['agent']}, {r['model'] or '-'} ({r['dialect']})"),
        ("project", r["project"] or "-"),
        ("session", r["session"] if wide else (r["session"] or "")[:12]),
        ("status", _n(r["status"])),
        (
            "what the proxy did",
            f"{r['action']}"
            + (
                f" ({r['outcome_label']})"
                if r.get("outcome_label") and r["outcome"] not in ("compressed", "unchanged")
                else _additions(r)
            ),
        ),
        ("reason", r["reason"] or "-"),
        ("body bytes", _change(r["bytes"]["before"] or 0, r["bytes"]["after"] or 0)),
        ("tool outputs, tokens (est.)", _change(r["tokens"]["before"] or 0, r["tokens"]["after"] or 0)),
        (
            "tool definitions (est.)",
            _change(r["tools"]["before"] or 0, r["tools"]["after"] or 0)
            + (f"; proxy tools added {r['tools']['proxy']:,}" if r["tools"]["proxy"] else ""),
        ),
        (
            "replayed from earlier turns",
            f"{r['replayed']['blocks']} outputs, {_change(r['replayed']['tokens_before'], r['replayed']['tokens_after'])} tokens",
        ),
        ("prefix vs previous turn", prefix_line(r["prefix"])),
        (
            "provider cache",
            f"read {_n(u['cache_read'])}, write {_n(u['cache_write'])}; input {_n(u['input'])}, output {_n(u['output'])}",
        ),
    ]
    if wide:
        rows.insert(0, ("entry id", r["entry_id"] or "-"))
    for a, b in rows:
        head.add_row(a, escape(str(b)))
    console.print(head)
    own = [b for b in r["blocks"] if b["decision"] != "replayed"]
    if not own:
        console.print(
            "\nNo tool output of this request was considered (none in the part the proxy may change, or all too small)."
        )
        return
    t = Table(
        title="tool outputs",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        show_edge=False,
        title_style="bold",
    )
    t.add_column("msg", justify="right", no_wrap=True)
    t.add_column("tool", overflow="ellipsis", no_wrap=True, max_width=None if wide else 14)
    t.add_column("kind", overflow="ellipsis", no_wrap=True, max_width=None if wide else 12)
    t.add_column("decision", no_wrap=True)
    t.add_column("tokens", justify="right", no_wrap=True)
    t.add_column("reason", overflow="fold" if wide else "ellipsis", no_wrap=not wide)
    if wide:
        t.add_column("strategy", no_wrap=True)
        t.add_column("keys", overflow="fold")
    for b in own:
        cells = [
            _n(b["message"]),
            b["tool"] or "-",
            b["kind"],
            b["decision"] + (" (cached)" if b["cached"] else ""),
            _change(b["tokens_before"], b["tokens_after"]),
            b["reason"],
        ]
        if wide:
            cells += [b["strategy"], " ".join(b["keys"])]
        t.add_row(*[escape(str(c)) for c in cells])
    console.print()
    console.print(t)
    lines = EXCERPT_LINES[1 if wide else 0]
    for b in own:
        if b["decision"] != "compressed":
            continue
        console.print()
        ui.copyable(
            f"[bold]message {b['message']}, {escape(b['tool'] or '-')} ({escape(b['kind'])}): {_change(b['tokens_before'], b['tokens_after'])} tokens[/]",
            console,
        )
        console.print(
            "[dim]before:[/]"
            + ("" if b["before"] is not None else " (original not stored: a lossless change keeps none)")
        )
        if b["before"] is not None:
            console.print(escape(_excerpt(b["before"], lines, b["before_cut"])), overflow="fold", highlight=False)
        console.print(
            "[dim]after:[/]" + ("" if b["after"] is not None else " (no longer stored: the session moved on)")
        )
        if b["after"] is not None:
            console.print(escape(_excerpt(b["after"], lines, b["after_cut"])), overflow="fold", highlight=False)
    if not wide:
        console.print("\nLonger texts and every column: --wide; everything: --json.", style="dim")


def show(
    request: Optional[str] = typer.Argument(
        None,
        help="A ledger row id, or a prefix of an entry id or of a session key (its latest request); default: the latest request.",
    ),
    wide: bool = typer.Option(
        False, "--wide", help="Every column and longer texts (needs a wide terminal); the default fits 80 columns."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON, texts whole."),
    db_url: Optional[str] = typer.Option(None, help="Read this database instead of the configured one."),
) -> None:
    """Show what the proxy did to one recorded request: each tool output before and after, replays, the prefix and the cache."""
    from headroom_core.db.engine import DatabaseError
    from headroom_core.show import request_report

    try:
        settings = load_settings({"db_url": db_url} if db_url else None)
        sessions = open_existing(settings.database_url)
    except (SettingsError, DatabaseError) as e:
        ui.fail("show", str(e))
        raise typer.Exit(2) from e
    if sessions is None:
        ui.fail(
            "show",
            f"no requests recorded yet: there is no database at {safe_url(settings.database_url)} (start the proxy: `headroom proxy` or `headroom wrap <agent>`)",
        )
        raise typer.Exit(1)
    sealer, originals = _readers(settings, sessions)
    try:
        r = request_report(sessions, request, sealer, originals)
    except DatabaseError as e:
        ui.fail("show", str(e))
        raise typer.Exit(2) from e
    if r is None:
        ui.fail(
            "show",
            f"no recorded request matches {request!r} (a row id, or a prefix of an entry id or session key)"
            if request
            else "no requests recorded yet",
        )
        raise typer.Exit(1)
    if as_json:
        print(json.dumps(r, indent=2, ensure_ascii=False))
        return
    render(r, wide)


def _readers(settings: Any, sessions: Any) -> tuple[Any, Any]:
    """The sealer (the home's secret key) and the originals store, or ``(None, None)`` when
    the key cannot be read (the report then has sizes only)."""
    from headroom_core.ccr.store import OriginalsStore
    from headroom_core.db.sealed import Sealer, load_secret, secret_path

    try:
        sealer = Sealer(load_secret(secret_path(settings.home, settings.secret_key_file)))
    except Exception as e:  # noqa: BLE001 - texts are optional
        ui.note("show", f"texts not shown: the secret key cannot be read ({e})")
        return None, None
    return sealer, OriginalsStore(sessions, settings.ccr_ttl_seconds, settings.ccr_max_bytes, sealer)


def register(app: typer.Typer) -> None:
    """Add ``headroom show`` to the CLI."""
    app.command("show")(show)


def _additions(r: dict) -> str:
    """`` (…)`` after ``unchanged`` when the body went out changed all the same, from the
    report's figures: the proxy's tools added, or nothing made smaller (an output kept whole,
    an injection)."""
    if r["action"] != "unchanged" or (r["bytes"]["after"] or 0) == (r["bytes"]["before"] or 0):
        return ""
    return " (proxy tools added)" if r["tools"]["proxy"] else " (nothing made smaller)"
