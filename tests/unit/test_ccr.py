"""CCR: markers, the originals store (TTL, LRU, restarts), the retrieve tool's answers."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from headroom_core.ccr import retrieve
from headroom_core.ccr.store import OriginalsStore
from headroom_core.compress import markers
from headroom_core.db.engine import open_database
from headroom_core.db.sealed import Sealer, SecretError, load_secret
from headroom_core.wire.blocks import ToolCall


def test_marker_grammar_roundtrip():
    key = markers.offload_key("original text")
    m = markers.make_marker("480 of 500 items", key)
    assert m == f"[headroom omitted 480 of 500 items; headroom_retrieve key={key}]"
    assert markers.find_marker_keys(f"x {m.replace(key, key.upper())} y") == [key]  # keys match case-insensitively
    assert len(key) == 24 and key == key.lower()
    with pytest.raises(ValueError):
        markers.make_marker("a;b", key)
    with pytest.raises(ValueError):
        markers.make_marker("ok", "xyz")


def _store(tmp_path, ttl=3600, max_bytes=10_000, secret="secret.key"):
    sealer = Sealer(load_secret(tmp_path / secret))
    return OriginalsStore(open_database(f"sqlite:///{tmp_path / 'h.db'}"), ttl, max_bytes, sealer)


def test_store_roundtrip_survives_reopen(tmp_path):
    text = '[{"id": 1, "name": "é"}]\n' * 10
    key = markers.offload_key(text)
    _store(tmp_path).put(key, text, "json")
    assert _store(tmp_path).get(key).text == text


def test_store_is_sealed_at_rest_and_scoped(tmp_path):
    """Originals are encrypted in the database file; another key reads nothing, another scope
    gets the answer an unknown key gets; a lone surrogate round-trips."""
    text = "AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY \ud83d end"
    key = markers.offload_key(text)
    s = _store(tmp_path)
    s.put(key, text, "text", "scope-a")
    assert s.get(key, "scope-a").text == text
    assert s.get(key, "scope-b").text is None
    assert s.get(key).text is None
    raw = (tmp_path / "h.db").read_bytes() + b"".join(p.read_bytes() for p in tmp_path.glob("h.db-wal"))
    assert b"AKIAIOSFODNN7EXAMPLE" not in raw and b"wJalrXUtnFEMI" not in raw
    assert _store(tmp_path, secret="other.key").get(key, "scope-a").text is None
    assert retrieve.answer(ToolCall("c", retrieve.TOOL_NAME, {"key": key}), s, "scope-b") == retrieve.answer(
        ToolCall("c", retrieve.TOOL_NAME, {"key": "0" * 24}), s, "scope-b"
    ).replace("0" * 24, key)


def test_secret_file_is_owner_only(tmp_path):
    p = tmp_path / "home" / "secret.key"
    first = load_secret(p)
    assert len(first) == 32 and load_secret(p) == first
    assert p.stat().st_mode & 0o777 == 0o600


def test_a_secret_file_on_a_read_only_file_system_says_why(tmp_path):
    """The clean-up of the half-written file (EROFS there, even for a file that was never made)
    must not hide why the key cannot be created. A real read-only bind mount (root only)."""
    ro = tmp_path / "ro"
    ro.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(["mount", "--bind", "-o", "ro", str(ro), str(ro)], capture_output=True).returncode != 0
    ):
        pytest.skip("a read-only bind mount needs root and mount(8)")
    try:
        p = ro / "secret.key"
        with pytest.raises(SecretError, match=f"^cannot create the secret key file {p}: .*Read-only file system"):
            load_secret(p)
    finally:
        subprocess.run(["umount", str(ro)], check=True)


def test_keep_restores_an_expired_original_from_the_clients_copy(tmp_path):
    s = _store(tmp_path, ttl=1)
    text = "original " * 20
    key = markers.offload_key(text)
    s.put(key, text, "text", "sc")
    time.sleep(1.2)
    assert s.get(key, "sc").text is None
    s.keep(key, text, "sc")
    assert s.get(key, "sc").text == text


def test_store_ttl_expires(tmp_path):
    s = _store(tmp_path, ttl=1)
    s.put("a" * 24, "x", "json")
    assert s.get("a" * 24).text == "x"
    time.sleep(1.2)
    assert s.get("a" * 24).text is None


def test_store_lru_eviction_keeps_recently_used(tmp_path):
    s = _store(tmp_path, max_bytes=2500)
    keys = [f"{i:024x}" for i in range(3)]
    for k in keys:
        s.put(k, "y" * 1000, "json")
        time.sleep(0.01)
    # 3000 bytes > 2500: the least recently used (keys[0]) went
    assert s.get(keys[0]).text is None
    assert s.get(keys[1]).text and s.get(keys[2]).text


def test_retrieve_answers(tmp_path):
    s = _store(tmp_path)
    text = "the original"
    key = markers.offload_key(text)
    s.put(key, text, "json")
    assert retrieve.answer(ToolCall("c", retrieve.TOOL_NAME, {"key": key.upper()}), s) == text
    assert 'needs a "key"' in retrieve.answer(ToolCall("c", retrieve.TOOL_NAME, {}), s)
    assert "not a retrieval key" in retrieve.answer(ToolCall("c", retrieve.TOOL_NAME, {"key": "zz"}), s)
    assert "no original is stored" in retrieve.answer(ToolCall("c", retrieve.TOOL_NAME, {"key": "0" * 24}), s)
    assert "needs a" in retrieve.answer(ToolCall("c", retrieve.TOOL_NAME, None), s)
