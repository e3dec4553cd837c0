"""One settings object: ``config.example.toml`` documents every key at its default, the
precedence of DESIGN.md holds (``headroom config show`` / ``init``: tests/e2e/test_config_cli.py)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from headroom_core.settings import Settings, SettingsError, load_settings, sources

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "config.example.toml"
KEY_LINE = re.compile(r"^# (\w+) = (.+)$")


def _documented() -> dict[str, str]:
    """key -> the value on its last commented ``# key = value`` line (the default)."""
    out = {}
    for line in EXAMPLE.read_text().splitlines():
        m = KEY_LINE.match(line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def test_example_documents_every_key():
    missing = [f.name for f in dataclasses.fields(Settings) if f.name not in _documented()]
    assert not missing, f"config.example.toml lacks {missing}"
    unknown = [k for k in _documented() if k not in {f.name for f in dataclasses.fields(Settings)}]
    assert not unknown, f"config.example.toml documents keys Settings does not have: {unknown}"


def test_example_defaults_are_the_real_defaults(tmp_path):
    doc = _documented()
    doc.pop("home")  # set through HEADROOM_HOME; its default depends on the machine
    (tmp_path / "config.toml").write_text("\n".join(f"{k} = {v}" for k, v in doc.items()))
    loaded = load_settings(env={"HEADROOM_HOME": str(tmp_path)})
    defaults = Settings(home=str(tmp_path))
    assert loaded == defaults
    assert set(sources(env={"HEADROOM_HOME": str(tmp_path)}).values()) == {str(tmp_path / "config.toml"), "environment HEADROOM_HOME"}


def test_precedence_option_over_env_over_file_over_default(tmp_path):
    (tmp_path / "config.toml").write_text('min_tokens = 400\nexclude_tools = ["mcp__*"]\nretrieve_max_rounds = 5\n')
    env = {"HEADROOM_HOME": str(tmp_path), "HEADROOM_MIN_TOKENS": "300", "HEADROOM_RETRIEVE_MAX_ROUNDS": "4"}
    s = load_settings({"retrieve_max_rounds": "2"}, env=env)
    assert (s.min_tokens, s.exclude_tools, s.retrieve_max_rounds, s.ccr_ttl_seconds) == (300, ("mcp__*",), 2, 21600)
    src = sources({"retrieve_max_rounds": "2"}, env=env)
    assert src["min_tokens"] == "environment HEADROOM_MIN_TOKENS"
    assert src["exclude_tools"] == str(tmp_path / "config.toml")
    assert src["retrieve_max_rounds"] == "option"
    assert src["ccr_ttl_seconds"] == "default"


def test_bad_values_name_the_key_and_the_source(tmp_path):
    (tmp_path / "config.toml").write_text("min_tokens = 'many'\n")
    with pytest.raises(SettingsError, match=r"config.toml: min_tokens = 'many' is not valid"):
        load_settings(env={"HEADROOM_HOME": str(tmp_path)})
    (tmp_path / "config.toml").write_text("min_tokenz = 3\n")
    with pytest.raises(SettingsError, match="unknown key 'min_tokenz'"):
        load_settings(env={"HEADROOM_HOME": str(tmp_path)})
