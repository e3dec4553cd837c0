"""compress_prose and compress_html on real documents, with the real embedding model.

Prose: the long descriptions (README files) that installed packages ship in their METADATA.
HTML: pages that Python's own ``pydoc`` renders for real standard-library modules.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import json
import os
import pydoc
import re
import subprocess
import sys
from pathlib import Path

import pytest

from headroom_core.compress import embeddings
from headroom_core.compress.html import compress_html, readable_text
from headroom_core.compress.json_select import query_words
from headroom_core.compress.markers import MARKER_RE, offload_key
from headroom_core.compress.text import (
    IDENT_RE,
    NUMBER_RE,
    PATH_RE,
    QUERY_MAX_SHARE,
    compress_prose,
    segment,
    select_passages,
)

REPO = Path(__file__).resolve().parents[2]


def _readme(dist: str) -> str:
    """The long description a package ships (its README), without the metadata headers."""
    meta = md.distribution(dist).read_text("METADATA")
    return meta[meta.index("\n\n") + 2 :]


def _pydoc_page(module_name: str) -> str:
    mod = __import__(module_name, fromlist=["_"])
    return pydoc.html.page(pydoc.describe(mod), pydoc.html.document(mod, module_name))


@pytest.fixture(scope="module")
def model():
    """The real all-MiniLM-L6-v2, loaded once (blocking: this is a test, not a request)."""
    return embeddings.get_model()


def _pieces(out: str) -> list[str]:
    """The kept text of a compressed output: what lies between markers, stripped."""
    return [p.strip() for p in MARKER_RE.sub("\x00", out).split("\x00") if p.strip()]


def _check_extract(text: str, out: str) -> int:
    """Kept text is verbatim and in order; markers count the rest. Returns passages dropped."""
    pos = 0
    for piece in _pieces(out):
        at = text.find(piece, pos)
        assert at >= 0, f"kept text not verbatim/in order: {piece[:80]!r}"
        pos = at + len(piece)
    key = offload_key(text)
    dropped = 0
    for m in MARKER_RE.finditer(out):
        assert m.group("key") == key
        n, of = re.fullmatch(r"(\d+) of (\d+) passages", m.group("what")).groups()
        assert int(of) == len(segment(text))
        dropped += int(n)
    return dropped


def test_embed_api(model):
    assert embeddings.is_loaded() and embeddings.available()
    v = embeddings.embed(
        ["The proxy compresses tool outputs.", "Compression of tool results by a proxy.", "Bananas are yellow."]
    )
    assert v.shape == (3, embeddings.DIMENSIONS) and v.dtype.name == "float32"
    assert abs(float((v * v).sum(axis=1).max()) - 1.0) < 1e-4
    assert float(v[0] @ v[1]) > float(v[0] @ v[2]) + 0.2  # similar meaning, closer vectors
    assert embeddings.embed([]).shape == (0, embeddings.DIMENSIONS)
    assert embeddings.get_model() is model


def test_missing_model_folder_fails_clearly(tmp_path):
    e = embeddings.embedder(str(tmp_path / "no-model"))
    with pytest.raises(embeddings.EmbeddingModelUnavailable, match="not loaded"):
        e.embed(["x"], wait=False)
    with pytest.raises(embeddings.EmbeddingModelUnavailable, match="no sentence-transformers model folder"):
        e.embed(["x"])
    assert e.failed and not e.loaded


def test_segment_covers_every_character_once():
    text = _readme("openai")
    passages = segment(text)
    covered = bytearray(len(text))
    for p in passages:
        assert p.start < p.end and not text[p.start].isspace() and not text[p.end - 1].isspace()
        for i in range(p.start, p.end):
            assert not covered[i]
            covered[i] = 1
    assert all(covered[i] or text[i].isspace() for i in range(len(text)))
    kinds = {p.kind for p in passages}
    assert {"heading", "sentence", "code", "item"} <= kinds
    fences = [text[p.start : p.end] for p in passages if p.kind == "code" and text[p.start : p.end].startswith("```")]
    assert fences and all(f.endswith("```") for f in fences)


@pytest.mark.parametrize(
    "dist, query",
    [
        ("openai", "How do I configure retries and timeouts for requests?"),
        ("tqdm", "show a progress bar for pandas dataframes"),
        ("pydantic", ""),
    ],
)
def test_prose_keeps_query_passages_verbatim(dist, query, counter, model):
    text = _readme(dist)
    res = compress_prose(text, query, counter, wait_for_model=True)
    assert res.changed and res.kind == "text" and res.strategy == "extract", res.reason
    assert "embedding ranking" in res.reason
    before, after = counter.count(text), counter.count(res.text)
    assert after <= 0.9 * before
    assert len(res.offloads) == 1 and res.offloads[0].original == text
    assert res.offloads[0].key == offload_key(text)
    dropped = _check_extract(text, res.text)
    assert dropped > 0

    passages = [text[p.start : p.end] for p in segment(text)]
    # Headings stay: the outline of the document.
    for p in segment(text):
        if p.kind == "heading":
            assert text[p.start : p.end] in res.text
    # Every passage with a discriminating word of the query is kept.
    forced = 0
    for w in query_words(query):
        rx = re.compile(r"(?<![^\W_])" + re.escape(w), re.IGNORECASE)
        hits = [p for p in passages if rx.search(p)]
        if 0 < len(hits) <= QUERY_MAX_SHARE * len(passages):
            for p in hits:
                assert p in res.text, f"passage with query word {w!r} dropped: {p[:80]!r}"
            forced += len(hits)
    if query:
        assert forced > 0
    # Numbers, paths and identifiers of kept passages are all there, as written.
    kept = [p for p in passages if p in res.text]
    for p in kept:
        for rx in (NUMBER_RE, PATH_RE, IDENT_RE):
            for m in rx.finditer(p):
                assert m.group(0) in res.text


def test_prose_same_input_same_bytes(counter, model):
    text = _readme("openai")
    q = "How do I configure retries and timeouts for requests?"
    a = compress_prose(text, q, counter, wait_for_model=True)
    b = compress_prose(text, q, counter, wait_for_model=True)
    assert a.text == b.text and a.reason == b.reason


def test_prose_declines_while_model_loads_then_matches_across_processes(counter, model):
    """A fresh process declines (never another ranker's bytes), then gives this process's bytes."""
    text = _readme("openai")
    q = "How do I configure retries and timeouts for requests?"
    here = compress_prose(text, q, counter, wait_for_model=True).text
    script = f"""
import hashlib, importlib.metadata as md, json, sys
from pathlib import Path
from headroom_core.compress.text import compress_prose
from headroom_core.compress.tokens import TokenCounter
from headroom_core.compress import embeddings
meta = md.distribution("openai").read_text("METADATA")
text = meta[meta.index("\\n\\n") + 2 :]
c = TokenCounter({str(Path.home() / ".headroom")!r})
first = compress_prose(text, {q!r}, c)
embeddings.embedder("").wait()
second = compress_prose(text, {q!r}, c)
print(json.dumps([first.changed, first.reason, second.changed, hashlib.sha256(second.text.encode()).hexdigest()]))
"""
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    changed1, reason1, changed2, digest = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (changed1, reason1) == (False, "model loading")
    assert changed2 and digest == hashlib.sha256(here.encode()).hexdigest()


def test_lexical_ranker_without_model(counter):
    text = _readme("tqdm")
    a = select_passages(text, "pandas progress_apply", counter, use_model=False)
    b = select_passages(text, "pandas progress_apply", counter, use_model=False)
    assert a == b and a.ranker == "lexical"
    kept_text = [text[a.passages[i].start : a.passages[i].end] for i in a.reasons]
    assert any("progress_apply" in t for t in kept_text)


def test_prose_unchanged_reasons(counter):
    assert compress_prose("", "", counter).reason == "not text"
    assert compress_prose("A short note about nothing.", "", counter).reason == "small"
    assert compress_prose("x\ud800" * 300, "", counter).reason == "nothing to drop"  # a lone surrogate is text too


@pytest.mark.parametrize(
    "module_name, query, must_keep",
    [
        ("argparse", "how does parse_known_args handle unknown options", "parse_known_args"),
        ("json", "what does object_pairs_hook do", "object_pairs_hook"),
        ("email.message", "", None),
    ],
)
def test_html_pages_become_readable_text(module_name, query, must_keep, counter, model):
    html = _pydoc_page(module_name)
    md_text = readable_text(html)
    assert counter.count(md_text) < 0.5 * counter.count(html)
    assert not re.search(r"<(?:font|td|tr|table|a\s|span|div|br|tt|dl|dd|dt)\b", md_text, re.I)
    assert "\\_" not in md_text  # identifiers are not Markdown-escaped

    res = compress_html(html, query, counter, wait_for_model=True)
    assert res.changed and res.kind == "html", res.reason
    assert res.strategy in ("readable", "readable+extract")
    key = offload_key(html)
    first, _, rest = res.text.partition("\n")
    m = MARKER_RE.fullmatch(first)
    assert m and m.group("key") == key and "html markup" in m.group("what")
    assert all(k.group("key") == key for k in MARKER_RE.finditer(res.text))
    assert len(res.offloads) == 1 and res.offloads[0].original == html and res.offloads[0].key == key
    for piece in _pieces(rest):  # kept text is the page's readable text, verbatim, in order
        assert piece in md_text
    if must_keep:
        assert must_keep in res.text
    assert counter.count(res.text) <= 0.9 * counter.count(html)


# A small hand-made page: the parts a real page has around its content.
PAGE = """<!DOCTYPE html>
<html><head><title>Retry settings &mdash; client docs</title>
<style>body { color: red }</style><script>var tracking_id = "UA-123";</script></head>
<body><nav><a href="/">Home</a> | <a href="/docs">Docs</a></nav>
<main><h1>Retry settings</h1>
<p>Set <code>max_retries</code> on the client; the default is 2 and the backoff is 0.5&nbsp;s.</p>
<pre>client = Client(max_retries=5, timeout=20.0)</pre>
<table><tr><th>option</th><th>default</th></tr><tr><td>max_retries</td><td>2</td></tr></table>
</main><footer>Copyright</footer><!-- build 42 --></body></html>"""


def test_html_keeps_main_content_only():
    text = readable_text(PAGE)
    assert text.startswith("# Retry settings")
    assert "tracking_id" not in text and "color: red" not in text and "Home" not in text
    assert "Copyright" not in text and "build 42" not in text
    assert "max_retries" in text and "0.5 s" in text
    assert "client = Client(max_retries=5, timeout=20.0)" in text
    assert "| max_retries | 2 |" in text


def test_html_unchanged_reasons(counter):
    assert compress_html("just words, no markup " * 100, "", counter).reason == "not html"
    assert compress_html("<p>tiny</p>", "", counter).reason == "small"
    assert compress_html("<div>" + "<span></span>" * 300 + "</div>", "", counter).reason == "not html"
