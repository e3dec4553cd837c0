"""Isolation end to end (issue: nothing the proxy adds or keeps for one project or user reaches
another), through real ``mitmdump -s addons/headroom.py`` processes, the real ``anthropic`` SDK,
a real local upstream, the real embedding model, SQLite and a real PostgreSQL server.

The scenario a user reported: a memory saved for project A; then the same request (same system
prompt, same first user message, as many agents start) sent once for project A and once for
project B, in both orders. B never carries A's memory; A gets it either way. Two API keys in
one project never share a session; a retrieve call made from project B with a key that project
A's request offloaded gets the answer an unknown key gets.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import select

from headroom_core.compress import markers
from headroom_core.db.engine import open_database
from headroom_core.db.models import RequestOutcome
from tests.e2e.test_memory_e2e import BASH, wait_for_model
from tests.support.clients import anthropic_client
from tests.support.postgres import fresh_pg_database, pg_server_url
from tests.support.proxy import ADDON_SCRIPT
from tests.support.upstream import Reply
from tests.unit.test_request_plan import github_scenario

SYSTEM = "You are Claude Code, Anthropic's CLI for coding.\n" + "Follow the repository's conventions. " * 300
MEMORY = "Database migrations in this project run with pnpm db:migrate; prisma migrate dev breaks the schema."
QUESTION = "How do I run the database migrations here?"
UNKNOWN = "headroom_retrieve error: no original is stored under key {key} (unknown, or expired); work with the shortened output."


def headroom_cli(home: str, *args: str, env: dict | None = None) -> str:
    out = subprocess.run(
        [str(Path(sys.executable).parent / "headroom"), *args],
        capture_output=True, text=True, timeout=300, env={**os.environ, "HEADROOM_HOME": home, **(env or {})},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout


def ask(upstream, proxy, project: str, question: str = QUESTION, key: str = "sk-ant-test-one", tools=(BASH,)) -> dict:
    """One request for ``project``; returns the body the upstream received."""
    n = len(upstream.requests)
    client = anthropic_client(upstream, proxy, api_key=key, default_headers={"x-headroom-project": project})
    client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=100,
        system=SYSTEM,
        tools=list(tools),
        messages=[{"role": "user", "content": question}],
    )
    return upstream.requests[n].json


def carries_memory(body: dict) -> bool:
    return MEMORY in json.dumps(body["messages"])


@pytest.fixture(scope="module")
def proxy(module_proxy_factory, upstream_server):
    p = module_proxy_factory(ADDON_SCRIPT, options={"headroom_memory": "true"})
    wait_for_model(p)
    headroom_cli(p.home, "memory", "add", MEMORY, "--project", "A")
    upstream_server.reset()
    return p


@pytest.mark.parametrize("order", [("A", "B"), ("B", "A")], ids=["A-then-B", "B-then-A"])
def test_one_projects_memory_never_reaches_another_in_either_order(upstream, proxy, order):
    question = f"{QUESTION} ({'-'.join(order)})"  # the same request for both projects in this order
    sent = {project: ask(upstream, proxy, project, question) for project in order}
    assert carries_memory(sent["A"]), "project A's request must carry A's memory"
    assert not carries_memory(sent["B"]), "project B's request carried project A's memory"
    first = [
        m["content"] if isinstance(m["content"], str) else m["content"][0]["text"]
        for m in (sent["A"]["messages"][0], sent["B"]["messages"][0])
    ]
    assert first == [question, question]  # the same request


def test_two_api_keys_in_one_project_never_share_a_session(upstream, proxy):
    question = "Which migrations are pending?"
    one = ask(upstream, proxy, "A", question, key="sk-ant-user-one")
    two = ask(upstream, proxy, "A", question, key="sk-ant-user-two")
    assert carries_memory(one) and carries_memory(two)
    sessions = open_database(f"sqlite:///{Path(proxy.home) / 'headroom.db'}")
    deadline = time.monotonic() + 30  # the rows are committed just after the answers
    while True:
        with sessions() as s:
            rows = s.scalars(select(RequestOutcome).order_by(RequestOutcome.id.desc()).limit(2)).all()
        if len(rows) == 2 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert len(rows) == 2 and rows[0].session_key != rows[1].session_key
    # and no credential is stored anywhere, in clear or as an unkeyed hash
    raw = b"".join(p.read_bytes() for p in Path(proxy.home).glob("headroom.db*"))
    assert b"sk-ant-user-one" not in raw and b"sk-ant-user-two" not in raw


def offload_then_steal(upstream, proxy_a, proxy_b, payload: str) -> tuple[str, str, str]:
    """Project A's request offloads ``payload`` (through ``proxy_a``); then the model, in a
    conversation of project B (through ``proxy_b``) that never held the payload, calls
    ``headroom_retrieve`` with A's key, and in such a conversation of project A too. Returns the
    key and the two tool results the proxy answered with."""
    call = {"type": "tool_use", "id": "toolu_gh", "name": "mcp__gh__issues", "input": {}}
    msgs = [
        {"role": "user", "content": "List the open issues. " * 200},
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_gh", "content": payload}]},
    ]
    tools = [
        BASH,
        {
            "name": "mcp__gh__issues",
            "description": "List issues.",
            "input_schema": {"type": "object", "properties": {}},
        },
    ]
    upstream.script(Reply.text("30 are open."))
    anthropic_client(upstream, proxy_a, default_headers={"x-headroom-project": "A"}).messages.create(
        model="claude-sonnet-4-5", max_tokens=100, system=SYSTEM, tools=tools, messages=msgs
    )
    forwarded = upstream.requests[-1].json["messages"][2]["content"][0]["content"]
    (key,) = set(markers.find_marker_keys(forwarded))
    answers = []
    for project in ("B", "A"):
        n = len(upstream.requests)
        upstream.script(Reply.tool_call("headroom_retrieve", {"key": key}), Reply.text("done"))
        msg = anthropic_client(upstream, proxy_b, default_headers={"x-headroom-project": project}).messages.create(
            model="claude-sonnet-4-5",
            max_tokens=100,
            system=SYSTEM,
            tools=tools,
            messages=[{"role": "user", "content": f"Show issue 3 ({project}). " * 400}],
        )
        assert [b.type for b in msg.content] == ["text"] and msg.content[
            0
        ].text == "done"  # the client never sees the proxy's call
        follow = upstream.requests[n + 1].json
        answers.append(follow["messages"][-1]["content"][0]["content"])
    return key, answers[0], answers[1]


def test_retrieve_from_another_project_gets_the_unknown_key_answer(upstream, proxy):
    payload = github_scenario("paginate-issues.json")
    key, from_b, from_a = offload_then_steal(upstream, proxy, proxy, payload)
    assert from_b == UNKNOWN.format(key=key)
    assert from_a == payload


@pytest.fixture(scope="module")
def pg_url():
    server = pg_server_url()
    if server is None:
        pytest.skip("no PostgreSQL server: scripts/test starts one (scripts/postgres)")
    url, drop = fresh_pg_database(server)
    yield url
    drop()


def test_isolation_holds_with_two_proxies_on_one_postgresql(upstream, module_proxy_factory, pg_url, tmp_path_factory):
    key_file = tmp_path_factory.mktemp("team") / "secret.key"
    env = {"HEADROOM_DB_URL": pg_url, "HEADROOM_SECRET_KEY_FILE": str(key_file)}
    one = module_proxy_factory(ADDON_SCRIPT, options={"headroom_memory": "true"}, env=env)
    two = module_proxy_factory(ADDON_SCRIPT, options={"headroom_memory": "true"}, env=env)
    wait_for_model(one)
    wait_for_model(two)
    headroom_cli(one.home, "memory", "add", MEMORY, "--project", "A", env=env)
    upstream.reset()
    question = QUESTION + " (team)"
    b_two = ask(upstream, two, "B", question)
    a_one = ask(upstream, one, "A", question)
    b_one = ask(upstream, one, "B", question)
    a_two = ask(upstream, two, "A", question)
    assert carries_memory(a_one) and carries_memory(a_two)
    assert not carries_memory(b_one) and not carries_memory(b_two)
    payload = github_scenario("search-issues.json")
    key, from_b, from_a = offload_then_steal(upstream, one, two, payload)
    assert from_b == UNKNOWN.format(key=key)
    assert from_a == payload  # offloaded through one proxy, retrieved through the other
