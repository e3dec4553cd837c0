"""The fault matrix of issue 36: each case a fault a proxy meets in the field, injected around a
real mitmdump (the test upstream, the anthropic SDK), with what should happen, what did, and
whether that holds. Prints one table.

    .venv/bin/python bench/bench_faults.py [-k WORD]      (only the cases whose name has WORD)

A case is a row of :data:`CASES`: ``Case(name, expected, run)`` where ``run(env)`` returns
``(observed, ok)``; :class:`Env` gives a fresh proxy (``env.proxy(**MitmProxy kwargs)``, stopped
after the case) and the shared upstream. The database cases (items 3, 6, 7, 8) are here; the
request/response lifecycle cases plug in the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from tests.support.clients import anthropic_client  # noqa: E402
from tests.support.proxy import ADDON_SCRIPT, MitmProxy  # noqa: E402
from tests.support.upstream import Reply, Upstream  # noqa: E402


@dataclass
class Env:
    """What a case runs against: the upstream (answers "ok" unless the case scripts it) and
    fresh proxies, stopped and removed after the case."""

    upstream: Upstream
    started: list[MitmProxy] = field(default_factory=list)

    def proxy(self, *, ready: bool = True, **kw) -> MitmProxy:
        px = MitmProxy(ADDON_SCRIPT, startup_timeout=180, **kw)
        self.started.append(px)
        px.start()
        if ready:
            px.wait_for_log(r"headroom: ready", timeout=180, since_start=True)
        return px

    def ask(self, px: MitmProxy, model: str, messages: list | None = None, **kw) -> float:
        """One Messages request through ``px``; its answer's seconds."""
        self.upstream.responder = lambda rec: Reply.text("ok")
        t = time.monotonic()
        anthropic_client(self.upstream, px, timeout=120).messages.create(
            model=model,
            max_tokens=20,
            messages=messages or [{"role": "user", "content": f"hello {model} " + "x" * 500}],
            **kw,
        )
        return time.monotonic() - t

    def close(self) -> None:
        for px in self.started:
            px.cleanup()
        self.started = []


@dataclass(frozen=True)
class Case:
    """One fault: ``name``, ``expected`` (in words), ``run(env) -> (observed, ok)``."""

    name: str
    expected: str
    run: Callable[[Env], tuple[str, bool]]


def _rows(db: Path) -> list[tuple[str, str]]:
    con = sqlite3.connect(db)
    try:
        return sorted(con.execute("SELECT model, outcome FROM request_outcomes"))
    finally:
        con.close()


def _wait_rows(db: Path, n: int, timeout: float = 60.0) -> list[tuple[str, str]]:
    deadline = time.monotonic() + timeout
    while len(rows := _rows(db)) < n and time.monotonic() < deadline:
        time.sleep(0.2)
    return rows


_LOCKER = "import sqlite3,sys\nc=sqlite3.connect(sys.argv[1],isolation_level=None,timeout=30)\nc.execute('BEGIN EXCLUSIVE')\nprint('locked',flush=True)\nsys.stdin.read()\n"


def _write_lock(env: Env) -> tuple[str, bool]:
    from tests.unit.test_request_plan import anthropic_request, github_scenario

    px = env.proxy()
    db = px.home / "headroom.db"
    env.ask(px, "warm-up")
    p = subprocess.Popen(
        [sys.executable, "-c", _LOCKER, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert p.stdout is not None and p.stdout.readline().strip() == "locked"
    try:
        small = env.ask(px, "small")
        body = anthropic_request(github_scenario("paginate-issues.json"))
        big = env.ask(px, "big", messages=body["messages"], system=body["system"], tools=body["tools"])
    finally:
        assert p.stdin is not None
        p.stdin.close()
        p.wait(30)
    outcome = dict(_wait_rows(db, 3)).get("big")
    return (
        f"600-byte request {small:.2f} s, new 118 KB output {big:.2f} s, outcome {outcome}",
        small < 2.0 and outcome == "db_busy",
    )


def _damaged(env: Env) -> tuple[str, bool]:
    px = env.proxy()
    db = px.home / "headroom.db"
    env.ask(px, "before")
    _wait_rows(db, 1)
    px.stop()
    db.write_bytes(b"")
    px.start()
    px.wait_for_log(r"headroom: (ready|warm-up failed)", timeout=180, since_start=True)
    moved = list(db.parent.glob("headroom.db.damaged-*"))
    lines = [ln for ln in px.log_text(since_start=True).splitlines() if "was damaged" in ln]
    for i in range(3):
        env.ask(px, f"after-{i}")
    n = len(_wait_rows(db, 3))
    return f"{len(moved)} file(s) moved aside, {len(lines)} log line(s), {n} of 3 later answers recorded", len(
        moved
    ) == 1 and len(lines) == 1 and n == 3


def _concurrent_starts(env: Env, proxies: int = 3, rounds: int = 3) -> tuple[str, bool]:
    migrations: list[int] = []
    failed = 0
    for _ in range(rounds):
        home = Path(tempfile.mkdtemp(prefix="headroom-faults-"))
        barrier = threading.Barrier(proxies)
        made: list[MitmProxy] = []

        def one() -> None:
            barrier.wait(60)
            made.append(env.proxy(home=home, ready=False))

        threads = [threading.Thread(target=one) for _ in range(proxies)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        for px in made:
            log = px.wait_for_log(r"headroom: (ready|warm-up failed)", timeout=180, since_start=True).group(1)
            failed += log != "ready"
        migrations.append(sum(px.log_text().count("database migrated to") for px in made))
        env.close()
    return (
        f"{rounds} rounds x {proxies} proxies: migrations per round {migrations}, {failed} warm-ups failed",
        failed == 0 and migrations == [1] * rounds,
    )


def _stop_leaves_data(env: Env) -> tuple[str, bool]:
    px = env.proxy()
    db = px.home / "headroom.db"
    for i in range(3):
        env.ask(px, f"kept-{i}")
    _wait_rows(db, 3)
    px.stop()
    wal = Path(f"{db}-wal")
    wal_bytes = wal.stat().st_size if wal.exists() else 0
    alone = Path(tempfile.mkdtemp(prefix="headroom-faults-")) / "copy.db"
    alone.write_bytes(db.read_bytes())
    n = len(_rows(alone))
    return f"-wal {wal_bytes} bytes after stop; headroom.db alone holds {n} of 3 rows", n == 3


def _quick_check_time(env: Env, mib: int = 200) -> tuple[str, bool]:
    from headroom_core.db.sqlite_file import damage

    f = Path(tempfile.mkdtemp(prefix="headroom-faults-")) / "big.db"
    con = sqlite3.connect(f)
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, data BLOB)")
    con.executemany("INSERT INTO t (data) VALUES (?)", ((os.urandom(64 << 10),) for _ in range(mib * 16)))
    con.commit()
    con.close()
    t = time.monotonic()
    found = damage(f)
    s = time.monotonic() - t
    return f"{f.stat().st_size >> 20} MiB checked in {s:.2f} s at start", found is None


def _originals_refused(env: Env, turns: int = 4) -> tuple[str, bool]:
    """Issue 36, item 1: the originals table refuses every new row (a trigger raising SQLite's
    "database or disk is full") for ``turns`` turns, each adding a new large tool output; the
    scripted model asks headroom_retrieve for every marker it is sent. Then one turn without the
    fault."""
    from collections import Counter

    from headroom_core.compress.markers import find_marker_keys
    from tests.e2e.test_originals_unstored_e2e import NO_ORIGINAL, SQLITE_FULL, Model
    from tests.unit.test_request_plan import anthropic_request, github_scenario

    px = env.proxy()
    db = px.home / "headroom.db"
    model = Model()
    env.upstream.responder = model
    client = anthropic_client(env.upstream, px, timeout=120)
    outputs = [
        github_scenario(n) for n in ("paginate-issues.json", "git-refs.json", "labels.json", "search-issues.json")
    ]
    body = anthropic_request(github_scenario("search-issues.json"))
    body["messages"][0]["content"] = "Which issues and refs matter?"

    def turn(name: str) -> dict:
        n = len(env.upstream.requests)
        client.messages.create(
            model=name, max_tokens=50, system=body["system"], tools=body["tools"], messages=body["messages"]
        )
        return env.upstream.requests[n].json

    turn("before")
    con = sqlite3.connect(db)
    con.execute(SQLITE_FULL)
    con.commit()
    sent: dict[int, str] = {}  # message index -> the new output as it went during the fault
    for t in range(turns):
        new = outputs[t % len(outputs)] + "\n" * (t // len(outputs) + 1)  # a new output each turn
        body["messages"] += [
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": f"toolu_f{t}", "name": "github_api", "input": {"path": f"/x/{t}"}}
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_f{t}", "content": new}]},
        ]
        i = len(body["messages"]) - 1
        sent[i] = turn(f"fault-{t}")["messages"][i]["content"][0]["content"]
        body["messages"] += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "go on"}]
    con.execute("DROP TRIGGER originals_full")
    con.commit()
    con.close()
    after = turn("after")["messages"]
    marked = sum(1 for v in sent.values() if find_marker_keys(v))
    whole = sum(1 for i, v in sent.items() if v == body["messages"][i]["content"][0]["content"])
    bad = sum(1 for a in model.given if NO_ORIGINAL in a)
    same = all(after[i]["content"][0]["content"] == v for i, v in sent.items())
    rows = dict(_wait_rows(db, turns + 2))
    outcomes = Counter(rows.get(f"fault-{t}") for t in range(turns))
    return (
        f"{turns} new outputs during the fault: {marked} with a marker, {turns - marked - whole} lossless, {whole} whole; "
        f"retrieve answers 'no original is stored': {bad} of {len(model.given)}; after the fault the same bytes: {same}; outcomes {dict(outcomes)}",
        marked == 0 and bad == 0 and same and outcomes == Counter({"originals_unstored": turns}),
    )


# -- the Responses WebSocket (the same cases as tests/e2e/test_ws_faults_e2e.py) ------------------


def _ws_setup(env: Env) -> tuple[MitmProxy, str, str]:
    """A fresh proxy (plans always finish), the 144 KB paginate-issues output and its marker's key."""
    from headroom_core.compress import markers
    from tests.unit.test_request_plan import github_scenario

    big = github_scenario("paginate-issues.json")
    env.upstream.reset()
    return env.proxy(options={"headroom_compress_timeout_seconds": 300}), big, markers.offload_key(big)


def _ws_frames(env: Env) -> list:
    return [r for r in env.upstream.requests if r.method == "WS"]


def _ws_provider_429(env: Env) -> tuple[str, bool]:
    from headroom_core.ccr.retrieve import TOOL_NAME
    from tests.e2e.test_ws_e2e import create_frame, items, read_turn
    from tests.e2e.test_ws_faults_e2e import RATE_LIMIT, partial_follow_up
    from tests.support.clients import ws_connect

    px, big, key = _ws_setup(env)
    env.upstream.script(Reply.tool_call(TOOL_NAME, {"key": key}, text="Let me look."))
    env.upstream.raw(
        200,
        b"",
        chunks=[*partial_follow_up("Issues 1 and"), json.dumps({"type": "error", "status": 429, "error": RATE_LIMIT})],
    )
    with ws_connect(env.upstream, px) as ws:
        ws.send(create_frame(items(big)))
        last = json.loads(read_turn(ws)[-1])
    err = (last.get("response") or {}).get("error") or {}
    texts = [c.get("text") for it in (last.get("response") or {}).get("output") or [] for c in it.get("content") or []]
    n = len(_ws_frames(env))
    ok = (
        last["type"] == "response.failed" and err == RATE_LIMIT and texts == ["Let me look.", "Issues 1 and"] and n == 2
    )
    return f"client's last event {last['type']} ({err.get('code')}, text so far {texts}); {n} frames upstream", ok


def _ws_cut_by_max_output_tokens(env: Env) -> tuple[str, bool]:
    from tests.e2e.test_ws_e2e import create_frame, items, read_turn
    from tests.e2e.test_ws_faults_e2e import cut_retrieve
    from tests.support.clients import ws_connect

    px, big, key = _ws_setup(env)
    env.upstream.raw(200, b"", chunks=cut_retrieve(key, "Checking."))
    with ws_connect(env.upstream, px) as ws:
        ws.send(create_frame(items(big)))
        last = json.loads(read_turn(ws)[-1])
    time.sleep(1.0)  # a follow-up would have gone by now
    kinds = [it.get("type") for it in last["response"].get("output") or []]
    n = len(_ws_frames(env))
    ok = last["type"] == "response.incomplete" and kinds == ["message"] and n == 1
    return (
        f"client's last event {last['type']} ({last['response'].get('incomplete_details')}), output {kinds}; {n} frame upstream",
        ok,
    )


def _ws_client_leaves(env: Env) -> tuple[str, bool]:
    from headroom_core.ccr.retrieve import TOOL_NAME
    from tests.e2e.test_ws_e2e import create_frame, items
    from tests.e2e.test_ws_faults_e2e import partial_follow_up
    from tests.support.clients import ws_connect

    px, big, key = _ws_setup(env)
    env.upstream.script(Reply.tool_call(TOOL_NAME, {"key": key}, text="Checking."))
    env.upstream.raw(200, b"", chunks=partial_follow_up("Issues")[:1], hang=120.0)
    env.upstream.script(Reply.tool_call(TOOL_NAME, {"key": key}), Reply.text("round 3"))
    with ws_connect(env.upstream, px, close_timeout=2) as ws:
        ws.send(create_frame(items(big)))
        while "Checking." not in json.loads(ws.recv(timeout=120)).get("delta", ""):
            pass
        deadline = time.monotonic() + 180
        while len(_ws_frames(env)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        left = time.monotonic()
        ws.socket.shutdown(socket.SHUT_RDWR)  # the agent's process ends: no close frame
        ws.socket.close()
    closed = env.upstream.closed_at(_ws_frames(env)[1].index, timeout=60)
    time.sleep(1.0)
    after = sum(r.received_at >= left for r in _ws_frames(env))
    took = f"{closed - left:.2f} s" if closed is not None else "never"
    return (
        f"upstream socket closed {took} after the client left; {after} frames upstream after it",
        closed is not None and after == 0,
    )


def _ws_upstream_cut(env: Env) -> tuple[str, bool]:
    from websockets.exceptions import ConnectionClosed

    from headroom_core.ccr.retrieve import TOOL_NAME
    from tests.e2e.test_ws_e2e import create_frame, items
    from tests.e2e.test_ws_faults_e2e import partial_follow_up
    from tests.support.clients import ws_connect

    px, big, key = _ws_setup(env)
    env.upstream.script(Reply.tool_call(TOOL_NAME, {"key": key}, text="Checking."))
    env.upstream.raw(200, b"", chunks=partial_follow_up("Issues 1"), close=True)
    types: list[str] = []
    with ws_connect(env.upstream, px) as ws:
        ws.send(create_frame(items(big)))
        t = time.monotonic()
        try:
            while True:
                types.append(json.loads(ws.recv(timeout=60))["type"])
        except ConnectionClosed:
            how = f"closed {time.monotonic() - t:.2f} s after its frame was sent"
        except TimeoutError:
            how = "no close within 60 s"
    ok = how.startswith("closed") and "response.completed" not in types
    return f"client's socket {how}, last event {types[-1] if types else None}", ok


# -- follow-ups over HTTP (the same cases as tests/e2e/test_followup_faults_e2e.py) -----------


def _http_left(env: Env, px: MitmProxy, leave: Callable[[], None]) -> tuple[str, bool]:
    """After ``leave()`` (the client goes once the follow-up waits for the model): when the
    upstream saw the follow-up's connection closed, and how many requests came after."""
    left = time.monotonic()
    leave()
    closed = env.upstream.closed_at(1, timeout=60)
    time.sleep(1.0)  # a next round would start now, had the loop gone on
    after = sum(r.received_at >= left for r in env.upstream.requests)
    took = f"{closed - left:.2f} s" if closed is not None else "never (within 60 s)"
    return (
        f"follow-up's upstream connection closed {took} after the client left; {after} requests upstream after it",
        closed is not None and after == 0,
    )


def _http_client_leaves_json(env: Env) -> tuple[str, bool]:
    from headroom_core.ccr.retrieve import TOOL_NAME
    from tests.e2e.test_followup_faults_e2e import SLOW, _retrieve_again
    from tests.support.leaving_clients import h1_send
    from tests.unit.test_request_plan import anthropic_request

    px, big, key = _ws_setup(env)
    env.upstream.script(Reply.tool_call(TOOL_NAME, {"key": key}, text="Checking."))
    env.upstream.raw(200, _retrieve_again(key), {"content-type": "application/json"}, wait=SLOW)
    env.upstream.script(Reply.tool_call(TOOL_NAME, {"key": key}), Reply.text("round 3"))
    sock = h1_send(
        px,
        env.upstream,
        "/v1/messages",
        json.dumps({**anthropic_request(big), "model": "m", "max_tokens": 100}).encode(),
    )
    env.upstream.wait_for_requests(2, timeout=180)
    return _http_left(env, px, sock.close)


def _http_stream_reset(env: Env) -> tuple[str, bool]:
    from headroom_core.ccr.retrieve import TOOL_NAME
    from headroom_core.compress import markers
    from tests.e2e.test_followup_faults_e2e import SLOW
    from tests.support.leaving_clients import H2Client
    from tests.support.sse_forms import anthropic_events, anthropic_message, sse
    from tests.unit.test_request_plan import anthropic_request, github_scenario

    env.upstream.reset()
    big = github_scenario("paginate-issues.json")
    key = markers.offload_key(big)
    px = env.proxy(options={"headroom_compress_timeout_seconds": 300, "connection_strategy": "lazy"})
    env.upstream.script(Reply.tool_call(TOOL_NAME, {"key": key}, text="Checking."))
    env.upstream.raw(
        200,
        b"",
        {"content-type": "text/event-stream"},
        chunks=[sse(anthropic_events(anthropic_message([], "end_turn"))[:1])],
        hang=SLOW,
    )
    env.upstream.script(Reply.text("round 3"))
    with H2Client(px, env.upstream) as c:
        sid = c.post(
            "/v1/messages",
            json.dumps({**anthropic_request(big), "model": "m", "max_tokens": 100, "stream": True}).encode(),
        )
        c.read_until(sid, lambda st: b"Checking." in st.data, timeout=180)
        env.upstream.wait_for_requests(2, timeout=180)
        observed, ok = _http_left(env, px, lambda: c.reset(sid))
        alive = c.alive(0.5)
    return f"{observed}; client's connection {'still open' if alive else 'closed'}", ok and alive


def _http_provider_429(env: Env) -> tuple[str, bool]:
    import anthropic

    from headroom_core.ccr.retrieve import TOOL_NAME
    from tests.e2e.test_followup_faults_e2e import RATE_LIMITED
    from tests.unit.test_request_plan import anthropic_request

    px, big, key = _ws_setup(env)
    env.upstream.script(Reply.tool_call(TOOL_NAME, {"key": key}, text="Checking."))
    env.upstream.raw(429, RATE_LIMITED, {"retry-after": "7"})
    body = anthropic_request(big)
    try:
        anthropic_client(env.upstream, px, timeout=180).messages.create(
            model="m", max_tokens=100, tools=body["tools"], messages=body["messages"]
        )
        return "the client got an answer (200)", False
    except anthropic.APIStatusError as e:
        ra = e.response.headers.get("retry-after")
        return (
            f"client got {e.status_code}, retry-after {ra}, the provider's body {'as sent' if e.body == RATE_LIMITED else 'changed'}",
            (e.status_code, ra, e.body) == (429, "7", RATE_LIMITED),
        )


def _http_streamed_529(env: Env) -> tuple[str, bool]:
    from headroom_core.ccr.retrieve import TOOL_NAME
    from tests.support.clients import http_client, iter_sse
    from tests.unit.test_request_plan import anthropic_request

    px, big, key = _ws_setup(env)
    env.upstream.script(Reply.tool_call(TOOL_NAME, {"key": key}, text="Checking."))
    env.upstream.raw(
        529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, {"retry-after": "3"}
    )
    with http_client(px, timeout=180) as c:
        with c.stream(
            "POST",
            env.upstream.url + "/v1/messages",
            json={**anthropic_request(big), "model": "m", "max_tokens": 100, "stream": True},
        ) as r:
            events = list(iter_sse(r))
    text = "".join(e.json["delta"].get("text", "") for e in events if e.type == "content_block_delta")
    last = events[-1].json if events else {}
    err = last.get("error") or {}
    ok = (
        text == "Checking."
        and last.get("type") == "error"
        and err.get("type") == "overloaded_error"
        and "message_stop" not in [e.type for e in events]
    )
    return f"text so far {text!r}, then event: {last.get('type')} {err.get('type')} ({err.get('message')!r})", ok


def _http_cut_by_max_tokens(env: Env) -> tuple[str, bool]:
    from headroom_core.ccr.retrieve import TOOL_NAME
    from tests.unit.test_request_plan import anthropic_request

    px, big, key = _ws_setup(env)
    env.upstream.script(Reply.tool_call(TOOL_NAME, {"key": key}, text="Checking.", stop_reason="max_tokens"))
    body = anthropic_request(big)
    msg = anthropic_client(env.upstream, px, timeout=180).messages.create(
        model="m", max_tokens=100, tools=body["tools"], messages=body["messages"]
    )
    time.sleep(1.0)  # a follow-up would have gone by now
    n = len(env.upstream.requests)
    kinds = [b.type for b in msg.content]
    return (
        f"client got stop_reason {msg.stop_reason}, content {kinds}; {n} request upstream",
        msg.stop_reason == "max_tokens" and kinds == ["text"] and n == 1,
    )


CASES: list[Case] = [
    Case(
        "write lock held by another process (item 3)",
        "answers within the 0.5 s lock budget (before ~20 s); new output without a marker (item 1), outcome db_busy",
        _write_lock,
    ),
    Case(
        "originals table refuses new rows (item 1)",
        "new outputs go without a marker (whole or lossless), 0 retrieve answers 'no original is stored', the same bytes after the fault, outcome originals_unstored",
        _originals_refused,
    ),
    Case("database emptied to 0 bytes (item 6)", "moved aside with one log line; later answers recorded", _damaged),
    Case(
        "proxies starting together on one file (item 7)",
        "one migration per round, every warm-up ready",
        _concurrent_starts,
    ),
    Case(
        "copy of headroom.db after a stop (item 8)",
        "the file alone holds every row (checkpoint at stop)",
        _stop_leaves_data,
    ),
    Case("damage check of a large database (item 6)", "a figure: quick_check's time at start", _quick_check_time),
    Case(
        "Responses WS: provider 429 on a follow-up (item 4)",
        "response.failed with the provider's rate_limit_exceeded and the text so far (Codex retries it); no other frame",
        _ws_provider_429,
    ),
    Case(
        "Responses WS: retrieve cut by max_output_tokens (item 5)",
        "never carried out (1 frame upstream); the client gets response.incomplete",
        _ws_cut_by_max_output_tokens,
    ),
    Case(
        "Responses WS: client leaves during a follow-up (item 2)",
        "upstream socket closed at once; 0 frames upstream after the client left",
        _ws_client_leaves,
    ),
    Case(
        "HTTP: client leaves a non-streamed follow-up (item 2)",
        "follow-up's upstream connection closed at once (before: ran to its end, then rounds 2, 3); 0 requests after the client left",
        _http_client_leaves_json,
    ),
    Case(
        "HTTP/2: stream reset (CANCEL) during a hung streamed follow-up (item 2)",
        "follow-up's upstream connection closed at once (before: 600 s read timeout); 0 requests after; the client's connection stays",
        _http_stream_reset,
    ),
    Case(
        "HTTP: provider 429 on a non-streamed follow-up (item 4)",
        "client gets 429 with the same retry-after and error body (before: 200 end_turn with a notice)",
        _http_provider_429,
    ),
    Case(
        "HTTP: provider 529 on a streamed follow-up (item 4)",
        "text so far, then event: error overloaded_error with the wait (before: end_turn with a notice)",
        _http_streamed_529,
    ),
    Case(
        "HTTP: retrieve cut by max_tokens (item 5)",
        "never carried out (1 request upstream); the client sees stop_reason max_tokens",
        _http_cut_by_max_tokens,
    ),
    Case(
        "Responses WS: upstream socket cut during a follow-up",
        "the client's socket closed at once (never a silent hang), no made-up completion",
        _ws_upstream_cut,
    ),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-k", default="", help="only the cases whose name contains this")
    args = ap.parse_args()
    table = Table(title="fault matrix (issue 36)")
    for col in ("case", "expected", "observed", "holds"):
        table.add_column(col, overflow="fold")
    with Upstream() as upstream:
        for case in CASES:
            if args.k.lower() not in case.name.lower():
                continue
            env = Env(upstream)
            try:
                observed, ok = case.run(env)
            except Exception as e:  # noqa: BLE001 - a case that breaks is a row that fails
                observed, ok = f"{type(e).__name__}: {e}"[:300], False
            finally:
                env.close()
            table.add_row(case.name, case.expected, observed, "pass" if ok else "FAIL")
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
