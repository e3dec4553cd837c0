"""The proxy's certificate authority: where mitmproxy keeps it, what it says, a CA bundle for
runtimes whose trust setting *replaces* the default roots, and how to add it to a system store.

mitmproxy creates the CA in its confdir on first start (``mitmproxy-ca-cert.pem`` is the
public certificate; ``mitmproxy-ca.pem`` holds the private key too and must stay private).
"""

from __future__ import annotations

import os
import platform
import stat
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

CA_CERT = "mitmproxy-ca-cert.pem"
CA_KEY = "mitmproxy-ca.pem"
BUNDLE = "ca-bundle.pem"

# Where distributions keep the system roots as one PEM file (first existing wins).
_SYSTEM_BUNDLES = (
    "/etc/ssl/certs/ca-certificates.crt",  # Debian, Ubuntu, Alpine, Arch
    "/etc/pki/tls/certs/ca-bundle.crt",  # Fedora, RHEL
    "/etc/ssl/ca-bundle.pem",  # openSUSE
    "/etc/ssl/cert.pem",  # macOS, BSDs
)


def default_confdir(home: str | os.PathLike[str]) -> Path:
    """mitmproxy's confdir under the Headroom home: ``<home>/mitmproxy``."""
    return Path(home).expanduser() / "mitmproxy"


@dataclass(frozen=True)
class CAInfo:
    """The CA in ``confdir``. ``exists`` False means mitmproxy has not created it yet (the other
    fields are then empty). ``key_private`` is False when the key file is readable by group or
    others (POSIX mode bits; always True on Windows). Times are UTC."""

    cert_path: Path
    key_path: Path
    exists: bool
    subject: str = ""
    sha256: str = ""
    not_after: datetime | None = None
    key_private: bool = True
    error: str = ""
    not_before: datetime | None = None

    @property
    def expired(self) -> bool:
        return self.not_after is not None and self.not_after <= datetime.now(timezone.utc)

    @property
    def not_yet_valid(self) -> bool:
        """The certificate's validity starts later than this machine's clock says it is now."""
        return self.not_before is not None and self.not_before > datetime.now(timezone.utc)


def ca_info(confdir: str | os.PathLike[str]) -> CAInfo:
    """Read the CA certificate in ``confdir`` (never raises; a broken file sets ``error``)."""
    conf = Path(confdir).expanduser()
    cert, key = conf / CA_CERT, conf / CA_KEY
    if not cert.is_file():
        return CAInfo(cert, key, False)
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    try:
        c = x509.load_pem_x509_certificate(cert.read_bytes())
    except (OSError, ValueError) as e:
        return CAInfo(cert, key, True, error=f"cannot read {cert}: {e}")
    private = True
    if os.name == "posix" and key.exists():
        private = not (key.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO))
    if key.exists() and (why := _key_problem(key, c)):
        return CAInfo(cert, key, True, error=why)
    return CAInfo(
        cert,
        key,
        True,
        subject=c.subject.rfc4514_string(),
        sha256=c.fingerprint(hashes.SHA256()).hex(":").upper(),
        not_after=c.not_valid_after_utc,
        key_private=private,
        not_before=c.not_valid_before_utc,
    )


def _key_problem(key: Path, cert) -> str:
    """Why mitmproxy could not use ``key`` (its CA file: the private key and the certificate
    in one PEM file) with the public certificate ``cert``: unreadable, no key in it, or another
    certificate than the one agents are told to trust. ``""`` when it can."""
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        data = key.read_bytes()
        load_pem_private_key(data, password=None)
    except (OSError, ValueError, TypeError) as e:
        return f"cannot read the CA's private key {key}: {getattr(e, 'strerror', None) or e}"
    try:
        inside = x509.load_pem_x509_certificate(data)
    except ValueError:
        return ""  # a key file without its certificate: mitmproxy reads the certificate file
    if inside != cert:
        return f"{key} holds another CA certificate than {key.parent / CA_CERT}"
    return ""


#: What ``headroom certs --renew`` moves aside (mitmproxy's CA files; its ``dhparam`` stays).
CA_FILES = (
    "mitmproxy-ca.pem",
    "mitmproxy-ca.p12",
    "mitmproxy-ca-cert.pem",
    "mitmproxy-ca-cert.p12",
    "mitmproxy-ca-cert.cer",
)


def ca_problem(info: CAInfo) -> str | None:
    """Why the proxy must not start with the CA of ``info`` (agents would fail TLS with it), as
    plain text without the remedy (:func:`renew_steps`), or None when it can be used or does not
    exist yet (mitmproxy then creates one): unreadable, expired, or not valid yet."""
    if not info.exists:
        return None
    if info.error:
        return f"the proxy's CA cannot be used: {info.error}"
    if info.expired:
        return f"the proxy's CA {info.cert_path} expired on {info.not_after:%Y-%m-%d}"
    if info.not_yet_valid:
        now = datetime.now(timezone.utc)
        return (
            f"the proxy's CA {info.cert_path} is valid only from {info.not_before:%Y-%m-%d %H:%M} UTC, and this machine's clock says "
            f"{now:%Y-%m-%d %H:%M} UTC (set the clock right, or renew it)"
        )
    return None


def renew_steps(confdir: Path, default: bool = True) -> str:
    """The remedy for a CA :func:`ca_problem` refuses, naming its folder ``confdir`` (``default``:
    the Headroom home's, else ``--confdir`` is part of the command), in one line."""
    opt = "" if default else f" --confdir {confdir}"
    return (
        f"run `headroom certs --renew{opt}` (moves the CA files in {confdir} aside; the proxy makes a new CA on its next start), "
        f"then trust the new CA: `headroom wrap` does it for the agents it starts; elsewhere repeat `headroom certs --install` "
        f"or your NODE_EXTRA_CA_CERTS/SSL_CERT_FILE setting"
    )


def renew(confdir: Path, now: datetime | None = None) -> tuple[Path, list[Path]]:
    """Move mitmproxy's CA files (:data:`CA_FILES`) in ``confdir`` into a new folder
    ``old-ca-<UTC time>[-n]`` beside them, owner-only (it holds the old private key); mitmproxy makes
    a new CA on its next start. Returns the folder and the files moved (none when there was no
    CA; the folder is then not created). Raises :class:`OSError`."""
    now = now or datetime.now(timezone.utc)
    present = [confdir / n for n in CA_FILES if (confdir / n).exists()]
    dest = confdir / f"old-ca-{now:%Y%m%dT%H%M%SZ}"
    if not present:
        return dest, []
    n = 1
    while dest.exists():  # renewed twice within a second
        n += 1
        dest = confdir / f"old-ca-{now:%Y%m%dT%H%M%SZ}-{n}"
    dest.mkdir(mode=0o700)
    moved = []
    for f in present:
        f.rename(dest / f.name)
        moved.append(dest / f.name)
    return dest, moved


def system_bundle() -> Path | None:
    """The system's root certificates as one PEM file, else certifi's bundle, else None."""
    for p in _SYSTEM_BUNDLES:
        if Path(p).is_file():
            return Path(p)
    try:
        import certifi
    except ImportError:
        return None
    return Path(certifi.where())


def write_bundle(ca_cert: Path, dest: Path, base: Path | None = None, extra: tuple[Path, ...] = ()) -> Path:
    """Write ``dest`` = the ``base`` roots (default :func:`system_bundle`), the ``extra`` CA files,
    then the proxy's CA, for ``SSL_CERT_FILE``-style settings that replace the default roots (so hosts reached
    without the proxy still verify). Rewritten only when its content would change (atomic
    rename). A ``base`` that is ``dest`` itself (a shell that already exports ``SSL_CERT_FILE``
    as this bundle) is not built upon: the system roots are, so the bundle does not grow a copy
    of the CA with every run. Raises :class:`OSError` when ``ca_cert`` cannot be read or ``dest``
    written."""
    if base is not None and dest.exists() and base.resolve() == dest.resolve():
        base = None
    base = base if base is not None else system_bundle()
    roots = base.read_bytes() if base is not None else b""
    for p in extra:
        roots = roots.rstrip(b"\n") + b"\n\n# " + str(p).encode() + b"\n" + p.read_bytes()
    data = roots.rstrip(b"\n") + b"\n\n# Headroom proxy CA (" + str(ca_cert).encode() + b")\n" + ca_cert.read_bytes()
    if dest.is_file() and dest.read_bytes() == data:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".bundle-")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(tmp, 0o644)
    os.replace(tmp, dest)
    return dest


def in_bundle(ca_cert: Path, bundle: Path | None) -> bool:
    """Whether the certificate's PEM text is inside ``bundle`` (e.g. the system store)."""
    if bundle is None or not bundle.is_file() or not ca_cert.is_file():
        return False
    pem = b"".join(line.strip() for line in ca_cert.read_bytes().splitlines() if line and not line.startswith(b"-----"))
    text = b"".join(line.strip() for line in bundle.read_bytes().splitlines())
    return pem in text


@dataclass(frozen=True)
class InstallPlan:
    """How to add the CA to the system store on one platform: ``commands`` to run in order
    (argv lists), whether they need administrator rights, and a note for the user."""

    system: str
    commands: tuple[tuple[str, ...], ...]
    needs_admin: bool
    note: str = ""


def install_plan(cert: Path, system: str | None = None, os_release: str | None = None) -> InstallPlan:
    """The commands that add ``cert`` to the system trust store of ``system`` (``platform.system()``
    by default: Linux, Darwin, Windows); on Linux the family is read from ``/etc/os-release``
    (or ``os_release``'s text). Raises :class:`ValueError` for a platform it does not know."""
    system = system or platform.system()
    if system == "Linux":
        if os_release is None:
            try:
                os_release = Path("/etc/os-release").read_text()
            except OSError:
                os_release = ""
        ids = " ".join(
            line.split("=", 1)[1].strip('"').lower()
            for line in os_release.splitlines()
            if line.startswith(("ID=", "ID_LIKE="))
        )
        if any(x in ids for x in ("fedora", "rhel", "centos", "suse")):
            dest = "/etc/pki/ca-trust/source/anchors/headroom-mitmproxy.pem"
            return InstallPlan("Linux (Fedora/RHEL)", (("cp", str(cert), dest), ("update-ca-trust", "extract")), True)
        if "arch" in ids:
            return InstallPlan("Linux (Arch)", (("trust", "anchor", "--store", str(cert)),), True)
        dest = "/usr/local/share/ca-certificates/headroom-mitmproxy.crt"
        return InstallPlan("Linux (Debian/Ubuntu/Alpine)", (("cp", str(cert), dest), ("update-ca-certificates",)), True)
    if system == "Darwin":
        return InstallPlan(
            "macOS",
            (
                (
                    "security",
                    "add-trusted-cert",
                    "-d",
                    "-r",
                    "trustRoot",
                    "-k",
                    "/Library/Keychains/System.keychain",
                    str(cert),
                ),
            ),
            True,
            "Node and Python do not read the macOS keychain: `headroom wrap` still sets their variables.",
        )
    if system == "Windows":
        return InstallPlan(
            "Windows",
            (("certutil", "-addstore", "-user", "Root", str(cert)),),
            False,
            "Adds the CA to the current user's Trusted Root store.",
        )
    raise ValueError(f"no known system trust store for platform {system!r}; see certs/README.md")


def is_admin() -> bool:
    """Whether this process may write the system trust store (root on POSIX)."""
    return os.name != "posix" or os.geteuid() == 0
