"""The savings ledger under concurrency and faults: concurrent first requests all counted
(``tool_usage`` upserts, SQLite and PostgreSQL), and what the proxy answered survives ``kill -9``
of a real mitmdump."""

from __future__ import annotations

import json
import signal
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

import pytest
from sqlalchemy import func, select

from headroom_core import ledger
from headroom_core.db.engine import open_database
from headroom_core.db.models import RequestOutcome, ToolUsage
from headroom_core.ledger_writer import LedgerWriter
from headroom_core.request_plan import RequestPlan
from headroom_core.wire.blocks import Usage
from headroom_core.wire.detect import Dialect
from tests.support.clients import http_client, post_stream
from tests.support.upstream import Reply
from tests.e2e.test_memory_store import fresh_pg_database, pg_server_url

N = 32


@pytest.fixture(params=["sqlite", "postgresql"])
def sessions(request, tmp_path):
    if request.param == "sqlite":
        yield open_database(f"sqlite:///{tmp_path / 'headroom.db'}")
        return
    server = pg_server_url()
    if server is None:
        pytest.skip("PostgreSQL cases need HEADROOM_TEST_PG_URL (eval \"$(scripts/postgres start)\") or PostgreSQL installed")
    url, drop = fresh_pg_database(server)
    yield open_database(url)
    drop()


def _plan(i: int) -> RequestPlan:
    return RequestPlan("passthrough", "nothing to compress", Dialect.ANTHROPIC_MESSAGES, session_key=f"s{i}", project="/src/app")


def _record(sessions, i: int, writer: LedgerWriter | None = None) -> Future | None:
    return ledger.record(sessions, _plan(i), user_agent="claude-cli/1.0.62", model="claude-sonnet-4", status_code=200, usage=Usage(input_tokens=10),
                  rounds=0, offered=["Read", "Write", "Read"], called=["Read"], writer=writer)


def _counts(sessions) -> tuple[int, dict[str, tuple[int, int]]]:
    with sessions() as s:
        n = s.scalar(select(func.count(RequestOutcome.id)))
        usage = {r.tool_name: (r.offered, r.called) for r in s.scalars(select(ToolUsage))}
    return n, usage


def test_concurrent_first_requests_are_all_counted(sessions):
    """32 threads write the first request of the same client and project at once: 32 rows, and
    every offer and call counted (before: ``UNIQUE constraint failed: tool_usage…``, 30 of 32)."""
    barrier = threading.Barrier(N)

    def one(i: int) -> None:
        barrier.wait(timeout=60)
        _record(sessions, i)

    with ThreadPoolExecutor(N) as pool:
        list(pool.map(one, range(N)))
    n, usage = _counts(sessions)
    assert n == N
    assert usage == {"Read": (2 * N, N), "Write": (N, 0)}


def test_two_writers_sharing_a_database_count_everything(sessions):
    """Two background writers (two proxy processes sharing one database) and 2 x 32 requests."""
    writers = [LedgerWriter(sessions), LedgerWriter(sessions)]
    barrier = threading.Barrier(N)

    def one(i: int) -> None:
        barrier.wait(timeout=60)
        _record(sessions, i, writers[0])
        _record(sessions, N + i, writers[1])

    with ThreadPoolExecutor(N) as pool:
        list(pool.map(one, range(N)))
    assert all(w.close(60) for w in writers)
    n, usage = _counts(sessions)
    assert n == 2 * N and usage == {"Read": (4 * N, 2 * N), "Write": (2 * N, 0)}


def test_writer_batches_and_flushes(tmp_path):
    sessions = open_database(f"sqlite:///{tmp_path / 'headroom.db'}")
    w = LedgerWriter(sessions, flush_seconds=0.05)
    for i in range(500):
        _record(sessions, i, w)
    assert w.flush(60) and w.pending == 0
    assert _counts(sessions)[0] == 500
    committed = _record(sessions, 500, w)
    assert committed.result(60) is True and _counts(sessions)[0] == 501  # resolved once on disk
    assert w.close(10)
    late = _record(sessions, 999, w)  # after close: ignored, never raises
    assert late.result(1) is False and _counts(sessions)[0] == 501


# --- kill -9 of a real mitmdump ---------------------------------------------------------------


def _tool_output(i: int) -> str:
    """A JSON tool output of about 60 KB, different for every ``i`` (nothing to reuse: every
    request keeps the proxy's compression threads busy, as a burst of new work does)."""
    rows = [{"id": i * 1000 + k, "name": f"item-{i}-{k}", "state": "open" if k % 7 else "closed", "labels": ["bug", f"area-{k % 5}"],
             "body": f"Request {i}, row {k}: the build step failed on runner {k % 13} after {k % 60} s."} for k in range(400)]
    return json.dumps(rows, indent=2)


def _body(i: int, dialect: str) -> tuple[str, dict]:
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    out = _tool_output(i)
    if dialect == "anthropic":
        return "/v1/messages", {"model": "claude-sonnet-4", "max_tokens": 50, "stream": i % 2 == 0,
                                "tools": [{"name": "Read", "description": "Reads a file.", "input_schema": schema}],
                                "messages": [{"role": "user", "content": f"request {i}: which rows are closed?"},
                                             {"role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_{i}", "name": "Read", "input": {"path": "rows.json"}}]},
                                             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": out}]}]}
    if dialect == "chat":
        return "/v1/chat/completions", {"model": "gpt-4o", "stream": i % 2 == 0,
                                        "tools": [{"type": "function", "function": {"name": "Read", "description": "Reads.", "parameters": schema}}],
                                        "messages": [{"role": "user", "content": f"request {i}: which rows are closed?"},
                                                     {"role": "assistant", "content": None, "tool_calls": [{"id": f"call_{i}", "type": "function", "function": {"name": "Read", "arguments": "{}"}}]},
                                                     {"role": "tool", "tool_call_id": f"call_{i}", "content": out}]}
    return "/v1/responses", {"model": "gpt-5", "stream": i % 2 == 0,
                             "tools": [{"type": "function", "name": "Read", "description": "Reads.", "parameters": schema}],
                             "input": [{"role": "user", "content": f"request {i}: which rows are closed?"},
                                       {"type": "function_call", "call_id": f"call_{i}", "name": "Read", "arguments": "{}"},
                                       {"type": "function_call_output", "call_id": f"call_{i}", "output": out}]}


def test_answered_requests_survive_kill_9(upstream, proxy_factory):
    """A burst of 96 requests at concurrency 32 (three dialects, JSON and SSE, each with a new
    tool output to compress); ``kill -9`` mid-burst. Every answered request is in
    ``request_outcomes`` afterwards (an answer goes out once its row is committed), and a
    restarted proxy finds them and goes on counting."""
    from tests.support.proxy import ADDON_SCRIPT

    px = proxy_factory(ADDON_SCRIPT, options={"headroom_compress_timeout_seconds": "600"})
    upstream.responder = lambda rec: Reply.text("ok")
    answered: list[float] = []  # monotonic times the answers were complete
    lock = threading.Lock()

    def one(i: int) -> None:
        path, body = _body(i, ("anthropic", "chat", "responses")[i % 3])
        try:
            with http_client(px, timeout=120) as c:
                if body["stream"]:
                    r, events = post_stream(c, upstream.url + path, body)
                    ok = r.status_code == 200 and any(e.event in ("message_stop", "response.completed") or e.data == "[DONE]" for e in events)
                else:
                    r = c.post(upstream.url + path, content=json.dumps(body).encode(), headers={"content-type": "application/json"})
                    ok = r.status_code == 200
        except Exception:  # noqa: BLE001 - in flight when the proxy was killed
            return
        if ok:
            with lock:
                answered.append(time.monotonic())

    pool = ThreadPoolExecutor(N)  # a burst: 32 at once
    futures = [pool.submit(one, i) for i in range(96)]
    deadline = time.monotonic() + 600
    while len(answered) < 48 and time.monotonic() < deadline:
        time.sleep(0.02)
    px.process.send_signal(signal.SIGKILL)
    px.process.wait(30)
    for f in futures:
        f.result()
    pool.shutdown()
    assert len(answered) >= 48
    sessions = open_database(f"sqlite:///{px.home / 'headroom.db'}")
    on_disk = _counts(sessions)[0]  # a fresh reader after the kill
    assert len(answered) <= on_disk <= 96, f"answered {len(answered)}, {on_disk} rows"
    px.restart()
    assert _counts(sessions)[0] == on_disk
    with http_client(px, timeout=120) as c:
        path, body = _body(1000, "anthropic")
        body["stream"] = False
        assert c.post(upstream.url + path, content=json.dumps(body).encode(), headers={"content-type": "application/json"}).status_code == 200
    deadline = time.monotonic() + 60
    while _counts(sessions)[0] < on_disk + 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _counts(sessions)[0] == on_disk + 1
