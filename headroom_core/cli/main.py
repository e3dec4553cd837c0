"""``headroom``: run the proxy and read the savings ledger.

Command groups live in their own modules ``headroom_core/cli/<group>_cmd.py`` (``wrap``,
``certs``, ``doctor``, ``config``, …), each with ``register(app)``.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer
from rich.console import Console
from rich.table import Table

from headroom_core.cli import proxy_process as pp
from headroom_core.cli.ca import CA_CERT, default_confdir
from headroom_core.settings import SettingsError, headroom_home, load_settings

if TYPE_CHECKING:
    from headroom_core import ledger

app = typer.Typer(help="Headroom on mitmproxy: compress what coding agents send to LLM APIs.", no_args_is_help=True)
console = Console()
err = Console(stderr=True)

ADDON = pp.ADDON


@app.command()
def proxy(
    listen_host: str = typer.Option("127.0.0.1", help="Address to listen on (0.0.0.0 for a container or a LAN)."),
    port: int = typer.Option(8080, help="Port to listen on."),
    confdir: Optional[Path] = typer.Option(None, help="mitmproxy confdir: where the proxy's CA lives (default: $HEADROOM_HOME/mitmproxy)."),
    db_url: Optional[str] = typer.Option(None, help="SQLAlchemy URL (default: SQLite under $HEADROOM_HOME)."),
    set_: list[str] = typer.Option([], "--set", help="Any mitmproxy or headroom_* option, as key=value (repeatable)."),
    mode: Optional[str] = typer.Option(None, help="mitmproxy --mode, e.g. upstream:http://corp-proxy:3128."),
    detach: bool = typer.Option(False, "--detach", help="Run in the background (log and pid file under $HEADROOM_HOME)."),
    stop: bool = typer.Option(False, "--stop", help="Stop the background proxy on --port."),
    timeout: float = typer.Option(60.0, help="With --detach: seconds to wait until it answers."),
) -> None:
    """Run the proxy: mitmdump -s addons/headroom.py with these options.

    In the foreground it replaces this process; --detach runs it in the background.
    """
    home = headroom_home()
    if stop:
        pid = pp.stop(home, port)
        if pid is None:
            err.print(f"headroom: no background proxy on port {port} (no pid file under {home / 'run'})")
            raise typer.Exit(1)
        err.print(f"headroom: stopped the proxy on port {port} (pid {pid})")
        return
    conf = (confdir or default_confdir(home)).expanduser()
    conf.mkdir(parents=True, exist_ok=True)
    addr = pp.ProxyAddress(listen_host, port)
    try:
        args = pp.proxy_command(addr, conf, db_url=db_url, sets=set_, mode=mode)
    except pp.ProxyError as e:
        err.print(f"[red]headroom proxy:[/] {e}")
        raise typer.Exit(2) from e
    ca = conf / CA_CERT
    if detach:
        state = pp.probe(addr)
        if state != "none":
            err.print(f"[red]headroom proxy:[/] {addr.url} is already in use ({'another program' if state == 'other' else 'a Headroom proxy'})")
            raise typer.Exit(1)
        try:
            pid = pp.start_detached(args, pp.proxy_environ(os.environ, keep_proxy_vars=bool(mode)), addr, home, ca, timeout)
        except pp.ProxyError as e:
            err.print(f"[red]headroom proxy:[/] {e}")
            raise typer.Exit(1) from e
        err.print(f"headroom: proxy on {addr.url} (pid {pid}, log {pp.log_file(home, port)}); stop it with `headroom proxy --stop --port {port}`")
        return
    err.print(f"[bold]headroom[/] proxy on {addr.url}  CA: {ca} (created on first start)")
    err.print(f"  use it: `headroom wrap <agent>`, or HTTPS_PROXY={addr.url} and trust the CA (`headroom certs`)")
    err.print(f"  stats: http://{addr.client_host}:{port}/ (or http://headroom.localhost/ through the proxy)")
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(args[0], args, pp.proxy_environ(os.environ, keep_proxy_vars=bool(mode)))


def _pct(v: float | None) -> str:
    return f"{100 * v:.1f}%" if v is not None else "-"


def _group_table(title: str, first: str, rows: list[tuple[str, "ledger.Totals"]]) -> Table:
    t = Table(title=title, title_justify="left")
    t.add_column(first, overflow="fold")
    for col in ("requests", "compressed", "est. before", "est. after", "est. saved", "saved %", "prompt (provider)", "saved % of prompt", "cache read", "cache write", "cache hit"):
        t.add_column(col, justify="right")
    for g, x in rows:
        t.add_row(
            g,
            f"{x.requests:,}",
            f"{x.compressed:,}",
            f"{x.tokens_before + x.tools_tokens_before:,}",
            f"{x.tokens_after + x.tools_tokens_after:,}",
            f"{x.tokens_saved:,}",
            _pct(x.saved_share),
            f"{x.usage_prompt_tokens:,}",
            _pct(x.saved_share_of_prompt),
            f"{x.usage_cache_read_tokens:,}",
            f"{x.usage_cache_write_tokens:,}",
            _pct(x.cache_hit_rate),
        )
    return t


def _kind_table(rows: list[tuple[str, "ledger.KindTotals"]]) -> Table:
    t = Table(title="per content kind (estimated)", title_justify="left")
    t.add_column("kind")
    for col in ("blocks", "compressed", "reused", "before", "after", "saved", "saved %"):
        t.add_column(col, justify="right")
    for k, x in rows:
        t.add_row(k, f"{x.blocks:,}", f"{x.compressed:,}", f"{x.reused:,}", f"{x.tokens_before:,}", f"{x.tokens_after:,}", f"{x.tokens_saved:,}", _pct(x.saved_share))
    return t


def _summary(x: "ledger.Totals", url: str) -> Table:
    t = Table(title=f"Headroom savings ledger ({url})", title_justify="left", show_header=False)
    t.add_column("figure")
    t.add_column("value", justify="right")
    t.add_column("source")
    t.add_row("requests (compressed)", f"{x.requests:,} ({x.compressed:,})", "")
    t.add_row("tool outputs, tokens before → after", f"{x.tokens_before:,} → {x.tokens_after:,}", "estimated")
    t.add_row("tool definitions, tokens before → after", f"{x.tools_tokens_before:,} → {x.tools_tokens_after:,}", "estimated")
    t.add_row("tokens saved", f"{x.tokens_saved:,} ({_pct(x.saved_share)})", "estimated")
    t.add_row("prompt tokens sent", f"{x.usage_prompt_tokens:,}", f"provider usage of {x.usage_requests:,} responses")
    t.add_row("  input / cache read / cache write", f"{x.usage_input_tokens:,} / {x.usage_cache_read_tokens:,} / {x.usage_cache_write_tokens:,}", "provider usage")
    t.add_row("prompt without the proxy", f"{x.prompt_tokens_without_headroom:,}", "provider usage + estimated saving")
    t.add_row("saved of the whole prompt", _pct(x.saved_share_of_prompt), "")
    t.add_row("prompt-cache hit rate", _pct(x.cache_hit_rate), f"cache read {x.usage_cache_read_tokens:,} / prompt")
    t.add_row("output tokens", f"{x.usage_output_tokens:,}", "provider usage")
    t.add_row("retrieval rounds", f"{x.retrieve_rounds:,}", "follow-ups the proxy made for its own tools")
    return t


_TITLES = {"agent": "per agent", "client": "per client", "project": "per project", "dialect": "per dialect", "model": "per model", "action": "per action", "day": "per day (UTC)"}


@app.command()
def stats(
    by: Optional[str] = typer.Option(None, help="Only one breakdown: agent, project, kind, day, client, dialect, model or action."),
    tools: bool = typer.Option(False, "--tools", help="Per-tool usage: how often each tool was offered and called."),
    as_json: bool = typer.Option(False, "--json", help="Print the ledger as JSON (what http://headroom.localhost/stats serves)."),
    days: Optional[int] = typer.Option(None, help="Only the last N days."),
    db_url: Optional[str] = typer.Option(None, help="Read this database instead of the configured one."),
) -> None:
    """Print the savings ledger: tokens saved, prompt tokens, cache hit rate.

    Tokens before/after are estimated (our counts) and measured (the provider's usage);
    the breakdowns are per agent, project, content kind and day.
    """
    from headroom_core import ledger
    from headroom_core.db.engine import DatabaseError, open_database

    if by is not None and by not in (*ledger.GROUPS, "kind"):
        err.print(f"[red]headroom stats:[/] --by {by!r}: choose one of {', '.join((*ledger.GROUPS, 'kind'))}")
        raise typer.Exit(2)
    since = datetime.now(timezone.utc).replace(tzinfo=None) - timedelta(days=days) if days else None
    try:
        settings = load_settings({"db_url": db_url} if db_url else None)
        sessions = open_database(settings.database_url)
        if as_json:
            print(json.dumps(ledger.snapshot(sessions, since=since), indent=2))
            return
        if tools:
            t = Table(title="per tool", title_justify="left")
            for col in ("tool", "client", "project", "offered", "called"):
                t.add_column(col, justify="right" if col in ("offered", "called") else "left")
            for r in ledger.tool_usage(sessions):
                t.add_row(r.tool_name, r.client, r.project, f"{r.offered:,}", f"{r.called:,}")
            console.print(t)
            return
        if by is None:
            console.print(_summary(ledger.totals(sessions, since=since)[0][1], _safe_url(settings.database_url)))
        for g in [by] if by else ["agent", "project", "kind", "day"]:
            if g == "kind":
                console.print(_kind_table(ledger.kind_totals(sessions, since=since)))
            else:
                console.print(_group_table(_TITLES[g], g, ledger.totals(sessions, g, since=since)))
    except (SettingsError, DatabaseError) as e:
        err.print(f"[red]headroom stats:[/] {e}")
        raise typer.Exit(2) from e
    console.print("estimated: our token counts (cl100k_base unless configured); provider: the usage figures in the responses; cache hit = cache read / prompt tokens.")


def _safe_url(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


# Command groups live in their own modules; each has ``register(app)``.
for _name in ("compress_cmd", "cache_cmd", "memory_cmd", "learn_cmd", "wrap_cmd", "certs_cmd", "doctor_cmd", "config_cmd", "mcp_cmd"):
    try:
        _mod = __import__(f"headroom_core.cli.{_name}", fromlist=["register"])
    except ModuleNotFoundError as _e:
        if _e.name != f"headroom_core.cli.{_name}":
            raise
        continue
    _mod.register(app)


if __name__ == "__main__":
    app()
