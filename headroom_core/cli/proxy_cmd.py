"""``headroom proxy``: run the proxy (``mitmdump -s addons/headroom.py``) in the foreground or
the background, and stop background proxies.

Beside the regular proxy port (``HTTPS_PROXY``) it listens as a base URL for agents configured
with ``ANTHROPIC_BASE_URL`` / ``OPENAI_BASE_URL`` (mitmproxy reverse modes: plain HTTP in, the
provider's HTTPS API out; no CA to trust). Ports are checked before anything starts.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Optional

import typer

from headroom_core.cli import proxy_process as pp
from headroom_core.cli import ui
from headroom_core.cli.ca import BUNDLE, CA_CERT, default_confdir
from headroom_core.cli.dbopen import sqlite_path_problem
from headroom_core.cli.upstream_trust import UPSTREAM_BUNDLE, from_environment, user_sets_trust, write_upstream_bundle
from headroom_core.settings import Settings, SettingsError, headroom_home, load_settings


def upstream_ca(
    command: str, home: Path, conf: Path, sets: list[str], env: dict[str, str] | os._Environ
) -> Path | None:
    """The bundle the proxy verifies upstream servers with when the environment's CA variables
    name extra CAs (a corporate TLS-intercepting proxy's): system roots + those files, written to
    ``<home>/upstream-ca-bundle.pem``. None when there are none or ``sets`` choose already. A
    variable naming a missing file is warned about on standard error."""
    trust = from_environment(env, ignore=(conf / CA_CERT, home / BUNDLE, home / UPSTREAM_BUNDLE))
    for var, path in trust.missing:
        ui.note(
            command,
            f"{var}={path} names no file: neither the agent nor the proxy can trust that CA (behind a TLS-intercepting proxy, requests then fail certificate verification); fix or unset {var}",
        )
    if not trust.files or user_sets_trust(sets):
        return None
    try:
        return write_upstream_bundle(trust.files, home / UPSTREAM_BUNDLE)
    except OSError as e:
        ui.note(
            command,
            f"cannot write {home / UPSTREAM_BUNDLE} ({e}); the proxy verifies upstream servers with its default roots only",
        )
        return None


def check_ports(command: str, host: str, port: int, base_urls: list[pp.BaseUrlListener]) -> None:
    """Exit 1 with a one-line message when the proxy's ``port`` or one of the base-URL ports
    cannot be listened on; a base-URL port is named as such, with the option that moves it."""
    for p, what in [
        (port, ""),
        *((b.port, f"the {b.name} base-URL port, {b.option}; 0 turns it off") for b in base_urls),
    ]:
        why = pp.port_problem(host, p)
        if why:
            ui.fail(command, why.replace(f"port {p} ", f"port {p} ({what}) ", 1) if what else why)
            raise typer.Exit(1)


def home_problem(home: Path) -> str | None:
    """Why the Headroom home ``home`` cannot be the proxy's (None when it can): it must be a
    folder this user can write, created (owner-only) when missing; tried for real, so a
    read-only file system, a folder without write permission and a path through a file are all
    found, whatever the user's privileges. The proxy keeps its secret key, CA, logs, pid files
    and CA bundles there: in an unwritable home its warm-up cannot create the secret key and it
    would run with compression off."""
    import tempfile

    try:
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        with tempfile.NamedTemporaryFile(dir=home, prefix=".headroom-check-"):
            pass
        return None
    except OSError as e:
        blocker = next((p for p in [home, *home.parents] if p.exists() and not p.is_dir()), None)
        if blocker is not None:
            return f"the Headroom home {home}: {blocker} is a file, not a folder; point HEADROOM_HOME at a folder"
        return (f"the Headroom home {home} is not writable ({e.strerror or e}): the proxy keeps its secret key, CA and logs there; "
                "make it writable, or point HEADROOM_HOME at a writable folder")  # fmt: skip


def check_home(command: str, home: Path) -> None:
    """Exit 1 with one line (:func:`home_problem`) when ``home`` cannot be the proxy's home:
    before anything else is checked, so every combination of options says the same."""
    if why := home_problem(home):
        ui.fail(command, why)
        raise typer.Exit(1)


def make_confdir(command: str, conf: Path) -> None:
    """Create the CA folder ``conf``; exit 1 with one line when it cannot be created."""
    try:
        conf.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        ui.fail(command, f"cannot create the CA folder {conf} ({e.strerror or e}): give a writable one with --confdir")
        raise typer.Exit(1) from e


def validate_settings(command: str, db_url: str | None, sets: list[str]) -> None:
    """Exit 2 with a one-line message when the settings (``--db-url``, ``--set headroom_*``,
    environment, config file) are not valid: the proxy would refuse to start after the banner."""
    overrides = {"db_url": db_url} if db_url else {}
    for kv in sets:
        k, sep, v = kv.partition("=")
        if not sep:
            ui.fail(command, f"--set {kv!r}: expected key=value")
            raise typer.Exit(2)
        if k.startswith("headroom_"):
            overrides[k.removeprefix("headroom_")] = v
    try:
        settings = load_settings(overrides)
    except SettingsError as e:
        ui.fail(command, str(e))
        raise typer.Exit(2) from e
    for url in {settings.database_url, settings.memory_db_url or settings.database_url}:
        if why := sqlite_path_problem(url):
            ui.fail(command, why)
            raise typer.Exit(2)
    check_databases(command, settings)


def check_databases(command: str, settings: Settings) -> None:
    """Exit 2 with one line naming the cause (connection refused at host:port, login refused, no
    such database, a file that is no SQLite database, …) and what to do when the proxy's
    database or its memory database cannot be used: checked in seconds before the proxy starts,
    instead of a start-up timeout and a traceback in its log."""
    from headroom_core.cli.dbopen import safe_url
    from headroom_core.db.check import database_problem

    where = {settings.database_url: ("db_url", "--db-url")}
    if settings.memory_db_url:
        where.setdefault(settings.memory_db_url, ("memory_db_url", "--set headroom_memory_db_url=URL"))
    for url, (key, option) in where.items():
        with ui.status(f"checking the database {safe_url(url)} …"):
            why = database_problem(url)
        if why:
            ui.fail(
                command,
                f"cannot use the database {safe_url(url)}: {why}. Fix that, or give another database with {option} "
                f"(or HEADROOM_{key.upper()}, or {key} in {headroom_home() / 'config.toml'})",
            )
            raise typer.Exit(2)


def check_ca(command: str, conf: Path, default: bool) -> None:
    """Exit 2 with one line when the CA in ``conf`` (``default``: the Headroom home's confdir)
    is expired, not valid yet or unreadable: agents would fail TLS with it (and mitmproxy's own
    warning names ``~/.mitmproxy``, not this folder). The line says how to renew it."""
    from headroom_core.cli.ca import ca_info, ca_problem, renew_steps

    if why := ca_problem(ca_info(conf)):
        ui.fail(command, f"{why}: {renew_steps(conf, default)}")
        raise typer.Exit(2)


def banner(addr: pp.ProxyAddress, ca: Path, base_urls: list[pp.BaseUrlListener]) -> None:
    """What the proxy serves and how to use it; every command on one line (never wrapped). The
    CA ``ca`` is said to be made at this start only when it does not exist yet."""
    ui.copyable(
        f"[bold]headroom[/] proxy on {addr.url}  CA: {ca}{'' if ca.is_file() else ' (created on first start)'}", ui.err
    )
    ui.copyable(
        f"  use it: `headroom wrap <agent>`, or HTTPS_PROXY={addr.url} and trust the CA (`headroom certs`)", ui.err
    )
    if base_urls:
        urls = "  ".join(f"{b.env}={b.base_url(addr.host)}" for b in base_urls)
        ui.copyable(f"  base URLs (no CA needed): {urls}", ui.err)
    ui.copyable(
        f"  stats: http://{addr.client_host}:{addr.port}/ (or http://headroom.localhost/ through the proxy)", ui.err
    )


def _stop(home: Path, port: int | None) -> None:
    if port is not None:
        pid = pp.stop(home, port)
        if pid is None:
            ui.fail("proxy", f"no background proxy on port {port} (no live pid file {pp.pid_file(home, port)})")
            raise typer.Exit(1)
        ui.err.print(f"headroom: stopped the proxy on port {port} (pid {pid})", soft_wrap=True)
        return
    found = pp.background_proxies(home)
    stopped = [(b.port, pp.stop(home, b.port)) for b in found]
    live = [(p, pid) for p, pid in stopped if pid is not None]
    for p, pid in live:
        ui.err.print(f"headroom: stopped the proxy on port {p} (pid {pid})", soft_wrap=True)
    stale = len(stopped) - len(live)
    if stale:
        ui.err.print(f"headroom: removed {stale} stale pid file(s) of proxies no longer running", soft_wrap=True)
    if not live:
        ui.fail("proxy", f"no background proxy running (no live pid file under {home / 'run'})")
        raise typer.Exit(1)


def proxy(
    listen_host: str = typer.Option("127.0.0.1", help="Address to listen on (0.0.0.0 for a container or a LAN)."),
    port: Optional[int] = typer.Option(
        None, min=1, max=65535, show_default=False, help="The proxy port (HTTPS_PROXY); default 8080."
    ),
    anthropic_port: Optional[int] = typer.Option(
        None,
        min=0,
        max=65535,
        show_default=False,
        help="Port serving as ANTHROPIC_BASE_URL (to --anthropic-upstream); default: --port + 1; 0: none.",
    ),
    openai_port: Optional[int] = typer.Option(
        None,
        min=0,
        max=65535,
        show_default=False,
        help="Port serving as OPENAI_BASE_URL (…/v1, to --openai-upstream); default: --port + 2; 0: none.",
    ),
    anthropic_upstream: str = typer.Option(pp.ANTHROPIC_API, help="Where the Anthropic base-URL port forwards to."),
    openai_upstream: str = typer.Option(
        pp.OPENAI_API, help="Where the OpenAI base-URL port forwards to: an origin or a base URL ending in /v1."
    ),
    google_port: Optional[int] = typer.Option(
        None,
        min=0,
        max=65535,
        show_default=False,
        help="Port serving as GOOGLE_GEMINI_BASE_URL (the Gemini API, to --google-upstream); default: --port + 3; 0: none.",
    ),
    google_upstream: str = typer.Option(pp.GOOGLE_API, help="Where the Google base-URL port forwards to: an origin."),
    confdir: Optional[Path] = typer.Option(
        None, help="mitmproxy confdir: where the proxy's CA lives (default: $HEADROOM_HOME/mitmproxy)."
    ),
    db_url: Optional[str] = typer.Option(None, help="SQLAlchemy URL (default: SQLite under $HEADROOM_HOME)."),
    set_: list[str] = typer.Option([], "--set", help="Any mitmproxy or headroom_* option, as key=value (repeatable)."),
    mode: Optional[str] = typer.Option(
        None, help="mitmproxy --mode for the proxy port, e.g. upstream:http://corp-proxy:3128."
    ),
    detach: bool = typer.Option(
        False, "--detach", help="Run in the background (log and pid file under $HEADROOM_HOME)."
    ),
    stop: bool = typer.Option(
        False, "--stop", help="Stop the background proxy on --port, or every background proxy without --port."
    ),
    timeout: float = typer.Option(60.0, min=1, help="With --detach: seconds to wait until it answers."),
) -> None:
    """Run the proxy: mitmdump -s addons/headroom.py with these options.

    It listens as a proxy (HTTPS_PROXY) on --port and as the Anthropic, OpenAI and Google (Gemini) base URLs on the next three ports. In the foreground it replaces this process; --detach runs it in the background.
    """
    home = headroom_home()
    if stop:
        _stop(home, port)
        return
    port = port or 8080
    check_home("proxy", home)
    validate_settings("proxy", db_url, set_)
    addr = pp.ProxyAddress(listen_host, port)
    try:
        base_urls = pp.base_url_listeners(
            port, anthropic_port, openai_port, anthropic_upstream, openai_upstream, google_port, google_upstream
        )
    except pp.ProxyError as e:
        ui.fail("proxy", str(e))
        raise typer.Exit(2) from e
    check_ports("proxy", listen_host, port, base_urls)
    conf = (confdir or default_confdir(home)).expanduser()
    check_ca("proxy", conf, confdir is None)
    make_confdir("proxy", conf)
    trust = upstream_ca("proxy", home, conf, set_, os.environ)
    try:
        args = pp.proxy_command(addr, conf, db_url=db_url, sets=set_, mode=mode, base_urls=base_urls, upstream_ca=trust)
    except pp.ProxyError as e:
        ui.fail("proxy", str(e))
        raise typer.Exit(2) from e
    ca = conf / CA_CERT
    env = pp.proxy_environ(os.environ, keep_proxy_vars=bool(mode))
    if detach:
        try:
            with ui.status(f"starting the Headroom proxy on {addr.url} …"):
                pid = pp.start_detached(args, env, addr, home, ca, timeout)
        except pp.ProxyError as e:
            ui.fail("proxy", str(e).splitlines()[0])
            ui.err.print(str(e).split("\n", 1)[1] if "\n" in str(e) else "", markup=False, soft_wrap=True)
            raise typer.Exit(1) from e
        except KeyboardInterrupt:
            ui.fail("proxy", "interrupted; the proxy that was starting is stopped")
            raise typer.Exit(130) from None
        ui.copyable(
            f"headroom: proxy on {addr.url} (pid {pid}, log {pp.log_file(home, port)}); stop it with `headroom proxy --stop --port {port}`",
            ui.err,
            markup=False,
        )
        if base_urls:
            ui.copyable(
                "  base URLs: " + "  ".join(f"{b.env}={b.base_url(listen_host)}" for b in base_urls),
                ui.err,
                markup=False,
            )
        return
    banner(addr, ca, base_urls)
    pp.mark_foreground(home, port, os.getpid())  # this pid becomes the proxy's; it removes the record as it stops
    sys.stdout.flush()
    sys.stderr.flush()
    if hasattr(signal, "pthread_sigmask"):
        # a Ctrl-C while mitmdump imports and loads the addon waits until the addon takes it
        # (addons/headroom_options.py): a quiet stop, not a KeyboardInterrupt out of an import
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    os.execve(args[0], args, env)


def register(app: typer.Typer) -> None:
    """Add ``headroom proxy`` to the CLI."""
    app.command("proxy")(proxy)
