"""Conversations that name no project (no header, no working directory stated) are each their own
scope, through a real ``mitmdump -s addons/headroom.py`` with memory on and the real embedding
model: a memory the model saves in one is injected there and never in an unrelated one; live
learning's failures, the ledger's rows and tool statistics are kept per conversation; nothing is
written under a shared ``global`` project."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from headroom_core.db.engine import open_database
from headroom_core.db.models import RequestOutcome, ToolUsage
from headroom_core.learn.models import LearnFailure
from headroom_core.memory.models import Memory
from headroom_core.project import is_conversation
from tests.e2e.test_memory_e2e import BASH, wait_for_model
from tests.e2e.test_ws_e2e import wait_until
from tests.support.clients import anthropic_client
from tests.support.proxy import ADDON_SCRIPT
from tests.support.upstream import Reply

SYSTEM = "You are a helpful coding assistant."  # no environment block: no project
FACT = "The staging database of this service listens on port 6543, not 5432."


@pytest.fixture(scope="module")
def proxy(module_proxy_factory, upstream_server):
    p = module_proxy_factory(ADDON_SCRIPT, options={"headroom_memory": "true"})
    wait_for_model(p)
    upstream_server.reset()
    return p


def db(proxy):
    return open_database(f"sqlite:///{proxy.home / 'headroom.db'}")


def ask(upstream, proxy, messages: list[dict]) -> dict:
    n = len(upstream.requests)
    anthropic_client(upstream, proxy).messages.create(
        model="claude-sonnet-4-5", max_tokens=100, system=SYSTEM, tools=[BASH], messages=messages
    )
    return upstream.requests[n].json


def failing(task: str) -> list[dict]:
    return [
        {"role": "user", "content": task},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "pytest tests"}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "/bin/sh: 1: pytest: not found"}],
        },
    ]


def test_two_project_less_conversations_share_no_memory_failure_or_statistic(upstream, proxy):
    sessions = db(proxy)
    opening_a = "Which port does the staging database use? Check the service config."
    upstream.script(
        Reply.tool_call("memory_save", {"text": FACT, "kind": "fact"}, text="Noted."), Reply.text("Port 6543.")
    )
    ask(upstream, proxy, [{"role": "user", "content": opening_a}])
    with sessions() as s:
        mems = list(s.scalars(select(Memory)))
    assert [m.text for m in mems] == [FACT] and is_conversation(mems[0].project)
    project_a = mems[0].project

    # conversation A, a later turn: its own memory comes back
    later_a = [
        {"role": "user", "content": opening_a},
        {"role": "assistant", "content": "Port 6543."},
        {"role": "user", "content": "Remind me: which port is the staging database on?"},
    ]
    upstream.script(Reply.text("6543"))
    assert FACT in json.dumps(ask(upstream, proxy, later_a)["messages"][-1])

    # conversation B, unrelated, asks the same: never A's memory
    upstream.script(Reply.text("I don't know."))
    assert FACT not in json.dumps(
        ask(upstream, proxy, [{"role": "user", "content": "Remind me: which port is the staging database on?"}])
    )

    # a failure in conversation C is recorded under C only, never under A or a shared bucket
    upstream.script(Reply.text("ok"))
    ask(upstream, proxy, failing("run the suite for the parser"))

    def failure_projects():
        with sessions() as s:
            return {f.project for f in s.scalars(select(LearnFailure))}

    got = wait_until(failure_projects, timeout=30)
    assert len(got) == 1 and is_conversation(next(iter(got))) and project_a not in got

    def ledger():
        with sessions() as s:
            return [r.project for r in s.scalars(select(RequestOutcome))], {
                u.project for u in s.scalars(select(ToolUsage))
            }

    def enough():
        got = ledger()
        return got if len(got[0]) >= 4 else None

    rows, tool_projects = wait_until(enough, timeout=30) or ([], set())
    assert len(rows) == 4 and "global" not in rows and "global" not in tool_projects
    assert all(is_conversation(p) for p in rows) and len(set(rows)) == 3  # A (two turns), B, C
    assert tool_projects <= set(rows)
