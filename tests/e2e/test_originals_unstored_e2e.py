"""An output is shortened only once its original is stored (issue 36, item 1), through a real
mitmdump, the anthropic SDK and a scripted model that asks ``headroom_retrieve`` for every
marker it is sent.

Before, with the database unable to take a new original (a full disk, a write lock held by
another process, a PostgreSQL connection lost), the 144 KB tool output of a turn went upstream
shortened all the same, its original never stored, and the model's ``headroom_retrieve`` was
told "no original is stored … work with the shortened output". Now the originals are written
before the request is forwarded; when that fails, the output goes whole or losslessly compressed
(no marker), the next turn sends the same bytes (also once the fault is gone), and the ledger
counts the request under ``originals_unstored`` (``db_busy`` for a lock), which ``headroom stats``
lists among the reasons requests went out uncompressed.

The faults: SQLite and PostgreSQL refusing the originals' rows as a full disk does (a trigger
raising SQLite's SQLITE_FULL text / PostgreSQL's ``disk_full`` SQLSTATE), another process holding
the write lock (tests/e2e/test_db_lock_e2e.py's :class:`Locker`), and PostgreSQL ending the
connection in the middle of the originals' write (the server terminating the backend, as a
restart does)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest
from sqlalchemy import select, text

from headroom_core import ledger
from headroom_core.ccr import retrieve
from headroom_core.compress import markers
from headroom_core.compress.json_crush import decode_table
from headroom_core.compress.router import compress_text
from headroom_core.db.engine import open_database
from headroom_core.db.models import RequestOutcome
from headroom_core.settings import load_settings
from tests.e2e.test_db_lock_e2e import Locker
from tests.support.clients import anthropic_client
from tests.support.postgres import fresh_pg_database, pg_server_url
from tests.support.proxy import ADDON_SCRIPT
from tests.support.upstream import Reply, ToolCall
from tests.unit.test_request_plan import anthropic_request, github_scenario

HEADROOM = str(Path(sys.executable).parent / "headroom")
NO_ORIGINAL = "no original is stored"
#: Each fault's outcome class in the ledger.
OUTCOME = {"full": "originals_unstored", "locked": "db_busy", "connection lost": "originals_unstored"}

SQLITE_FULL = "CREATE TRIGGER originals_full BEFORE INSERT ON originals BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END"
PG_FULL = (
    "CREATE FUNCTION originals_full() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END $$",
    "CREATE TRIGGER originals_full BEFORE INSERT ON originals FOR EACH ROW EXECUTE FUNCTION originals_full()",
)
#: The server ends the connection that writes an original (as a restart or a failover does).
PG_GONE = (
    "CREATE FUNCTION originals_gone() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "PERFORM pg_terminate_backend(pg_backend_pid()); RETURN NEW; END $$",
    "CREATE TRIGGER originals_gone BEFORE INSERT ON originals FOR EACH ROW EXECUTE FUNCTION originals_gone()",
)


def _ddl(url: str, statements: tuple[str, ...]) -> None:
    """Run ``statements`` on the database at ``url``, on a connection of the test's own."""
    with open_database(url).kw["bind"].begin() as c:
        for stmt in statements:
            c.execute(text(stmt))


@contextmanager
def _fault(kind: str, url: str) -> Iterator[None]:
    """The database unable to take a new original while the block runs."""
    if kind == "locked":
        with Locker(url):
            yield
        return
    sqlite = url.startswith("sqlite")
    _ddl(url, (SQLITE_FULL,) if sqlite else PG_FULL if kind == "full" else PG_GONE)
    name = "originals_full" if kind == "full" else "originals_gone"
    try:
        yield
    finally:
        _ddl(url, (f"DROP TRIGGER {name}" if sqlite else f"DROP TRIGGER {name} ON originals",))


class Model:
    """The scripted model: a request that carries markers gets one ``headroom_retrieve`` call per
    marker key; the proxy's follow-up with the answers, and a request without markers, get "ok".
    ``answers``: the latest answer the proxy gave for each key (key -> tool result text);
    ``given``: every answer, in order."""

    def __init__(self) -> None:
        self.answers: dict[str, str] = {}
        self.given: list[str] = []

    def __call__(self, rec) -> Reply:
        last = rec.json["messages"][-1]
        asked = [b for b in last["content"] if isinstance(b, dict) and b.get("type") == "tool_result" and b["tool_use_id"].startswith("toolu_hr")] \
            if isinstance(last["content"], list) else []  # fmt: skip
        if asked:
            calls = {
                b["id"]: b["input"]["key"] for b in rec.json["messages"][-2]["content"] if b.get("type") == "tool_use"
            }
            for b in asked:
                self.answers[calls[b["tool_use_id"]]] = (
                    b["content"] if isinstance(b["content"], str) else b["content"][0]["text"]
                )
                self.given.append(self.answers[calls[b["tool_use_id"]]])
            return Reply.text("ok")
        keys = sorted(set(markers.find_marker_keys(rec.text)))
        if not keys:
            return Reply.text("ok")
        return Reply.tool_calls_reply(
            [ToolCall(retrieve.TOOL_NAME, {"key": k}, f"toolu_hr{i:02d}{len(rec.body)}") for i, k in enumerate(keys)]
        )


def _outcomes(url: str) -> dict[str, tuple[str, str]]:
    """``model -> (outcome, reason)`` of every ledger row."""
    with open_database(url)() as s:
        return {r.model: (r.outcome, r.reason) for r in s.scalars(select(RequestOutcome))}


def _wait_outcomes(url: str, n: int, timeout: float = 120.0) -> dict[str, tuple[str, str]]:
    deadline = time.monotonic() + timeout
    while len(rows := _outcomes(url)) < n and time.monotonic() < deadline:
        time.sleep(0.2)
    return rows


@pytest.fixture(params=[("sqlite", "full"), ("sqlite", "locked"), ("postgresql", "full"), ("postgresql", "locked"), ("postgresql", "connection lost")],
                ids=lambda p: f"{p[0]}-{p[1].replace(' ', '-')}")  # fmt: skip
def faulty(request, proxy_factory):
    """A warmed-up proxy, its database URL and the fault to inject."""
    backend, kind = request.param
    options = {"headroom_compress_timeout_seconds": "120"}
    drop = None
    if backend == "postgresql":
        server = pg_server_url()
        if server is None:
            pytest.skip("needs PostgreSQL: set HEADROOM_TEST_PG_URL or install PostgreSQL")
        url, drop = fresh_pg_database(server)
        options["headroom_db_url"] = url
    px = proxy_factory(ADDON_SCRIPT, options=options)
    px.wait_for_log(r"headroom: ready", timeout=120)
    yield px, options.get("headroom_db_url") or f"sqlite:///{px.home / 'headroom.db'}", kind
    if drop is not None:
        px.stop()
        drop()


def test_an_output_goes_shortened_only_once_its_original_is_stored(upstream, faulty, counter):
    px, url, kind = faulty
    client = anthropic_client(upstream, px, timeout=120)
    model = Model()
    upstream.responder = model
    small, big = github_scenario("search-issues.json"), github_scenario("paginate-issues.json")
    first = anthropic_request(small)

    def turn(name: str, body: dict) -> dict:
        n = len(upstream.requests)
        msg = client.messages.create(
            model=name, max_tokens=50, system=body["system"], tools=body["tools"], messages=body["messages"]
        )
        assert [b.text for b in msg.content if b.type == "text"][-1] == "ok"
        return upstream.requests[n].json  # what the upstream got first (the proxy's follow-up comes after)

    sent1 = turn("turn-1", first)  # no fault: shortened, its original retrievable
    assert markers.find_marker_keys(sent1["messages"][2]["content"][0]["content"])
    assert model.answers == {markers.offload_key(small): small}

    second = {**first, "messages": first["messages"] + [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_02", "name": "github_api", "input": {"path": "/repos/o/r/issues?page=all"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_02", "content": big}]},
    ]}  # fmt: skip
    with _fault(kind, url):
        sent2 = turn("turn-2", second)
    new = sent2["messages"][4]["content"][0]["content"]
    s = load_settings({}, env={})
    lossless = compress_text(
        big,
        "Which issues are still open?",
        counter,
        min_tokens=s.min_tokens,
        min_saving_ratio=s.min_saving_ratio,
        lossless=True,
    )
    assert not lossless.offloads
    assert new == (
        lossless.text if lossless.changed else big
    )  # whole, or the lossless form: nothing dropped, no marker
    assert len(new) < len(big) and decode_table(json.loads(new)) == json.loads(
        big
    )  # the JSON table form, every value kept
    assert sent2["messages"][2] == sent1["messages"][2]  # turn 1 replayed as sent
    assert model.answers == {markers.offload_key(small): small}  # every marker sent answered with its original
    assert not any(NO_ORIGINAL in a for a in model.given)

    third = {
        **second,
        "messages": second["messages"]
        + [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "And which are closed?"}],
    }
    sent3 = turn("turn-3", third)  # the fault gone: the same bytes again
    assert sent3["messages"][4]["content"][0]["content"] == new

    rows = _wait_outcomes(url, 3)
    assert rows["turn-2"][0] == OUTCOME[kind], rows
    assert "their originals could not be stored" in rows["turn-2"][1]
    assert rows["turn-1"][0] == "compressed" and rows["turn-3"][0] == "compressed"
    label = {
        "originals_unstored": "originals could not be stored (outputs sent whole or lossless)",
        "db_busy": "database locked by another process",
    }[OUTCOME[kind]]
    snap = ledger.snapshot(open_database(url))  # what headroom stats and the stats page show
    assert {"key": OUTCOME[kind], "label": label, "requests": 1} in snap["uncompressed"]
    env = {
        "HEADROOM_HOME": str(px.home),
        "HOME": str(Path.home()),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "COLUMNS": "160",
        "LINES": "50",
    }
    if not url.startswith("sqlite"):
        env["HEADROOM_DB_URL"] = url
    out = subprocess.run([HEADROOM, "stats"], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "went out uncompressed, by reason" in out.stdout and label in out.stdout
