"""Clear errors and safe defaults of the ``headroom`` command, each with the right value:
``--version``; help without a type after flags; database URLs (``postgres://`` accepted, a
SQLite path under a file refused in one line); the database created readable by its owner
only; ``certs``' Java recipe keeping the JDK's roots; commands to copy never hard-wrapped."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from headroom_core.settings import load_settings, normalize_db_url
from tests.support.proxy import free_port

HEADROOM = str(Path(sys.executable).parent / "headroom")


def _run(home: Path, *args: str, columns: int = 80, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("HEADROOM_") and not k.lower().endswith("_proxy")}
    return subprocess.run(
        [HEADROOM, *args],
        env={**base, "HEADROOM_HOME": str(home), "COLUMNS": str(columns), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_version(tmp_path):
    from importlib.metadata import version

    out = _run(tmp_path, "--version")
    assert out.returncode == 0
    assert out.stdout == f"headroom {version('headroom-mitm')} (mitmproxy 11.0.2, Python {platform.python_version()})\n"


def test_help_has_no_type_after_flags(tmp_path):
    from typer.main import get_command
    from typer.testing import CliRunner

    from headroom_core.cli.main import app

    root = get_command(app)
    ctx = root.make_context("headroom", ["--version"], resilient_parsing=True)
    commands = {n: root.get_command(ctx, n) for n in root.list_commands(ctx)}  # each loaded (lazy)
    paths = [[]] + [[n] for n in commands] + [[n, s] for n, c in commands.items() for s in getattr(c, "commands", {})]
    runner = CliRunner()
    for path in paths:
        out = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200", "HEADROOM_HOME": str(tmp_path)})
        assert out.exit_code == 0, (path, out.output)
        assert "<bool>" not in out.output, (path, out.output)
    assert len(paths) > 20
    detach = _run(tmp_path, "proxy", "--help", columns=200).stdout  # as a user sees it
    assert "<bool>" not in detach
    option = [line for line in detach.splitlines() if line.lstrip("│ ").startswith("--detach")][0]
    assert option.split("--detach")[1].split()[0] == "Run"


def test_database_urls(tmp_path):
    # the form Heroku and many docs print; SQLAlchemy 2 refuses "postgres"
    assert normalize_db_url("postgres://u:p@db:5432/h") == "postgresql+psycopg://u:p@db:5432/h"
    assert normalize_db_url("postgresql+psycopg2://u@db/h") == "postgresql+psycopg2://u@db/h"
    assert load_settings({"db_url": "postgres://u@db/h"}, env={}).database_url == "postgresql+psycopg://u@db/h"
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    bad = f"sqlite:///{blocker}/headroom.db"
    port = str(free_port())  # not 8080: a proxy of the user's may run there (wrap would reuse it)
    for args in (
        ("stats", "--db-url", bad),
        ("proxy", "--db-url", bad, "--port", port),
        ("wrap", "--db-url", bad, "--port", port, "true"),
    ):
        out = _run(tmp_path, *args)
        assert out.returncode == 2, (args, out.stderr)
        assert out.stderr == f"headroom {args[0]}: {bad}: {blocker} is a file, not a folder\n"
    out = _run(tmp_path, "memory", "add", "a fact", HEADROOM_DB_URL=bad)
    assert (
        out.returncode == 2
        and out.stderr
        == f"headroom memory: cannot create the SQLite database {blocker}/headroom.db: {blocker} is a file, not a folder\n"
    )
    long_bad = f"sqlite:///{tmp_path}/{'very-long-folder-name/' * 6}{blocker.name}/x.db"
    blocker2 = tmp_path / ("very-long-folder-name/" * 6)
    blocker2.mkdir(parents=True)
    (blocker2 / blocker.name).write_text("x")
    out = _run(tmp_path, "stats", "--db-url", long_bad, columns=60)
    assert out.returncode == 2 and out.stderr.count("\n") == 1  # one line, whatever the terminal's width


@pytest.mark.skipif(
    not os.environ.get("HEADROOM_TEST_PG_URL"),
    reason="no PostgreSQL server (scripts/postgres start prints HEADROOM_TEST_PG_URL)",
)
def test_postgres_scheme_accepted_by_the_cli(tmp_path):
    url = os.environ["HEADROOM_TEST_PG_URL"].replace("postgresql+psycopg://", "postgres://")
    out = _run(tmp_path, "stats", "--db-url", url, "--json")
    assert out.returncode == 0, out.stderr
    assert '"totals"' in out.stdout


def test_database_file_is_owner_only(tmp_path):
    from headroom_core.db.engine import open_database

    f = tmp_path / "new" / "headroom.db"
    sessions = open_database(f"sqlite:///{f}")
    with sessions.begin() as s:
        s.execute(__import__("sqlalchemy").text("UPDATE alembic_version SET version_num = version_num"))
    modes = {p.name: p.stat().st_mode & 0o777 for p in f.parent.iterdir()}
    # the lock file that makes starts open it one at a time is owner-only too
    assert modes == {
        "headroom.db": 0o600,
        "headroom.db-wal": 0o600,
        "headroom.db-shm": 0o600,
        "headroom.db.lock": 0o600,
    }
    assert f.parent.stat().st_mode & 0o777 == 0o700


def test_certs_java_recipe_keeps_the_jdk_roots_and_lines_are_never_wrapped(tmp_path):
    from mitmproxy.certs import CertStore

    conf = tmp_path / "mitmproxy"
    CertStore.from_store(conf, "mitmproxy", 2048)
    out = _run(tmp_path, "certs", columns=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    store = tmp_path / "java-cacerts"
    cert = conf / "mitmproxy-ca-cert.pem"
    assert f'    cp "$JAVA_HOME/lib/security/cacerts" {store} && chmod u+w {store}' in lines
    assert (
        f"    keytool -importcert -noprompt -alias headroom-mitmproxy -file {cert} -keystore {store} -storepass changeit"
        in lines
    )
    assert (
        f"    export JAVA_TOOL_OPTIONS='-Djavax.net.ssl.trustStore={store} -Djavax.net.ssl.trustStorePassword=changeit -Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort=8080'"
        in lines
    )
    moved = _run(tmp_path, "certs", "--port", "9090", "--listen-host", "10.0.0.5", columns=60).stdout.splitlines()
    assert any(line.endswith("-Dhttps.proxyHost=10.0.0.5 -Dhttps.proxyPort=9090'") for line in moved)
    assert f"  Node (Claude Code, Gemini CLI, cursor-agent):  export NODE_EXTRA_CA_CERTS={cert}" in lines


def test_read_only_commands_create_no_database(tmp_path):
    home = tmp_path / "home"
    for args, said in (
        (("stats",), "No requests recorded yet: there is no database at"),
        (("memory", "list"), "No memories yet: there is no database at"),
        (("memory", "stats"), "No memories yet: there is no database at"),
        (("cache", "report"), "No sessions recorded yet: there is no database at"),
        (("learn", "--list", "--project", str(tmp_path)), "No rules learned yet"),
    ):
        out = _run(home, *args)
        assert out.returncode == 0, (args, out.stderr)
        assert said in out.stdout, (args, out.stdout)
        assert not (home / "headroom.db").exists(), args


def test_a_misspelt_headroom_variable_is_named_with_the_setting_meant(tmp_path):
    out = _run(
        tmp_path,
        "--version",
        HEADROOM_MEMROY="true",
        HEADROOM_LISTEN_PORT="8080",
        HEADROOM_TEST_PG_URL="x",
        HEADROOM_FOO="1",
    )
    assert out.returncode == 0
    assert out.stderr.splitlines() == [
        "headroom: warning: HEADROOM_FOO is not a Headroom setting and is ignored; `headroom config` lists the settings",
        "headroom: warning: HEADROOM_MEMROY is not a Headroom setting and is ignored; did you mean HEADROOM_MEMORY?",
    ]
    assert _run(tmp_path, "--version", HEADROOM_MEMORY="true").stderr == ""
