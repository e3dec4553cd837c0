"""Gemini prices: the table knows Google's model families (input, output, context caching), a
Gemini usage (``promptTokenCount`` including ``cachedContentTokenCount``) is priced with the
cached tokens at the cache price, and a user entry for a Gemini glob gets Gemini's cache rule."""

from __future__ import annotations

import pytest

from headroom_core.pricing import Price, PriceTable, parse_entry, request_cost


@pytest.mark.parametrize(
    "model, price",
    [
        ("gemini-2.5-pro", Price(1.25, 10.0, 0.125, 1.25)),
        ("gemini-2.5-flash", Price(0.30, 2.50, 0.03, 0.30)),
        ("gemini-2.5-flash-lite", Price(0.10, 0.40, 0.01, 0.10)),
        ("gemini-3-pro-preview", Price(2.0, 12.0, 0.20, 2.0)),
        ("gemini-3.1-pro-preview", Price(2.0, 12.0, 0.20, 2.0)),
        ("gemini-3-flash-preview", Price(0.50, 3.0, 0.05, 0.50)),
        ("gemini-2.0-flash-001", Price(0.10, 0.40, 0.025, 0.10)),
        ("models/gemini-2.5-pro", Price(1.25, 10.0, 0.125, 1.25)),  # as Code Assist's count names it
    ],
)
def test_table_prices_gemini_families(model, price):
    assert PriceTable().price(model) == price


def test_a_gemini_usage_is_priced_with_its_cached_tokens_at_the_cache_price():
    # usageMetadata {promptTokenCount: 11500, cachedContentTokenCount: 10000, candidates 1000 + thoughts 10000}
    c = request_cost(
        PriceTable().price("gemini-2.5-pro"),
        separate_cache=False,
        input_tokens=11500,
        cache_read=10000,
        cache_write=0,
        output_tokens=11000,
        tokens_saved=0,
    )
    assert c.prompt == pytest.approx((1500 * 1.25 + 10000 * 0.125) / 1e6)
    assert c.output == pytest.approx(11000 * 10.0 / 1e6)


def test_a_user_entry_for_gemini_follows_gemini_s_cache_rule():
    assert parse_entry("gemini-9*=1/4") == ("gemini-9*", Price(1.0, 4.0, 0.1, 1.0))
