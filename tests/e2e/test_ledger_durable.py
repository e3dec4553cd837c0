"""The savings ledger under concurrency and faults: concurrent first requests all counted
(``tool_usage`` upserts, SQLite and PostgreSQL), and what the proxy answered survives ``kill -9``
of a real mitmdump."""

from __future__ import annotations

import json
import signal
import sqlite3
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace

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

N = 32


def _plan(i: int) -> RequestPlan:
    return RequestPlan(
        "passthrough", "nothing to compress", Dialect.ANTHROPIC_MESSAGES, session_key=f"s{i}", project="/src/app"
    )


def _record(sessions, i: int, writer: LedgerWriter | None = None) -> Future | None:
    return ledger.record(
        sessions,
        _plan(i),
        user_agent="claude-cli/1.0.62",
        model="claude-sonnet-4",
        status_code=200,
        usage=Usage(input_tokens=10),
        rounds=0,
        offered=["Read", "Write", "Read"],
        called=["Read"],
        writer=writer,
    )


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


def test_an_answer_waits_for_its_row_not_for_the_counts(tmp_path):
    """The future an answer waits for resolves once the ``request_outcomes`` row is committed;
    the ``tool_usage`` counts follow in their own transaction (a request offering 200 tools paid
    ~10 ms of upserts before its answer). The counts' write is held here: the future is done
    with the row on disk and no counts yet; :meth:`LedgerWriter.flush` returns once they are."""
    import headroom_core.ledger_writer as lw

    sessions = open_database(f"sqlite:///{tmp_path / 'headroom.db'}")
    w = LedgerWriter(sessions)
    release = threading.Event()
    real_counts = lw.write_counts

    def held_counts(*a):
        release.wait(30)
        real_counts(*a)

    lw.write_counts = held_counts
    try:
        committed = _record(sessions, 0, w)
        assert committed.result(30) is True  # answered while the counts are held
        assert _counts(sessions) == (1, {})
        assert not w.flush(0.2)  # the counts are pending
        release.set()
        assert w.flush(30)
        assert _counts(sessions) == (1, {"Read": (2, 1), "Write": (1, 0)})
    finally:
        lw.write_counts = real_counts
        release.set()
        w.close(10)


def test_held_counts_are_written_without_a_flush(tmp_path):
    """Counts held back are written once ``counts_seconds`` have passed: three requests' counts,
    with no flush and no further request to carry them."""
    sessions = open_database(f"sqlite:///{tmp_path / 'headroom.db'}")
    w = LedgerWriter(sessions, counts_seconds=0.2)
    want = (3, {"Read": (6, 3), "Write": (3, 0)})
    try:
        assert all(_record(sessions, i, w).result(30) for i in range(3))
        deadline = time.monotonic() + 30
        while (_counts(sessions) != want or w.pending) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _counts(sessions) == want and w.pending == 0
    finally:
        w.close(10)


def test_a_row_waits_for_its_tools_figures_without_blocking_the_caller(tmp_path):
    """A tool list new to the process is counted in the background from the moment the plan
    decides it: recording the turn meanwhile returns at once (the WebSocket addon records on the
    event loop), and the row is committed, with the exact figures, once they are counted."""
    from headroom_core.compress.tokens import TokenCounter
    from headroom_core.tools.figures import ToolsFigures
    from tests.conftest import TOKENIZER_HOME

    gate = threading.Event()

    class Held(TokenCounter):
        def count(self, text: str) -> int:
            gate.wait(30)
            return super().count(text)

    real = TokenCounter(TOKENIZER_HOME)
    before = json.dumps(
        [
            {
                "name": "Read",
                "description": "Reads a file from the local filesystem. " * 40,
                "input_schema": {"type": "object"},
            }
        ]
    )
    after = json.dumps([{"name": "Read", "description": "Reads a file.", "input_schema": {"type": "object"}}])
    sessions = open_database(f"sqlite:///{tmp_path / 'headroom.db'}")
    w = LedgerWriter(sessions)
    try:
        plan = replace(_plan(0), tools=ToolsFigures(before, after, "minified", Held(TOKENIZER_HOME)))
        committed = ledger.record(
            sessions,
            plan,
            user_agent="claude-cli/1.0.62",
            model="claude-sonnet-4",
            status_code=200,
            usage=Usage(input_tokens=10),
            rounds=0,
            offered=["Read"],
            called=[],
            writer=w,
        )
        assert committed is not None and not committed.done() and not plan.tools.counted
        assert _counts(sessions)[0] == 0
        gate.set()
        assert committed.result(30) is True
        with sessions() as s:
            row = s.scalars(select(RequestOutcome)).one()
        assert (row.tools_tokens_before, row.tools_tokens_after) == (real.count(before), real.count(after))
        assert row.tools_tokens_before > 10 * row.tools_tokens_after > 0
    finally:
        gate.set()
        w.close(10)


# --- kill -9 of a real mitmdump ---------------------------------------------------------------


def _tool_output(i: int) -> str:
    """A JSON tool output of about 60 KB, different for every ``i`` (nothing to reuse: every
    request keeps the proxy's compression threads busy, as a burst of new work does)."""
    rows = [
        {
            "id": i * 1000 + k,
            "name": f"item-{i}-{k}",
            "state": "open" if k % 7 else "closed",
            "labels": ["bug", f"area-{k % 5}"],
            "body": f"Request {i}, row {k}: the build step failed on runner {k % 13} after {k % 60} s.",
        }
        for k in range(400)
    ]
    return json.dumps(rows, indent=2)


def _body(i: int, dialect: str) -> tuple[str, dict]:
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    out = _tool_output(i)
    if dialect == "anthropic":
        return "/v1/messages", {
            "model": "claude-sonnet-4",
            "max_tokens": 50,
            "stream": i % 2 == 0,
            "tools": [{"name": "Read", "description": "Reads a file.", "input_schema": schema}],
            "messages": [
                {"role": "user", "content": f"request {i}: which rows are closed?"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": f"toolu_{i}", "name": "Read", "input": {"path": "rows.json"}}
                    ],
                },
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": out}]},
            ],
        }
    if dialect == "chat":
        return "/v1/chat/completions", {
            "model": "gpt-4o",
            "stream": i % 2 == 0,
            "tools": [
                {"type": "function", "function": {"name": "Read", "description": "Reads.", "parameters": schema}}
            ],
            "messages": [
                {"role": "user", "content": f"request {i}: which rows are closed?"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": f"call_{i}", "type": "function", "function": {"name": "Read", "arguments": "{}"}}
                    ],
                },
                {"role": "tool", "tool_call_id": f"call_{i}", "content": out},
            ],
        }
    return "/v1/responses", {
        "model": "gpt-5",
        "stream": i % 2 == 0,
        "tools": [{"type": "function", "name": "Read", "description": "Reads.", "parameters": schema}],
        "input": [
            {"role": "user", "content": f"request {i}: which rows are closed?"},
            {"type": "function_call", "call_id": f"call_{i}", "name": "Read", "arguments": "{}"},
            {"type": "function_call_output", "call_id": f"call_{i}", "output": out},
        ],
    }


def test_answered_requests_survive_kill_9(upstream, proxy_factory):
    """A burst of 96 requests at concurrency 32 (three dialects, JSON and SSE, each with a new
    tool output to compress); ``kill -9`` mid-burst. Every answered request is in
    ``request_outcomes`` once the proxy is restarted (an answer goes out once its row is in the
    ledger journal; the restart writes what the database lacks), each once, and the proxy goes
    on counting."""
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
                    ok = r.status_code == 200 and any(
                        e.event in ("message_stop", "response.completed") or e.data == "[DONE]" for e in events
                    )
                else:
                    r = c.post(
                        upstream.url + path,
                        content=json.dumps(body).encode(),
                        headers={"content-type": "application/json"},
                    )
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
    committed = _counts(sessions)[0]  # a fresh reader after the kill: committed so far
    px.restart()
    px.wait_for_log(r"headroom: ready", timeout=120, since_start=True)  # the journal is written before it
    on_disk = _counts(sessions)[0]
    if on_disk > committed:  # the restart wrote the journaled rest, and said so
        assert px.wait_for_log(
            r"(\d+) answered requests written to the ledger from the journal", since_start=True
        ).group(1) == str(on_disk - committed)
    assert len(answered) <= on_disk <= 96, f"answered {len(answered)}, {on_disk} rows"
    with sessions() as s:  # no entry twice
        assert s.scalar(select(func.count(func.distinct(RequestOutcome.entry_id)))) == on_disk
    with http_client(px, timeout=120) as c:
        path, body = _body(1000, "anthropic")
        body["stream"] = False
        assert (
            c.post(
                upstream.url + path, content=json.dumps(body).encode(), headers={"content-type": "application/json"}
            ).status_code
            == 200
        )
    deadline = time.monotonic() + 60
    while _counts(sessions)[0] < on_disk + 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _counts(sessions)[0] == on_disk + 1


WS_CONNECTIONS, WS_TURNS = 4, 8  # 32 WebSocket turns over 4 connections at once
HOLD_SECONDS = 0.25  # well under the 2 s an answer waits for its row at most


class _OtherWriter:
    """Another writer of the proxy's SQLite database, as a second proxy or the CLI sharing it
    would be: :meth:`hold` takes the database's write lock (``BEGIN IMMEDIATE`` on its own
    connection) for ``HOLD_SECONDS`` unless it holds it already, so the proxy's ledger commits
    meanwhile wait for it (SQLite's busy timeout)."""

    def __init__(self, path) -> None:
        self.path, self.lock, self.db, self.held = path, threading.Lock(), None, False
        self.timers: list[threading.Timer] = []

    def hold(self) -> None:
        with self.lock:
            if self.held:
                return
            if self.db is None:
                self.db = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
            self.db.execute("BEGIN IMMEDIATE")
            self.held = True
            t = threading.Timer(HOLD_SECONDS, self._release)
            self.timers.append(t)
            t.start()

    def _release(self) -> None:
        with self.lock:
            self.db.execute("ROLLBACK")
            self.held = False

    def close(self) -> None:
        for t in list(self.timers):
            t.join(60)
        if self.db is not None:
            self.db.close()


def _ws_rows(sessions) -> list[tuple[str, str, int | None]]:
    """(model, dialect, status code) of every ``request_outcomes`` row, sorted."""
    with sessions() as s:
        return sorted((r.model, r.dialect, r.status_code) for r in s.scalars(select(RequestOutcome)))


def test_answered_websocket_turns_survive_kill_9(upstream, proxy_factory):
    """32 Responses turns over 4 WebSockets at once (Codex's ``response.create`` frames; every
    other one with a new 60 KB tool output to compress, so it offers ``headroom_retrieve`` and
    its events go through the proxy-tools loop; two connections end on such a turn, two on a
    plain one), while another writer of the database holds its
    write lock for a moment as each turn reaches the upstream (so the proxy's ledger commit is
    not instant); ``kill -9`` of the proxy from the client thread the moment the last turn's
    terminal event is received. The database then holds exactly the 32 answered turns, each
    its own row (its own model name) of the Responses dialect with status 200 (a terminal event
    goes to the client once its row is committed; before, the rows still queued were lost); a
    restarted proxy finds them and counts a further WebSocket turn. Since the ledger journal,
    a terminal event goes out once its row is journaled: the rows the killed proxy had not
    committed are written by the restart."""
    from headroom_core.wire import responses_ws as rws
    from tests.e2e.test_ws_e2e import create_frame, items
    from tests.support.clients import ws_connect
    from tests.support.proxy import ADDON_SCRIPT

    px = proxy_factory(ADDON_SCRIPT, options={"headroom_compress_timeout_seconds": "600"})
    other = _OtherWriter(px.home / "headroom.db")

    def responder(rec):
        other.hold()  # the turn's events go out now, its ledger row waits for the lock
        return Reply.text("ok")

    upstream.responder = responder
    total = WS_CONNECTIONS * WS_TURNS
    answered: list[str] = []  # the model names of the turns whose terminal event arrived
    lock = threading.Lock()

    def turn(ws, model: str, output: str) -> bool:
        ws.send(create_frame(items(output, f"turn {model}: which rows are closed?"), model=model))
        while True:
            event = json.loads(ws.recv(timeout=300))
            if event.get("type") in rws.TERMINAL_EVENTS:
                return event["type"] == "response.completed"

    def connection(c: int) -> None:
        with ws_connect(upstream, px, additional_headers={"user-agent": "codex_cli_rs/0.50.0"}) as ws:
            for k in range(WS_TURNS):
                i = c * WS_TURNS + k
                model = f"gpt-ws-kill-{i}"
                assert turn(ws, model, _tool_output(i) if (i + c) % 2 == 0 else f"short output {i}")
                with lock:
                    answered.append(model)
                    if len(answered) == total:  # the last answer: kill now, from this thread
                        px.process.send_signal(signal.SIGKILL)
                        return

    try:
        with ThreadPoolExecutor(WS_CONNECTIONS) as pool:
            for f in [pool.submit(connection, c) for c in range(WS_CONNECTIONS)]:
                f.result()
        px.process.wait(30)
    finally:
        other.close()
    upstream.responder = lambda rec: Reply.text("ok")
    assert len(answered) == total
    frames = [r for r in upstream.requests if r.method == "WS"]
    looped = {
        r.json["model"] for r in frames if "headroom_retrieve" in [t.get("name") for t in r.json.get("tools", [])]
    }
    with_output = {
        f"gpt-ws-kill-{c * WS_TURNS + k}"
        for c in range(WS_CONNECTIONS)
        for k in range(WS_TURNS)
        if (c * WS_TURNS + k + c) % 2 == 0
    }
    assert len(frames) == total and looped and looped <= with_output  # both of the addon's paths were taken
    sessions = open_database(f"sqlite:///{px.home / 'headroom.db'}")
    want = sorted((m, "openai-responses", 200) for m in answered)
    committed = _ws_rows(sessions)  # a fresh reader after the kill: committed so far
    assert set(committed) <= set(want)
    px.restart()
    px.wait_for_log(r"headroom: ready", timeout=120, since_start=True)  # the journal is written before it
    assert _ws_rows(sessions) == want  # every answered turn, each once, no other row
    # a new output whose plan met the other writer's lock past the request's lock-wait budget
    # went as sent, counted as such (issue 36, item 3); every other one looped
    with sessions() as s:
        outcome = {r.model: r.outcome for r in s.scalars(select(RequestOutcome))}
    assert all(outcome[m] == "db_busy" for m in with_output - looped)
    if len(committed) < total:  # the last turn's commit waited for the other writer: the journal has it
        assert px.wait_for_log(
            r"(\d+) answered requests written to the ledger from the journal", since_start=True
        ).group(1) == str(total - len(committed))
    with ws_connect(upstream, px, additional_headers={"user-agent": "codex_cli_rs/0.50.0"}) as ws:
        assert turn(ws, "gpt-ws-after-restart", "short output after the restart")
    deadline = time.monotonic() + 60
    while len(_ws_rows(sessions)) < total + 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _ws_rows(sessions) == sorted(want + [("gpt-ws-after-restart", "openai-responses", 200)])
