"""An output a compression timeout sent whole (issue 33): recorded as its decision like any other,
and where it went remembered with the session, so every proxy of a team sends the same bytes.

The walk on a real runtime (SQLite): the timed-out turn is :func:`~headroom_core.request_plan.replay_only`
(what the proxy sends after a compression timeout), the others :func:`plan_request`; a second
runtime on the same home is a second proxy of a team.
"""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from headroom_core.compress.result import DEFERRED
from headroom_core.db.models import CompressionDecision
from headroom_core.request_plan import plan_request, replay_only
from headroom_core.runtime import Runtime
from headroom_core.settings import load_settings

EPH = {"type": "ephemeral"}
SYSTEM = [{"type": "text", "text": "You are a coding agent. Working directory: /work/shop\n" + "Be careful. " * 800, "cache_control": EPH}]
TOOLS = [{"name": "Bash", "description": "Run a shell command.", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}]
UA = {"user-agent": "claude-cli/1.0.62 (external, cli)"}
#: Where the output of the timed-out turn sits in ``messages``.
AT = 2


def log_output(n: int = 1600) -> str:
    lines = [f"2024-05-01T10:{i // 60 % 60:02d}:{i % 60:02d}Z INFO worker-{i % 4} processed batch {i} in {10 + i % 7} ms" for i in range(n)]
    lines[800] = "2024-05-01T10:13:20Z ERROR worker-0 batch 800 failed: connection reset by peer"
    return "\n".join(lines)


def conversation(output: str, turns: int) -> list[list[dict]]:
    """The ``messages`` of ``turns`` requests: the task, then ``output`` (new in request 2), then
    a short call and output per request."""
    msgs: list[dict] = [{"role": "user", "content": [{"type": "text", "text": "Find out why the nightly job fails."}]}]
    out = [json.loads(json.dumps(msgs))]
    for n in range(1, turns):
        text = output if n == 1 else f"step {n}: ok"
        call = {"type": "tool_use", "id": f"toolu_{n}", "name": "Bash", "input": {"command": f"run {n}"}}
        msgs += [{"role": "assistant", "content": [call]}, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": text}]}]
        out.append(json.loads(json.dumps(msgs)))
    return out


def raw(messages: list[dict]) -> bytes:
    msgs = json.loads(json.dumps(messages))
    msgs[-1]["content"][-1]["cache_control"] = EPH  # Claude Code's breakpoint on the latest message
    return json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 512, "system": SYSTEM, "tools": TOOLS, "messages": msgs}).encode()


def sent(plan, body: bytes) -> dict:
    return json.loads(plan.body if plan.body else body)


# -- the walk, on a real runtime -----------------------------------------------------------------


@pytest.fixture
def home(tmp_path):
    return str(tmp_path)


def proxy(home: str, counter) -> Runtime:
    """A proxy of the team: a runtime on the shared home (its database and secret key)."""
    rt = Runtime(load_settings({"home": home}, env={}))
    rt.__dict__["counter"] = counter
    return rt


def deferred_rows(rt: Runtime) -> int:
    with rt.sessions() as s:
        return len(s.scalars(select(CompressionDecision).where(CompressionDecision.strategy == DEFERRED)).all())


def test_a_timeout_records_that_it_sent_an_output_whole_and_the_session_remembers_where(home, counter):
    a, b = proxy(home, counter), proxy(home, counter)
    turns = [raw(m) for m in conversation(log_output(), 2)]
    plan_request(a, "POST", "/v1/messages", UA, turns[0])
    p = replay_only(a, "POST", "/v1/messages", UA, turns[1], "compression timed out after 10.0 s")
    assert sent(p, turns[1])["messages"][AT]["content"][0]["content"] == log_output()
    assert [(blk.strategy, blk.changed) for blk in p.pipeline.blocks] == [(DEFERRED, False)]
    assert deferred_rows(a) == 1  # a decision like any other, in the shared database
    rec = b.session_store.load(p.session_key)  # another proxy reads where it went whole
    assert [e.deferred for e in rec.messages] == [(), (), (("content", 0, "content"),)]
    # another proxy with no time either sends the very same bytes
    again = replay_only(b, "POST", "/v1/messages", UA, turns[1], "compression timed out after 10.0 s")
    assert again.body == p.body
