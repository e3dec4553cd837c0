"""Silence and slowness (issue 34, item 8), on the real ``headroom`` command: ``compress`` says
what it does on a terminal's standard error while it works (and nothing more when standard error
is a pipe); ``memory add`` loads the embedding model only when the project has memories a
near-duplicate could be among (the first is saved at once, its vector added later), ``memory
search`` only when there is something to rank. Timings are in bench/bench_cli.py, never here."""

from __future__ import annotations

import os
import pty
import select
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

HEADROOM = str(Path(sys.executable).parent / "headroom")


def _env(home: Path) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("HEADROOM_") and not k.lower().endswith("_proxy")}
    return {**base, "HEADROOM_HOME": str(home), "COLUMNS": "100", "TERM": "xterm"}


def _with_tty_stderr(args: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str, str]:
    """Run ``headroom ARGS`` with standard error on a pseudo-terminal: (exit code, stdout, what the terminal showed)."""
    master, slave = pty.openpty()
    p = subprocess.Popen(
        [HEADROOM, *args], stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL, env=env, cwd=cwd
    )
    os.close(slave)
    shown = b""
    out_chunks = []
    open_ = [master, p.stdout]
    deadline = time.monotonic() + 300
    while open_ and time.monotonic() < deadline:
        ready, _, _ = select.select(open_, [], [], 0.5)
        if master in ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the terminal's last writer has exited
                data = b""
            shown += data
            if not data:
                open_.remove(master)
        if p.stdout in ready:
            chunk = p.stdout.read1(65536)
            out_chunks.append(chunk)
            if not chunk:
                open_.remove(p.stdout)
    os.close(master)
    return p.wait(), b"".join(out_chunks).decode(), shown.decode(errors="replace")


def _big_log(path: Path) -> Path:
    lines = [
        f"2025-06-01 10:{i // 60 % 60:02d}:{i % 60:02d} INFO worker-{i % 7} handled request {i} in {i % 97} ms"
        for i in range(20000)
    ]
    lines[12345] = "2025-06-01 13:25:45 ERROR worker-3 database connection lost: timeout after 30000 ms"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_compress_says_what_it_does_on_a_terminal(tmp_path):
    log = _big_log(tmp_path / "service.log")
    code, out, shown = _with_tty_stderr(["compress", str(log)], _env(tmp_path / "home"), tmp_path)
    assert code == 0
    assert "database connection lost: timeout after 30000 ms" in out  # the compressed text on stdout
    assert "compressing service.log (" in shown and "characters" in shown  # the spinner's line
    assert "kind=log tokens " in shown  # then the summary


def test_compress_to_a_pipe_prints_only_the_summary(tmp_path):
    log = _big_log(tmp_path / "service.log")
    out = subprocess.run(
        [HEADROOM, "compress", str(log)], env=_env(tmp_path / "home"), capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0
    assert out.stderr.startswith("kind=log tokens ") and "compressing" not in out.stderr


def _memories(home: Path) -> list[tuple[str, bool, int]]:
    with sqlite3.connect(home / "headroom.db") as c:
        return [
            (t, e is None, n)
            for t, e, n in c.execute("SELECT text, embedding, evidence FROM memories ORDER BY created_at")
        ]


def test_memory_add_needs_the_model_only_when_a_near_duplicate_could_exist(tmp_path):
    home, project = tmp_path / "home", tmp_path / "app"
    project.mkdir()
    env = _env(home)
    first = subprocess.run(
        [HEADROOM, "memory", "add", "The test suite runs with pnpm test:unit"],
        env=env,
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert first.returncode == 0, first.stderr
    assert _memories(home) == [
        ("The test suite runs with pnpm test:unit", True, 1)
    ]  # saved without a vector: no model was loaded
    empty = tmp_path / "other"
    empty.mkdir()
    none = subprocess.run(
        [HEADROOM, "memory", "search", "tests"], env=env, cwd=empty, capture_output=True, text=True, timeout=300
    )
    assert (
        none.returncode == 0 and "no memory of" in none.stdout and "text search" in none.stdout
    )  # nothing to rank: no model
    code, out, shown = _with_tty_stderr(["memory", "add", "the test suite runs with pnpm test:unit!"], env, project)
    assert code == 0, shown
    assert "loading the embedding model (to find a near-duplicate among this project's memories)" in shown
    assert out.startswith("updated memory ") and "similarity 0.9" in out  # merged by meaning
    assert _memories(home) == [("the test suite runs with pnpm test:unit!", False, 2)]  # and now it has its vector
