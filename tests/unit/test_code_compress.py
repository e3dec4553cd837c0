"""The tree-sitter code compressor on real source: installed packages (alembic, mitmproxy,
sqlalchemy, werkzeug/urwid JavaScript) and the TypeScript/TSX files a real Claude Code session
wrote (../shared/corpus/claude-code-sessions). Go, Rust and Java have no real file on this
machine; small hand-made fixtures below cover their grammars."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
from pathlib import Path

import pytest

from headroom_core.ccr import retrieve
from headroom_core.ccr.store import OriginalsStore
from headroom_core.compress.code import compress_code, defined_names, guess_language, language_for_path, parses
from headroom_core.compress.markers import MARKER_RE, offload_key
from headroom_core.compress.numbered import split_numbered
from headroom_core.db.engine import open_database
from headroom_core.wire.blocks import ToolCall
from tests.conftest import corpus_dir


def package_modules(pkg: str, names: list[str]) -> list[Path]:
    root = Path(importlib.util.find_spec(pkg).origin).parent
    return [root / n for n in names]


# Large, varied modules (decorators, nested classes, overloads, async, long docstrings).
PY_MODULES = (
    package_modules(
        "alembic",
        ["command.py", "autogenerate/render.py", "operations/ops.py", "runtime/migration.py", "script/revision.py"],
    )
    + package_modules(
        "mitmproxy",
        ["flow.py", "http.py", "addons/proxyserver.py", "proxy/layers/http/__init__.py", "tools/console/flowlist.py"],
    )
    + package_modules(
        "sqlalchemy",
        ["orm/session.py", "sql/schema.py", "engine/base.py", "orm/relationships.py", "util/langhelpers.py"],
    )
)


def top_level_names(code: str) -> list[str]:
    """Module-level names by Python's own parser (independent of tree-sitter): defs, classes,
    assignment targets, imports; plus every method name of every top-level class."""
    names = []
    for node in ast.parse(code).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
            if isinstance(node, ast.ClassDef):
                names += [
                    f"{node.name}.{b.name}"
                    for b in node.body
                    if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                ]
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names += [a.asname or a.name for a in node.names]
    return names


@pytest.mark.parametrize("path", PY_MODULES, ids=lambda p: "/".join(p.parts[-2:]))
def test_real_python_module_parses_and_keeps_every_top_level_name(path, counter):
    text = path.read_text(encoding="utf-8")
    res = compress_code(text, "", counter, language="python")
    assert res.changed, res.reason
    assert res.kind == "code" and res.strategy == "outline"
    ast.parse(res.text)  # CPython's parser accepts it
    assert parses(res.text, "python")
    assert top_level_names(res.text) == top_level_names(text)
    assert defined_names(res.text, "python") == defined_names(text, "python")
    assert counter.count(res.text) <= 0.9 * counter.count(text)
    # one offload, the whole original, and every marker names its key
    (off,) = res.offloads
    assert off.original == text and off.key == offload_key(text)
    keys = {m.group("key") for m in MARKER_RE.finditer(res.text)}
    assert keys == {off.key}
    # the first line of every top-level or class-level def and its decorators stay byte for byte
    lines, kept = text.split("\n"), set(res.text.split("\n"))
    for node in outline_nodes(text):
        for ln in [node.lineno] + [d.lineno for d in node.decorator_list]:
            assert lines[ln - 1] in kept, lines[ln - 1]


def outline_nodes(code: str) -> list:
    """Top-level defs and classes, and the defs of top-level classes (Python's ast)."""
    out = []
    for node in ast.parse(code).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.append(node)
            if isinstance(node, ast.ClassDef):
                out += [b for b in node.body if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    return out


def test_docstring_first_line_kept(counter):
    text = (package_modules("alembic", ["command.py"])[0]).read_text()
    res = compress_code(text, "", counter, language="python")
    assert '    """Initialize a new scripts directory."""' in res.text.splitlines()


def claude_read(text: str, arrow: bool = True) -> str:
    """``text`` as Claude Code's Read tool prints it (``     1→line``; ``cat -n`` uses a tab)."""
    sep = "→" if arrow else "\t"
    return "\n".join(f"{i:6d}{sep}{ln}" for i, ln in enumerate(text.split("\n"), 1))


@pytest.mark.parametrize("arrow", [True, False], ids=["read-arrow", "cat-n-tab"])
def test_numbered_read_keeps_true_line_numbers(arrow, counter):
    src = package_modules("alembic", ["autogenerate/render.py"])[0].read_text()
    shown = claude_read(src, arrow)
    res = compress_code(shown, "", counter, language="python")
    assert res.changed, res.reason
    original = src.split("\n")
    sep = "→" if arrow else "\t"
    for ln in res.text.split("\n"):
        m = re.match(rf"^ *(\d+){sep}(.*)$", ln)
        if m:
            got = m.group(2)
            want = original[int(m.group(1)) - 1]
            # a kept line is the file's line; a shortened docstring keeps that line's start
            assert got == want or (got.rstrip('"') and want.startswith(got.rstrip('"').rstrip())), (
                m.group(1),
                got,
                want,
            )
        else:
            assert MARKER_RE.search(ln) and ln.startswith(" " * 6 + sep), ln
    num = split_numbered(res.text)
    assert num is None  # marker lines carry no number ...
    stripped = "\n".join(re.sub(rf"^ *\d*{sep}", "", ln, count=1) for ln in res.text.split("\n"))
    assert parses(stripped, "python")  # ... and the code without prefixes still parses


@pytest.mark.parametrize("rel", ["werkzeug/debug/shared/debugger.js", "urwid/display/_web.js"])
def test_real_javascript(rel, counter):
    spec = importlib.util.find_spec(rel.split("/")[0])
    path = Path(spec.origin).parent / Path(*rel.split("/")[1:])
    text = path.read_text()
    assert guess_language(text) in ("javascript", "tsx")
    res = compress_code(text, "", counter, language="javascript")
    assert res.changed, res.reason
    assert parses(res.text, "javascript")
    assert defined_names(res.text, "javascript") == defined_names(text, "javascript")


def session_written_files() -> list[tuple[str, str]]:
    """(file_path, content) of every Write call in the real Claude Code sessions."""
    out = []
    for f in sorted(corpus_dir("claude-code-sessions").glob("*.jsonl")):
        for line in f.read_text().splitlines():
            rec = json.loads(line)
            for b in (rec.get("message") or {}).get("content") or []:
                if isinstance(b, dict) and b.get("type") == "tool_use" and b.get("name") == "Write":
                    out.append((b["input"]["file_path"], b["input"]["content"]))
    return out


def test_real_typescript_and_tsx_from_a_session(counter):
    seen = {"typescript": 0, "tsx": 0}
    changed = 0
    for path, content in session_written_files():
        lang = language_for_path(path)
        if lang not in seen:
            continue
        seen[lang] += 1
        assert parses(content, lang), path
        res = compress_code(content, "", counter, min_tokens=50, language=lang)
        if res.changed:
            changed += 1
            assert parses(res.text, lang), path
            assert defined_names(res.text, lang) == defined_names(content, lang), path
    assert seen["typescript"] >= 5 and seen["tsx"] >= 5
    assert changed >= 8


# Hand-made fixtures (no real Go/Rust/Java source is installed on this machine).
GO = """package store

import (
\t"errors"
\t"fmt"
)

// Store keeps values.
type Store struct {
\titems map[string]int
}

// Get returns the value of key.
func (s *Store) Get(key string) (int, error) {
\tif s == nil || s.items == nil {
\t\treturn 0, errors.New("the store has not been opened yet")
\t}
\tv, ok := s.items[key]
\tif !ok {
\t\treturn 0, errors.New("missing")
\t}
\tfmt.Println("got", key)
\treturn v, nil
}
"""
RUST = """use std::collections::HashMap;

/// A store of values.
pub struct Store {
    items: HashMap<String, i64>,
}

impl Store {
    pub fn get(&self, key: &str) -> Option<i64> {
        if self.items.is_empty() {
            println!("the store has not been filled with any values yet");
            return None;
        }
        let v = self.items.get(key);
        if v.is_none() {
            println!("missing {}", key);
        }
        let w = v.copied();
        w
    }
}
"""
JAVA = """package org.example;

import java.util.Map;

public class Store {
    private Map<String, Integer> items;

    public int get(String key) {
        if (items == null || items.isEmpty()) {
            throw new IllegalStateException("the store has not been filled with any values yet");
        }
        Integer v = items.get(key);
        if (v == null) {
            throw new IllegalArgumentException("missing " + key);
        }
        System.out.println(key);
        return v;
    }
}
"""


@pytest.mark.parametrize("lang,src,name", [("go", GO, "Get"), ("rust", RUST, "get"), ("java", JAVA, "get")])
def test_brace_languages(lang, src, name, counter):
    assert guess_language(src) == lang
    res = compress_code(src, "", counter, min_tokens=10, min_saving_ratio=0.0, language=lang)
    assert res.changed, res.reason
    assert parses(res.text, lang)
    assert f"body of {name}, lines" in res.text
    assert defined_names(res.text, lang) == defined_names(src, lang)


def test_unparseable_code_is_kept(counter):
    """A SWE-agent window starts mid-function: it does not parse, so nothing changes."""
    traj = json.loads((corpus_dir("swe-agent") / "pydicom-1458.traj").read_text())
    window = next(s["observation"] for s in traj["trajectory"] if s["action"].startswith("open "))
    numbered = "\n".join(ln for ln in window.split("\n") if re.match(r"^\d+:", ln))
    res = compress_code(numbered, "", counter, min_tokens=10, language="python")
    assert not res.changed and "does not parse" in res.reason


def test_offloaded_code_comes_back_byte_exact(tmp_path, counter):
    text = claude_read(package_modules("mitmproxy", ["flow.py"])[0].read_text())
    res = compress_code(text, "", counter, language="python")
    store = OriginalsStore(open_database(f"sqlite:///{tmp_path / 'h.db'}"), 3600, 10**8)
    for off in res.offloads:
        store.put(off.key, off.original, res.kind)
    for key in {m.group("key") for m in MARKER_RE.finditer(res.text)}:
        assert retrieve.answer(ToolCall("c1", "headroom_retrieve", {"key": key}), store) == text
