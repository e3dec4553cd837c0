"""``headroom compress FILE|-`` as a user runs it: the real console script in a subprocess."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

from headroom_core.compress.router import compress_text
from tests.conftest import TOKENIZER_HOME, corpus_dir

HEADROOM = Path(sys.executable).parent / "headroom"
ALEMBIC = Path(importlib.util.find_spec("alembic").origin).parent
SUMMARY = re.compile(r"^kind=(\S+) tokens (\d+) -> (\d+) \(([+-][\d.]+%|-)\) (\w+): (.+)$")


def headroom(*args: str, stdin: bytes | None = None, home: Path = TOKENIZER_HOME) -> subprocess.CompletedProcess:
    env = {"PATH": str(HEADROOM.parent), "HOME": str(Path.home()), "HEADROOM_HOME": str(home)}
    return subprocess.run([str(HEADROOM), "compress", *args], input=stdin, capture_output=True, env=env, timeout=120)


def test_file_is_compressed_like_the_proxy_would(counter):
    path = ALEMBIC / "command.py"
    p = headroom(str(path))
    assert p.returncode == 0, p.stderr.decode()
    text = path.read_text()
    want = compress_text(text, "", counter, min_tokens=250, min_saving_ratio=0.10, hint=None)
    assert want.changed
    assert p.stdout.decode() == want.text + ("" if want.text.endswith("\n") else "\n")
    m = SUMMARY.match(p.stderr.decode().splitlines()[0])
    assert m, p.stderr.decode()
    assert m.group(1) == "code(python)" and m.group(5) == "outline"
    assert int(m.group(2)) == counter.count(text) and int(m.group(3)) == counter.count(want.text)


def test_stdin_with_query_and_kind(counter):
    grep = subprocess.run(["grep", "-rn", "--include=*.py", "def ", "."], cwd=ALEMBIC, capture_output=True).stdout
    a = headroom("-", "--query", "render foreign key", stdin=grep)
    b = headroom("-", "--query", "sqlite batch alter table", "--kind", "search", stdin=grep)
    assert a.returncode == 0 and b.returncode == 0
    assert a.stdout != b.stdout
    assert SUMMARY.match(a.stderr.decode().splitlines()[0]).group(1) == "search"
    assert "def _render_foreign_key" in a.stdout.decode()
    if "headroom_retrieve key=" in a.stdout.decode():  # markers in a preview are said to be unstored
        assert "nothing is stored" in a.stderr.decode()


def test_unchanged_output_and_errors(tmp_path):
    log = corpus_dir("logs") / "OpenSSH_2k.log"
    p = headroom(str(log), "--kind", "diff")  # a wrong kind is harmless
    assert p.returncode == 0
    assert p.stdout == log.read_bytes() + (b"" if log.read_bytes().endswith(b"\n") else b"\n")
    assert SUMMARY.match(p.stderr.decode().splitlines()[0]).group(5) == "unchanged"
    bad = headroom(str(log), "--kind", "poetry")
    assert bad.returncode == 2 and b"unknown kind" in bad.stderr
    missing = headroom(str(tmp_path / "nope.txt"))
    assert missing.returncode == 2 and b"cannot read" in missing.stderr
