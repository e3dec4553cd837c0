"""``headroom show`` and the page's ``/request`` view (issue 34), after a real session of three
turns through a real ``mitmdump`` with the ``anthropic`` SDK: a large JSON tool output is
compressed in turn 1 (its before and after texts shown, its kind, decision and reason), replayed
in turns 2 and 3 (each later turn's prefix the same as the turn before up to the new message),
and the provider's cache read/write of each request reported. Also item 10: the proxy's own
tools are counted apart from the client's tool definitions, and ``stats`` shows how many
requests went out uncompressed and why."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from bs4 import BeautifulSoup
from sqlalchemy import select

from headroom_core.compress import markers
from headroom_core.compress.tokens import TokenCounter
from headroom_core.db.engine import open_database
from headroom_core.db.models import RequestOutcome
from tests.support.clients import anthropic_client
from tests.support.proxy import ADDON_SCRIPT
from tests.support.upstream import Reply
from tests.unit.test_request_plan import anthropic_request, github_scenario

HEADROOM = str(Path(sys.executable).parent / "headroom")
USAGE = [dict(input_tokens=500, output_tokens=20, cache_read=0, cache_creation=4000), dict(input_tokens=60, output_tokens=20, cache_read=4000, cache_creation=300),
         dict(input_tokens=70, output_tokens=20, cache_read=4300, cache_creation=90)]  # fmt: skip


@pytest.fixture(scope="module")
def session(module_proxy_factory, upstream_server):
    """Three turns of one conversation, then one request with the bypass header (it goes out
    uncompressed), through one proxy."""
    px = module_proxy_factory(ADDON_SCRIPT, options={"headroom_compress_timeout_seconds": 300})
    big = github_scenario("paginate-issues.json")
    upstream_server.reset()
    upstream_server.script(*(Reply.text(f"answer {i}", **u) for i, u in enumerate(USAGE)), Reply.text("bypassed"))
    client = anthropic_client(upstream_server, px)
    body = anthropic_request(big)
    msgs = list(body["messages"])
    for i in range(3):
        client.messages.create(
            model="claude-sonnet-4-5", max_tokens=100, system=body["system"], tools=body["tools"], messages=msgs
        )
        msgs += [{"role": "assistant", "content": f"answer {i}"}, {"role": "user", "content": f"and question {i + 2}?"}]
    client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=100,
        messages=[{"role": "user", "content": "hi"}],
        extra_headers={"x-headroom-bypass": "1"},
    )
    sessions = open_database(f"sqlite:///{px.home / 'headroom.db'}")
    for _ in range(200):  # the rows are written by the ledger's own thread
        with sessions() as s:
            rows = list(s.scalars(select(RequestOutcome).order_by(RequestOutcome.id)))
        if len(rows) == 4 and all(r.status_code for r in rows):
            break
        time.sleep(0.1)
    px.rows, px.big, px.sessions = rows, big, sessions
    px.sent = [r.json for r in upstream_server.requests]
    return px


def _cli(px, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEADROOM_")}
    env.update(HEADROOM_HOME=str(px.home), COLUMNS="80")
    return subprocess.run([HEADROOM, *args], capture_output=True, text=True, env=env, timeout=120)


def _show(px, *args: str) -> dict:
    out = _cli(px, "show", "--json", *args)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_show_the_turn_that_compressed(session):
    first = session.rows[0]
    r = _show(session, str(first.id))
    counter = TokenCounter(str(session.home))
    (b,) = r["blocks"]
    assert (b["message"], b["tool"], b["kind"], b["decision"]) == (2, "github_api", "json", "compressed")
    assert (
        b["reason"] and b["tokens_before"] == counter.count(session.big) and b["tokens_after"] < b["tokens_before"] / 2
    )
    assert b["before"] == session.big  # the original, from the originals store
    sent_out = session.sent[0]["messages"][2]["content"][0]["content"]
    assert b["after"] == sent_out and set(markers.find_marker_keys(sent_out)) == set(b["keys"]) == {
        markers.offload_key(session.big)
    }
    assert r["prefix"]["known"] is False and r["replayed"]["blocks"] == 0
    assert r["usage"] == {"input": 500, "output": 20, "cache_read": 0, "cache_write": 4000}
    assert (
        r["tools"]["proxy"] > 0
        and r["tools"]["before"] == r["tools"]["after"]
        or r["tools"]["after"] < r["tools"]["before"]
    )


def test_show_a_later_turn_replays_and_compares_its_prefix(session):
    third = session.rows[2]
    r = _show(session, third.session_key[:12])  # a session key's prefix (cache report): its latest request
    assert r["id"] == third.id and r["blocks"][-1]["decision"] == "replayed"
    assert _show(session, session.rows[1].entry_id)["id"] == session.rows[1].id
    assert r["replayed"]["blocks"] == 1 and r["replayed"]["tokens_before"] == session.rows[0].tokens_before
    p = r["prefix"]
    # turn 3 sent 7 messages; the 5 of turn 2 went out in the same bytes (the client's markers
    # moved nowhere: no cache_control on messages), the sixth is new
    assert (p["known"], p["messages"], p["previous_messages"], p["same_messages"]) == (True, 7, 5, 5)
    assert p["tools_same"] is True and p["system_same"] is True and p["first_difference"] == "message 5"
    sent2 = json.dumps(session.sent[1]["messages"][:5], separators=(",", ":"))
    assert p["same_bytes"] >= len(sent2.encode()) - 10 and p["previous_id"] == session.rows[1].id
    assert r["usage"]["cache_read"] == 4300 and r["usage"]["cache_write"] == 90


def test_show_defaults_to_the_latest_and_names_why_it_went_out_uncompressed(session):
    r = _show(session)
    assert r["id"] == session.rows[-1].id and r["outcome"] == "bypass" and r["blocks"] == []
    out = _cli(session, "show", str(session.rows[0].id))
    assert out.returncode == 0, out.stderr
    assert max(len(line) for line in out.stdout.splitlines()) <= 80
    assert (
        "github_api" in out.stdout and "json" in out.stdout and "compressed" in out.stdout and "before:" in out.stdout
    )
    bad = _cli(session, "show", "zzz")
    assert (
        bad.returncode == 1
        and len(bad.stderr.strip().splitlines()) == 1
        and "no recorded request matches" in bad.stderr
    )


def test_stats_counts_proxy_tools_apart_and_uncompressed_requests(session):
    rows = session.rows
    assert all(r.proxy_tools_tokens > 0 for r in rows[:3])  # headroom_retrieve, counted apart
    assert all(r.tools_tokens_after <= r.tools_tokens_before for r in rows)  # the client's tools never "grow"
    assert [r.outcome for r in rows] == ["compressed", "compressed", "compressed", "bypass"]
    out = _cli(session, "stats")
    assert out.returncode == 0, out.stderr
    assert (
        "proxy tools added" in out.stdout
        and "bypass (x-headroom-bypass)" in out.stdout
        and "−-" not in out.stdout
        and "--" not in out.stdout.replace("--wide", "").replace("--by", "")
    )
    snap = json.loads(_cli(session, "stats", "--json").stdout)
    assert snap["uncompressed"] == [{"key": "bypass", "label": "bypass (x-headroom-bypass)", "requests": 1}]
    assert snap["totals"]["proxy_tools_tokens"] == sum(r.proxy_tools_tokens for r in rows)


def _get(px, path: str) -> httpx.Response:
    with httpx.Client(proxy=px.url, trust_env=False, timeout=30) as c:
        return c.get("http://headroom.localhost" + path)


def test_the_page_view_of_a_request(session):
    first = session.rows[0]
    r = _get(session, f"/request?id={first.id}")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    soup = BeautifulSoup(r.text, "html.parser")
    (row,) = soup.select('table[data-group="blocks"] tr[data-block]')
    assert (row["data-kind"], row["data-decision"], int(row["data-before"]), int(row["data-after"])) == (
        "json",
        "compressed",
        first.tokens_before,
        first.tokens_after,
    )
    assert soup.select_one('pre[data-text="before"]').get_text() == session.big
    assert (
        soup.select_one('pre[data-text="after"]').get_text() == session.sent[0]["messages"][2]["content"][0]["content"]
    )
    assert _get(session, f"/request?id={first.id}&format=json").json()["blocks"][0]["before"] == session.big
    with httpx.Client(trust_env=False, timeout=30) as c:  # on the proxy's own port too
        assert c.get(f"{session.url}/request?id={first.id}").status_code == 200
    assert _get(session, "/request?id=zzz").status_code == 404
    page = _get(session, "/")
    fig = {el["data-figure"]: el for el in BeautifulSoup(page.text, "html.parser").select("[data-figure]")}
    assert fig["uncompressed"]["data-value"] == "1" and int(fig["proxy_tools_tokens"]["data-value"]) > 0
    assert "−-" not in page.text


def test_a_request_sent_with_only_the_proxys_tools_added_is_not_compressed(session, upstream_server):
    """A new conversation over ``retrieve_min_bytes`` (a long system prompt) whose tool output is
    too small to compress: the body goes out grown by headroom_retrieve alone. ``show`` says so and ``stats --by action`` counts it as unchanged,
    not as a compressed request that saved a negative number of tokens."""
    body = anthropic_request('{"ok": true}')
    upstream_server.script(Reply.text("small"))
    anthropic_client(upstream_server, session).messages.create(
        model="claude-sonnet-4-5",
        max_tokens=100,
        system="a new conversation. " + "Follow the house style. " * 600,
        tools=body["tools"],
        messages=body["messages"],
    )
    for _ in range(200):
        with session.sessions() as s:
            row = s.scalars(select(RequestOutcome).order_by(RequestOutcome.id.desc())).first()
        if row is not None and row.id > session.rows[-1].id and row.status_code:
            break
        time.sleep(0.1)
    assert row.body_bytes_after > row.body_bytes_before and row.proxy_tools_tokens > 0  # grown by the proxy's tool
    assert (row.tokens_after, row.tools_tokens_after) == (row.tokens_before, row.tools_tokens_before)  # nothing smaller
    assert (row.action, row.outcome) == ("unchanged", "unchanged")
    out = _cli(session, "show", str(row.id))
    assert out.returncode == 0 and "unchanged (proxy tools added)" in out.stdout, out.stdout + out.stderr
    by_action = {
        r["key"]: r for r in csv.DictReader(io.StringIO(_cli(session, "stats", "--by", "action", "--csv").stdout))
    }
    assert (by_action["unchanged"]["requests"], by_action["compressed"]["requests"]) == ("1", "3")
    assert int(by_action["unchanged"]["tokens_saved"]) == 0 and int(by_action["compressed"]["tokens_saved"]) > 0
