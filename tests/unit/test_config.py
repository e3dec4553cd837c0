"""One settings object: each key documented once, in ``headroom_core/settings.py`` (its
``help``), and given with that same text by the mitmproxy option and ``config.example.toml``
(at its real default), and listed in the settings table of docs/configuration.md; the precedence of docs/architecture.md
holds (``headroom config show`` / ``init``: tests/e2e/test_config_cli.py)."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import textwrap
from pathlib import Path

import pytest

from headroom_core.settings import Settings, SettingsError, load_settings, setting_help, sources

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "config.example.toml"
CONFIGURATION_DOC = REPO / "docs" / "configuration.md"
OPTIONS_ADDON = REPO / "addons" / "headroom_options.py"
KEY_LINE = re.compile(r"^# (\w+) = (.+)$")
KEYS = [f.name for f in dataclasses.fields(Settings)]


def _documented() -> dict[str, str]:
    """key -> the value on its last commented ``# key = value`` line (the default)."""
    out = {}
    for line in EXAMPLE.read_text().splitlines():
        m = KEY_LINE.match(line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def _example_texts() -> dict[str, str]:
    """key -> the comment paragraph right above its last ``# key = value`` line, lines joined
    with spaces. Not part of it: indented example lines (``#   db_url = "postgresql…"``) and
    other ``# key = value`` lines of the same key; it stops at a blank line, a section rule
    (``# ---``) or another key's line."""
    lines = EXAMPLE.read_text().splitlines()
    out = {}
    for i, line in enumerate(lines):
        m = KEY_LINE.match(line)
        if not m:
            continue
        key, text = m.group(1), []
        for above in reversed(lines[:i]):
            other = KEY_LINE.match(above)
            if other and other.group(1) == key or above.startswith("#   "):
                continue
            if not above.startswith("# ") or above.startswith("# ---") or other:
                break
            text.insert(0, above[2:].strip())
        out[key] = " ".join(text)
    return out


def test_example_documents_every_key():
    missing = [f.name for f in dataclasses.fields(Settings) if f.name not in _documented()]
    assert not missing, f"config.example.toml lacks {missing}"
    unknown = [k for k in _documented() if k not in {f.name for f in dataclasses.fields(Settings)}]
    assert not unknown, f"config.example.toml documents keys Settings does not have: {unknown}"


def test_every_key_has_one_help_text_in_settings():
    for key in KEYS:
        text = setting_help(key)
        assert len(text) > 20 and text.endswith((".", ")")) and "  " not in text, f"{key}: {text!r}"


def test_example_gives_each_key_the_settings_help():
    """The comment above each key in config.example.toml is settings.py's help, word for word
    (edit the help there, then re-wrap the comment: the failure shows the expected lines)."""
    texts = _example_texts()
    for key in KEYS:
        expected = textwrap.fill(
            setting_help(key),
            100,
            initial_indent="# ",
            subsequent_indent="# ",
            break_long_words=False,
            break_on_hyphens=False,
        )
        assert texts.get(key) == setting_help(key), (
            f"config.example.toml: the comment above {key} should read\n{expected}"
        )


def test_mitmproxy_option_help_is_the_settings_help(monkeypatch):
    """``--set headroom_<key>`` is declared for every key with settings.py's help, through the
    addon's real ``load`` hook (a loader that records what it is given)."""
    from headroom_core import heap

    monkeypatch.setattr(heap, "limit_arenas", lambda n=2: False)  # not this process's malloc
    spec = importlib.util.spec_from_file_location("headroom_options_under_test", OPTIONS_ADDON)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    declared = {}

    class Loader:
        def add_option(self, name, typespec, default, help):
            declared[name] = (default, help)

    mod.HeadroomOptions(mod.State()).load(Loader())
    assert declared == {f"headroom_{k}": (None, setting_help(k)) for k in KEYS}


def _doc_settings_rows() -> list[tuple[list[str], str]]:
    """The settings table of docs/configuration.md (under ``## Settings``): each row's keys (a
    cell may name several: ``a`` / ``b``) and its default cell."""
    section = CONFIGURATION_DOC.read_text().split("\n## Settings\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("| `") else []
        if len(cells) >= 3:
            rows.append((re.findall(r"`(\w+)`", cells[0]), cells[1]))
    return rows


def test_doc_settings_table_lists_every_key_at_its_default():
    rows = _doc_settings_rows()
    listed = [k for keys, _ in rows for k in keys]
    assert sorted(listed) == sorted(KEYS), (
        f"docs/configuration.md settings table: missing {sorted(set(KEYS) - set(listed))}, unknown {sorted(set(listed) - set(KEYS))}, twice {sorted({k for k in listed if listed.count(k) > 1})}"
    )
    defaults = Settings()
    for keys, cell in rows:
        shown = [d.strip() for d in cell.split(" / ")]
        for key, d in zip(keys, shown if len(shown) == len(keys) else [cell] * len(keys)):
            value = getattr(defaults, key)
            if isinstance(value, bool):
                assert d == str(value).lower(), f"docs/configuration.md: {key} default {d!r}, settings: {value!r}"
            elif isinstance(value, (int, float)):
                assert float(d.replace(",", "")) == value, (
                    f"docs/configuration.md: {key} default {d!r}, settings: {value!r}"
                )


def test_example_defaults_are_the_real_defaults(tmp_path):
    doc = _documented()
    doc.pop("home")  # set through HEADROOM_HOME; its default depends on the machine
    (tmp_path / "config.toml").write_text("\n".join(f"{k} = {v}" for k, v in doc.items()))
    loaded = load_settings(env={"HEADROOM_HOME": str(tmp_path)})
    defaults = Settings(home=str(tmp_path))
    assert loaded == defaults
    assert set(sources(env={"HEADROOM_HOME": str(tmp_path)}).values()) == {
        str(tmp_path / "config.toml"),
        "environment HEADROOM_HOME",
    }


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


@pytest.mark.parametrize(
    "line,said",
    [
        # a size limit refuses what is over it: 0 would refuse every request (no "0 = off" here)
        ("max_body_bytes = 0", "max_body_bytes = 0 must be at least 1 (bytes)"),
        ("ws_max_frame_bytes = 0", "ws_max_frame_bytes = 0 must be at least 1 (bytes)"),
        ("min_saving_ratio = 7.5", "min_saving_ratio = 7.5 must be at least 0 and below 1"),
        ("min_saving_ratio = 1", "min_saving_ratio = 1.0 must be at least 0 and below 1"),
        ("min_saving_ratio = -0.1", "min_saving_ratio = -0.1 must be at least 0 and below 1"),
        ("min_tokens = -5", "min_tokens = -5 must not be negative"),
    ],
)
def test_values_out_of_their_range_name_the_key_and_the_source(tmp_path, line, said):
    (tmp_path / "config.toml").write_text(line + "\n")
    with pytest.raises(SettingsError) as e:
        load_settings(env={"HEADROOM_HOME": str(tmp_path)})
    assert str(e.value).startswith(f"{tmp_path / 'config.toml'}: {said}") and "\n" not in str(e.value)
    key = line.split()[0]
    with pytest.raises(SettingsError, match=f"^environment HEADROOM_{key.upper()}: {key} = "):
        load_settings(env={f"HEADROOM_{key.upper()}": line.split("= ")[1]})
    with pytest.raises(SettingsError, match=f"^option: {key} = "):
        load_settings({key: line.split("= ")[1]}, env={})


def test_the_edges_of_the_ranges_are_accepted():
    s = load_settings({"max_body_bytes": "1", "ws_max_frame_bytes": "1", "min_saving_ratio": "0"}, env={})
    assert (s.max_body_bytes, s.ws_max_frame_bytes, s.min_saving_ratio) == (1, 1, 0.0)
    assert load_settings({"min_saving_ratio": "0.99"}, env={}).min_saving_ratio == 0.99
