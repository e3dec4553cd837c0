"""What the proxy trusts for its own upstream connections when the user's environment names
extra certificate authorities: behind a TLS-intercepting corporate proxy, the agent's CA
variables (``NODE_EXTRA_CA_CERTS``, ``SSL_CERT_FILE``, ``REQUESTS_CA_BUNDLE``,
``CURL_CA_BUNDLE``) name that proxy's CA, and the Headroom proxy, which now makes the upstream
connections, must trust it too, beside the system roots.

mitmproxy verifies upstream servers with certifi's roots, or with the single PEM file its
option ``ssl_verify_upstream_trusted_ca`` names; :func:`write_upstream_bundle` writes that file
(system roots + the user's CAs).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from headroom_core.cli.ca import system_bundle

#: The variables whose files the proxy trusts upstream, in the order they are read.
CA_VARS = ("NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
UPSTREAM_BUNDLE = "upstream-ca-bundle.pem"


@dataclass(frozen=True)
class UpstreamTrust:
    """``files``: the CA files the environment names that exist (deduplicated, in
    :data:`CA_VARS` order); ``missing``: ``(variable, path)`` naming files that do not exist."""

    files: tuple[Path, ...]
    missing: tuple[tuple[str, str], ...]


def from_environment(env: Mapping[str, str], ignore: tuple[Path, ...] = ()) -> UpstreamTrust:
    """The CA files of :data:`CA_VARS` in ``env``; ``ignore`` leaves out Headroom's own files
    (its CA and bundles, which a nested ``wrap`` would find there)."""
    skip = {p.resolve() for p in ignore if p}
    files: list[Path] = []
    missing: list[tuple[str, str]] = []
    for var in CA_VARS:
        raw = env.get(var)
        if not raw:
            continue
        p = Path(raw).expanduser()
        if not p.is_file():
            missing.append((var, raw))
            continue
        r = p.resolve()
        if r not in skip and r not in files:
            files.append(r)
    return UpstreamTrust(tuple(files), tuple(missing))


def write_upstream_bundle(files: tuple[Path, ...], dest: Path, roots: Path | None = None) -> Path:
    """Write ``dest`` = the system roots (``roots``, default :func:`~headroom_core.cli.ca.system_bundle`)
    followed by each of ``files``; rewritten only when its content changes (atomic rename).
    Raises :class:`OSError` when a file cannot be read or ``dest`` written."""
    base = roots if roots is not None else system_bundle()
    data = base.read_bytes() if base is not None else b""
    for f in files:
        data = data.rstrip(b"\n") + b"\n\n# " + str(f).encode() + b"\n" + f.read_bytes()
    data = data.rstrip(b"\n") + b"\n"
    if dest.is_file() and dest.read_bytes() == data:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".upstream-")
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(tmp, 0o644)
    os.replace(tmp, dest)
    return dest


def user_sets_trust(sets: list[str] | tuple[str, ...]) -> bool:
    """Whether ``--set`` values already choose how upstream servers are verified."""
    return any(
        kv.split("=", 1)[0].strip()
        in ("ssl_verify_upstream_trusted_ca", "ssl_verify_upstream_trusted_confdir", "ssl_insecure")
        for kv in sets
    )
