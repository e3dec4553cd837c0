"""``headroom mcp``: the MCP server (stdio) and its registration with Claude Code and Codex.

    headroom mcp [--project DIR]                     run the server on stdin/stdout
    headroom mcp install [--client claude|codex|all] [--scope user|project] [--dry-run] [--remove]

``install`` prints the diff of every config file it changes; ``--dry-run`` prints it and writes
nothing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

err = Console(stderr=True)

mcp_app = typer.Typer(
    help="Headroom as an MCP server (retrieve, memory search/save, compress) over stdio; `install` registers it with Claude Code and Codex.",
    invoke_without_command=True,
)


@mcp_app.callback()
def serve(
    ctx: typer.Context,
    project: Optional[str] = typer.Option(
        None, help="Memory project (default: the directory the agent starts the server in)."
    ),
    db_url: Optional[str] = typer.Option(None, help="SQLAlchemy URL (default: the configured database)."),
) -> None:
    """Run the MCP server on standard input/output (what the agent starts)."""
    if ctx.invoked_subcommand is not None:
        return
    from headroom_core.mcpserver.server import serve as run
    from headroom_core.settings import SettingsError, load_settings

    try:
        settings = load_settings({"db_url": db_url} if db_url else None)
    except SettingsError as e:
        err.print(f"[red]headroom mcp:[/] {e}")
        raise typer.Exit(2) from e
    run(settings, (project or "").strip() or os.getcwd())


@mcp_app.command("install")
def install(
    client: str = typer.Option("all", help="claude, codex or all."),
    scope: str = typer.Option(
        "user",
        help="user (every project: ~/.claude.json, ~/.codex/config.toml) or project (this folder: .mcp.json, .codex/config.toml).",
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the diff of each config file; write nothing."),
    remove: bool = typer.Option(False, "--remove", help="Take the headroom server out again."),
    project_dir: Path = typer.Option(Path("."), help="The project folder for --scope project."),
) -> None:
    """Register `headroom mcp` with Claude Code and Codex (their documented config files)."""
    from headroom_core.mcpserver.install import InstallError, plan

    if scope not in ("user", "project"):
        err.print(f"[red]headroom mcp install:[/] --scope {scope!r}: choose user or project")
        raise typer.Exit(2)
    clients = ["claude", "codex"] if client == "all" else [client]
    try:
        changes = plan(clients, scope, project_dir.resolve(), remove=remove)
    except InstallError as e:
        err.print(f"[red]headroom mcp install:[/] {e}")
        raise typer.Exit(2) from e
    for ch in changes:
        if not ch.changed:
            err.print(f"{ch.client}: {ch.path} already {'without' if remove else 'has'} the headroom server; unchanged")
            continue
        typer.echo(ch.diff(), nl=False)
        if dry_run:
            err.print(f"{ch.client}: would change {ch.path} (dry run: nothing written)")
        else:
            ch.write()
            err.print(
                f"{ch.client}: {'removed from' if remove else 'registered in'} {ch.path}; restart the agent to pick it up"
            )


def register(app: typer.Typer) -> None:
    """Add the ``mcp`` command group to the ``headroom`` app."""
    app.add_typer(mcp_app, name="mcp")
