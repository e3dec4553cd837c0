"""The ``headroom`` executable catches an exception that escapes a command by its level
(:mod:`headroom_core.errors`): a usage error and an environment problem are one line,
``headroom <command>: <message>``, with exit status 2 and 1; an internal error, a data problem
and any other exception keep their traceback (exit 1), since a bug should be reported.

Each command catches the errors it expects, so none escapes today by itself: the test makes one
escape. The real ``headroom`` executable runs with a ``sitecustomize`` module on ``PYTHONPATH``
(Python imports it at start-up) that makes ``load_settings``, which every command calls first,
raise a real instance of one of Headroom's own classes: ``headroom config show`` then meets it
as it would meet a real one.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HEADROOM = str(Path(sys.executable).parent / "headroom")

_SITECUSTOMIZE = """
import importlib, os
module, name = os.environ["RAISE_IN_LOAD_SETTINGS"].split(":")
import headroom_core.settings as settings

def load_settings(*args, **kwargs):
    raise getattr(importlib.import_module(module), name)(os.environ["RAISE_MESSAGE"])

settings.load_settings = load_settings
"""


def _headroom(tmp_path: Path, raises: str, message: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``headroom ARGS`` in a fresh home, with ``load_settings`` raising ``raises`` ("module:Class")."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEADROOM_")}
    env.update(
        HEADROOM_HOME=str(tmp_path / "home"),
        PYTHONPATH=str(site),
        RAISE_IN_LOAD_SETTINGS=raises,
        RAISE_MESSAGE=message,
        COLUMNS="80",
    )
    return subprocess.run([HEADROOM, *args], env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("raises", "status"),
    [
        ("headroom_core.pricing:PriceError", 2),  # a UsageError that config show does not catch itself
        ("headroom_core.db.sealed:SecretError", 1),  # an EnvironmentProblem
        ("headroom_core.cli.proxy_process:ProxyError", 1),  # an EnvironmentProblem
    ],
)
def test_usage_and_environment_are_one_line(tmp_path, raises, status):
    message = "the secret key file /x/secret holds 3 bytes, not 32:\n  restore it or remove it " + "and more words " * 8
    out = _headroom(tmp_path, raises, message, "config", "show")
    assert out.returncode == status, out.stderr
    assert out.stderr == f"headroom config: {' '.join(message.split())}\n"  # one line, never wrapped at 80 columns
    assert out.stdout == ""


@pytest.mark.parametrize(
    "raises",
    [
        "headroom_core.cache.breakpoints:BreakpointError",  # an InternalError
        "headroom_core.wire.view:ViewError",  # a DataProblem
        "builtins:KeyError",  # anything else
    ],
)
def test_bugs_keep_their_traceback(tmp_path, raises):
    out = _headroom(tmp_path, raises, "planned edit moved a breakpoint", "config", "show")
    assert out.returncode == 1, out.stderr
    assert "Traceback" in out.stderr or "─ Traceback" in out.stderr  # typer's rich traceback or Python's own
    assert out.stderr.rstrip().splitlines()[-1].startswith(raises.split(":")[1])
    assert "planned edit moved a breakpoint" in out.stderr
