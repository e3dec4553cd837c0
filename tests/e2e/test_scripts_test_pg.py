"""``scripts/test`` leaves no PostgreSQL behind (issue 34, item 2): the server it started is
stopped when the tests end, whatever their outcome, and it says so; a server that was already
running is left running, and it says that. Run on a copy of the script whose setup, linters and
pytest are stand-ins (the stand-in pytest records whether the server was up while it ran), with
the real ``scripts/postgres`` on a private data folder and port."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.support.proxy import REPO_ROOT, free_port


@pytest.fixture
def tree():
    """A copy of ``scripts/test`` and ``scripts/postgres`` with stand-ins for the rest, and the
    environment that points ``scripts/postgres`` at a private folder and port."""
    if not any(Path("/usr/lib/postgresql").glob("*/bin/initdb")) and os.geteuid() != 0:
        pytest.skip("PostgreSQL is not installed (/usr/lib/postgresql/*/bin/initdb) and this is not root")
    root = Path(tempfile.mkdtemp(prefix="headroom-scripts-test-"))
    root.chmod(0o755)  # as root the server runs as the postgres user, who must reach its data folder
    (root / "scripts").mkdir()
    (root / ".venv" / "bin").mkdir(parents=True)
    for name in ("test", "postgres"):
        shutil.copy(REPO_ROOT / "scripts" / name, root / "scripts" / name)
    for name in ("setup", "chromium", "agents"):
        (root / "scripts" / name).write_text("exit 0\n")
    for name in ("ruff", "mypy"):
        (root / ".venv" / "bin" / name).write_text("#!/bin/sh\nexit 0\n")
    # the stand-in pytest: is the server up while the tests run? then the tests' outcome
    (root / ".venv" / "bin" / "python").write_text(
        '#!/bin/sh\nbash scripts/postgres url > during.txt 2>/dev/null || echo "not running" > during.txt\n'
        'echo "url=$HEADROOM_TEST_PG_URL" >> during.txt\nexit "${FAKE_PYTEST_RC:-0}"\n'
    )
    for f in (root / ".venv" / "bin").iterdir():
        f.chmod(0o755)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEADROOM_")}
    env.update(HEADROOM_PG_DIR=str(root / "pg"), HEADROOM_PG_PORT=str(port), HEADROOM_PG_DB="headroom_test")
    try:
        yield root, env, port
    finally:
        subprocess.run(
            ["bash", str(root / "scripts" / "postgres"), "destroy"], env=env, capture_output=True, timeout=120
        )
        shutil.rmtree(root, ignore_errors=True)


def _pg(root: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(root / "scripts" / "postgres"), *args], env=env, capture_output=True, text=True, timeout=300
    )


def _run_tests(root: Path, env: dict, rc: int) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(root / "scripts" / "test")],
        env={**env, "FAKE_PYTEST_RC": str(rc)},
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_server_it_started_is_stopped_when_the_tests_end(tree):
    root, env, port = tree
    assert _pg(root, env, "url").returncode == 1  # not running before
    for rc in (0, 3):  # tests passing or failing
        run = _run_tests(root, env, rc)
        assert run.returncode == rc, run.stderr[-2000:]
        during = (root / "during.txt").read_text()
        assert f"@127.0.0.1:{port}/headroom_test" in during.splitlines()[0]  # up while the tests ran, exported to them
        assert f"url=postgresql+psycopg://postgres@127.0.0.1:{port}/headroom_test" in during
        assert _pg(root, env, "url").returncode == 1, "PostgreSQL left running"
        assert "scripts/test: stopped the test PostgreSQL server it started" in run.stderr


def test_a_server_already_running_is_left_running(tree):
    root, env, port = tree
    assert _pg(root, env, "start").returncode == 0
    run = _run_tests(root, env, 0)
    assert run.returncode == 0, run.stderr[-2000:]
    assert _pg(root, env, "url").returncode == 0  # still running: it was the user's
    assert "already running before the tests; it is left running" in run.stderr and "stopped the test" not in run.stderr
