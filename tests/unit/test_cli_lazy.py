"""``headroom`` loads a command's module only when that command runs (issue 33: a fast CLI).

What is asserted is which modules a start imports, never how long it takes: the figures are in ``bench/bench_cli.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from headroom_core.cli.main import COMMANDS, load_command

HEAVY = ("sqlalchemy", "httpx", "numpy", "tokenizers", "headroom_core.compress", "headroom_core.db")


_PROBE = """
import atexit, sys
atexit.register(lambda: print("\\nMODULES " + " ".join(sorted(sys.modules))))
from headroom_core.cli import run
sys.argv = ["headroom", *sys.argv[1:]]
sys.exit(run())
"""


def _imported(*args: str) -> set[str]:
    """The modules a ``headroom ARGS`` process has imported when it exits."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEADROOM_")}
    out = subprocess.run([sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return set(out.stdout.rsplit("MODULES ", 1)[1].split())


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_listed_line_is_the_commands_own(name):
    cmd = load_command(name)
    assert cmd.name == name
    assert (cmd.help or "").strip().split("\n")[0] == COMMANDS[name][1]


@pytest.mark.parametrize("args", [("--version",), ("--help",)])
def test_version_and_help_import_no_command(args):
    mods = _imported(*args)
    assert not {m for m in mods if m.startswith("headroom_core.cli.") and m.endswith("_cmd")}
    assert not [m for m in mods if m.startswith(HEAVY)]


def test_a_command_imports_only_its_own_module():
    mods = _imported("certs", "--help")
    assert {m for m in mods if m.endswith("_cmd")} == {"headroom_core.cli.certs_cmd"}
    assert not [m for m in mods if m.startswith(HEAVY)]


def test_wrap_loads_no_database_or_compression_library():
    mods = _imported("wrap", "--help")
    assert "headroom_core.cli.wrap_cmd" in mods
    assert not [m for m in mods if m.startswith(HEAVY)]


@pytest.mark.parametrize("delay", [0.05, 0.2, 0.4, 0.8])
def test_ctrl_c_at_any_moment_of_the_start_is_one_line(tmp_path, delay):
    """SIGINT while `headroom` imports and starts: exit 130 (or the signal itself, before
    Python handles it) and never a traceback."""
    import shutil
    import signal
    import time

    exe = shutil.which("headroom", path=os.path.dirname(sys.executable))
    assert exe
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("HEADROOM_")}, "HEADROOM_HOME": str(tmp_path)}
    p = subprocess.Popen([exe, "stats"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    time.sleep(delay)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    # a SIGINT that lands while the interpreter itself starts (site, before any of our code)
    # gets Python's own few lines; never one from inside headroom's imports or commands
    if "Traceback" in err:
        assert "headroom_core" not in err and p.returncode in (1, -signal.SIGINT), err
    assert p.returncode in (0, 1, 130, -signal.SIGINT)
    if p.returncode == 130:  # ours while importing, click's (Aborted, a bare line) once it runs
        assert err.strip() in ("", "headroom: interrupted", "Aborted!"), err
