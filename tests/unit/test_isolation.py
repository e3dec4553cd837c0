"""The test run's own home (issue 34, item 1): :func:`tests.support.isolation.isolate` on a
given environment."""

from __future__ import annotations

from pathlib import Path

from tests.support.isolation import AGENTS_CACHE, REAL_HOME, isolate


def test_isolate_swaps_home_strips_the_users_headroom_variables_and_records_the_real_places(tmp_path):
    env = {"HOME": "/home/ann", "PATH": "/usr/bin", "XDG_CACHE_HOME": "/home/ann/.xdg-cache", "HEADROOM_COMPRESS": "false",
           "HEADROOM_HOME": "/home/ann/.headroom", "HEADROOM_MEMROY": "true", "HEADROOM_TEST_PG_URL": "postgresql://x", "HEADROOM_FUZZ_EXAMPLES": "5"}  # fmt: skip
    iso = isolate(env)
    try:
        home = iso.home
        assert home.is_dir() and home.name.startswith("headroom-tests-home-") and env["HOME"] == str(home)
        assert {k: env[k] for k in env if k.startswith("HEADROOM_")} == {
            "HEADROOM_TEST_PG_URL": "postgresql://x",
            "HEADROOM_FUZZ_EXAMPLES": "5",
        }
        assert env[REAL_HOME] == "/home/ann" and env[AGENTS_CACHE] == "/home/ann/.xdg-cache/headroom-test-agents"
        for k, sub in (
            ("XDG_CONFIG_HOME", ".config"),
            ("XDG_CACHE_HOME", ".cache"),
            ("XDG_DATA_HOME", ".local/share"),
            ("XDG_STATE_HOME", ".local/state"),
        ):
            assert env[k] == str(home / sub) and (home / sub).is_dir()
        assert env["PATH"] == "/usr/bin"
    finally:
        iso.undo(env)
    assert not home.exists()
    assert env == {"HOME": "/home/ann", "PATH": "/usr/bin", "XDG_CACHE_HOME": "/home/ann/.xdg-cache", "HEADROOM_COMPRESS": "false",
                   "HEADROOM_HOME": "/home/ann/.headroom", "HEADROOM_MEMROY": "true", "HEADROOM_TEST_PG_URL": "postgresql://x", "HEADROOM_FUZZ_EXAMPLES": "5"}  # fmt: skip


def test_the_agents_cache_follows_the_harness_variable_and_an_outer_runs_record_stands():
    bo = {"HOME": "/home/bo"}
    isolate(bo).undo(bo)
    assert bo == {"HOME": "/home/bo"}
    iso = isolate(bo)
    assert bo[AGENTS_CACHE] == "/home/bo/.cache/headroom-test-agents"
    iso.undo(bo)
    env = {"HOME": "/home/ann", "HEADROOM_TEST_AGENTS_DIR": "/srv/agents"}
    iso = isolate(env)
    try:
        assert env[AGENTS_CACHE] == "/srv/agents" and env[REAL_HOME] == "/home/ann"
        inner = dict(env)  # a test run started by this one: the real places stay the real ones
        iso2 = isolate(inner)
        assert inner[REAL_HOME] == "/home/ann" and inner[AGENTS_CACHE] == "/srv/agents" and inner["HOME"] != env["HOME"]
        iso2.undo(inner)
        assert inner == env and Path(env["HOME"]).is_dir()
    finally:
        iso.undo(env)
    assert env == {"HOME": "/home/ann", "HEADROOM_TEST_AGENTS_DIR": "/srv/agents"}
