"""Token counts equal tiktoken's cl100k_base; settings precedence and errors."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from headroom_core.compress.tokens import CL100K_PATTERN, TokenCounter, TokenizerUnavailable
from headroom_core.settings import Settings, SettingsError, load_settings

SAMPLES = [
    "Hello world, this is   a test of cl100k! 12345 été",
    "def f(x):\n    return x ** 2  # squares\n\n\n",
    '{"id": 515435940, "node_id": "R_kgDOHrjtpA", "private": false}',
    "日本語のテキストと emoji 🙂 and tabs\t\tend",
]


def test_counts_equal_tiktoken_on_real_text(counter):
    import tiktoken
    import tiktoken.load

    spec = importlib.util.find_spec("tiktoken_ext")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "cl100k_base.tiktoken"
    enc = tiktoken.Encoding(
        "cl100k_base",
        pat_str=CL100K_PATTERN,
        mergeable_ranks=tiktoken.load.load_tiktoken_bpe(str(path)),
        special_tokens={},
    )
    real = Path(importlib.util.find_spec("mitmproxy.http").origin).read_text()[:20000]
    for text in SAMPLES + [real]:
        assert counter.count(text) == len(enc.encode(text))
    assert counter.count("") == 0


def test_missing_tokenizer_file_is_a_clear_error(tmp_path):
    c = TokenCounter(tmp_path, tokenizer_path=str(tmp_path / "nope.json"))
    with pytest.raises(TokenizerUnavailable, match="does not exist"):
        c.count("x")


def test_settings_precedence(tmp_path):
    (tmp_path / "config.toml").write_text("min_tokens = 111\nexclude_tools = ['mcp__*']\nretrieve_max_rounds = 7\n")
    env = {"HEADROOM_HOME": str(tmp_path), "HEADROOM_MIN_TOKENS": "222", "HEADROOM_COMPRESS": "off"}
    s = load_settings({"min_tokens": "333"}, env=env)
    assert s.min_tokens == 333  # option > env > file
    assert s.compress is False  # env > default
    assert s.exclude_tools == ("mcp__*",) and s.retrieve_max_rounds == 7  # file > default
    assert s.database_url == f"sqlite:///{tmp_path / 'headroom.db'}"
    assert load_settings(env={"HEADROOM_HOME": str(tmp_path)}).min_tokens == 111
    assert Settings().min_tokens == 250


@pytest.mark.parametrize(
    "config,env,overrides,match",
    [
        ("bogus = 1\n", {}, {}, "unknown key 'bogus'"),
        ("min_tokens = 'many'\n", {}, {}, "min_tokens"),
        ("", {"HEADROOM_COMPRESS": "maybe"}, {}, "HEADROOM_COMPRESS"),
        ("", {}, {"nope": 1}, "unknown key 'nope'"),
        ("min_tokens = \n", {}, {}, "config.toml"),
    ],
)
def test_settings_errors_name_the_source(tmp_path, config, env, overrides, match):
    (tmp_path / "config.toml").write_text(config)
    with pytest.raises(SettingsError, match=match):
        load_settings(overrides, env={"HEADROOM_HOME": str(tmp_path), **env})


@pytest.mark.parametrize(
    "ua,name",
    [
        ("claude-cli/1.0.62 (external, cli)", "claude-cli"),
        ("Anthropic/Python 0.125.0", "anthropic-python"),
        ("OpenAI/Python 2.54.0", "openai-python"),
        ("codex_cli_rs/0.1 (Linux)", "codex_cli_rs"),
        ("", "unknown"),
    ],
)
def test_client_names(ua, name):
    from headroom_core.clients import client_name

    assert client_name(ua) == name


def test_cl100k_is_read_from_the_shipped_file_and_nothing_is_written(tmp_path, monkeypatch):
    """The vocabulary comes from the installed package's data: a new home (and HOME) gets no
    file, and cl100k_base's published ids hold ("hello world" is 15339, 1917 in tiktoken's README)."""
    from headroom_core.compress.tokens import load_cl100k

    monkeypatch.setenv("HOME", str(tmp_path))
    c = TokenCounter(tmp_path / ".headroom")
    assert c.count("hello world") == 2 and c.lengths(["hello world", "", "hello world" * 3]) == [2, 0, 6]
    assert list(tmp_path.rglob("*")) == []
    assert load_cl100k()._enc.encode_ordinary("hello world") == [15339, 1917]


def test_a_named_tokenizer_json_is_counted_with_tokenizers(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({"[UNK]": 0, "a": 1, "b": 2}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    c = TokenCounter(tmp_path, tokenizer_path=str(tmp_path / "tokenizer.json"))
    assert c.count("a b zz a") == 4 and c.count("a " * 5000) == 5000
