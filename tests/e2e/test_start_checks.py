"""What ``headroom proxy`` (foreground and ``--detach``) and ``headroom wrap`` check before a proxy
starts (issue 34, items 4 and 5), each failure one line naming the cause and what to do, the
proxy never started:

* a database nobody answers (a refused PostgreSQL port), a PostgreSQL database that does not
  exist, a login the server refuses, a file that is no SQLite database, from ``--db-url`` or
  the environment;
* a CA that expired, is not valid yet or cannot be read (real certificates made with
  ``cryptography``), named in the Headroom confdir (never ``~/.mitmproxy``), and ``headroom
  certs --renew``, after which a real proxy makes a new, valid CA.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from headroom_core.cli import proxy_process as pp
from headroom_core.cli.ca import CA_CERT, CA_KEY, ca_info
from headroom_core.db.check import database_problem
from tests.support.postgres import pg_server_url
from tests.support.proxy import free_port

HEADROOM = str(Path(sys.executable).parent / "headroom")

STARTS = (("proxy",), ("proxy", "--detach"), ("wrap",))


def _run(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("HEADROOM_") and not k.lower().endswith("_proxy")}
    return subprocess.run(
        [HEADROOM, *args],
        env={**base, "HEADROOM_HOME": str(home), "COLUMNS": "80", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _start(home: Path, start: tuple[str, ...], port: int, *opts: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``headroom <start> --port P <opts>`` (``wrap`` runs ``true``)."""
    tail = ("true",) if start[0] == "wrap" else ()
    return _run(home, *start, "--port", str(port), *opts, *tail, **env)


def _one_line(out: subprocess.CompletedProcess[str], command: str) -> str:
    assert out.returncode == 2, out.stderr
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith(f"headroom {command}: ")
    return lines[0]


def _nothing_started(home: Path, port: int) -> None:
    assert not (home / "run" / f"proxy-{port}.pid").exists()
    assert not (home / "logs" / f"proxy-{port}.log").exists()


# --- the database ------------------------------------------------------------------------------


@pytest.mark.parametrize("start", STARTS, ids=" ".join)
def test_a_refused_postgresql_port_is_named_before_anything_starts(tmp_path, start):
    dead = free_port()  # nobody listens there
    url = f"postgresql://headroom:s3cret@127.0.0.1:{dead}/headroom"
    port = free_port()
    line = _one_line(_start(tmp_path, start, port, "--db-url", url), start[0])
    assert (
        f"cannot use the database postgresql+psycopg://headroom:***@127.0.0.1:{dead}/headroom: connection refused at 127.0.0.1:{dead}"
        in line
    )
    assert "--db-url" in line and "HEADROOM_DB_URL" in line and str(tmp_path / "config.toml") in line
    assert "s3cret" not in line
    _nothing_started(tmp_path, port)


def test_the_environments_database_and_the_memory_database_are_checked(tmp_path):
    dead = free_port()
    line = _one_line(
        _run(tmp_path, "proxy", "--port", str(free_port()), HEADROOM_DB_URL=f"postgresql://u@127.0.0.1:{dead}/h"),
        "proxy",
    )
    assert f"connection refused at 127.0.0.1:{dead}" in line
    line = _one_line(
        _run(
            tmp_path,
            "proxy",
            "--port",
            str(free_port()),
            "--set",
            f"headroom_memory_db_url=postgresql://u@127.0.0.1:{dead}/m",
        ),
        "proxy",
    )
    assert f"cannot use the database postgresql+psycopg://u@127.0.0.1:{dead}/m: connection refused" in line
    assert "headroom_memory_db_url" in line and "HEADROOM_MEMORY_DB_URL" in line


@pytest.mark.parametrize("start", STARTS, ids=" ".join)
def test_a_file_that_is_no_sqlite_database(tmp_path, start):
    bad = tmp_path / "notes.db"
    bad.write_text("these are my notes, not a database\n" * 40)
    port = free_port()
    line = _one_line(_start(tmp_path, start, port, "--db-url", f"sqlite:///{bad}"), start[0])
    assert f"{bad} cannot be opened as a SQLite database" in line
    assert bad.read_text().startswith("these are my notes")  # left as it was
    _nothing_started(tmp_path, port)


def test_a_missing_database_and_a_refused_login_on_a_real_server():
    server = pg_server_url()
    if server is None:
        pytest.skip("no PostgreSQL here (HEADROOM_TEST_PG_URL unset, /usr/lib/postgresql missing)")
    from sqlalchemy.engine import make_url

    u = make_url(server)
    assert database_problem(u.render_as_string(hide_password=False)) is None
    missing = u.set(database="headroom_no_such_db_34").render_as_string(hide_password=False)
    assert database_problem(missing) == (
        f"database 'headroom_no_such_db_34' does not exist on that server (user {u.username!r} can log in): "
        "create it (createdb headroom_no_such_db_34) or name another one in the URL"
    )
    stranger = u.set(username="headroom_no_such_role_34", password="x").render_as_string(hide_password=False)
    why = database_problem(stranger) or ""
    assert (
        why.startswith("cannot log in as user 'headroom_no_such_role_34': ")
        and "headroom_no_such_role_34" in why.split(": ", 1)[1]
    )


def test_an_unknown_host_and_a_missing_driver():
    assert (database_problem("postgresql://u@no-such-host.invalid:5432/h") or "").startswith(
        "host 'no-such-host.invalid' not found"
    )
    assert "is not installed" in (database_problem("mysql+nosuchdriver34://u@127.0.0.1:1/h") or "")


def test_a_database_that_answers_passes(tmp_path):
    assert database_problem(f"sqlite:///{tmp_path / 'new' / 'headroom.db'}") is None  # created by the proxy later
    assert not (tmp_path / "new").exists()  # the check creates nothing


# --- the CA ------------------------------------------------------------------------------------


def _write_ca(conf: Path, not_before: datetime, not_after: datetime) -> None:
    """A CA as mitmproxy keeps it (key + certificate in mitmproxy-ca.pem, the certificate in
    mitmproxy-ca-cert.pem), valid from ``not_before`` to ``not_after``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, "mitmproxy"),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "mitmproxy"),
        ]
    )
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(not_before).not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    pem = cert.public_bytes(serialization.Encoding.PEM)
    kpem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )
    conf.mkdir(parents=True, exist_ok=True)
    (conf / CA_KEY).write_bytes(kpem + pem)
    (conf / CA_KEY).chmod(0o600)
    (conf / CA_CERT).write_bytes(pem)


NOW = datetime.now(timezone.utc)


@pytest.mark.parametrize("start", STARTS, ids=" ".join)
def test_an_expired_ca_is_refused_naming_the_headroom_confdir(tmp_path, start):
    conf = tmp_path / "mitmproxy"
    _write_ca(conf, NOW - timedelta(days=800), NOW - timedelta(days=3))
    port = free_port()
    line = _one_line(_start(tmp_path, start, port), start[0])
    expired = (NOW - timedelta(days=3)).strftime("%Y-%m-%d")
    assert line.startswith(
        f"headroom {start[0]}: the proxy's CA {conf / CA_CERT} expired on {expired}: run `headroom certs --renew` (moves the CA files in {conf} aside"
    )
    assert "trust the new CA" in line and ".mitmproxy" not in line.replace(str(conf), "")
    _nothing_started(tmp_path, port)


def test_a_ca_not_valid_yet_and_an_unreadable_one(tmp_path):
    conf = tmp_path / "mitmproxy"
    _write_ca(conf, NOW + timedelta(days=30), NOW + timedelta(days=400))
    line = _one_line(_run(tmp_path, "proxy", "--port", str(free_port())), "proxy")
    assert f"the proxy's CA {conf / CA_CERT} is valid only from {(NOW + timedelta(days=30)):%Y-%m-%d}" in line
    (conf / CA_CERT).write_text("-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n")
    line = _one_line(_run(tmp_path, "wrap", "--port", str(free_port()), "true"), "wrap")
    assert line.startswith(f"headroom wrap: the proxy's CA cannot be used: cannot read {conf / CA_CERT}: ")
    assert "headroom certs --renew" in line


def test_a_custom_confdir_is_named_in_the_command(tmp_path):
    conf = tmp_path / "elsewhere"
    _write_ca(conf, NOW - timedelta(days=800), NOW - timedelta(days=1))
    line = _one_line(_run(tmp_path, "proxy", "--port", str(free_port()), "--confdir", str(conf)), "proxy")
    assert f"run `headroom certs --renew --confdir {conf}`" in line


def test_certs_renew_moves_the_old_ca_aside_and_the_proxy_makes_a_new_one(tmp_path):
    conf = tmp_path / "mitmproxy"
    _write_ca(conf, NOW - timedelta(days=800), NOW - timedelta(days=3))
    old = ca_info(conf)
    doctor = _run(tmp_path, "certs")
    assert "(EXPIRED)" in doctor.stdout and "headroom certs --renew" in doctor.stdout
    out = _run(tmp_path, "certs", "--renew")
    assert out.returncode == 0, out.stderr
    aside = [p for p in conf.iterdir() if p.name.startswith("old-ca-")]
    assert len(aside) == 1 and sorted(p.name for p in aside[0].iterdir()) == [CA_CERT, CA_KEY]
    assert (aside[0].stat().st_mode & 0o077) == 0  # the old private key stays private
    assert f"moved the CA files of {conf} to {aside[0]}" in out.stdout and "Trust the new one" in out.stdout
    assert not (conf / CA_CERT).exists()
    port = free_port()
    started = _run(tmp_path, "proxy", "--detach", "--port", str(port), "--anthropic-port", "0", "--openai-port", "0")
    try:
        assert started.returncode == 0, started.stderr
        new = ca_info(conf)
        assert new.exists and not new.error and not new.expired and new.sha256 != old.sha256
    finally:
        _run(tmp_path, "proxy", "--stop", "--port", str(port))
    again = _run(tmp_path, "certs", "--renew")  # nothing is lost: a second renewal keeps both
    assert again.returncode == 0 and len([p for p in conf.iterdir() if p.name.startswith("old-ca-")]) == 2


# --- a database that fails once the proxy runs ------------------------------------------------


def test_a_proxy_that_cannot_open_its_database_is_told_in_seconds(tmp_path):
    """Past the CLI's check (the server went away a moment later, or mitmdump started by hand):
    the proxy answers /health with why, so a start stops at once in one line, and ``wrap`` in
    front of such a running proxy says so instead of waiting for it to warm up."""
    import signal
    import time

    from headroom_core.cli import proxy_process as pp

    conf = tmp_path / "mitmproxy"
    conf.mkdir()
    dead = free_port()
    addr = pp.ProxyAddress("127.0.0.1", free_port())
    cmd = pp.proxy_command(addr, conf, db_url=f"postgresql+psycopg://u@127.0.0.1:{dead}/h")
    env = {
        **pp.proxy_environ({k: v for k, v in os.environ.items() if not k.startswith("HEADROOM_")}),
        "HEADROOM_HOME": str(tmp_path),
    }
    with pytest.raises(pp.ProxyError) as e:
        pp.start_detached(cmd, env, addr, tmp_path, conf / CA_CERT, timeout=120)
    assert str(e.value).startswith(
        f"the proxy cannot open its database (DatabaseError: cannot open postgresql+psycopg://u@127.0.0.1:{dead}/h: "
    )
    assert "\n" not in str(e.value) and str(e.value).endswith(
        f"it is stopped, its log is {tmp_path / 'logs' / f'proxy-{addr.port}.log'}"
    )
    assert not pp.pid_file(tmp_path, addr.port).exists() and pp.probe(addr) == "none"

    running = subprocess.Popen(
        cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 120
        while pp.health_failure(addr) is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert (pp.health_failure(addr) or "").startswith(
            f"DatabaseError: cannot open postgresql+psycopg://u@127.0.0.1:{dead}/h: "
        )
        out = _run(tmp_path, "wrap", "--port", str(addr.port), "-q", "true")
        assert out.returncode == 0, out.stderr
        assert out.stderr.startswith(
            f"headroom wrap: the proxy on {addr.url} cannot open its database (DatabaseError: "
        )
        assert out.stderr.rstrip().endswith(
            f"requests pass uncompressed; fix it, then restart that proxy (`headroom proxy --stop --port {addr.port}`)"
        )
    finally:
        os.killpg(running.pid, signal.SIGTERM)
        running.wait(timeout=60)


def test_a_sqlite_database_another_process_holds_is_busy_not_broken(tmp_path):
    import sqlite3

    db = tmp_path / "headroom.db"
    lock = sqlite3.connect(db, isolation_level=None)
    lock.execute("CREATE TABLE t (x)")
    lock.execute("BEGIN EXCLUSIVE")
    try:
        assert database_problem(f"sqlite:///{db}") is None
    finally:
        lock.close()


def test_doctor_names_the_cause_of_an_unreachable_database(tmp_path):
    import json

    dead = free_port()
    out = _run(
        tmp_path,
        "doctor",
        "--no-models",
        "--port",
        str(free_port()),
        "--json",
        HEADROOM_DB_URL=f"postgresql://u:pw@127.0.0.1:{dead}/h",
    )
    found = {f["name"]: f for f in json.loads(out.stdout)}
    assert found["database"]["level"] == "fail"
    assert (
        found["database"]["detail"]
        == f"postgresql+psycopg://u:***@127.0.0.1:{dead}/h: connection refused at 127.0.0.1:{dead}: no database server listens there"
    )
    assert "HEADROOM_DB_URL" in found["database"]["fix"]


# --- the home folder ---------------------------------------------------------------------------


@pytest.fixture(params=["read-only file system", "no write permission"])
def unwritable_home(request, tmp_path):
    """A Headroom home the user cannot write: a real read-only bind mount (root with mount(8)),
    or a folder of mode 0555 with the command run without the capabilities that let root ignore
    file modes (setpriv). Yields (home, the command's prefix)."""
    home = tmp_path / "home"
    home.mkdir()
    if request.param == "read-only file system":
        if (
            os.geteuid() != 0
            or subprocess.run(["mount", "--bind", "-o", "ro", str(home), str(home)], capture_output=True).returncode
            != 0
        ):
            pytest.skip("a read-only bind mount needs root and mount(8)")
        try:
            yield home, (), "Read-only file system"
        finally:
            subprocess.run(["umount", str(home)], check=True)
        return
    home.chmod(0o555)
    prefix: tuple[str, ...] = ()
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv (util-linux): cannot make a folder unwritable")
        prefix = (
            setpriv,
            "--bounding-set",
            "-dac_override,-dac_read_search",
            "--inh-caps",
            "-dac_override,-dac_read_search",
        )
    try:
        yield home, prefix, "Permission denied"
    finally:
        home.chmod(0o755)


@pytest.mark.parametrize("start", STARTS, ids=" ".join)
def test_an_unwritable_home_is_one_line_with_any_options(tmp_path, unwritable_home, start):
    """With the database and the CA elsewhere too, the proxy never starts in a home where it
    cannot create its secret key (it would run with compression off): one line, exit 1."""
    home, prefix, reason = unwritable_home
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for opts in (
        (),
        ("--db-url", f"sqlite:///{elsewhere / 'x.db'}"),
        ("--db-url", f"sqlite:///{elsewhere / 'x.db'}", "--confdir", str(elsewhere / "c")),
    ):
        port = free_port()
        tail = ("true",) if start[0] == "wrap" else ()
        base = {
            k: v for k, v in os.environ.items() if not k.startswith("HEADROOM_") and not k.lower().endswith("_proxy")
        }
        out = subprocess.run([*prefix, HEADROOM, *start, "--port", str(port), *opts, *tail], env={**base, "HEADROOM_HOME": str(home), "COLUMNS": "80"},
                             capture_output=True, text=True, timeout=120)  # fmt: skip
        assert out.returncode == 1, (opts, out.stderr)
        assert out.stderr.splitlines() == [
            f"headroom {start[0]}: the Headroom home {home} is not writable ({reason}): the proxy keeps its secret key, CA and logs there; "
            "make it writable, or point HEADROOM_HOME at a writable folder"
        ], (opts, out.stderr)
        assert pp.probe(pp.ProxyAddress("127.0.0.1", port)) == "none"  # nothing started
        assert not (elsewhere / "x.db").exists() and not (elsewhere / "c").exists()


def test_a_home_through_a_file(tmp_path):
    (tmp_path / "notes").write_text("x\n")
    home = tmp_path / "notes" / "x"
    for start in STARTS:
        out = _start(home, start, free_port(), "--db-url", f"sqlite:///{tmp_path / 'x.db'}")
        assert out.returncode == 1 and out.stderr.splitlines() == [
            f"headroom {start[0]}: the Headroom home {home}: {tmp_path / 'notes'} is a file, not a folder; point HEADROOM_HOME at a folder"
        ], out.stderr
