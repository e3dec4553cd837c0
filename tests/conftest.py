"""Shared fixtures: the real-input corpus, one token counter, a fresh runtime per test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from headroom_core.compress.tokens import TokenCounter
from headroom_core.runtime import Runtime
from headroom_core.settings import load_settings

from tests.support.fixtures import *  # noqa: F401,F403  (upstream, proxies)

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus"
TOKENIZER_HOME = Path.home() / ".headroom"


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
    """One cl100k_base counter for the whole run (its vocabulary cache under ~/.headroom)."""
    return TokenCounter(TOKENIZER_HOME)


@pytest.fixture
def runtime(tmp_path: Path, counter: TokenCounter) -> Runtime:
    """A runtime on a fresh SQLite database under ``tmp_path``, sharing the session's counter."""
    rt = Runtime(load_settings({"home": str(tmp_path)}, env={}))
    rt.__dict__["counter"] = counter
    return rt
