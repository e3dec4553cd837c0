"""``headroom doctor`` on real set-ups: a broken one (no CA, home and database not writable,
a port taken by something else, a bad config key) says what is wrong and how to fix it; a
working one, with a real proxy running, is all set."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from headroom_core.cli import doctor_cmd
from tests.support.proxy import ADDON_SCRIPT, free_port

HEADROOM = str(Path(sys.executable).parent / "headroom")


def _doctor(home: Path, *args: str, drop_privileges: bool = False) -> subprocess.CompletedProcess[str]:
    env = {
        "HEADROOM_HOME": str(home),
        "HOME": str(Path.home()),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "COLUMNS": "100",
        "HF_HUB_OFFLINE": "1",
    }
    cmd = [HEADROOM, "doctor", *args]
    if drop_privileges and os.geteuid() == 0:
        # root ignores file modes; without these capabilities it is held to them like a user
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv (util-linux): cannot make a folder unwritable")
        cmd = [
            setpriv,
            "--bounding-set",
            "-dac_override,-dac_read_search",
            "--inh-caps",
            "-dac_override,-dac_read_search",
            *cmd,
        ]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)


def _lines(out: subprocess.CompletedProcess[str]) -> str:
    return " ".join((out.stdout + out.stderr).split())  # the table wraps: compare word runs


def _findings(out: subprocess.CompletedProcess[str]) -> dict[str, dict]:
    return {c["name"]: c for c in json.loads(out.stdout)}


def test_broken_setup_no_ca_and_database_not_writable(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(0o555)
    port = str(free_port())
    try:
        out = _doctor(home, "--no-models", "--port", port, "--json", drop_privileges=True)
        table = _doctor(home, "--no-models", "--port", port, drop_privileges=True)
    finally:
        home.chmod(0o755)
    assert out.returncode == 1, out.stdout + out.stderr
    f = _findings(out)
    assert {k: v["level"] for k, v in f.items()} == {
        "configuration": "ok",
        "home folder": "fail",
        "database": "fail",
        "CA": "fail",
        "proxy": "warn",
        "mitmproxy": "ok",
    }
    assert f["CA"]["detail"] == f"no CA in {home}/mitmproxy" and "start the proxy once" in f["CA"]["fix"]
    assert (
        f["home folder"]["detail"].startswith(f"{home} is not writable (PermissionError")
        and "point HEADROOM_HOME at a writable folder" in f["home folder"]["fix"]
    )
    assert f["database"]["detail"].startswith(f"sqlite:///{home}/headroom.db: its folder {home} is not writable")
    assert f"chmod u+w {home}" in f["database"]["fix"] and "HEADROOM_DB_URL" in f["database"]["fix"]
    assert "headroom wrap <agent>" in f["proxy"]["fix"]
    text = _lines(table)  # what a person sees: the same findings in a table, and the count
    assert table.returncode == 1 and "FAIL" in text and "no CA in" in text and "3 problem(s) to fix." in text


def test_doctor_creates_no_database_and_checks_its_mode(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    out = _doctor(home, "--no-models", "--port", str(free_port()), "--json")
    f = _findings(out)
    assert (
        f["database"]["level"] == "ok"
        and f["database"]["detail"]
        == f"sqlite:///{home}/headroom.db: none yet (the proxy creates it, readable by you only, on first start)"
    )
    assert not (home / "headroom.db").exists()
    from headroom_core.db.engine import open_database

    open_database(f"sqlite:///{home / 'headroom.db'}")  # as the proxy does on first start
    db = home / "headroom.db"
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in home.glob("headroom.db*")} == {
        "headroom.db": "0o600",
        "headroom.db-wal": "0o600",
        "headroom.db-shm": "0o600",
        "headroom.db.lock": "0o600",
    }
    f = _findings(_doctor(home, "--no-models", "--port", str(free_port()), "--json"))
    assert f["database"]["detail"].endswith("(migrated, writable)") and f["database file"]["level"] == "ok"
    db.chmod(0o644)
    out = _doctor(home, "--no-models", "--port", str(free_port()))
    f = _findings(_doctor(home, "--no-models", "--port", str(free_port()), "--json"))
    assert f["database file"]["level"] == "warn" and "headroom.db 0644" in f["database file"]["detail"]
    assert f["database file"]["fix"] == f"`chmod 600 {db}`"
    # the command to copy is on one line of the table output, whatever the terminal's width
    assert f"database file: `chmod 600 {db}`" in out.stdout


def test_read_only_database_file(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    from headroom_core.db.engine import open_database

    open_database(f"sqlite:///{home / 'headroom.db'}")
    db = home / "headroom.db"
    for p in home.glob("headroom.db*"):
        p.chmod(0o444)
    out = _doctor(home, "--no-models", "--port", str(free_port()), "--json", drop_privileges=True)
    db_check = _findings(out)["database"]
    assert out.returncode == 1 and db_check["level"] == "fail"
    assert (
        db_check["detail"] == f"sqlite:///{db}: the file is read-only"
        and db_check["fix"] == f"`chmod u+w {db}` (or chown it to you)"
    )


def test_a_home_through_a_file_is_said_as_the_proxy_says_it(tmp_path):
    """HEADROOM_HOME=/some/file/x: no owner change helps; the finding names the file, as
    ``headroom proxy`` does ("… is a file, not a folder")."""
    (tmp_path / "notes").write_text("a file\n")
    home = tmp_path / "notes" / "x"
    f = _findings(_doctor(home, "--no-models", "--port", str(free_port()), "--json"))
    assert f["home folder"] == {"name": "home folder", "level": "fail", "detail": f"{home}: {tmp_path / 'notes'} is a file, not a folder",
                                "fix": f"point HEADROOM_HOME at a folder (or move the file {tmp_path / 'notes'} away)"}  # fmt: skip
    assert f["database"]["detail"] == f"sqlite:///{home}/headroom.db: {tmp_path / 'notes'} is a file, not a folder"
    assert "chown" not in json.dumps(f) and "chmod" not in json.dumps(f)
    proxy = subprocess.run(
        [HEADROOM, "proxy", "--port", str(free_port())],
        env={**os.environ, "HEADROOM_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert f"{tmp_path / 'notes'} is a file, not a folder" in proxy.stderr  # the same words


def test_warnings_alone_are_not_all_set(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    from mitmproxy.certs import CertStore

    CertStore.from_store(home / "mitmproxy", "mitmproxy", 2048)
    out = _doctor(home, "--no-models", "--port", str(free_port()))
    assert out.returncode == 0 and "warn" in out.stdout  # nothing listens on that port
    assert out.stdout.rstrip().splitlines()[-1] == "No problem to fix; 1 warning(s) above."


def test_port_taken_and_bad_config(tmp_path, upstream):
    (tmp_path / "config.toml").write_text("min_tokenz = 3\n")
    out = _doctor(tmp_path, "--no-models", "--json")
    f = _findings(out)
    assert out.returncode == 1 and f["configuration"]["level"] == "fail"
    assert (
        "unknown key 'min_tokenz'" in f["configuration"]["detail"]
        and str(tmp_path / "config.toml") in f["configuration"]["fix"]
    )
    (tmp_path / "config.toml").unlink()
    f = _findings(_doctor(tmp_path, "--no-models", "--port", str(upstream.port), "--json"))
    assert (
        f["proxy"]["level"] == "fail"
        and f["proxy"]["detail"] == f"http://127.0.0.1:{upstream.port} is taken by another program"
    )
    assert "another port" in f["proxy"]["fix"]


def test_working_setup_is_all_set(proxy_factory):
    px = proxy_factory(ADDON_SCRIPT)
    out = _doctor(px.home, "--port", str(px.port), "--confdir", str(px.confdir), "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    f = _findings(out)
    assert {c["level"] for c in f.values()} == {"ok"}
    assert f["proxy"]["detail"] in (
        f"a Headroom proxy answers at {px.url}",
        f"a Headroom proxy at {px.url} is still warming up (database, vocabulary)",
    )
    assert f["database"]["detail"].endswith("(migrated, writable)") and f["tokenizer"]["detail"].startswith(
        "cl100k_base"
    )
    assert f["CA"]["detail"].startswith(str(px.ca_path))


def test_ca_key_readable_by_others_is_a_warning(tmp_path):
    from mitmproxy.certs import CertStore

    CertStore.from_store(tmp_path, "mitmproxy", 2048)  # the CA as mitmproxy makes it
    (tmp_path / "mitmproxy-ca.pem").chmod(0o644)
    checks = {c.name: c for c in doctor_cmd.check_ca(tmp_path)}
    assert checks["CA"].level == "ok"
    assert checks["CA key"].level == "warn" and f"chmod 600 {tmp_path}/mitmproxy-ca.pem" in checks["CA key"].fix
