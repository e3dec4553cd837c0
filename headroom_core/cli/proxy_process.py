"""Starting, finding and stopping a Headroom proxy (``mitmdump -s addons/headroom.py``).

A proxy started in the background (``headroom proxy --detach``, or by ``headroom wrap``) runs in
its own session, logs to ``<home>/logs/proxy-<port>.log`` and writes its pid to
``<home>/run/proxy-<port>.pid``; ``headroom proxy --stop`` ends it. One started in a terminal
(``headroom proxy``) is recorded in ``<home>/run/foreground-<port>.pid`` while it runs (written
before ``mitmdump`` replaces the command, removed by the proxy as it stops), so ``headroom
doctor`` finds it on any port; ``--stop`` leaves it alone (Ctrl-C in its terminal stops it).
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
from urllib.parse import urlsplit

from headroom_core.errors import EnvironmentProblem
from headroom_core.web import PAGE_HOST

ADDON = Path(__file__).resolve().parents[2] / "addons" / "headroom.py"
PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")

#: The providers' API hosts that ``headroom proxy`` serves as base URLs (mitmproxy reverse modes).
ANTHROPIC_API = "https://api.anthropic.com"
OPENAI_API = "https://api.openai.com"
#: The Gemini API (Gemini CLI in API-key mode and the google-genai SDK read its base URL from
#: ``GOOGLE_GEMINI_BASE_URL``; requests keep their own path, ``/v1beta/models/…``).
GOOGLE_API = "https://generativelanguage.googleapis.com"


class ProxyError(RuntimeError, EnvironmentProblem):
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


@dataclass(frozen=True)
class BaseUrlListener:
    """A port where the proxy is an API's base URL (mitmproxy reverse mode): plain HTTP in,
    ``upstream`` (``https://api.anthropic.com``) out; no proxy settings and no CA needed.
    ``env`` is the variable agents read the base URL from, ``path`` what follows the port in it
    (OpenAI clients expect ``/v1`` in the base URL, Anthropic's do not)."""

    name: str
    upstream: str
    port: int
    env: str
    path: str = ""

    @property
    def option(self) -> str:
        """The ``headroom proxy`` option that sets this port (``--anthropic-port``, ``--openai-port``)."""
        return f"--{self.name.lower()}-port"

    def mode(self) -> str:
        """The mitmproxy ``--mode`` spec: ``reverse:<upstream>@<port>``."""
        return f"reverse:{self.upstream}@{self.port}"

    def base_url(self, host: str) -> str:
        """The base URL a client on this machine uses, for listen address ``host``."""
        h = ProxyAddress(host, self.port).url
        return h + self.path


def upstream_origin(name: str, url: str, path: str) -> str:
    """The origin (``scheme://host[:port]``) a base-URL listener forwards to, from ``url`` as a
    user gives it: an origin, or the API's base URL with the path its clients put in their base
    URL (``path``: ``/v1`` for OpenAI, none for Anthropic), e.g. ``https://host/v1`` for OpenAI
    (its requests keep their own path, ``/v1/responses``, so the base URL's ``/v1`` is the one
    they carry). Raises :class:`ProxyError` (one line, naming the option) for anything else: no
    http(s) scheme or host, a query, or another path (a gateway prefix such as
    ``/openai/v1``, which mitmproxy's reverse mode cannot add)."""
    opt = f"--{name.lower()}-upstream"
    u = urlsplit(url.strip())
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ProxyError(f"{opt} {url!r}: give an http(s) URL, e.g. https://api.example.com{path}")
    try:
        u.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError as e:
        raise ProxyError(f"{opt} {url!r}: {e}") from e
    if u.query or u.fragment or u.username or u.password:
        raise ProxyError(f"{opt} {url!r}: no query, fragment or credentials in the upstream URL")
    given = u.path.rstrip("/")
    if given not in ("", path):
        want = f"the origin (https://{u.netloc})" + (
            f" or the base URL ending in {path} (https://{u.netloc}{path})" if path else ""
        )
        raise ProxyError(
            f"{opt} {url!r}: the path {u.path!r} is not supported: requests keep their own path; give {want}"
        )
    return f"{u.scheme}://{u.netloc}"


def base_url_listeners(
    port: int, anthropic_port: int | None, openai_port: int | None, anthropic_upstream: str = ANTHROPIC_API, openai_upstream: str = OPENAI_API,
    google_port: int | None = None, google_upstream: str = GOOGLE_API,
) -> list[BaseUrlListener]:  # fmt: skip
    """The base-URL listeners beside the proxy on ``port``: Anthropic on ``anthropic_port``
    (default ``port + 1``), OpenAI on ``openai_port`` (default ``port + 2``), Google's Gemini API
    on ``google_port`` (default ``port + 3``, as ``GOOGLE_GEMINI_BASE_URL``); a port of 0 turns
    that one off. Each upstream is an origin or the API's base URL (:func:`upstream_origin`,
    which raises :class:`ProxyError` for other URLs)."""
    a = port + 1 if anthropic_port is None else anthropic_port
    o = port + 2 if openai_port is None else openai_port
    g = port + 3 if google_port is None else google_port
    out = []
    if a:
        out.append(
            BaseUrlListener("Anthropic", upstream_origin("Anthropic", anthropic_upstream, ""), a, "ANTHROPIC_BASE_URL")
        )
    if o:
        out.append(
            BaseUrlListener("OpenAI", upstream_origin("OpenAI", openai_upstream, "/v1"), o, "OPENAI_BASE_URL", "/v1")
        )
    if g:
        out.append(
            BaseUrlListener("Google", upstream_origin("Google", google_upstream, ""), g, "GOOGLE_GEMINI_BASE_URL")
        )
    return out


def proxy_command(
    addr: ProxyAddress,
    confdir: Path,
    *,
    db_url: str | None = None,
    sets: Sequence[str] = (),
    mode: str | None = None,
    base_urls: Sequence[BaseUrlListener] = (),
    upstream_ca: Path | None = None,
) -> list[str]:
    """The ``mitmdump`` argv for a Headroom proxy at ``addr`` with its CA in ``confdir``;
    ``sets`` are extra ``key=value`` options (mitmproxy's or ``headroom_*``, applied last so
    they win); ``mode`` replaces the regular proxy mode (``upstream:<corporate proxy>``);
    ``base_urls`` add reverse-mode listeners; ``upstream_ca`` is a PEM bundle the proxy verifies
    upstream servers with (mitmproxy's ``ssl_verify_upstream_trusted_ca``).

    Raises :class:`ProxyError` for a ``--set`` without ``=``."""
    args = [
        mitmdump(),
        "-s",
        str(ADDON),
        "--listen-host",
        addr.host,
        "--listen-port",
        str(addr.port),
        "--set",
        f"confdir={confdir}",
    ]
    # mitmproxy's per-flow line prints full URLs, query included (Gemini's API key travels in
    # it): off unless asked for with --set flow_detail=1; Headroom logs its own lines without it
    args += ["--set", "flow_detail=0"]
    if mode or base_urls:
        args += ["--mode", mode or "regular"]
    for b in base_urls:
        args += ["--mode", b.mode()]
    if base_urls:
        args += ["--set", "headroom_base_urls=" + ",".join(f"{b.name.lower()}={b.port}" for b in base_urls)]
    if upstream_ca is not None:
        args += ["--set", f"ssl_verify_upstream_trusted_ca={upstream_ca}"]
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
    and vocabulary, or one that cannot open its database: :func:`health_failure`),
    ``"base_url"`` (a base-URL port of a Headroom proxy, not its proxy port: :func:`identify`
    names it) or ``"other"``. The probe is answered by the proxy itself on every one of its
    ports and never forwarded upstream (``addons/headroom_page.py``)."""
    return _health(addr, timeout)[0]


@dataclass(frozen=True)
class Listener:
    """What :func:`identify` found at an address: ``state`` as :func:`probe` says it, ``words``
    for a message (``"nothing"``, ``"a Headroom proxy"``, ``"the Anthropic base-URL port of the
    Headroom proxy on port 8080"``, ``"another program"``) and, for a Headroom proxy or one of
    its base-URL ports, that proxy's port (else None)."""

    state: str
    words: str
    proxy_port: int | None = None


#: How the providers of ``headroom_base_urls`` are written in messages.
PROVIDER_NAMES = {"anthropic": "Anthropic", "openai": "OpenAI", "google": "Google"}


def identify(addr: ProxyAddress, timeout: float = 2.0) -> Listener:
    """What listens at ``addr`` (one probe, as :func:`probe`), with words for a message."""
    state, j = _health(addr, timeout)
    if state == "base_url" and j is not None:
        names = [n for n, p in (j.get("base_urls") or {}).items() if p == addr.port]
        name = PROVIDER_NAMES.get(names[0], names[0]) + " " if names else ""
        return Listener(
            state, f"the {name}base-URL port of the Headroom proxy on port {j.get('proxy_port')}", j.get("proxy_port")
        )
    if state in ("headroom", "warming"):
        return Listener(state, "a Headroom proxy", addr.port)
    return Listener(state, "nothing" if state == "none" else "another program")


def health_failure(addr: ProxyAddress, timeout: float = 1.0) -> str | None:
    """Why the Headroom proxy at ``addr`` cannot work, as its ``/health`` says (its database
    cannot be opened: the proxy then runs but compresses nothing), or None (it works, is still
    starting, or is no Headroom proxy)."""
    return _failure(*_health(addr, timeout))


def _failure(state: str, j: dict | None) -> str | None:
    """The reason a ``/health`` answer gives for not working (``ok`` false with a ``detail``;
    a proxy still starting has none)."""
    if state == "warming" and j is not None and not j.get("ok", True) and j.get("detail"):
        return " ".join(str(j["detail"]).split())
    return None


def _health(addr: ProxyAddress, timeout: float) -> tuple[str, dict | None]:
    """:func:`probe`'s state and the ``/health`` answer (None when there was none)."""
    try:
        with socket.create_connection((addr.client_host, addr.port), timeout=timeout):
            pass
    except OSError:
        return "none", None
    import httpx  # here, not at the top: `headroom --version`, `wrap` start without it (~70 ms)

    try:
        # through the port as through a proxy: the absolute-form target names the reserved host,
        # which a Headroom proxy answers itself on its proxy port and its base-URL ports alike
        with httpx.Client(proxy=addr.url, trust_env=False, timeout=timeout) as c:
            r = c.get(f"http://{PAGE_HOST}/health")
        if not r.headers.get("content-type", "").startswith("application/json"):
            return "other", None
        j = r.json()
        if not isinstance(j, dict) or j.get("service") != "headroom":
            return "other", None
        if addr.port != j.get("proxy_port") and addr.port in (j.get("base_urls") or {}).values():
            return "base_url", j
        return ("headroom" if j.get("ready", True) else "warming"), j
    except (httpx.HTTPError, ValueError):
        return "other", None


def wait_ready(addr: ProxyAddress, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for the Headroom proxy at ``addr`` to finish warming up."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if probe(addr, timeout=1.0) == "headroom":
            return True
        time.sleep(0.2)
    return False


def port_problem(host: str, port: int) -> str | None:
    """Why the proxy could not listen on ``host:port`` (None when it can): an invalid port or
    address, or the port already taken (naming a Headroom proxy when one answers there)."""
    if not 1 <= port <= 65535:
        return f"port {port} is not a TCP port (1-65535)"
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as e:
        return f"cannot listen on {host!r}: {e}"
    family, _, _, _, sockaddr = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as s:
        if os.name == "posix":  # as asyncio's servers do: a port in TIME_WAIT is free
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(sockaddr)
        except OSError as e:
            bind_error = e
        else:
            return None
    found = identify(ProxyAddress(host, port))
    if found.state == "base_url":
        return f"port {port} is busy: it is {found.words} (stop that proxy, or choose another port)"
    if found.state in ("headroom", "warming"):
        return (
            f"port {port} is busy: a Headroom proxy already runs there (started with --detach, it stops with "
            f"`headroom proxy --stop --port {port}`; started in a terminal, with Ctrl-C there)"
        )
    if isinstance(bind_error, PermissionError):
        return f"port {port} on {host or 'all addresses'} needs privileges this user lacks ({bind_error.strerror}); choose a port above 1023"
    if bind_error.errno in (99, 49):  # EADDRNOTAVAIL (Linux, macOS)
        return f"{host!r} is not an address of this machine ({bind_error.strerror})"
    return f"port {port} on {host or 'all addresses'} is busy (another program listens there; {bind_error.strerror}); choose another port"


def pid_file(home: Path, port: int) -> Path:
    return Path(home) / "run" / f"proxy-{port}.pid"


@dataclass(frozen=True)
class Background:
    """A background proxy found by its pid file: ``port`` (from the file name), ``pid``, and
    whether that process is still a running ``mitmdump`` (``alive``)."""

    port: int
    pid: int
    pid_file: Path
    alive: bool


def _is_mitmdump(pid: int) -> bool:
    """Whether ``pid`` runs (and, where ``/proc`` tells, is a ``mitmdump``: a recycled pid
    of another program is never taken for the proxy)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # someone else's process: not ours
    cmdline = Path(f"/proc/{pid}/cmdline")
    if cmdline.exists():
        try:
            return b"mitmdump" in cmdline.read_bytes()
        except OSError:
            return False
    return True


def background_proxies(home: Path) -> list[Background]:
    """Every background proxy with a pid file under ``home`` (any port), by port."""
    out = []
    for f in sorted((Path(home) / "run").glob("proxy-*.pid")):
        try:
            port = int(f.stem.removeprefix("proxy-"))
            pid = int(f.read_text().strip())
        except (OSError, ValueError):
            continue
        out.append(Background(port, pid, f, _is_mitmdump(pid)))
    return sorted(out, key=lambda b: b.port)


def foreground_file(home: Path, port: int) -> Path:
    """The record of a proxy running in a terminal on ``port`` (its pid)."""
    return Path(home) / "run" / f"foreground-{port}.pid"


def mark_foreground(home: Path, port: int, pid: int) -> None:
    """Record the proxy about to run in this terminal as ``pid`` (this process, which ``exec``
    makes the proxy). A home where it cannot be written records nothing (doctor then does not
    find it; the proxy says why the home is unusable on its own)."""
    f = foreground_file(home, port)
    try:
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(f"{pid}\n")
    except OSError:
        pass


def unmark_foreground(home: Path, port: int, pid: int) -> None:
    """Remove the record of the terminal proxy on ``port`` if it names ``pid`` (never another's)."""
    f = foreground_file(home, port)
    try:
        if int(f.read_text().strip()) == pid:
            f.unlink()
    except (OSError, ValueError):
        pass


def foreground_proxies(home: Path) -> list[Background]:
    """The proxies running in a terminal with a record under ``home`` and still alive, by port
    (a record left by a killed proxy is skipped)."""
    out = []
    for f in (Path(home) / "run").glob("foreground-*.pid"):
        try:
            port = int(f.stem.removeprefix("foreground-"))
            pid = int(f.read_text().strip())
        except (OSError, ValueError):
            continue
        if _is_mitmdump(pid):
            out.append(Background(port, pid, f, True))
    return sorted(out, key=lambda b: b.port)


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


def start_detached(
    cmd: Sequence[str], env: Mapping[str, str], addr: ProxyAddress, home: Path, ca_cert: Path, timeout: float = 60.0
) -> int:
    """Start ``cmd`` in its own session, wait until it answers as a Headroom proxy at ``addr``
    and its CA ``ca_cert`` exists, write the pid file, and return the pid.

    Raises :class:`ProxyError` with the end of its log when it exits or is not ready within
    ``timeout`` seconds, and in one line as soon as it answers that it cannot open its database
    (it is then stopped).
    """
    log = log_file(home, addr.port)
    log.parent.mkdir(parents=True, exist_ok=True)
    pidf = pid_file(home, addr.port)
    pidf.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        out.write(f"### {' '.join(cmd)}\n".encode())
        out.flush()
        proc = subprocess.Popen(
            list(cmd),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(env),
            start_new_session=True,
        )
    pidf.write_text(f"{proc.pid}\n")  # at once: a proxy that is starting can be found and stopped
    deadline = time.monotonic() + timeout
    try:
        while True:
            code = proc.poll()
            if code is not None:
                raise ProxyError(
                    f"the proxy exited with code {code} while starting; its log ({log}) ends:\n{_tail(log)}"
                )
            state, j = _health(addr, 1.0)
            if ca_cert.is_file() and state == "headroom":
                return proc.pid
            if (why := _failure(state, j)) is not None:
                raise ProxyError(f"the proxy cannot open its database ({why}); it is stopped, its log is {log}")
            if time.monotonic() > deadline:
                raise ProxyError(
                    f"the proxy did not answer at {addr.url} within {timeout:.0f} s; its log ({log}) ends:\n{_tail(log)}"
                )
            time.sleep(0.1)
    except BaseException:  # an error, or Ctrl-C while it starts: leave no proxy behind
        _terminate(proc.pid)
        pidf.unlink(missing_ok=True)
        raise


def stop(home: Path, port: int, timeout: float = 10.0) -> int | None:
    """Stop the background proxy of ``port`` (pid file under ``home``); return its pid, or None
    when there was no pid file or its process was gone (the stale pid file is removed; a pid
    now used by another program is never signalled)."""
    pidf = pid_file(home, port)
    try:
        pid = int(pidf.read_text().strip())
    except (OSError, ValueError):
        return None
    pidf.unlink(missing_ok=True)
    if not _is_mitmdump(pid):
        return None
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
