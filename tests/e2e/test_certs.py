"""``headroom certs``: where the CA is and how to trust it, the system-store commands per
platform, and the CA bundle ``wrap`` builds (system roots + the proxy CA)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from mitmproxy.certs import CertStore

from headroom_core.cli.ca import ca_info, in_bundle, install_plan, write_bundle

HEADROOM = str(Path(sys.executable).parent / "headroom")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    CertStore.from_store(tmp_path / "mitmproxy", "mitmproxy", 2048)  # the CA as mitmproxy makes it
    return tmp_path


def _certs(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"HEADROOM_HOME": str(home), "PATH": "/usr/bin:/bin", "COLUMNS": "300"}
    return subprocess.run([HEADROOM, "certs", *args], env=env, capture_output=True, text=True, timeout=60)


def test_certs_shows_the_ca_and_how_to_trust_it(home):
    info = ca_info(home / "mitmproxy")
    out = _certs(home)
    assert out.returncode == 0, out.stderr
    assert str(info.cert_path) in out.stdout and info.sha256 in out.stdout and str(info.key_path) in out.stdout
    assert (
        f"NODE_EXTRA_CA_CERTS={info.cert_path}" in out.stdout
        and f"SSL_CERT_FILE={home / 'ca-bundle.pem'}" in out.stdout
    )
    assert "keytool -importcert" in out.stdout
    # the bundle it names exists now (it was written only by `headroom wrap` before)
    assert in_bundle(info.cert_path, home / "ca-bundle.pem")


def test_certs_without_a_ca_says_how_to_make_one(tmp_path):
    out = _certs(tmp_path)
    assert out.returncode == 1 and "no CA yet" in out.stdout and "headroom proxy" in out.stdout


def test_install_dry_run_prints_this_systems_commands(home):
    out = _certs(home, "--install", "--dry-run")
    assert out.returncode == 0, out.stderr
    plan = install_plan(home / "mitmproxy" / "mitmproxy-ca-cert.pem")
    for cmd in plan.commands:
        assert " ".join(cmd) in out.stdout


@pytest.mark.parametrize(
    ("system", "release", "first"),
    [
        ("Linux", "ID=debian\n", ("cp", "C", "/usr/local/share/ca-certificates/headroom-mitmproxy.crt")),
        (
            "Linux",
            'ID="rhel"\nID_LIKE="fedora"\n',
            ("cp", "C", "/etc/pki/ca-trust/source/anchors/headroom-mitmproxy.pem"),
        ),
        ("Linux", "ID=arch\n", ("trust", "anchor", "--store", "C")),
        (
            "Darwin",
            None,
            ("security", "add-trusted-cert", "-d", "-r", "trustRoot", "-k", "/Library/Keychains/System.keychain", "C"),
        ),
        ("Windows", None, ("certutil", "-addstore", "-user", "Root", "C")),
    ],
)
def test_install_plans(system, release, first):
    plan = install_plan(Path("C"), system, release)
    assert plan.commands[0] == first
    assert plan.needs_admin == (system != "Windows")
    with pytest.raises(ValueError, match="no known system trust store"):
        install_plan(Path("C"), "Plan9")


def test_bundle_holds_the_roots_and_the_ca(home, tmp_path):
    ca = home / "mitmproxy" / "mitmproxy-ca-cert.pem"
    roots = tmp_path / "roots.pem"
    other = tmp_path / "other"
    CertStore.from_store(other, "corp", 2048)
    roots.write_bytes((other / "corp-ca-cert.pem").read_bytes())
    dest = write_bundle(ca, tmp_path / "bundle.pem", roots)
    assert in_bundle(ca, dest) and in_bundle(other / "corp-ca-cert.pem", dest)
    mtime = dest.stat().st_mtime_ns
    write_bundle(ca, dest, roots)  # unchanged content: not rewritten
    assert dest.stat().st_mtime_ns == mtime


def test_a_bundle_built_on_itself_does_not_grow(home, tmp_path):
    # a shell that followed `headroom certs` exports SSL_CERT_FILE as the bundle; `wrap` and
    # `certs` then take it as the roots to build on: the bundle must stay one CA copy
    ca = home / "mitmproxy" / "mitmproxy-ca-cert.pem"
    dest = write_bundle(ca, tmp_path / "ca-bundle.pem")
    first = dest.read_bytes()
    for _ in range(3):
        write_bundle(ca, dest, dest)
    assert dest.read_bytes() == first and first.count(b"# Headroom proxy CA") == 1
    env = {
        "HEADROOM_HOME": str(home),
        "PATH": "/usr/bin:/bin",
        "COLUMNS": "300",
        "SSL_CERT_FILE": str(home / "ca-bundle.pem"),
    }
    for _ in range(2):
        out = subprocess.run([HEADROOM, "certs"], env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
    assert (home / "ca-bundle.pem").read_bytes().count(b"# Headroom proxy CA") == 1
