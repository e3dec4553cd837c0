"""``headroom wrap <agent> [args…]``: run an agent through the proxy, one command from install.

Starts a background proxy unless one already answers at the address, builds the CA bundle,
then replaces itself with the agent (so signals, the terminal and the exit code are the
agent's own) with the proxy variables, ``NO_PROXY`` for local addresses and the CA trusted
for its runtime (:mod:`headroom_core.cli.agent_env`).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Optional

import typer

from headroom_core.cli import agent_env as ae
from headroom_core.cli import proxy_process as pp
from headroom_core.cli import ui
from headroom_core.cli.ca import BUNDLE, CA_CERT, default_confdir, write_bundle
from headroom_core.cli.proxy_cmd import check_ca, check_home, make_confdir, upstream_ca, validate_settings
from headroom_core.settings import headroom_home

err = ui.err

#: Signals Python ignores at start-up (``SIG_IGN`` survives ``exec``): the agent gets them back
#: at their default, or ``yes | head -1`` under ``wrap`` would print "Broken pipe".
RESET_SIGNALS = tuple(getattr(signal, n) for n in ("SIGPIPE", "SIGXFSZ") if hasattr(signal, n))


def upstream_mode(base: dict[str, str] | os._Environ, own: pp.ProxyAddress) -> str | None:
    """``upstream:<url>`` when the environment already names a proxy other than ``own``
    (a corporate proxy): the Headroom proxy must then reach the internet through it."""
    url = base.get("HTTPS_PROXY") or base.get("https_proxy") or ""
    if not url or url.rstrip("/") == own.url or base.get("HEADROOM_PROXY"):
        return None
    return f"upstream:{url}"


def find_command(command: list[str], env: dict[str, str] | os._Environ) -> str | None:
    """The executable ``command[0]`` names on ``env``'s ``PATH`` (or as a path), else None."""
    return shutil.which(command[0], path=env.get("PATH"))


def default_signals() -> None:
    """Give :data:`RESET_SIGNALS` their default disposition (before ``exec``)."""
    for sig in RESET_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)


def run_agent(command: list[str], env: dict[str, str], exe: str | None = None) -> int:
    """Run ``command`` with ``env``: exec on POSIX (this process becomes the agent, with default
    signal dispositions; the return is never reached), a child process elsewhere (its exit code
    returned). Exit 127 when the command is not found."""
    exe = exe or find_command(command, env)
    if exe is None:
        ui.fail("wrap", f"command not found: {command[0]}")
        return 127
    sys.stdout.flush()
    sys.stderr.flush()
    if os.name == "posix":
        default_signals()
        os.execve(exe, command, env)
    return subprocess.call([exe, *command[1:]], env=env)


def _free(host: str, listeners: list[pp.BaseUrlListener]) -> list[pp.BaseUrlListener]:
    return [b for b in listeners if pp.port_problem(host, b.port) is None]


def wrap(
    ctx: typer.Context,
    agent: str = typer.Argument(
        ..., help="claude, codex, aider, gemini, antigravity (agy), cursor-agent, or any command; its arguments follow."
    ),
    listen_host: str = typer.Option("127.0.0.1", help="The proxy's address."),
    port: int = typer.Option(
        8080, min=1, max=65535, help="The proxy's port (reused when a Headroom proxy already answers there)."
    ),
    confdir: Optional[Path] = typer.Option(
        None, help="mitmproxy confdir (the CA) (default: $HEADROOM_HOME/mitmproxy)."
    ),
    db_url: Optional[str] = typer.Option(None, help="Database for a proxy this command starts."),
    set_: list[str] = typer.Option([], "--set", help="key=value options for a proxy this command starts (repeatable)."),
    no_proxy: Optional[str] = typer.Option(
        None,
        help="NO_PROXY for the agent (default: yours + localhost,127.0.0.1,::1); '' sends local hosts (local LLM servers) through the proxy too.",
    ),
    timeout: float = typer.Option(60.0, min=1, help="Seconds to wait for a proxy this command starts."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No message before the agent starts."),
) -> None:
    """Run an agent through the Headroom proxy, trusting its CA.

    Starts the proxy in the background when none answers at the address, then runs the
    agent with HTTPS_PROXY, NO_PROXY and the CA variables for its runtime. Exits with the
    agent's exit code. Example: headroom wrap claude --resume
    """
    command = ae.agent_command([agent, *ctx.args], lambda c: find_command([c], os.environ))
    exe = find_command(command, os.environ)
    if exe is None:  # before any proxy starts: nothing is left behind
        ui.fail("wrap", f"command not found: {command[0]}")
        raise typer.Exit(127)
    home = headroom_home()
    conf = (confdir or default_confdir(home)).expanduser()
    addr = pp.ProxyAddress(listen_host, port)
    ca = conf / CA_CERT
    check_ca("wrap", conf, confdir is None)  # the agent would fail TLS: refuse before it runs
    found = pp.identify(addr)
    state = found.state
    if state == "base_url":
        ui.fail(
            "wrap",
            f"{addr.url} is {found.words}, not a proxy port: use --port {found.proxy_port}, or choose another --port",
        )
        raise typer.Exit(2)
    if state == "other":
        ui.fail("wrap", f"{addr.url} answers, but not as a Headroom proxy: choose another --port")
        raise typer.Exit(2)
    if state == "warming" and (why := pp.health_failure(addr)) is not None:
        ui.note(
            "wrap",
            f"the proxy on {addr.url} cannot open its database ({why}): requests pass uncompressed; fix it, then restart that proxy (`headroom proxy --stop --port {port}`)",
        )
    elif state == "warming":
        with ui.status(f"waiting for the Headroom proxy on {addr.url} to warm up …", quiet=quiet):
            ready = pp.wait_ready(addr, timeout)
        if not ready:
            ui.note(
                "wrap", f"the proxy on {addr.url} is still warming up; requests pass uncompressed until it is ready"
            )
    if state == "none":
        check_home("wrap", home)
        validate_settings("wrap", db_url, set_)
        if (why := pp.port_problem(listen_host, port)) is not None:
            ui.fail("wrap", why)
            raise typer.Exit(2)
        mode = upstream_mode(os.environ, addr)
        make_confdir("wrap", conf)
        trust = upstream_ca("wrap", home, conf, set_, os.environ)
        base_urls = _free(listen_host, pp.base_url_listeners(port, None, None))
        try:
            cmd = pp.proxy_command(
                addr, conf, db_url=db_url, sets=set_, mode=mode, base_urls=base_urls, upstream_ca=trust
            )
            with ui.status(f"starting the Headroom proxy on {addr.url} …", quiet=quiet):
                pid = pp.start_detached(
                    cmd, pp.proxy_environ(os.environ, keep_proxy_vars=bool(mode)), addr, home, ca, timeout
                )
        except pp.ProxyError as e:
            ui.fail("wrap", str(e).splitlines()[0])
            if "\n" in str(e):
                err.print(str(e).split("\n", 1)[1], markup=False, soft_wrap=True)
            raise typer.Exit(2) from e
        except KeyboardInterrupt:
            ui.fail("wrap", "interrupted while the proxy was starting; it is stopped, nothing was run")
            raise typer.Exit(130) from None
        if not quiet:
            via = f", via {mode[9:]}" if mode else ""
            trusted = (
                f", trusting {', '.join(str(f) for f in trust_files(os.environ, home, conf))} upstream" if trust else ""
            )
            ui.copyable(
                f"headroom: started the proxy on {addr.url} (pid {pid}{via}{trusted}); stop it with `headroom proxy --stop --port {port}`",
                err,
                markup=False,
            )
    elif set_ or db_url:
        ui.note("wrap", f"a proxy already runs on {addr.url}: --set/--db-url are not applied to it")
    if not ca.is_file():
        ui.fail("wrap", f"no CA at {ca}: the proxy on {addr.url} uses another confdir; pass it with --confdir")
        raise typer.Exit(2)
    roots, extra = ae.bundle_sources(os.environ)
    try:
        bundle = write_bundle(ca, home / BUNDLE, roots, extra)
    except OSError as e:
        ui.fail("wrap", f"cannot write the CA bundle {home / BUNDLE}: {e}")
        raise typer.Exit(2) from e
    env = ae.agent_env(os.environ, proxy_url=addr.url, ca_cert=ca, ca_bundle=bundle, no_proxy=no_proxy)
    if not quiet:
        prof = ae.profile_for(command)
        ui.copyable(
            f"headroom: {prof.label()} through {addr.url}; trusts the CA via {', '.join(prof.trust)}; stats: `headroom stats`",
            err,
            markup=False,
        )
    raise typer.Exit(run_agent(command, env, exe))


def trust_files(env: dict[str, str] | os._Environ, home: Path, conf: Path) -> tuple[Path, ...]:
    """The CA files of the environment that the proxy trusts upstream (for messages)."""
    from headroom_core.cli.upstream_trust import UPSTREAM_BUNDLE, from_environment

    return from_environment(env, ignore=(conf / CA_CERT, home / BUNDLE, home / UPSTREAM_BUNDLE)).files


def register(app: typer.Typer) -> None:
    """Add ``headroom wrap`` to the CLI."""
    app.command(
        "wrap",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "allow_interspersed_args": False},
    )(wrap)
