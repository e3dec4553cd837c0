"""SSE through ``mitmdump -s addons/headroom.py``: events reach the client one by one as the
upstream sends them (never buffered to the end), and the usage figures the upstream put in the
stream land in the ledger exactly."""

from __future__ import annotations

import json
import time

import pytest
from sqlalchemy import select

from headroom_core.db.engine import open_database
from headroom_core.db.models import RequestOutcome
from tests.support.clients import http_client, post_stream
from tests.support.proxy import ADDON_SCRIPT
from tests.support.upstream import Reply

DELAY = 0.15  # seconds the upstream sleeps between two events
WORDS = " ".join(f"w{i}" for i in range(12))  # 12 text deltas, so 15+ events per stream


@pytest.fixture(scope="module")
def proxy(module_proxy_factory):
    px = module_proxy_factory(ADDON_SCRIPT)
    # timing is measured once the warm-up (database, vocabulary) no longer competes for the CPU
    px.wait_for_log(r"headroom: ready", timeout=120)
    return px


def request(dialect: str, model: str) -> tuple[str, dict]:
    """Path and streaming body of a small request in ``dialect``."""
    if dialect == "anthropic":
        return "/v1/messages", {
            "model": model,
            "max_tokens": 64,
            "stream": True,
            "messages": [{"role": "user", "content": f"count for {model}"}],
        }
    if dialect == "chat":
        return "/v1/chat/completions", {
            "model": model,
            "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": f"count for {model}"}],
        }
    return "/v1/responses", {"model": model, "stream": True, "input": f"count for {model}"}


def ledger_row(proxy, model: str, timeout: float = 15.0) -> RequestOutcome | None:
    """The ledger row of ``model`` in the proxy's database, once written (polled, bounded)."""
    sessions = open_database(f"sqlite:///{proxy.home / 'headroom.db'}")
    deadline = time.monotonic() + timeout
    while True:
        with sessions() as s:
            row = s.scalars(select(RequestOutcome).where(RequestOutcome.model == model)).first()
        if row is not None or time.monotonic() > deadline:
            return row
        time.sleep(0.05)


@pytest.mark.parametrize("dialect", ["anthropic", "chat", "responses"])
def test_events_arrive_one_by_one(upstream, proxy, dialect):
    upstream.script(Reply.text(WORDS, delay=DELAY))
    path, body = request(dialect, f"stream-{dialect}")
    with http_client(proxy) as c:
        r, events = post_stream(c, upstream.url + path, body)
    assert r.status_code == 200
    n = len(events)
    assert n >= 15
    texts = [e.json for e in events if e.json]
    got = "".join(
        (t.get("delta") or {}).get("text", "")
        if dialect == "anthropic"
        else (t["choices"][0]["delta"].get("content") or "" if t.get("choices") else "")
        if dialect == "chat"
        else t.get("delta", "")
        if t.get("type") == "response.output_text.delta"
        else ""
        for t in texts
    )
    assert got == WORDS
    # The upstream needs at least (n - 1) * DELAY seconds between its first and last event. A
    # proxy that buffered would hand all of them over at once; streamed, their arrival times are
    # spread over (nearly) that span, and each event arrives after the one before.
    arrivals = [e.arrived for e in events]
    assert arrivals == sorted(arrivals)
    assert arrivals[-1] - arrivals[0] > (n - 1) * DELAY / 2
    # not delivered in one batch (on a loaded machine a stall may bunch a few of them together)
    assert len({round(a, 3) for a in arrivals}) >= min(6, n // 2)


@pytest.mark.parametrize(
    "dialect,want",
    [
        ("anthropic", (1500, 42, 1200, 300)),
        ("chat", (1500, 42, 1200, None)),
        ("responses", (1500, 42, 1200, None)),
    ],
)
def test_usage_from_the_stream_reaches_the_ledger(upstream, proxy, dialect, want):
    model = f"usage-{dialect}"
    upstream.script(
        Reply.text("usage counted", input_tokens=1500, output_tokens=42, cache_read=1200, cache_creation=300)
    )
    path, body = request(dialect, model)
    with http_client(proxy) as c:
        r, events = post_stream(c, upstream.url + path, body)
    assert r.status_code == 200 and events
    row = ledger_row(proxy, model)
    assert row is not None, "no ledger row"
    got = (row.usage_input_tokens, row.usage_output_tokens, row.usage_cache_read_tokens, row.usage_cache_write_tokens)
    assert got == want
    assert (
        row.status_code == 200
        and row.dialect
        == {"anthropic": "anthropic-messages", "chat": "openai-chat", "responses": "openai-responses"}[dialect]
    )


def test_stream_bytes_reach_the_client_unchanged(upstream, proxy):
    """A recorded-style stream (comments, CRLF, an unknown event) passes byte for byte."""
    raw = (
        b": keep-alive comment\r\n\r\n"
        b"event: message_start\r\ndata: "
        + json.dumps(
            {
                "type": "message_start",
                "message": {
                    "id": "m1",
                    "type": "message",
                    "role": "assistant",
                    "content": [],
                    "model": "raw-model",
                    "usage": {"input_tokens": 9, "output_tokens": 1},
                },
            }
        ).encode()
        + b"\r\n\r\n"
        b'event: ping\ndata: {"type": "ping"}\n\n'
        b'event: vendor_extension\ndata: {"type":"vendor_extension","x":"\xc3\xa9"}\n\n'
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    )
    upstream.raw(
        200,
        raw,
        {"content-type": "text/event-stream"},
        chunks=[raw[i : i + 37] for i in range(0, len(raw), 37)],
        delay=0.01,
    )
    with http_client(proxy) as c:
        with c.stream(
            "POST",
            upstream.url + "/v1/messages",
            json={
                "model": "raw-model",
                "max_tokens": 5,
                "stream": True,
                "messages": [{"role": "user", "content": "raw"}],
            },
        ) as r:
            got = b"".join(r.iter_raw())
    assert got == raw
