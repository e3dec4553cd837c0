"""``headroom certs``: where the proxy's CA is, how to trust it, and ``--install`` into the
system store (Debian/Ubuntu/Alpine, Fedora/RHEL, Arch, macOS, Windows)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

from headroom_core.cli import agent_env as ae
from headroom_core.cli.ca import (
    BUNDLE,
    ca_info,
    default_confdir,
    in_bundle,
    install_plan,
    is_admin,
    renew,
    renew_steps,
    system_bundle,
    write_bundle,
)
from headroom_core.cli.ui import copyable, fail
from headroom_core.settings import headroom_home

console = Console(emoji=False)  # a fingerprint holds ":CD:"-like pairs that are no emoji


def certs(
    confdir: Optional[Path] = typer.Option(None, help="mitmproxy confdir (default: $HEADROOM_HOME/mitmproxy)."),
    install: bool = typer.Option(
        False, "--install", help="Add the CA to the system trust store (needs root/admin on Linux and macOS)."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="With --install: print the commands, run nothing."),
    listen_host: str = typer.Option("127.0.0.1", help="The proxy's address, for the recipes that name it (Java)."),
    port: int = typer.Option(8080, min=1, max=65535, help="The proxy's port, for the recipes that name it (Java)."),
    renew_ca: bool = typer.Option(
        False,
        "--renew",
        help="Move the CA aside (expired, not yet valid, unreadable, or its key leaked): the proxy makes a new one on its next start, which agents must then trust.",
    ),
) -> None:
    """Show where the proxy's CA is and how to trust it; --install adds it to the system store."""
    home = headroom_home()
    conf = (confdir or default_confdir(home)).expanduser()
    if renew_ca:
        _renew(home, conf)
        return
    info = ca_info(conf)
    if not info.exists:
        copyable(
            f"[red]no CA yet[/] in {conf}: mitmproxy creates it on first start; run `headroom proxy` (or `headroom wrap <agent>`) once.",
            console,
        )
        raise typer.Exit(1)
    if info.error:
        copyable(f"[red]{escape(info.error)}[/]: {escape(renew_steps(conf, confdir is None))}", console)
        raise typer.Exit(1)
    if install:
        _install(info.cert_path, dry_run)
        return
    c = info.cert_path
    say = lambda text: copyable(text, console)  # noqa: E731 - paths and commands: never wrapped
    say(f"[bold]certificate[/] (public, share it): {c}")
    say(f"  subject {info.subject}, SHA-256 {info.sha256}")
    say(
        f"  valid until {info.not_after:%Y-%m-%d}{' [red](EXPIRED)[/]' if info.expired else ''}{' [red](NOT VALID YET)[/]' if info.not_yet_valid else ''}"
    )
    if info.expired or info.not_yet_valid:
        say(f"  [red]the proxy refuses to start with it:[/] {escape(renew_steps(conf, confdir is None))}")
    key_note = "" if info.key_private else f"  [red]readable by others: chmod 600 {info.key_path}[/]"
    say(f"[bold]private key[/] (never share, never copy into images): {info.key_path}{key_note}")
    sysb = system_bundle()
    say(
        f"system store ({sysb}): {'[green]trusted[/]' if in_bundle(c, sysb) else 'not trusted (`headroom certs --install`, or use `headroom wrap`)'}"
    )
    try:  # the bundle named below exists once this command ran (not only after `headroom wrap`)
        roots, extra = ae.bundle_sources(os.environ)  # what `headroom wrap` builds it from
        write_bundle(c, home / BUNDLE, roots, extra)
        bundle_note = "written now"
    except OSError as e:
        bundle_note = f"[red]could not be written: {e}[/]"
    say("\n[bold]trust it per runtime[/] (`headroom wrap` sets all of these for the agent):")
    say(f"  Node (Claude Code, Gemini CLI, cursor-agent):  export NODE_EXTRA_CA_CERTS={c}")
    say(f"  Python (Aider, SDKs), Go, curl, git, Codex:    export SSL_CERT_FILE={home / BUNDLE}")
    say(
        f"     (the bundle is the system roots plus this CA, {bundle_note}; also {', '.join(v for v in ae.BUNDLE_VARS if v != 'SSL_CERT_FILE')})"
    )
    say("  Java (a copy of the JDK's trust store, so its own roots stay trusted, plus this CA):")
    for line in java_recipe(c, home / JAVA_STORE, listen_host, port):
        say(f"    {line}")
    say("Details per OS and runtime, keeping the key private, rotating it: certs/README.md")
    say("No CA at all: agents that take a base URL use the proxy's base-URL ports (`headroom proxy` prints them).")


#: The Java trust store ``headroom certs`` suggests, under the Headroom home.
JAVA_STORE = "java-cacerts"


def java_recipe(cert: Path, store: Path, host: str = "127.0.0.1", port: int = 8080) -> list[str]:
    """Shell lines that trust ``cert`` in Java without losing the JDK's roots: copy the JDK's
    ``cacerts`` to ``store``, import the CA into the copy, point the JVM at it and at the proxy
    on ``host``:``port``."""
    return [
        f'cp "$JAVA_HOME/lib/security/cacerts" {store} && chmod u+w {store}',
        f"keytool -importcert -noprompt -alias headroom-mitmproxy -file {cert} -keystore {store} -storepass changeit",
        f"export JAVA_TOOL_OPTIONS='-Djavax.net.ssl.trustStore={store} -Djavax.net.ssl.trustStorePassword=changeit -Dhttps.proxyHost={host} -Dhttps.proxyPort={port}'",
    ]


def _renew(home: Path, conf: Path) -> None:
    """``--renew``: move the CA files aside (see :func:`~headroom_core.cli.ca.renew`) and say
    what follows: a new CA on the next start, to be trusted anew; running proxies keep the old
    one until restarted."""
    from headroom_core.cli import proxy_process as pp

    try:
        dest, moved = renew(conf)
    except OSError as e:
        fail("certs", f"cannot move the CA files of {conf} aside: {e}")
        raise typer.Exit(1) from e
    if not moved:
        copyable(f"no CA in {conf}: nothing to renew; the proxy makes one on its first start.", console, markup=False)
        return
    copyable(f"moved the CA files of {conf} to {dest} ({', '.join(p.name for p in moved)})", console, markup=False)
    copyable(
        "the proxy makes a new CA on its next start (`headroom proxy`, or `headroom wrap <agent>`). Trust the new one: "
        "`headroom wrap` does it for the agents it starts; where you trusted the old one, repeat `headroom certs --install` "
        "or your NODE_EXTRA_CA_CERTS/SSL_CERT_FILE setting.",
        console,
        markup=False,
    )
    for b in pp.background_proxies(home):
        if b.alive:
            copyable(
                f"the proxy on port {b.port} (pid {b.pid}) still uses the old CA: restart it (`headroom proxy --stop --port {b.port}`, then start it again).",
                console,
                markup=False,
            )


def _install(cert: Path, dry_run: bool) -> None:
    try:
        plan = install_plan(cert)
    except ValueError as e:
        console.print(f"[red]{e}[/]")
        raise typer.Exit(1) from e
    lines = [" ".join(c) for c in plan.commands]
    if dry_run or (plan.needs_admin and not is_admin()):
        if not dry_run:
            console.print(f"[yellow]{plan.system}: adding to the system store needs administrator rights; run:[/]")
        for line in lines:
            copyable(
                f"  {'sudo ' if plan.needs_admin and os.name == 'posix' and not is_admin() else ''}{line}",
                console,
                markup=False,
            )
        if plan.note:
            console.print(plan.note)
        if not dry_run:
            raise typer.Exit(1)
        return
    for c in plan.commands:
        copyable(f"$ {' '.join(c)}", console, markup=False)
        r = subprocess.run(list(c), capture_output=True, text=True)
        if r.returncode != 0:
            console.print(f"[red]failed ({r.returncode}):[/] {(r.stderr or r.stdout).strip()}")
            raise typer.Exit(1)
    console.print(f"[green]{plan.system}: the CA is in the system store.[/] {plan.note}")


def register(app: typer.Typer) -> None:
    """Add ``headroom certs`` to the CLI."""
    app.command("certs")(certs)
