"""Seeded fuzzing through a real mitmdump: ``hypothesis`` request bodies of the three dialects
(see ``tests/support/fuzz.py`` for what they hold) sent through ``mitmdump -s
addons/headroom.py`` to a local upstream. For every body: no 5xx of the proxy's own, and the
upstream body is byte-identical or parses and keeps every value except compressed tool-output
text (the oracle, :func:`tests.support.fuzz.check`); at the end, no hook raised and no plan
failed in the proxy's log.

Bounded for the suite: ``HEADROOM_FUZZ_EXAMPLES`` bodies (default 100, a few minutes here),
derandomized (the same bodies every run). The long run is ``bench/bench_fuzz.py``.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from tests.support import fuzz
from tests.support.clients import http_client
from tests.support.upstream import RawReply

EXAMPLES = int(os.environ.get("HEADROOM_FUZZ_EXAMPLES", "100"))
STATS: dict[str, int] = {}


@pytest.fixture(scope="module")
def fuzz_proxy(module_proxy_factory):
    from tests.support.proxy import ADDON_SCRIPT

    return module_proxy_factory(ADDON_SCRIPT, options={"headroom_compress_timeout_seconds": "120"})


def serve_fuzz_replies(upstream) -> None:
    """Answer every request with a minimal valid response of its dialect (JSON or SSE)."""

    def respond(rec):
        ctype, body = fuzz.reply_for(rec.path, rec.body)
        return RawReply(200, (("content-type", ctype),), body)

    upstream.responder = respond


def run_case(case: fuzz.Case, client, upstream) -> list[str]:
    """Send ``case`` through the proxy; the oracle's findings (empty when all is right)."""
    upstream.reset()
    serve_fuzz_replies(upstream)
    r = client.post(upstream.url + case.path, content=case.body, headers={"content-type": "application/json"})
    problems: list[str] = []
    if r.status_code >= 500:
        problems.append(f"the proxy answered {r.status_code}: {r.text[:300]}")
    recs = upstream.requests
    if r.status_code == 413 and not recs:
        outcome = "refused"
    elif not recs:
        problems.append(f"nothing reached the upstream (status {r.status_code})")
        outcome = "lost"
    else:
        problems += fuzz.check(case, recs[0].body)
        outcome = "identical" if recs[0].body == case.body else "rewritten"
    key = f"{case.dialect}/{case.kind}/{outcome}"
    STATS[key] = STATS.get(key, 0) + 1
    return problems


def log_failures(log: str) -> list[str]:
    """The proxy's log lines that show a hook raising or a plan failing, each with the line
    before it and the exception line that ends its traceback."""
    lines = log.splitlines()
    marks = ("Addon error", "compression failed", "the fallback failed", "Traceback")
    out = []
    for i, ln in enumerate(lines):
        if any(m in ln for m in marks):
            end = next(
                (
                    j
                    for j in range(i + 1, min(len(lines), i + 80))
                    if lines[j] and not lines[j].startswith((" ", "Traceback"))
                ),
                i,
            )
            out.append(" | ".join([lines[i - 1] if i else "", ln, lines[end]]))
    return out


def test_fuzzed_requests_through_mitmdump(fuzz_proxy, upstream):
    with http_client(fuzz_proxy, timeout=300) as client:

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            derandomize=True,
            database=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=fuzz.cases())
        def body_goes_through(case: fuzz.Case) -> None:
            problems = run_case(case, client, upstream)
            assert not problems, (case, problems[:8])

        body_goes_through()
    print("\nfuzz outcomes:", dict(sorted(STATS.items())))
    assert sum(STATS.values()) >= EXAMPLES
    assert any(k.endswith("/rewritten") for k in STATS)  # the proxy did change bodies (compressed or minified)
    failures = log_failures(fuzz_proxy.log_text())
    assert not failures, "\n".join(failures[:20])
