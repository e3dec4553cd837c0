"""``headroom wrap <agent> [args…]``: run an agent through the proxy, one command from install.

Starts a background proxy unless one already answers at the address, builds the CA bundle,
then replaces itself with the agent (so signals, the terminal and the exit code are the
agent's own) with the proxy variables, ``NO_PROXY`` for local addresses and the CA trusted
for its runtime (:mod:`headroom_core.cli.agent_env`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from headroom_core.cli import agent_env as ae
from headroom_core.cli import proxy_process as pp
from headroom_core.cli.ca import BUNDLE, CA_CERT, default_confdir, write_bundle
from headroom_core.settings import headroom_home

err = Console(stderr=True)


def upstream_mode(base: dict[str, str] | os._Environ, own: pp.ProxyAddress) -> str | None:
    """``upstream:<url>`` when the environment already names a proxy other than ``own``
    (a corporate proxy): the Headroom proxy must then reach the internet through it."""
    url = base.get("HTTPS_PROXY") or base.get("https_proxy") or ""
    if not url or url.rstrip("/") == own.url or base.get("HEADROOM_PROXY"):
        return None
    return f"upstream:{url}"


def run_agent(command: list[str], env: dict[str, str]) -> int:
    """Run ``command`` with ``env``: exec on POSIX (this process becomes the agent; the return is
    never reached), a child process elsewhere (its exit code returned). Exit 127 when the
    command is not found."""
    exe = shutil.which(command[0], path=env.get("PATH"))
    if exe is None:
        err.print(f"[red]headroom wrap:[/] command not found: {command[0]}")
        return 127
    sys.stdout.flush()
    sys.stderr.flush()
    if os.name == "posix":
        os.execve(exe, command, env)
    return subprocess.call([exe, *command[1:]], env=env)


def wrap(
    ctx: typer.Context,
    agent: str = typer.Argument(..., help="claude, codex, aider, gemini, cursor-agent, or any command; its arguments follow."),
    listen_host: str = typer.Option("127.0.0.1", help="The proxy's address."),
    port: int = typer.Option(8080, help="The proxy's port (reused when a Headroom proxy already answers there)."),
    confdir: Optional[Path] = typer.Option(None, help="mitmproxy confdir (the CA) (default: $HEADROOM_HOME/mitmproxy)."),
    db_url: Optional[str] = typer.Option(None, help="Database for a proxy this command starts."),
    set_: list[str] = typer.Option([], "--set", help="key=value options for a proxy this command starts (repeatable)."),
    no_proxy: Optional[str] = typer.Option(None, help="NO_PROXY for the agent (default: yours + localhost,127.0.0.1,::1); '' sends local hosts (local LLM servers) through the proxy too."),
    timeout: float = typer.Option(60.0, help="Seconds to wait for a proxy this command starts."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No message before the agent starts."),
) -> None:
    """Run an agent through the Headroom proxy, trusting its CA.

    Starts the proxy in the background when none answers at the address, then runs the
    agent with HTTPS_PROXY, NO_PROXY and the CA variables for its runtime. Exits with the
    agent's exit code. Example: headroom wrap claude --resume
    """
    command = [agent, *ctx.args]
    home = headroom_home()
    conf = (confdir or default_confdir(home)).expanduser()
    addr = pp.ProxyAddress(listen_host, port)
    ca = conf / CA_CERT
    state = pp.probe(addr)
    if state == "other":
        err.print(f"[red]headroom wrap:[/] {addr.url} answers, but not as a Headroom proxy: choose another --port")
        raise typer.Exit(2)
    if state == "warming" and not pp.wait_ready(addr, timeout):
        err.print(f"[yellow]headroom wrap:[/] the proxy on {addr.url} is still warming up; requests pass uncompressed until it is ready")
    if state == "none":
        mode = upstream_mode(os.environ, addr)
        conf.mkdir(parents=True, exist_ok=True)
        try:
            cmd = pp.proxy_command(addr, conf, db_url=db_url, sets=set_, mode=mode)
            pid = pp.start_detached(cmd, pp.proxy_environ(os.environ, keep_proxy_vars=bool(mode)), addr, home, ca, timeout)
        except pp.ProxyError as e:
            err.print(f"[red]headroom wrap:[/] {e}")
            raise typer.Exit(2) from e
        if not quiet:
            err.print(f"headroom: started the proxy on {addr.url} (pid {pid}{', via ' + mode[9:] if mode else ''}); stop it with `headroom proxy --stop --port {port}`")
    elif set_ or db_url:
        err.print(f"[yellow]headroom wrap:[/] a proxy already runs on {addr.url}: --set/--db-url are not applied to it")
    if not ca.is_file():
        err.print(f"[red]headroom wrap:[/] no CA at {ca}: the proxy on {addr.url} uses another confdir; pass it with --confdir")
        raise typer.Exit(2)
    roots, extra = ae.bundle_sources(os.environ)
    try:
        bundle = write_bundle(ca, home / BUNDLE, roots, extra)
    except OSError as e:
        err.print(f"[red]headroom wrap:[/] cannot write the CA bundle {home / BUNDLE}: {e}")
        raise typer.Exit(2) from e
    env = ae.agent_env(os.environ, proxy_url=addr.url, ca_cert=ca, ca_bundle=bundle, no_proxy=no_proxy)
    if not quiet:
        prof = ae.profile_for(command)
        err.print(f"headroom: {prof.name} ({prof.runtime}) through {addr.url}; trusts the CA via {', '.join(prof.trust)}; stats: `headroom stats`")
    raise typer.Exit(run_agent(command, env))


def register(app: typer.Typer) -> None:
    """Add ``headroom wrap`` to the CLI."""
    app.command(
        "wrap",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "allow_interspersed_args": False},
    )(wrap)
