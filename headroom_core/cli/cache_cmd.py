"""``headroom cache``: prompt-cache economics per session: hit rate from the provider's usage
figures, and the parts of the prefix (system prompt, tools) that changed and broke the cache."""

from __future__ import annotations

from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from headroom_core.cache.hit_rate import CacheUsage, cache_hit_rate
from headroom_core.cache.prefix_log import PrefixEvent, prefix_events
from headroom_core.cli.dbopen import open_existing, safe_url
from headroom_core.db.engine import DatabaseError
from headroom_core.settings import SettingsError, load_settings

console = Console()
cache_app = typer.Typer(help="Prompt-cache economics: hit rate and volatile prefix parts per session.", no_args_is_help=True)


def _pct(u: CacheUsage | None) -> str:
    return "-" if u is None or u.rate is None else f"{100 * u.rate:.1f}%"


def _changes(events: list[PrefixEvent]) -> str:
    lines: list[str] = []
    for e in events:
        if e.previous_fingerprint is None:
            continue
        for c in e.changes:
            where = f"system line {c.line}" if c.part == "system" else "tools"
            detail = c.after or c.before
            lines.append(f"{c.kind} ({where}): {detail[:90]}")
    return "\n".join(dict.fromkeys(lines)) or "-"


@cache_app.command("report")
def report(
    session: Optional[str] = typer.Option(None, "--session", help="A session key (or its first hex digits)."),
    project: Optional[str] = typer.Option(None, "--project", help="Only sessions of this project."),
    limit: int = typer.Option(20, help="Most recent sessions shown."),
) -> None:
    """Per session: requests, cache read/write and uncached input tokens (as the provider
    reported them), the hit rate = cache read / (input + cache read + cache write), and which
    parts of the prefix changed (timestamps, UUIDs, git status, model, tool order, …)."""
    try:
        settings = load_settings()
        sessions = open_existing(settings.database_url)
        if sessions is None:
            console.print(f"No sessions recorded yet: there is no database at {safe_url(settings.database_url)}.", soft_wrap=True)
            return
        usage = cache_hit_rate(sessions, session, by="session", project=project, limit=limit)
        events = prefix_events(sessions, session, project)
    except (SettingsError, DatabaseError) as e:
        console.print(f"[red]headroom cache report:[/] {e}")
        raise typer.Exit(2) from e
    by_session: dict[str, list[PrefixEvent]] = {}
    for event in events:
        by_session.setdefault(event.session_key, []).append(event)
    keys = [u.key for u in usage] + [k for k in reversed(list(by_session)) if k not in {u.key for u in usage}][: max(0, limit - len(usage))]
    if not keys:
        console.print("No sessions recorded yet." if not session else f"No session starts with {session!r}.")
        return
    t = Table(title=f"Prompt cache per session ({settings.database_url})", show_lines=True)
    for col in ("session", "project", "requests", "input", "cache read", "cache write", "hit rate", "prefix changes (broke the cache)"):
        t.add_column(col, justify="right" if col in ("requests", "input", "cache read", "cache write", "hit rate") else "left", overflow="fold")
    umap = {u.key: u for u in usage}
    for k in keys:
        u = umap.get(k)
        ev = by_session.get(k, [])
        proj = ev[0].project if ev else ""
        t.add_row(k[:12], proj, str(u.requests if u else 0), str(u.input_tokens if u else "-"), str(u.cache_read_tokens if u else "-"),
                  str(u.cache_write_tokens if u else "-"), _pct(u), _changes(ev))
    console.print(t)
    total = cache_hit_rate(sessions, session, by=None, project=project)
    console.print(f"overall hit rate {_pct(total[0] if total else None)}: cache read / all prompt tokens, from the provider's usage figures; "
                  "a prefix change is compared with the session's previous prefix, or the most similar recent one of the project.")


def register(app: typer.Typer) -> None:
    """Add the ``cache`` command group to the ``headroom`` app."""
    app.add_typer(cache_app, name="cache")
