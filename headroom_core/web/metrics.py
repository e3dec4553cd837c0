"""Prometheus metrics of the savings ledger, computed from the database at scrape time.

A custom collector (prometheus-client's documented pattern for "proxying" figures kept
elsewhere: https://prometheus.github.io/client_python/collector/custom/) so several proxy
processes sharing one database report the same totals, and a restart loses nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy.orm import Session, sessionmaker

from headroom_core import ledger

#: ``Content-Type`` of the text exposition format that :func:`render` produces.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class LedgerCollector(Collector):
    """Yields counters per agent (the client's product name) and per content kind, and the
    prompt-cache hit ratio, read from the ledger through ``sessions()`` on every collect.

    Token figures: ``headroom_estimated_*`` are our counts, ``headroom_usage_*`` the provider's.
    """

    def __init__(self, sessions: Callable[[], sessionmaker[Session]]) -> None:
        self._sessions = sessions

    def collect(self) -> Iterator[Metric]:
        sessions = self._sessions()
        by_agent = ledger.totals(sessions, "agent")
        whole = ledger.totals(sessions)[0][1]
        per_agent = [
            ("requests", "LLM requests that passed the proxy", lambda t: t.requests),
            ("compressed_requests", "LLM requests the proxy rewrote smaller", lambda t: t.compressed),
            (
                "estimated_tokens_before",
                "Estimated tokens of the tool outputs and tool definitions considered, before",
                lambda t: t.tokens_before + t.tools_tokens_before,
            ),
            (
                "estimated_tokens_after",
                "Estimated tokens of the tool outputs and tool definitions considered, after",
                lambda t: t.tokens_after + t.tools_tokens_after,
            ),
            ("estimated_tokens_saved", "Estimated tokens saved", lambda t: t.tokens_saved),
            ("request_bytes_before", "Request body bytes as the client sent them", lambda t: t.bytes_before),
            ("request_bytes_after", "Request body bytes as forwarded", lambda t: t.bytes_after),
            (
                "usage_prompt_tokens",
                "Prompt tokens as the provider reported them (input plus cache read and write)",
                lambda t: t.usage_prompt_tokens,
            ),
            (
                "usage_input_tokens",
                "Input tokens as the provider reported them (raw figure)",
                lambda t: t.usage_input_tokens,
            ),
            (
                "usage_cache_read_tokens",
                "Prompt-cache read tokens as the provider reported them",
                lambda t: t.usage_cache_read_tokens,
            ),
            (
                "usage_cache_write_tokens",
                "Prompt-cache write tokens as the provider reported them",
                lambda t: t.usage_cache_write_tokens,
            ),
            ("usage_output_tokens", "Output tokens as the provider reported them", lambda t: t.usage_output_tokens),
            (
                "retrieve_rounds",
                "Follow-up requests the proxy made to answer its own tools",
                lambda t: t.retrieve_rounds,
            ),
        ]
        for name, doc, get in per_agent:
            m = CounterMetricFamily(f"headroom_{name}", doc, labels=["agent"])
            for agent, t in by_agent:
                m.add_metric([agent], get(t))
            yield m
        kinds = ledger.kind_totals(sessions)
        per_kind = [
            ("kind_blocks", "Tool outputs (or tool lists) considered, per content kind", lambda k: k.blocks),
            (
                "kind_blocks_compressed",
                "Tool outputs (or tool lists) made smaller, per content kind",
                lambda k: k.compressed,
            ),
            ("kind_estimated_tokens_before", "Estimated tokens before, per content kind", lambda k: k.tokens_before),
            ("kind_estimated_tokens_after", "Estimated tokens after, per content kind", lambda k: k.tokens_after),
        ]
        for name, doc, get in per_kind:
            m = CounterMetricFamily(f"headroom_{name}", doc, labels=["kind"])
            for kind, k in kinds:
                m.add_metric([kind], get(k))
            yield m
        g = GaugeMetricFamily(
            "headroom_cache_hit_ratio",
            "Prompt-cache read tokens over prompt tokens, as the provider reported them (0..1)",
        )
        g.add_metric([], whole.cache_hit_rate or 0.0)
        yield g


def render(sessions: Callable[[], sessionmaker[Session]]) -> bytes:
    """The ledger's metrics in Prometheus' text exposition format (UTF-8 bytes)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(LedgerCollector(sessions))
    return generate_latest(registry)
