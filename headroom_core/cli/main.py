"""``headroom``: run the proxy and read the savings ledger."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from headroom_core import ledger
from headroom_core.db.engine import DatabaseError, open_database
from headroom_core.settings import SettingsError, load_settings

app = typer.Typer(help="Headroom on mitmproxy: compress what coding agents send to LLM APIs.", no_args_is_help=True)
console = Console()

ADDON = Path(__file__).resolve().parents[2] / "addons" / "headroom.py"
DEFAULT_CONFDIR = Path("~/.headroom/mitmproxy").expanduser()


def _mitmdump() -> str:
    local = Path(sys.executable).parent / "mitmdump"
    return str(local) if local.exists() else (shutil.which("mitmdump") or "mitmdump")


@app.command()
def proxy(
    listen_host: str = typer.Option("127.0.0.1", help="Address to listen on."),
    port: int = typer.Option(8080, help="Port to listen on."),
    confdir: Path = typer.Option(DEFAULT_CONFDIR, help="mitmproxy confdir: where the proxy's CA lives."),
    db_url: Optional[str] = typer.Option(None, help="SQLAlchemy URL (default: SQLite under ~/.headroom)."),
    set_: list[str] = typer.Option([], "--set", help="Any mitmproxy or headroom_* option, as key=value."),
) -> None:
    """Run ``mitmdump -s addons/headroom.py`` with these options (replaces this process)."""
    confdir = confdir.expanduser()
    confdir.mkdir(parents=True, exist_ok=True)
    args = [_mitmdump(), "-s", str(ADDON), "--listen-host", listen_host, "--listen-port", str(port), "--set", f"confdir={confdir}"]
    if db_url:
        args += ["--set", f"headroom_db_url={db_url}"]
    for kv in set_:
        args += ["--set", kv]
    console.print(f"[bold]headroom[/] proxy on http://{listen_host}:{port}  CA: {confdir / 'mitmproxy-ca-cert.pem'} (created on first start)")
    console.print(f"  use it: HTTPS_PROXY=http://{listen_host}:{port} and trust the CA (see certs/README.md)")
    sys.stdout.flush()
    os.execv(args[0], args)


@app.command()
def stats(by: Optional[str] = typer.Option(None, help="Group by client, dialect, model, action or day.")) -> None:
    """Print the savings ledger: requests, tokens before/after (estimated), provider usage."""
    try:
        settings = load_settings()
        sessions = open_database(settings.database_url)
        rows = ledger.totals(sessions, by)
    except (SettingsError, DatabaseError, KeyError) as e:
        console.print(f"[red]headroom stats:[/] {e}")
        raise typer.Exit(2) from e
    t = Table(title=f"Headroom savings ledger ({settings.database_url})")
    for col in (by or "scope", "requests", "compressed", "tokens before", "tokens after", "saved", "saved %", "usage input", "cache read", "cache write", "retrieve rounds"):
        t.add_column(col, justify="right" if col != (by or "scope") else "left")
    for g, x in rows:
        pct = f"{100 * x.tokens_saved / x.tokens_before:.1f}" if x.tokens_before else "-"
        t.add_row(g, str(x.requests), str(x.compressed), str(x.tokens_before), str(x.tokens_after), str(x.tokens_saved), pct,
                  str(x.usage_input_tokens), str(x.usage_cache_read_tokens), str(x.usage_cache_write_tokens), str(x.retrieve_rounds))
    console.print(t)
    console.print("tokens before/after: estimates (cl100k_base) of the tool outputs considered; usage: as the provider reported it.")


# Command groups live in their own modules; each has ``register(app)``.
for _name in ("compress_cmd", "cache_cmd", "memory_cmd", "learn_cmd", "wrap_cmd", "certs_cmd", "doctor_cmd", "config_cmd"):
    try:
        _mod = __import__(f"headroom_core.cli.{_name}", fromlist=["register"])
    except ModuleNotFoundError as _e:
        if _e.name == f"headroom_core.cli.{_name}":
            continue
        raise
    _mod.register(app)


if __name__ == "__main__":
    app()
