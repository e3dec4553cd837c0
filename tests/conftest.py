"""Shared fixtures: the real-input corpus, one token counter, a fresh runtime per test."""

from __future__ import annotations

# first, before anything reads HOME or HEADROOM_*: the run's own home, none of the user's settings
from tests.support.isolation import isolate

ISOLATION = isolate()

import json  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from headroom_core.compress.tokens import TokenCounter  # noqa: E402
from headroom_core.runtime import Runtime  # noqa: E402
from headroom_core.settings import load_settings  # noqa: E402
from tests.support.fixtures import *  # noqa: F401,F403,E402  (upstream, proxies)

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus"
TOKENIZER_HOME = ISOLATION.home / ".headroom"  # the run's home (the vocabulary is the installed package's)


def pytest_unconfigure(config: pytest.Config) -> None:
    """The run's home goes, the environment is as it was."""
    ISOLATION.undo()


def corpus_dir(name: str) -> Path:
    """``../shared/corpus/<name>``; skips the test (naming the folder) when it is absent."""
    p = CORPUS / name
    if not p.is_dir():
        pytest.skip(f"real-input corpus folder {p} is absent (it sits beside the repository as ../shared/corpus)")
    return p


def flow_files() -> list[Path]:
    """The recorded Claude Code requests, in session order."""
    return sorted(corpus_dir("anthropic-flows").glob("session-a-*.json"))


def load_flow(p: Path) -> dict:
    return json.loads(p.read_text())


@pytest.fixture(scope="session")
def counter() -> TokenCounter:
    """One cl100k_base counter for the whole run (its home the run's own ``~/.headroom``,
    :mod:`tests.support.isolation`)."""
    return TokenCounter(TOKENIZER_HOME)


@pytest.fixture
def runtime(tmp_path: Path, counter: TokenCounter) -> Runtime:
    """A runtime on a fresh SQLite database under ``tmp_path``, sharing the session's counter."""
    rt = Runtime(load_settings({"home": str(tmp_path)}, env={}))
    rt.__dict__["counter"] = counter
    return rt
