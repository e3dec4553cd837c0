"""Search, diff and test-output compressors on output printed by the real tools: grep over an
installed package, a find listing from a real Claude Code session, git diff, pytest and
unittest runs. Each offloaded original comes back byte for byte through headroom_retrieve."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from headroom_core.ccr import retrieve
from headroom_core.ccr.store import OriginalsStore
from headroom_core.compress.diff import compress_diff
from headroom_core.compress.markers import MARKER_RE, offload_key
from headroom_core.compress.router import classify, compress_text
from headroom_core.compress.search import compress_search, parse_hit
from headroom_core.compress.testout import compress_test_output
from headroom_core.db.engine import open_database
from headroom_core.wire.blocks import ToolCall
from tests.unit.test_router import session_outputs

ALEMBIC = Path(importlib.util.find_spec("alembic").origin).parent


def run(args: list[str], cwd: Path | None = None) -> str:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120).stdout


def assert_round_trip(res, text: str, tmp_path: Path) -> None:
    """One offload with the whole original; every marker's key gives it back byte for byte."""
    (off,) = res.offloads
    assert off.original == text and off.key == offload_key(text)
    store = OriginalsStore(open_database(f"sqlite:///{tmp_path / 'ccr.db'}"), 3600, 10**8)
    store.put(off.key, off.original, res.kind)
    keys = {m.group("key") for m in MARKER_RE.finditer(res.text)}
    assert keys == {off.key}
    assert retrieve.answer(ToolCall("c", "headroom_retrieve", {"key": off.key}), store) == text


# --- search -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def grep_output() -> str:
    out = run(["grep", "-rn", "--include=*.py", "def ", "."], cwd=ALEMBIC)
    assert out.count("\n") > 500
    return out


def test_grep_hits_grouped_by_file_with_counts(grep_output, counter, tmp_path):
    assert classify(grep_output).name == "search"
    res = compress_search(grep_output, "how does autogenerate render a foreign key constraint", counter)
    assert res.changed and res.kind == "search" and res.strategy == "group"
    hits = [parse_hit(ln) for ln in grep_output.splitlines()]
    per_file: dict[str, int] = {}
    for h in hits:
        per_file[h.path] = per_file.get(h.path, 0) + 1
    # each shown file's header carries its true number of matches
    headers = dict(re.findall(r"^(\S+) \((\d+) matches", res.text, re.M))
    assert headers and all(int(n) == per_file[p] for p, n in headers.items())
    # every shown line is the file's line, under its file
    current = None
    for ln in res.text.splitlines():
        if ln in ("",) or MARKER_RE.search(ln) or ln.endswith("not shown"):
            continue
        m = re.match(r"^(\S+) \(\d+ matches", ln)
        if m:
            current = m.group(1)
            continue
        n, _, rest = ln.partition(":")
        assert f"{current}:{n}:{rest}" in grep_output
    # hits most relevant to the query are kept
    assert "def _render_foreign_key" in res.text
    assert counter.count(res.text) < 0.5 * counter.count(grep_output)
    assert_round_trip(res, grep_output, tmp_path)


def test_query_changes_what_is_kept(grep_output, counter):
    a = compress_search(grep_output, "sqlite batch alter table", counter)
    b = compress_search(grep_output, "render foreign key", counter)
    assert a.text != b.text
    assert "batch" in a.text.lower()


def test_find_listing_from_session(counter, tmp_path):
    use, text = max(
        (
            (u, t)
            for u, t in session_outputs("fe5e1c67.jsonl")
            if u["name"] == "Bash" and u["input"]["command"].startswith("find ")
        ),
        key=lambda x: len(x[1]),
    )
    assert classify(text).name == "search"
    res = compress_search(text, "which version of eslint is installed", counter)
    assert res.changed and res.strategy == "paths"
    kept = [ln for ln in res.text.splitlines() if ln.startswith("/")]
    assert kept and all(ln in text.splitlines() for ln in kept)
    assert any("eslint" in ln for ln in kept[15:])  # query matches beyond the first paths
    assert "... [560 lines truncated] ..." in res.text  # the tool's own note stays
    assert re.search(r"^\d+ more paths, by directory:$", res.text, re.M)
    assert_round_trip(res, text, tmp_path)


# --- diff ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_diffs(tmp_path_factory) -> dict[int, str]:
    """``git diff --no-index -U<n>`` between alembic's command.py and a copy with edits."""
    d = tmp_path_factory.mktemp("diff")
    src = (ALEMBIC / "command.py").read_text()
    lines = src.split("\n")
    for i in range(40, len(lines), 60):  # a real-looking edit every 60 lines
        lines[i] = lines[i].replace("config", "cfg") + "  # changed"
    (d / "a.py").write_text(src)
    (d / "b.py").write_text("\n".join(lines))
    return {n: run(["git", "diff", "--no-index", f"-U{n}", "a.py", "b.py"], cwd=d) for n in (3, 10)}


@pytest.mark.parametrize("context", [3, 10])
def test_diff_keeps_headers_hunks_and_changes(context, real_diffs, counter, tmp_path):
    text = real_diffs[context]
    assert classify(text).name == "diff"
    res = compress_diff(text, "", counter, min_saving_ratio=0.05)
    assert res.changed, res.reason
    kept = set(res.text.split("\n"))
    for ln in text.split("\n"):
        if ln.startswith(("diff ", "index ", "--- ", "+++ ", "@@ ", "+", "-")):
            assert ln in kept, ln
    assert counter.count(res.text) < counter.count(text)
    assert_round_trip(res, text, tmp_path)


def test_swe_agent_submit_diff_is_too_small_to_touch(counter):
    from tests.unit.test_router import swe_steps

    diff = next(s["observation"] for s in swe_steps() if s["action"].startswith("submit"))
    res = compress_text(diff, "", counter, min_tokens=250, min_saving_ratio=0.1)
    assert not res.changed and res.text == diff


# --- test and build output ----------------------------------------------------------------------

SUITE = """
import warnings

import pytest


@pytest.mark.parametrize("n", range(60))
def test_passes(n):
    assert n >= 0


def test_totals_match():
    expected = {"apples": 3, "pears": 2}
    assert {"apples": 3, "pears": 5} == expected


def test_parser_raises():
    raise ValueError("bad token at line 7")


def test_warns():
    warnings.warn("use load_v2 instead", DeprecationWarning)
"""


@pytest.fixture(scope="module")
def pytest_output(tmp_path_factory) -> str:
    d = tmp_path_factory.mktemp("suite")
    (d / "test_suite.py").write_text(SUITE)
    return run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "test_suite.py"], cwd=d)


def test_pytest_failures_kept_passes_collapsed(pytest_output, counter, tmp_path):
    text = pytest_output
    assert classify(text).name == "test"
    res = compress_test_output(text, "", counter)
    assert res.changed and res.strategy == "collapse"
    for ln in text.split("\n"):
        if (
            "FAILED" in ln
            or "Error" in ln
            or ln.startswith(("E ", ">"))
            or "warnings summary" in ln
            or "passed" in ln
            and "failed" in ln
        ):
            assert ln in res.text.split("\n"), ln
    assert res.text.count("PASSED") <= 2  # runs shorter than MIN_RUN are not worth a marker
    assert re.search(r"= 2 failed, 61 passed, 1 warning in [\d.]+s =", res.text)
    assert "bad token at line 7" in res.text and "DeprecationWarning" in res.text
    assert counter.count(res.text) < 0.5 * counter.count(text)
    assert_round_trip(res, text, tmp_path)


def test_unittest_verbose(tmp_path, counter):
    body = "\n".join(f"    def test_ok_{i}(self):\n        self.assertTrue(True)\n" for i in range(40))
    (tmp_path / "test_u.py").write_text(
        "import unittest\n\n\nclass T(unittest.TestCase):\n"
        + body
        + "\n    def test_bad(self):\n        self.assertEqual(1, 2)\n"
    )
    text = subprocess.run(
        [sys.executable, "-m", "unittest", "-v", "test_u"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    ).stderr
    assert classify(text).name == "test"
    res = compress_test_output(text, "", counter, min_tokens=100)
    assert res.changed
    assert "FAIL: test_bad" in res.text and "AssertionError: 1 != 2" in res.text
    assert re.search(r"^Ran 41 tests in", res.text, re.M) and "FAILED (failures=1)" in res.text
    assert "... ok" not in res.text
