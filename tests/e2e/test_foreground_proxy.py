"""``headroom proxy`` in the foreground, as a person runs it in a terminal (the ``headroom``
command as a process in its own process group, Ctrl-C sent to the whole group as a terminal
does): the start banner, Ctrl-C at each moment of the start, and what ``doctor`` finds while it
runs."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support.proxy import free_port

HEADROOM = str(Path(sys.executable).parent / "headroom")
NO_BASE_URLS = ("--anthropic-port", "0", "--openai-port", "0", "--google-port", "0")


def _env(home: Path) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("HEADROOM_") and not k.lower().endswith("_proxy")}
    return {**base, "HEADROOM_HOME": str(home), "COLUMNS": "100"}


class Foreground:
    """``headroom proxy --port P`` in its own session, its output (stdout and stderr) read line
    by line as it comes."""

    def __init__(self, home: Path, port: int) -> None:
        self.port = port
        self.proc = subprocess.Popen([HEADROOM, "proxy", "--port", str(port), *NO_BASE_URLS], env=_env(home), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.lines.append(raw.decode(errors="replace").rstrip("\n"))

    def wait_for(self, pattern: str, timeout: float = 120.0) -> int:
        """The index of the first line matching ``pattern`` (waiting for it)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for i, line in enumerate(list(self.lines)):
                if re.search(pattern, line):
                    return i
            if self.proc.poll() is not None and not self._reader.is_alive():
                break
            time.sleep(0.02)
        raise AssertionError(f"no line matching {pattern!r}:\n" + "\n".join(self.lines))

    def interrupt(self) -> int:
        """Ctrl-C: SIGINT to the process group; the number of lines seen before it."""
        seen = len(self.lines)
        os.killpg(self.proc.pid, signal.SIGINT)
        return seen

    def finish(self, timeout: float = 60.0) -> int:
        """Wait for the exit; every process of the group is gone then (checked, bounded)."""
        code = self.proc.wait(timeout)
        self._reader.join(10)
        for _ in range(100):
            if not _group_alive(self.proc.pid):
                break
            time.sleep(0.1)
        assert not _group_alive(self.proc.pid), "a process of the proxy's group outlived it"
        return code

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(30)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


#: What mitmproxy and the proxy print while starting; a held-back Ctrl-C may come after these.
STARTING = re.compile(r"^\[[\d:.]+\] (Loading script |HTTP\(S\) proxy listening at |headroom: database )")


@pytest.mark.parametrize(
    "moment",
    [
        "headroom.*proxy on http",  # the banner: mitmdump is being started and imports mitmproxy
        "Loading script",  # the addon and headroom_core being imported, the runtime built
        "proxy listening at",  # the warm-up: database, vocabulary, the compression worker spawned
        "headroom: ready",  # warmed up
    ],
)
def test_ctrl_c_at_any_moment_of_the_start_is_one_line_and_status_130(tmp_path, moment):
    fg = Foreground(tmp_path, free_port())
    try:
        fg.wait_for(moment)
        seen = fg.interrupt()
        code = fg.finish()
    finally:
        fg.kill()
    after = fg.lines[seen:]
    assert code == 130, "\n".join(fg.lines)
    assert after[-1:] == ["headroom: interrupted"], "\n".join(fg.lines)
    # nothing else after the Ctrl-C but the start-up lines it was held behind: no traceback
    # (KeyboardInterrupt in an import, the worker's), no warm-up line, no panic
    assert all(STARTING.match(line) for line in after[:-1]), "\n".join(after)
    assert not any("Traceback" in line or "panicked" in line or ":root:" in line for line in fg.lines), "\n".join(
        fg.lines
    )


def test_the_banner_says_the_ca_is_created_only_when_it_is_not_there_yet(tmp_path):
    ca = tmp_path / "mitmproxy" / "mitmproxy-ca-cert.pem"
    for first in (True, False):
        fg = Foreground(tmp_path, free_port())
        try:
            banner = fg.lines[fg.wait_for(r"proxy on http")]
            fg.wait_for("headroom: ready")
            fg.interrupt()
            fg.finish()
        finally:
            fg.kill()
        assert banner.endswith(f"CA: {ca} (created on first start)" if first else f"CA: {ca}"), banner
        assert ca.is_file()


def test_doctor_finds_a_proxy_running_in_a_terminal_on_any_port(tmp_path):
    port = free_port()
    record = tmp_path / "run" / f"foreground-{port}.pid"
    fg = Foreground(tmp_path, port)
    try:
        fg.wait_for("headroom: ready")
        assert record.read_text() == f"{fg.proc.pid}\n"
        out = subprocess.run(
            [HEADROOM, "doctor", "--no-models", "--json"],
            env=_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=120,
        )
        found = {c["name"]: c for c in json.loads(out.stdout)}
        assert found[f"proxy :{port}"] == {
            "name": f"proxy :{port}", "level": "ok", "fix": "",
            "detail": f"pid {fg.proc.pid} answers at http://127.0.0.1:{port}; it runs in a terminal (Ctrl-C there stops it)",
        }  # fmt: skip
        assert "proxy" not in found  # no guess at 8080 when a running proxy is known
        stop = subprocess.run(
            [HEADROOM, "proxy", "--stop"], env=_env(tmp_path), capture_output=True, text=True, timeout=120
        )
        assert stop.returncode == 1 and fg.proc.poll() is None  # --stop is for background proxies
        fg.interrupt()
        assert fg.finish() == 130
    finally:
        fg.kill()
    assert not record.exists()  # removed by the proxy as it stopped
    out = subprocess.run(
        [HEADROOM, "doctor", "--no-models", "--json"], env=_env(tmp_path), capture_output=True, text=True, timeout=120
    )
    found = {c["name"]: c for c in json.loads(out.stdout)}
    assert f"proxy :{port}" not in found and found["proxy"]["level"] == "warn"
    assert found["proxy"]["fix"].endswith("one on another port: `headroom doctor --port N`")
