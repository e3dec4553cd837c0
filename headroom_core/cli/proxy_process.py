"""Starting, finding and stopping a Headroom proxy (``mitmdump -s addons/headroom.py``).

A proxy started in the background (``headroom proxy --detach``, or by ``headroom wrap``) runs in
its own session, logs to ``<home>/logs/proxy-<port>.log`` and writes its pid to
``<home>/run/proxy-<port>.pid``; ``headroom proxy --stop`` ends it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from headroom_core.web import PAGE_HOST

ADDON = Path(__file__).resolve().parents[2] / "addons" / "headroom.py"
PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


class ProxyError(RuntimeError):
    """The proxy could not be started or reached; the message says why and what to do."""


def mitmdump() -> str:
    """The ``mitmdump`` next to this interpreter, else the one on PATH."""
    local = Path(sys.executable).parent / "mitmdump"
    return str(local) if local.exists() else (shutil.which("mitmdump") or "mitmdump")


@dataclass(frozen=True)
class ProxyAddress:
    """Where a proxy listens. ``url`` is what clients use (a wildcard listen address becomes
    the loopback address)."""

    host: str
    port: int

    @property
    def client_host(self) -> str:
        return {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(self.host, self.host)

    @property
    def url(self) -> str:
        h = self.client_host
        return f"http://[{h}]:{self.port}" if ":" in h else f"http://{h}:{self.port}"


def proxy_command(addr: ProxyAddress, confdir: Path, *, db_url: str | None = None, sets: Sequence[str] = (), mode: str | None = None) -> list[str]:
    """The ``mitmdump`` argv for a Headroom proxy at ``addr`` with its CA in ``confdir``;
    ``sets`` are extra ``key=value`` options (mitmproxy's or ``headroom_*``)."""
    args = [mitmdump(), "-s", str(ADDON), "--listen-host", addr.host, "--listen-port", str(addr.port), "--set", f"confdir={confdir}"]
    # mitmproxy's per-flow line prints full URLs, query included (Gemini's API key travels in
    # it): off unless asked for with --set flow_detail=1; Headroom logs its own lines without it
    args += ["--set", "flow_detail=0"]
    if mode:
        args += ["--mode", mode]
    if db_url:
        args += ["--set", f"headroom_db_url={db_url}"]
    for kv in sets:
        if "=" not in kv:
            raise ProxyError(f"--set {kv!r}: expected key=value")
        args += ["--set", kv]
    return args


def probe(addr: ProxyAddress, timeout: float = 2.0) -> str:
    """What listens at ``addr``: ``"none"``, ``"headroom"`` (it answers ``/health`` at the
    reserved host through itself), ``"warming"`` (a Headroom proxy still loading its database
    and vocabulary) or ``"other"``."""
    try:
        with socket.create_connection((addr.client_host, addr.port), timeout=timeout):
            pass
    except OSError:
        return "none"
    try:
        with httpx.Client(proxy=addr.url, trust_env=False, timeout=timeout) as c:
            r = c.get(f"http://{PAGE_HOST}/health")
        if not r.headers.get("content-type", "").startswith("application/json"):
            return "other"
        j = r.json()
        if j.get("service") != "headroom":
            return "other"
        return "headroom" if j.get("ready", True) else "warming"
    except (httpx.HTTPError, ValueError):
        return "other"


def wait_ready(addr: ProxyAddress, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for the Headroom proxy at ``addr`` to finish warming up."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if probe(addr, timeout=1.0) == "headroom":
            return True
        time.sleep(0.2)
    return False


def pid_file(home: Path, port: int) -> Path:
    return Path(home) / "run" / f"proxy-{port}.pid"


def log_file(home: Path, port: int) -> Path:
    return Path(home) / "logs" / f"proxy-{port}.log"


def proxy_environ(base: Mapping[str, str], *, keep_proxy_vars: bool = False) -> dict[str, str]:
    """The proxy's own environment: no proxy variables (its follow-up requests must not loop
    back into itself) unless ``keep_proxy_vars`` (upstream-proxy mode), and offline model hubs."""
    env = {k: v for k, v in base.items() if keep_proxy_vars or k not in PROXY_VARS}
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def start_detached(cmd: Sequence[str], env: Mapping[str, str], addr: ProxyAddress, home: Path, ca_cert: Path, timeout: float = 60.0) -> int:
    """Start ``cmd`` in its own session, wait until it answers as a Headroom proxy at ``addr``
    and its CA ``ca_cert`` exists, write the pid file, and return the pid.

    Raises :class:`ProxyError` with the end of its log when it exits or is not ready within
    ``timeout`` seconds (it is then stopped).
    """
    log = log_file(home, addr.port)
    log.parent.mkdir(parents=True, exist_ok=True)
    pidf = pid_file(home, addr.port)
    pidf.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        out.write(f"### {' '.join(cmd)}\n".encode())
        out.flush()
        proc = subprocess.Popen(list(cmd), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=dict(env), start_new_session=True)
    deadline = time.monotonic() + timeout
    while True:
        code = proc.poll()
        if code is not None:
            raise ProxyError(f"the proxy exited with code {code} while starting; its log ({log}) ends:\n{_tail(log)}")
        if ca_cert.is_file() and probe(addr, timeout=1.0) == "headroom":
            pidf.write_text(f"{proc.pid}\n")
            return proc.pid
        if time.monotonic() > deadline:
            _terminate(proc.pid)
            raise ProxyError(f"the proxy did not answer at {addr.url} within {timeout:.0f} s; its log ({log}) ends:\n{_tail(log)}")
        time.sleep(0.1)


def stop(home: Path, port: int, timeout: float = 10.0) -> int | None:
    """Stop the background proxy of ``port`` (pid file under ``home``); return its pid, or None
    when there was no pid file or the process was already gone."""
    pidf = pid_file(home, port)
    try:
        pid = int(pidf.read_text().strip())
    except (OSError, ValueError):
        return None
    pidf.unlink(missing_ok=True)
    return pid if _terminate(pid, timeout) else None


def _terminate(pid: int, timeout: float = 10.0) -> bool:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                return True
        except ChildProcessError:  # not our child: poll its existence
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return True
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return True


def _tail(p: Path, n: int = 30) -> str:
    try:
        return "\n".join(p.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"
