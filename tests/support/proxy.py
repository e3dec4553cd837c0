"""Run a real ``mitmdump`` process for end-to-end tests.

::

    with MitmProxy(script=None, options={"stream_large_bodies": "1"}) as proxy:
        proxy.url       # "http://127.0.0.1:PORT"  (give it to clients as their proxy)
        proxy.ca_path   # "<confdir>/mitmproxy-ca-cert.pem" (clients verify with it)
        proxy.log_text()

The process runs with ``HEADROOM_HOME`` pointing at a fresh temporary directory (or the
one given), ``--set confdir=<tmp>`` (so the CA is generated per run, and kept across
:meth:`MitmProxy.restart`), and ``--set ssl_insecure=true`` (the test upstream's
certificate is self-signed).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, Any

__all__ = ["MitmProxy", "MitmProxyError", "free_port", "mitmdump_path", "REPO_ROOT", "ADDON_SCRIPT"]

#: The repository root (``/work/main``).
REPO_ROOT = Path(__file__).resolve().parents[2]
#: The Headroom addon script ``mitmdump -s`` loads.
ADDON_SCRIPT = REPO_ROOT / "addons" / "headroom.py"


class MitmProxyError(RuntimeError):
    """``mitmdump`` failed to start (the message carries its output)."""


def mitmdump_path() -> Path:
    """The ``mitmdump`` executable of the running interpreter's environment."""
    exe = Path(sys.executable).parent / "mitmdump"
    if exe.exists():
        return exe
    found = shutil.which("mitmdump")
    if found:
        return Path(found)
    raise MitmProxyError(f"mitmdump not found next to {sys.executable} nor on PATH")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def _fmt_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


class MitmProxy:
    """A real ``mitmdump`` process listening on ``127.0.0.1:<free port>``.

    Arguments:
        script: path of an addon script (``-s``), or ``None`` for a plain mitmdump.
            A list/tuple loads several scripts in order.
        options: extra ``--set name=value`` options (booleans become ``true``/``false``;
            a list value is passed as several ``--set name=item``).
        env: extra environment variables for the process (``None`` values remove a
            variable).
        home: the ``HEADROOM_HOME`` directory (default: a fresh temporary directory,
            removed on :meth:`stop` unless ``keep_dirs``).
        confdir: mitmproxy's confdir (default: ``<tmp>/confdir``).
        args: extra raw command-line arguments.
        port: listen port (default: a free port; kept across :meth:`restart`).
        startup_timeout: seconds to wait for the port and the CA file.
        keep_dirs: do not delete the temporary directory on :meth:`stop`.
    """

    def __init__(
        self,
        script: str | os.PathLike[str] | Iterable[str | os.PathLike[str]] | None = None,
        *,
        options: Mapping[str, Any] | None = None,
        env: Mapping[str, str | None] | None = None,
        home: str | os.PathLike[str] | None = None,
        confdir: str | os.PathLike[str] | None = None,
        args: Iterable[str] = (),
        port: int | None = None,
        startup_timeout: float = 30.0,
        keep_dirs: bool = False,
    ) -> None:
        if script is None:
            self.scripts: list[Path] = []
        elif isinstance(script, (str, os.PathLike)):
            self.scripts = [Path(script)]
        else:
            self.scripts = [Path(s) for s in script]
        self.options: dict[str, Any] = dict(options or {})
        self.env: dict[str, str | None] = dict(env or {})
        self.args = list(args)
        self.startup_timeout = startup_timeout
        self.keep_dirs = keep_dirs
        self.tmp = Path(tempfile.mkdtemp(prefix="headroom-mitm-"))
        self.home = Path(home) if home is not None else self.tmp / "home"
        self.confdir = Path(confdir) if confdir is not None else self.tmp / "confdir"
        self.home.mkdir(parents=True, exist_ok=True)
        self.confdir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.tmp / "mitmdump.log"
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self._log_offset = 0

    # -- properties ---------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The proxy URL for clients: ``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def ca_path(self) -> Path:
        """mitmproxy's CA certificate (PEM) that clients must trust."""
        return self.confdir / "mitmproxy-ca-cert.pem"

    @property
    def running(self) -> bool:
        """Whether the process is alive."""
        return self.process is not None and self.process.poll() is None

    def command(self) -> list[str]:
        """The full ``mitmdump`` command line."""
        cmd = [str(mitmdump_path())]
        for s in self.scripts:
            cmd += ["-s", str(s)]
        cmd += [
            "--listen-host", "127.0.0.1",
            "--listen-port", str(self.port),
            "--set", f"confdir={self.confdir}",
            "--set", "ssl_insecure=true",
        ]  # fmt: skip
        for k, v in self.options.items():
            values = v if isinstance(v, (list, tuple)) else [v]
            for item in values:
                cmd += ["--set", f"{k}={_fmt_value(item)}"]
        return cmd + self.args

    def _environ(self) -> dict[str, str]:
        env = dict(os.environ)
        # the proxy must not itself go through a proxy from the test environment
        for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
            env.pop(k, None)
        env["HEADROOM_HOME"] = str(self.home)
        env["PYTHONUNBUFFERED"] = "1"
        env.setdefault("HF_HUB_OFFLINE", "1")
        env.setdefault("TRANSFORMERS_OFFLINE", "1")
        # the proxy imports headroom_core from this checkout, not from wherever the venv's
        # editable install points (a second worktree sharing one venv tested the other's code)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(REPO_ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        )
        for k, v in self.env.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        return env

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> "MitmProxy":
        """Start ``mitmdump`` and wait until it accepts connections and its CA exists.

        Raises :class:`MitmProxyError` (with the process output) on exit or timeout.
        """
        if self.running:
            return self
        self._log_file = open(self.log_path, "ab")
        self._log_offset = self._log_file.tell()
        self._log_file.write(f"### {' '.join(self.command())}\n".encode())
        self._log_file.flush()
        self.process = subprocess.Popen(
            self.command(),
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            env=self._environ(),
            cwd=str(REPO_ROOT),
            start_new_session=True,
        )
        deadline = time.monotonic() + self.startup_timeout
        while True:
            code = self.process.poll()
            if code is not None:
                out = self.log_text(since_start=True)
                self._close_log()
                raise MitmProxyError(f"mitmdump exited with code {code} during startup:\n{out}")
            if self.ca_path.exists() and _port_open(self.port):
                return self
            if time.monotonic() > deadline:
                out = self.log_text(since_start=True)
                self.stop()
                raise MitmProxyError(
                    f"mitmdump did not listen on 127.0.0.1:{self.port} (or write {self.ca_path}) "
                    f"within {self.startup_timeout}s:\n{out}"
                )
            time.sleep(0.05)

    def stop(self, timeout: float = 10.0) -> int | None:
        """Terminate the process (SIGTERM, then SIGKILL after ``timeout``); return its exit code.

        The temporary directories stay (see :meth:`cleanup`), so :meth:`start` can run again.
        """
        code = None
        if self.process is not None:
            if self.process.poll() is None:
                self.process.send_signal(signal.SIGTERM)
                try:
                    self.process.wait(timeout)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait(5)
            code = self.process.returncode
        self._close_log()
        return code

    def restart(self, **changes: Any) -> "MitmProxy":
        """Stop and start again on the same port, confdir (same CA) and ``HEADROOM_HOME``.

        Keyword arguments update attributes first, e.g. ``restart(options={...})``,
        ``restart(env={...})`` or ``restart(script=path)``.
        """
        self.stop()
        if "script" in changes:
            s = changes.pop("script")
            self.scripts = [] if s is None else [Path(s)] if isinstance(s, (str, os.PathLike)) else [Path(x) for x in s]
        for k, v in changes.items():
            if not hasattr(self, k):
                raise AttributeError(f"MitmProxy has no attribute {k!r}")
            setattr(self, k, v)
        deadline = time.monotonic() + 10
        while _port_open(self.port) and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.start()

    def cleanup(self) -> None:
        """Stop the process and delete the temporary directory (unless ``keep_dirs``)."""
        self.stop()
        if not self.keep_dirs:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def _close_log(self) -> None:
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def __enter__(self) -> "MitmProxy":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.cleanup()

    # -- output -------------------------------------------------------------------------

    def log_text(self, *, since_start: bool = False) -> str:
        """Everything the process wrote to stdout/stderr (all runs, or only the current one)."""
        try:
            data = self.log_path.read_bytes()
        except FileNotFoundError:
            return ""
        if since_start:
            data = data[self._log_offset :]
        return data.decode("utf-8", "replace")

    def wait_for_log(self, pattern: str, timeout: float = 10.0, *, since_start: bool = False) -> re.Match[str]:
        """Wait until the log (of the current run only, with ``since_start``) matches the regex
        ``pattern``; return the match."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            m = rx.search(self.log_text(since_start=since_start))
            if m:
                return m
            if time.monotonic() > deadline:
                raise TimeoutError(f"{pattern!r} not in mitmdump log:\n{self.log_text()[-4000:]}")
            time.sleep(0.05)

    def __repr__(self) -> str:
        scripts = ",".join(str(s) for s in self.scripts) or "-"
        return f"MitmProxy({self.url}, scripts={scripts}, running={self.running})"
