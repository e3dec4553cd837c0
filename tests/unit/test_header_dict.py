"""The addons' header dict: the same names and values mitmproxy's ``Headers.items()`` gives,
read in one pass over the raw fields."""

from __future__ import annotations

import sys
from pathlib import Path

from mitmproxy import http

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "addons"))
from headroom_headers import header_dict  # noqa: E402


def test_names_lower_case_and_repeated_fields_folded_as_mitmproxy_folds_them():
    h = http.Headers(
        [(b"Content-Type", b"application/json"), (b"X-Api-Key", b"k"), (b"Accept", b"a"), (b"accept", b"b")]
    )
    assert header_dict(h) == {"content-type": "application/json", "x-api-key": "k", "accept": "a, b"}
    assert header_dict(h) == {k.lower(): v for k, v in h.items()}


def test_undecodable_bytes_kept_as_surrogate_escapes():
    h = http.Headers([(b"X-Odd", b"\xff\xfeok")])
    assert header_dict(h) == {"x-odd": "\udcff\udcfeok"} == {k.lower(): v for k, v in h.items()}


def test_no_headers():
    assert header_dict(http.Headers()) == {}
