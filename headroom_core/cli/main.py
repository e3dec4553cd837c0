"""``headroom``: run the proxy and read the savings ledger.

Every command lives in its own module ``headroom_core/cli/<name>_cmd.py`` (``proxy``,
``stats``, ``wrap``, ``certs``, ``doctor``, ``config``, …), each with ``register(app)``.
"""

from __future__ import annotations

from typing import Optional

import typer
from typer import core as _typer_core

from headroom_core.cli import (
    cache_cmd,
    certs_cmd,
    compress_cmd,
    config_cmd,
    discover_cmd,
    doctor_cmd,
    learn_cmd,
    mcp_cmd,
    memory_cmd,
    proxy_cmd,
    stats_cmd,
    wrap_cmd,
)
from headroom_core.cli import proxy_process as pp


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

app = typer.Typer(help="Headroom on mitmproxy: compress what coding agents send to LLM APIs.", no_args_is_help=True)

ADDON = pp.ADDON


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
    version: Optional[bool] = typer.Option(None, "--version", "-V", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    """Headroom on mitmproxy: compress what coding agents send to LLM APIs."""
    _warn_environment()


# Command groups live in their own modules; each has ``register(app)`` (in this order: the help
# lists the commands so).
for _cmd in (proxy_cmd, stats_cmd, discover_cmd, compress_cmd, cache_cmd, memory_cmd, learn_cmd, wrap_cmd, certs_cmd, doctor_cmd, config_cmd, mcp_cmd):
    _cmd.register(app)


if __name__ == "__main__":
    app()
