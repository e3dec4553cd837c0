"""Long steps show progress on a terminal (standard error is a pseudo-terminal here): the proxy
starting inside ``wrap``, the embedding model loading in ``compress``, reading and compressing
logs in ``discover``. Without a terminal nothing of it is printed (pipes stay clean)."""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import corpus_dir
from tests.support.proxy import free_port

HEADROOM = str(Path(sys.executable).parent / "headroom")


def _on_terminal(args: list[str], env: dict[str, str], timeout: float = 300) -> tuple[int, str, str]:
    """Run ``args`` with standard error on a pseudo-terminal; ``(exit code, stdout, what the
    terminal showed)``."""
    master, slave = os.openpty()
    proc = subprocess.Popen(
        args,
        env={**env, "TERM": "xterm", "COLUMNS": "100"},
        stdout=subprocess.PIPE,
        stderr=slave,
        stdin=subprocess.DEVNULL,
    )
    os.close(slave)
    shown = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _, _ = select.select([master], [], [], 0.2)
        if r:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
        elif proc.poll() is not None:
            break
    out = proc.stdout.read().decode() if proc.stdout else ""
    proc.wait(timeout=60)
    os.close(master)
    return proc.returncode, out, shown.decode(errors="replace")


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env["HEADROOM_HOME"] = str(home)
    return env


def test_wrap_shows_the_proxy_starting(tmp_path):
    port = free_port()
    env = _env(tmp_path)
    try:
        code, out, shown = _on_terminal(
            [HEADROOM, "wrap", "--port", str(port), sys.executable, "-c", "print('agent ran')"], env
        )
        assert code == 0, shown
        assert out == "agent ran\n"
        assert f"starting the Headroom proxy on http://127.0.0.1:{port}" in shown
        piped = subprocess.run(
            [HEADROOM, "wrap", "--port", str(port), "true"], env=env, capture_output=True, text=True, timeout=120
        )
        assert "starting the Headroom proxy" not in piped.stderr and "⠋" not in piped.stderr
    finally:
        subprocess.run([HEADROOM, "proxy", "--stop", "--port", str(port)], env=env, capture_output=True, timeout=60)


def test_compress_shows_the_model_loading(tmp_path):
    prose = "\n\n".join(
        f"Paragraph {i}: the release notes describe how the scheduler retries failed jobs, which queues they use, and why backoff matters for throughput."
        for i in range(60)
    )
    f = tmp_path / "notes.txt"
    f.write_text(prose)
    code, out, shown = _on_terminal([HEADROOM, "compress", str(f), "--kind", "text"], _env(tmp_path))
    assert code == 0, shown
    assert "loading the embedding model" in shown and out.strip()


def test_discover_shows_progress(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    for p in sorted(corpus_dir("claude-code-sessions").glob("*.jsonl")):
        shutil.copy(p, logs / p.name)
    code, out, shown = _on_terminal([HEADROOM, "discover", "--from", str(logs)], _env(tmp_path), timeout=600)
    assert code == 0, shown
    assert "compressing tool outputs" in shown and "per tool" in out
