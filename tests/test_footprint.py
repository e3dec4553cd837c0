"""What keeps resident memory down, checked for the values it must keep: the embedding model
is loaded only when needed and without sentence-transformers' extra imports (same vectors),
token counts are the same whichever BPE counts them, the decision cache keeps no copies of
originals, freed heap goes back to the system. Memory figures themselves are measured in
``bench/bench_load.py``, not asserted here."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from headroom_core import heap
from headroom_core.cache.decisions import DecisionCache
from headroom_core.compress import embeddings
from headroom_core.compress.bert_numpy import BertSentenceEncoder, plain_pipeline
from headroom_core.compress.result import CompressResult, Offload
from headroom_core.compress.tokens import TokenCounter, build_cl100k, shared_cache_dir
from tests.support.clients import http_client
from tests.support.upstream import Reply
from tests.test_request_plan import anthropic_request

TEXTS = [
    "The proxy compresses tool outputs.",
    "",
    "   padded on both sides   ",
    "word " * 700,  # past the model's 256 word pieces: truncated the same way
    "naïve café 😀 日本語",
    "Compression of tool results by a proxy.",
    "\ufffd half an emoji",
]


def test_numpy_encoder_gives_the_sentence_transformers_vectors():
    from sentence_transformers import SentenceTransformer

    path = embeddings.default_model_path()
    ours = BertSentenceEncoder(path).encode(TEXTS * 3, batch_size=4, normalize_embeddings=True)
    theirs = SentenceTransformer(path, device="cpu", local_files_only=True).encode(TEXTS * 3, batch_size=4, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
    assert ours.shape == theirs.shape == (21, embeddings.DIMENSIONS) and ours.dtype == np.float32
    assert float(np.abs(ours - theirs).max()) < 1e-5


def test_only_plain_folders_run_without_sentence_transformers(tmp_path):
    path = Path(embeddings.default_model_path())
    assert plain_pipeline(str(path)) == (256, True)
    other = tmp_path / "with-dense"
    shutil.copytree(path, other, ignore=shutil.ignore_patterns("*.safetensors", "*.bin"))
    modules = json.loads((other / "modules.json").read_text())
    modules.insert(2, {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
    (other / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(ValueError, match="modules"):
        plain_pipeline(str(other))
    with pytest.raises(ValueError):
        plain_pipeline(str(tmp_path))  # no modules.json at all


def test_packaged_model_loads_without_scipy_sklearn_or_sentence_transformers():
    code = (
        "import sys\n"
        "from headroom_core.compress import embeddings\n"
        "v = embeddings.embed(['a proxy for coding agents'])\n"
        "assert v.shape == (1, 384), v.shape\n"
        "print(sorted(m for m in ('sentence_transformers', 'sklearn', 'scipy', 'sympy') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_counts_equal_whichever_bpe_counts(counter, tmp_path):
    """The default counter (tiktoken's BPE over the shipped cl100k_base file) and the converted
    tokenizer.json read by ``tokenizers`` give the same counts."""
    build_cl100k(shared_cache_dir(tmp_path))
    hf = TokenCounter(tmp_path, tokenizer_path=str(shared_cache_dir(tmp_path) / "cl100k_base.tokenizer.json"))
    real = Path(json.__file__).read_text()[:30_000]
    for text in TEXTS + [real, "x\ud83d y", "{\n  \"a\": [1, 2]\n}\n" * 50]:
        assert counter.count(text) == hf.count(text), text[:40]


def test_decision_cache_memory_holds_no_originals():
    cache = DecisionCache(None)
    original = "line of a log\n" * 5000
    changed = CompressResult("short [marker]", True, "log", "templates", "r", (Offload("ab" * 12, original, "4990 of 5000 lines"),))
    cache.put("h1", changed, 10_000, 100)
    cache.put("h2", CompressResult.unchanged(original + "x", "text", "no gain"), 10_001, 10_001)
    kept = [e[0] for e in cache._mem.values()]
    assert all(r.text != original and all(o.original == "" for o in r.offloads) for r in kept)
    assert sum(len(r.text) for r in kept) < 100
    res, before, after = cache.get("h1", original)
    assert res == changed and (before, after) == (10_000, 100)
    res, _, _ = cache.get("h2", original + "x")
    assert res.text == original + "x" and not res.changed


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc_trim")
def test_heap_trim_works_on_glibc():
    assert heap.trim() is True


def _maps(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/<pid>/maps")
def test_proxy_loads_the_embedding_model_only_when_prose_needs_it(upstream, proxy_factory):
    """JSON is compressed without the model; the first prose output starts loading it (that
    request passes as it is); once loaded, prose is compressed. torch is never loaded."""
    from tests.support.proxy import ADDON_SCRIPT
    from tests.test_request_plan import github_scenario

    px = proxy_factory(ADDON_SCRIPT, options={"headroom_compress_timeout_seconds": "600"})
    upstream.responder = lambda rec: Reply.text("ok")

    def post(body: dict) -> str:
        r = c.post(upstream.url + "/v1/messages", content=json.dumps(body).encode(), headers={"content-type": "application/json"})
        assert r.status_code == 200
        return json.loads(upstream.last.body)["messages"][2]["content"][0]["content"]

    with http_client(px, timeout=300) as c:
        payload = github_scenario("paginate-issues.json")
        assert len(post(anthropic_request(payload))) < len(payload) / 2
        assert "embedding model" not in px.log_text()
        para = "The release checklist asks every maintainer {i} to confirm the changelog, bump versions and tag the commit before publishing. "
        prose = "\n\n".join((para * 3).format(i=i) for i in range(80))
        assert post(anthropic_request(prose, "what does the checklist ask?")) == prose  # "model loading"
        px.wait_for_log(r"embedding model \S+ loaded", timeout=300)
        # a new session (another first message): the live zone, compressed now
        sent = post(anthropic_request(prose, "which steps come before publishing?"))
        assert len(sent) < len(prose) / 2
    assert "libtorch" not in _maps(px.process.pid)
