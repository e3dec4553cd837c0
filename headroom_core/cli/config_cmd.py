"""``headroom config show``: every setting in force and where its value comes from;
``headroom config init``: write the documented ``config.toml`` (every key, commented out)."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from headroom_core.settings import Settings, SettingsError, headroom_home, load_settings, sources

console = Console()
config_app = typer.Typer(help="Show or create the configuration (~/.headroom/config.toml).", no_args_is_help=True)

#: The documented example: every key, its default and meaning (repository root).
EXAMPLE = Path(__file__).resolve().parents[2] / "config.example.toml"


def _shown(v: object) -> str:
    if isinstance(v, tuple):
        return ",".join(v) or "(none)"
    if isinstance(v, bool):
        return str(v).lower()
    return "(default)" if v == "" else str(v)


@config_app.command("show")
def show(as_json: bool = typer.Option(False, "--json", help="Print {key: {value, source}} as JSON.")) -> None:
    """Print every setting, its value, and its source (option, environment, config file, default)."""
    try:
        s = load_settings()
        src = sources()
    except SettingsError as e:
        console.print(f"[red]headroom config:[/] {e}")
        raise typer.Exit(2) from e
    rows = [(f.name, getattr(s, f.name), src.get(f.name, "default")) for f in dataclasses.fields(Settings)]
    if as_json:
        print(
            json.dumps(
                {k: {"value": list(v) if isinstance(v, tuple) else v, "source": w} for k, v, w in rows}, indent=2
            )
        )
        return
    t = Table(
        title=f"Headroom settings (precedence: --set headroom_* > HEADROOM_* > {headroom_home() / 'config.toml'} > default)",
        title_justify="left",
    )
    for c in ("key", "value", "source"):
        t.add_column(c)
    for k, v, w in rows:
        t.add_row(k, _shown(v), w)
    console.print(t)
    console.print(f"database in force: {s.database_url}")


@config_app.command("init")
def init(force: bool = typer.Option(False, "--force", help="Overwrite an existing config.toml.")) -> None:
    """Write the documented config.toml (every key commented out at its default) to $HEADROOM_HOME."""
    dest = headroom_home() / "config.toml"
    if dest.exists() and not force:
        console.print(f"[yellow]{dest} exists[/]; --force overwrites it")
        raise typer.Exit(1)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(EXAMPLE.read_text())
    os.chmod(dest, 0o600)
    console.print(f"wrote {dest}")


def register(app: typer.Typer) -> None:
    """Add ``headroom config`` to the CLI."""
    app.add_typer(config_app, name="config")
