"""What keeps resident memory down, checked for the values it must keep: the embedding model
(sentence-transformers) is loaded only when prose or memory needs it, the decision cache keeps
no copies of originals, freed heap goes back to the system. Memory figures themselves are
measured in ``bench/bench_load.py``, not asserted here."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from headroom_core import heap
from headroom_core.cache.decisions import DecisionCache
from headroom_core.compress import embeddings
from headroom_core.compress.result import CompressResult, Offload
from tests.support.clients import http_client
from tests.support.upstream import Reply
from tests.unit.test_request_plan import anthropic_request


def test_lone_surrogates_are_counted_and_embedded(counter):
    """Any JSON string is counted and embedded: a lone surrogate (half an emoji) reads as U+FFFD,
    with the model sentence-transformers loads."""
    assert counter.count("x\ud83d y") == counter.count("x\ufffd y") > 0
    v = embeddings.embed(["half an emoji \ud83d here", "half an emoji \ufffd here"])
    assert v.shape == (2, embeddings.DIMENSIONS) and v.dtype == np.float32
    assert float(np.abs(v[0] - v[1]).max()) == 0.0
    assert type(embeddings.get_model()).__name__ == "SentenceTransformer"


def test_decision_cache_memory_holds_no_originals():
    cache = DecisionCache(None)
    original = "line of a log\n" * 5000
    changed = CompressResult(
        "short [marker]", True, "log", "templates", "r", (Offload("ab" * 12, original, "4990 of 5000 lines"),)
    )
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
    """JSON is compressed without the model (torch is not even imported); the first prose output
    starts loading it (that request passes as it is); once loaded, prose is compressed."""
    from tests.support.proxy import ADDON_SCRIPT
    from tests.unit.test_request_plan import github_scenario

    px = proxy_factory(ADDON_SCRIPT, options={"headroom_compress_timeout_seconds": "600"})
    upstream.responder = lambda rec: Reply.text("ok")

    def post(body: dict) -> str:
        r = c.post(
            upstream.url + "/v1/messages",
            content=json.dumps(body).encode(),
            headers={"content-type": "application/json"},
        )
        assert r.status_code == 200
        return json.loads(upstream.last.body)["messages"][2]["content"][0]["content"]

    with http_client(px, timeout=300) as c:
        payload = github_scenario("paginate-issues.json")
        assert len(post(anthropic_request(payload))) < len(payload) / 2
        assert "embedding model" not in px.log_text()
        assert "libtorch" not in _maps(px.process.pid)
        para = "The release checklist asks every maintainer {i} to confirm the changelog, bump versions and tag the commit before publishing. "
        prose = "\n\n".join((para * 3).format(i=i) for i in range(80))
        assert post(anthropic_request(prose, "what does the checklist ask?")) == prose  # "model loading"
        px.wait_for_log(r"embedding model \S+ loaded", timeout=300)
        # a new session (another first message): the live zone, compressed now
        sent = post(anthropic_request(prose, "which steps come before publishing?"))
        assert len(sent) < len(prose) / 2
