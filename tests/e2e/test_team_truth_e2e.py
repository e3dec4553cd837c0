"""One truth per conversation across a team of proxies, whatever happens (issue 33).

Three real ``mitmdump -s addons/headroom.py`` processes on one database (PostgreSQL, and one
SQLite file shared by the three), one ``secret_key_file``; one Claude Code-like session (a
large system prompt, tool calls and their outputs, the breakpoint on the last message as Claude
Code moves it) spread request by request over them, A, B, C, A, … as a load balancer would.
Proxy C is the busy one: its compression budget is a microsecond (the
``headroom_compress_timeout_seconds`` option, the test's knob), so it decides nothing new: what
is new in its turns goes whole (the timeout's fallback), the rest as decided before.

The session's turns (the whole history each time, the real embedding model for memory):

0 (A) the task; 1 (B) a short listing; 2 (C) a 110 KB log output, NEW in C's timed-out turn: it
goes whole, and that is recorded as its decision; 3 (A) the user's question, a memory injected
into it, and the log output compressed LATE: the cost model says the saving pays for the cache
write at once (a large output at the end of the cached prefix), a deliberate change of the
cached prefix at that message, recorded; 4 (B) a 230 KB grep output compressed as new, and the
model asks for the log's original with ``headroom_retrieve`` (answered by B, byte for byte); 5
(C) timed out again: replays everything as the others sent it; 6 (A), 7 (B).

Asserted: every earlier message reaches the upstream with the same bytes turn over turn
(``cache_control`` aside, which the client moves), the one exception being the recorded late
compression (:func:`headroom_core.cache.prefix_check.earlier_break` finds exactly that one; a
single proxy with the same slow turns would find the same); the injected block and both
compressed outputs never flip; the ledger row of turn 3 carries the late compression and its
reason says so; no decision is left deferred nor any message flagged; ``headroom stats`` prints
the late-compression line.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import select

from headroom_core.cache import prefix_check
from headroom_core.compress import markers
from headroom_core.compress.result import DEFERRED
from headroom_core.db.engine import open_database
from headroom_core.db.models import CompressionDecision, FrozenMessage, RequestOutcome
from headroom_core.inject import BLOCK_HEADER
from tests.e2e.test_isolation_e2e import MEMORY, QUESTION, SYSTEM, headroom_cli
from tests.e2e.test_memory_e2e import BASH, wait_for_model
from tests.support.clients import http_client
from tests.support.postgres import fresh_pg_database, pg_server_url
from tests.support.proxy import ADDON_SCRIPT, MitmProxy
from tests.support.upstream import Reply

PROJECT = "/team/truth"
HEADERS = {
    "content-type": "application/json", "x-api-key": "sk-ant-team-truth", "anthropic-version": "2023-06-01",
    "x-headroom-project": PROJECT, "user-agent": "claude-cli/1.0.62 (external, cli)",
}  # fmt: skip
#: Every proxy: memory on, compression given all the time it needs ...
OPTIONS = {"headroom_memory": "true", "headroom_compress_timeout_seconds": "600"}
#: ... but the busy one, whose every plan times out (the fallback: nothing new decided).
BUSY = {**OPTIONS, "headroom_compress_timeout_seconds": "0.000001"}
#: The message (index in ``messages``) of the log output that went whole at turn 2.
LOG_AT = 4
#: The user's question, where the memory is injected at turn 3.
QUESTION_AT = 6


def log_output(n: int = 1600) -> str:
    """What a nightly job's dry run prints: 1,600 log lines of two templates, one error."""
    lines = [
        f"2024-05-01T10:{i // 60 % 60:02d}:{i % 60:02d}Z INFO worker-{i % 4} processed batch {i} in {10 + i % 7} ms"
        for i in range(n)
    ]
    lines[800] = "2024-05-01T10:13:20Z ERROR worker-0 batch 800 failed: connection reset by peer"
    return "\n".join(lines)


def grep_output(n: int = 2400) -> str:
    return "\n".join(
        f"src/app/module_{i // 40}.py:{10 + i % 40}:        retries = config.get('retry_{i % 17}', {i % 5}) if attempt < limit else None"
        for i in range(n)
    )


def session_turns() -> list[list[dict]]:
    """The eight requests' ``messages`` (the history grows by a call and its output, or by an
    answer and the user's next words)."""
    msgs: list[dict] = [
        {"role": "user", "content": "The nightly job fails with retries exhausted; find where retries are configured."}
    ]
    out = [json.loads(json.dumps(msgs))]
    steps = [
        ("ls", "src\ntests\nREADME.md\npyproject.toml", None),
        ("python -m app.nightly --dry-run", log_output(), None),
        (None, None, QUESTION),
        ("grep -rn retries src", grep_output(), None),
        ("cat pyproject.toml", "[project]\nname = 'app'\n", None),
        (None, None, "Thanks. Anything else to check before I rerun it?"),
        ("git status", "On branch main\nnothing to commit", None),
    ]
    for n, (cmd, output, text) in enumerate(steps):
        if cmd is not None:
            call = {"type": "tool_use", "id": f"toolu_{n:02d}", "name": "Bash", "input": {"command": cmd}}
            msgs += [
                {"role": "assistant", "content": [call]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": output}]},
            ]
        else:
            msgs += [
                {"role": "assistant", "content": [{"type": "text", "text": f"Step {n} done."}]},
                {"role": "user", "content": [{"type": "text", "text": text}]},
            ]
        out.append(json.loads(json.dumps(msgs)))
    return out


def request_body(messages: list[dict]) -> dict:
    """Claude Code's way: the system prompt and the last block of the last message marked."""
    msgs = json.loads(json.dumps(messages))
    last = msgs[-1]
    if isinstance(last["content"], str):
        last["content"] = [{"type": "text", "text": last["content"]}]
    last["content"][-1]["cache_control"] = {"type": "ephemeral"}
    system = [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
    return {"model": "claude-sonnet-4-5", "max_tokens": 200, "system": system, "tools": [BASH], "messages": msgs}


def bare(message: dict) -> str:
    """A message's bytes as the prefix is compared (``cache_control`` aside: the client moves it)."""

    def strip(v):
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if k != "cache_control"}
        return [strip(x) for x in v] if isinstance(v, list) else v

    return json.dumps(strip(message), ensure_ascii=False)


@pytest.fixture(params=["postgresql", "sqlite"])
def team(request, tmp_path):
    """Three proxies on one database (a fresh PostgreSQL database, or one SQLite file), one key
    file; the third one busy. Yields ``(proxies, env)``."""
    if request.param == "postgresql":
        server = pg_server_url()
        if server is None:
            pytest.skip(
                'needs PostgreSQL: set HEADROOM_TEST_PG_URL (eval "$(scripts/postgres start)") or install PostgreSQL'
            )
        url, drop = fresh_pg_database(server)
    else:
        url, drop = f"sqlite:///{tmp_path / 'team.db'}", lambda: None
    env = {"HEADROOM_DB_URL": url, "HEADROOM_SECRET_KEY_FILE": str(tmp_path / "secret.key")}
    proxies = [MitmProxy(ADDON_SCRIPT, options=o, env=env, startup_timeout=120) for o in (OPTIONS, OPTIONS, BUSY)]
    try:
        proxies[0].start()  # the first migrates (a SQLite file is created once)
        rest = [threading.Thread(target=p.start) for p in proxies[1:]]
        for t in rest:
            t.start()
        for t in rest:
            t.join()
        for p in proxies:
            assert p.running, p.log_text()[-2000:]
            wait_for_model(p)
        yield proxies, env
    finally:
        for p in proxies:
            p.cleanup()
        drop()


def ledger_rows(url: str, want: int, timeout: float = 60.0) -> list[RequestOutcome]:
    """The project's ledger rows in order, once there are ``want`` (written off the answer's path)."""
    deadline = time.monotonic() + timeout
    while True:
        with open_database(url)() as s:
            rows = list(
                s.scalars(select(RequestOutcome).where(RequestOutcome.project == PROJECT).order_by(RequestOutcome.id))
            )
        if len(rows) >= want or time.monotonic() > deadline:
            return rows
        time.sleep(0.2)


def test_a_session_round_robin_over_three_proxies_one_of_them_busy_keeps_one_truth(team, upstream):
    proxies, env = team
    # a memory of the project, saved through A in another conversation
    upstream.script(
        Reply.tool_call("memory_save", {"text": MEMORY, "kind": "fact"}, text="Noted."),
        Reply.text("Noted for next time."),
    )
    with http_client(proxies[0], timeout=300) as c:
        r = c.post(upstream.url + "/v1/messages", headers=HEADERS, json={
            "model": "claude-sonnet-4-5", "max_tokens": 100, "system": "another conversation", "tools": [BASH],
            "messages": [{"role": "user", "content": "Remember this: " + MEMORY}],
        })  # fmt: skip
        assert r.status_code == 200, r.text
    upstream.reset()

    clients = [http_client(p, timeout=300) for p in proxies]
    turns: list[tuple[dict, dict]] = []  # (the client's body, the first body the upstream got)
    retrieved = None
    try:
        for n, messages in enumerate(session_turns()):
            body = request_body(messages)
            key = None
            if n == 4:  # the model asks B for the original of the output compressed late by A
                key = markers.find_marker_keys(turns[3][1]["messages"][LOG_AT]["content"][0]["content"])[0]
                upstream.script(Reply.tool_call("headroom_retrieve", {"key": key}), Reply.text("answer 4"))
            else:
                upstream.script(Reply.text(f"answer {n}"))
            first = len(upstream.requests)
            r = clients[n % 3].post(upstream.url + "/v1/messages", content=json.dumps(body).encode(), headers=HEADERS)
            assert r.status_code == 200, (n, r.text[:300])
            turns.append((body, upstream.requests[first].json))
            if key is not None:
                retrieved = upstream.requests[first + 1].json["messages"][-1]["content"][0]["content"]
    finally:
        for c in clients:
            c.close()

    client = [b for b, _ in turns]
    sent = [u for _, u in turns]
    # C's turns went with what was decided before: the log output whole at turn 2 (new then)
    assert sent[2]["messages"][LOG_AT] == client[2]["messages"][LOG_AT] or bare(sent[2]["messages"][LOG_AT]) == bare(
        client[2]["messages"][LOG_AT]
    )
    late = sent[3]["messages"][LOG_AT]["content"][0]["content"]
    assert len(late) < len(log_output()) / 10  # compressed late at turn 3, by A
    assert retrieved == log_output()  # its original, stored before turn 3 went out, answered by B

    # the prompt-cache rule turn over turn: one break, at the late compression, nowhere else
    breaks = [
        (n, prefix_check.earlier_break(client[n - 1], client[n], sent[n - 1], sent[n])) for n in range(1, len(turns))
    ]
    assert [(n, b) for n, b in breaks if b is not None] == [(3, (2, LOG_AT))]
    changed = [
        (n, i)
        for n in range(1, len(turns))
        for i, (before, now) in enumerate(zip(sent[n - 1]["messages"], sent[n]["messages"]))
        if bare(before) != bare(now)
    ]
    assert changed == [(3, LOG_AT)]
    assert sent[0]["tools"] == sent[7]["tools"] and sent[0]["system"] == sent[7]["system"]
    # the injected memory went with the question at turn 3 and stays there through B and C
    question = {bare(s["messages"][QUESTION_AT]) for s in sent[3:]}
    assert len(question) == 1 and BLOCK_HEADER in question.pop() and MEMORY in bare(sent[3]["messages"][QUESTION_AT])
    # the grep output, compressed as new by B at turn 4, replayed by C and A
    assert len({bare(s["messages"][8]) for s in sent[4:]}) == 1 and len(bare(sent[4]["messages"][8])) < len(
        grep_output()
    )

    url = env["HEADROOM_DB_URL"]
    rows = ledger_rows(url, 9)  # the memory conversation, the eight turns and B's follow-up counted in its turn's row
    rows = rows[1:]
    assert len(rows) == 8
    facts = [json.loads(r.facts or "{}") for r in rows]
    assert [f.get("late", {}).get("outputs", 0) for f in facts] == [0, 0, 0, 1, 0, 0, 0, 0]
    assert "compressed late" in rows[3].reason
    assert rows[2].outcome == "timeout" and "compression timed out" in rows[2].reason  # C's turn with a new output
    with open_database(url)() as s:
        assert s.scalars(select(CompressionDecision).where(CompressionDecision.strategy == DEFERRED)).all() == []
        assert s.scalars(select(FrozenMessage).where(FrozenMessage.deferred.is_not(None))).all() == []
    out = headroom_cli(str(Path(proxies[0].home)), "stats", env=env)
    assert "compressed late: 1 earlier tool outputs" in " ".join(out.split())
