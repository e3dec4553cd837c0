"""``headroom cache``: prompt-cache economics per session: hit rate from the provider's usage
figures, and the parts of the prefix (system prompt, tools) that changed and broke the cache."""

from __future__ import annotations

from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

from headroom_core.cache.hit_rate import CacheUsage, cache_hit_rate
from headroom_core.cache.prefix_log import PrefixEvent, prefix_events
from headroom_core.cli.dbopen import open_existing, safe_url
from headroom_core.cli.tables import distinct_names, number, table
from headroom_core.db.engine import DatabaseError
from headroom_core.settings import SettingsError, load_settings

console = Console()
cache_app = typer.Typer(
    help="Prompt-cache economics: hit rate and volatile prefix parts per session.", no_args_is_help=True
)


def _pct(u: CacheUsage | None) -> str:
    return "-" if u is None or u.rate is None else f"{100 * u.rate:.1f}%"


def _change_lines(events: list[PrefixEvent]) -> list[str]:
    """What changed in a session's prefix, one line per distinct change (``kind (where): text``)."""
    lines: list[str] = []
    for e in events:
        if e.previous_fingerprint is None:
            continue
        for c in e.changes:
            where = f"system line {c.line}" if c.part == "system" else "tools"
            detail = " ".join((c.after or c.before).split())
            lines.append(f"{c.kind} ({where}): {detail[:200]}")
    return list(dict.fromkeys(lines))


def unique_prefix_length(shown: list[str], every: set[str], minimum: int = 12) -> int:
    """The fewest leading characters (at least ``minimum``) that tell each key of ``shown`` from
    every other key of ``every`` (so a shown id works with ``--session``): one more than the
    longest prefix a shown key shares with another key."""
    keys = sorted(every | set(shown))
    need = minimum
    pos = {k: i for i, k in enumerate(keys)}
    for k in shown:
        i = pos[k]
        for j in (i - 1, i + 1):  # in sorted order the longest shared prefix is with a neighbour
            if 0 <= j < len(keys):
                other = keys[j]
                n = 0
                while n < min(len(k), len(other)) and k[n] == other[n]:
                    n += 1
                need = max(need, n + 1)
    return min(need, max((len(k) for k in shown), default=minimum))


def _session_facts(sessions, keys: list[str]) -> tuple[dict[str, tuple[str, str]], set[str]]:
    """Per session key of ``keys``: (agent, project) of its latest request; and every session key
    in the ledger (to make the ids shown unique)."""
    from sqlalchemy import func, select

    from headroom_core.db.models import RequestOutcome as R

    facts: dict[str, tuple[str, str]] = {}
    with sessions() as s:
        every = set(s.scalars(select(R.session_key).distinct()))
        if keys:
            latest = (
                select(R.session_key, func.max(R.id).label("last"))
                .where(R.session_key.in_(keys))
                .group_by(R.session_key)
                .subquery()
            )
            for k, client, project in s.execute(
                select(R.session_key, R.client, R.project).join(latest, R.id == latest.c.last)
            ):
                facts[k] = (client or "", project or "")
    return facts, every


@cache_app.command("report")
def report(
    session: Optional[str] = typer.Option(
        None, "--session", help="A session key (or its first hex digits, as the report shows them)."
    ),
    project: Optional[str] = typer.Option(None, "--project", help="Only sessions of this project."),
    limit: int = typer.Option(20, help="Most recent sessions shown."),
    wide: bool = typer.Option(
        False,
        "--wide",
        help="Every column (first request, input, cache read and write, the changes beside each session); the default fits 80 columns.",
    ),
) -> None:
    """Per session: requests, cache read/write and uncached input tokens (as the provider
    reported them), the hit rate = cache read / (input + cache read + cache write), and which
    parts of the prefix changed (timestamps, UUIDs, git status, model, tool order, …).

    Compact (the default) fits 80 columns: session id (as many hex digits as make it unique, for
    --session), last request (UTC), agent, project (the part of its path that tells it from the
    others), requests, hit rate; then the prefix changes of each session on lines of their own."""
    try:
        settings = load_settings()
        sessions = open_existing(settings.database_url)
        if sessions is None:
            console.print(
                f"No sessions recorded yet: there is no database at {safe_url(settings.database_url)}.", soft_wrap=True
            )
            return
        usage = cache_hit_rate(sessions, session, by="session", project=project, limit=limit)
        events = prefix_events(sessions, session, project)
    except (SettingsError, DatabaseError) as e:
        console.print(f"[red]headroom cache report:[/] {escape(str(e))}", soft_wrap=True)
        raise typer.Exit(2) from e
    by_session: dict[str, list[PrefixEvent]] = {}
    for event in events:
        by_session.setdefault(event.session_key, []).append(event)
    keys = [u.key for u in usage] + [k for k in reversed(list(by_session)) if k not in {u.key for u in usage}][
        : max(0, limit - len(usage))
    ]
    if not keys:
        console.print("No sessions recorded yet." if not session else f"No session starts with {escape(session)!r}.")
        return
    facts, every = _session_facts(sessions, keys)
    n = unique_prefix_length(keys, every)
    t = table(f"Prompt cache per session ({escape(safe_url(settings.database_url))})")
    t.add_column("session", no_wrap=True, style="cyan")
    if wide:
        t.add_column("first (UTC)", no_wrap=True)
    t.add_column("last (UTC)", no_wrap=True)
    t.add_column("agent", overflow="fold", min_width=6)
    t.add_column("project", overflow="fold", min_width=8)
    for col in ("requests" if wide else "req.", *(("input", "cache read", "cache write") if wide else ()), "hit rate"):
        number(t, col)
    if wide:
        t.add_column("prefix changes (broke the cache)", overflow="fold", ratio=2, min_width=20)
    umap = {u.key: u for u in usage}
    changes = {k: _change_lines(by_session.get(k, [])) for k in keys}
    agents_projects = {
        k: facts.get(k, (by_session[k][-1].client, by_session[k][-1].project) if by_session.get(k) else ("", ""))
        for k in keys
    }
    shown_project = {}
    if not wide:  # the part of each project's path that tells it from the others
        projects = sorted({p for _, p in agents_projects.values() if p})
        folder, names = distinct_names(projects)
        shown_project = dict(zip(projects, names))
        t.caption = f"projects in {escape(folder)}" if folder else None
    for k in keys:
        u = umap.get(k)
        ev = by_session.get(k, [])
        agent, proj = agents_projects[k]
        proj = shown_project.get(proj, proj)
        when = (
            (lambda d: d.strftime("%Y-%m-%d %H:%M") if d else "-")
            if wide
            else (lambda d: d.strftime("%m-%d %H:%M") if d else "-")
        )
        row = [k[:n], *([when(u.first_at if u else None)] if wide else []), when(u.last_at if u else (ev[-1].first_seen_at if ev else None)), escape(agent or "-"),
               escape(proj or "-"), f"{u.requests if u else 0:,}"]  # fmt: skip
        if wide:
            row += [
                f"{u.input_tokens:,}" if u else "-",
                f"{u.cache_read_tokens:,}" if u else "-",
                f"{u.cache_write_tokens:,}" if u else "-",
            ]
        row.append(_pct(u))
        if wide:
            row.append(escape("\n".join(changes[k]) or "-"))
        t.add_row(*row)
    console.print(t)
    if not wide and any(changes.values()):
        console.print()
        console.print("[bold]prefix changes that broke the cache[/]")
        for k in keys:
            for line in changes[k]:
                console.print(f"[cyan]{k[:n]}[/] {escape(line)}", overflow="fold", highlight=False)
    total = cache_hit_rate(sessions, session, by=None, project=project)
    console.print()
    console.print(
        f"overall hit rate {_pct(total[0] if total else None)}: cache read / all prompt tokens, from the provider's usage figures; "
        "a prefix change is compared with the session's previous prefix, or the most similar recent one of the project."
        + ("" if wide else " More columns: --wide; one session: --session ID."),
        highlight=False,
    )


def register(app: typer.Typer) -> None:
    """Add the ``cache`` command group to the ``headroom`` app."""
    app.add_typer(cache_app, name="cache")
