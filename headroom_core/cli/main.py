"""``headroom``: run the proxy and read the savings ledger.

Every command lives in its own module ``headroom_core/cli/<name>_cmd.py`` (``proxy``,
``stats``, ``wrap``, ``certs``, ``doctor``, ``config``, …), each with ``register(app)``. A
module is imported only when its command runs (:class:`LazyGroup`): ``headroom --version``,
``--help`` and ``wrap`` do not pay for the database, HTTP and compression libraries that other
commands load.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Optional

import typer
from typer import core as _typer_core

if TYPE_CHECKING:
    from typer import _click as click

#: The commands, in the order the help lists them: name -> (module, the help's one line). The
#: line is the command's own first docstring line (a test keeps them equal), so listing the
#: commands imports none of them.
COMMANDS: dict[str, tuple[str, str]] = {
    "proxy": ("proxy_cmd", "Run the proxy: mitmdump -s addons/headroom.py with these options."),
    "stats": ("stats_cmd", "Print the savings ledger: tokens and money saved, prompt tokens, cache hit rate."),
    "discover": (
        "discover_cmd",
        "What the proxy would have saved on your past sessions (Claude Code, Codex, SWE-agent logs).",
    ),
    "compress": (
        "compress_cmd",
        "Compress FILE (or standard input) with the proxy's content router and print the result.",
    ),
    "learn": ("learn_cmd", "Learn rules from past failures in session logs and write them where agents read them."),
    "wrap": ("wrap_cmd", "Run an agent through the Headroom proxy, trusting its CA."),
    "certs": ("certs_cmd", "Show where the proxy's CA is and how to trust it; --install adds it to the system store."),
    "doctor": ("doctor_cmd", "Check the proxy, the CA, the database and the models, and say what to fix."),
    "show": (
        "show_cmd",
        "Show what the proxy did to one recorded request: each tool output before and after, replays, the prefix and the cache.",
    ),
    "cache": ("cache_cmd", "Prompt-cache economics: hit rate and volatile prefix parts per session."),
    "memory": (
        "memory_cmd",
        "Memories shared by all agents, per project (list, search, add, remove, stats, export, import).",
    ),
    "backup": (
        "backup_cmd",
        "Copy the SQLite database into one file, safely while the proxy runs (PostgreSQL: use pg_dump).",
    ),
    "config": ("config_cmd", "Show or create the configuration (~/.headroom/config.toml)."),
    "mcp": (
        "mcp_cmd",
        "Headroom as an MCP server (retrieve, memory search/save, compress) over stdio; `install` registers it with Claude Code and Codex.",
    ),
}


def load_command(name: str) -> click.Command:
    """The click command ``name`` (a key of :data:`COMMANDS`), its module imported now.
    Raises ``KeyError`` for another name."""
    module = importlib.import_module(f"headroom_core.cli.{COMMANDS[name][0]}")
    sub = typer.Typer()
    module.register(sub)
    return typer.main.get_group(sub).commands[name]


class LazyGroup(_typer_core.TyperGroup):
    """The ``headroom`` group: its commands are imported when one is run (or its own help is
    asked for); the group's help lists them from :data:`COMMANDS` without importing any."""

    _listing = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return super().get_command(ctx, cmd_name)
        if self._listing:  # the group's help: name and one line
            return _typer_core.TyperCommand(cmd_name, help=COMMANDS[cmd_name][1])
        if cmd_name not in self.commands:
            self.commands[cmd_name] = load_command(cmd_name)
        return self.commands[cmd_name]

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


def _flag_type_hidden(display):
    """Typer's rich help prints a type after every option, flags included (``--detach <bool>``),
    while its plain help leaves flags bare; keep them bare in both."""

    def display_type_rich(self, ctx):
        if getattr(self, "is_flag", False) or getattr(self, "count", False):
            return None
        return display(self, ctx)

    return display_type_rich


# a deliberate patch of one typer method (no hook exists for it)
_typer_core.TyperOption.display_type_rich = _flag_type_hidden(_typer_core.TyperOption.display_type_rich)  # type: ignore[method-assign]

app = typer.Typer(
    cls=LazyGroup, help="Headroom on mitmproxy: compress what coding agents send to LLM APIs.", no_args_is_help=True
)


def version_text() -> str:
    """``headroom <version> (mitmproxy <version>, Python <version>)``."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    def v(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    return f"headroom {v('headroom-mitm')} (mitmproxy {v('mitmproxy')}, Python {platform.python_version()})"


def _warn_environment() -> None:
    """A line on standard error per ``HEADROOM_*`` variable that nothing reads (a misspelling)."""
    from headroom_core.settings import unknown_environment

    for line in unknown_environment():
        typer.echo(f"headroom: warning: {line}", err=True)


def _version(value: bool) -> None:
    if value:
        _warn_environment()
        typer.echo(version_text())
        raise typer.Exit()


@app.callback()
def main(
    version: Optional[bool] = typer.Option(
        None, "--version", "-V", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Headroom on mitmproxy: compress what coding agents send to LLM APIs."""
    _warn_environment()


if __name__ == "__main__":
    from headroom_core.cli import run

    raise SystemExit(run())
