"""Tools on demand end to end (issue 19, part 1): a real ``mitmdump`` with
``tools_on_demand`` on, the real Claude Code tool definitions of the corpus, the real
``anthropic`` SDK. Earlier sessions of the project build the evidence in the proxy's own ledger;
in a new session the proxy sends the idle tools as skeletons, the upstream model calls
``headroom_tool_docs``, and the proxy answers it with the full definition the client sent: the
client gets only the model's final answer."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from headroom_core.db.engine import open_database
from headroom_core.db.models import ToolUsage
from headroom_core.tools.on_demand import NOTE, TOOL_NAME, definition_text
from headroom_core.wire import jsonedit
from tests.conftest import flow_files, load_flow
from tests.support.clients import anthropic_client
from tests.support.proxy import ADDON_SCRIPT
from tests.support.upstream import Reply

MODEL = "claude-sonnet-4-5"
SYSTEM = (
    "You are Claude Code, Anthropic's official CLI for Claude. Working directory: /home/user/app\n"
    + "Be careful. " * 200
)
IDLE = 3  # tools_on_demand_idle_requests for the test
WANTED = "mcp__zen__precommit"


@pytest.fixture(scope="module")
def corpus_tools() -> list[dict]:
    """The 229 tool definitions of the real Claude Code session (its largest ``tools``)."""
    best: list[dict] = []
    for f in flow_files():
        tools = load_flow(f)["request"]["body"].get("tools") or []
        if len(tools) > len(best):
            best = tools
    assert len(best) >= 200 and any(t["name"] == WANTED for t in best)
    return best


def _usage_rows(proxy, at_least: int, timeout: float = 60.0) -> int:
    """The requests that offered ``Read`` in the proxy's ledger, once there are ``at_least``
    (the ledger is written after the response)."""
    sessions = open_database(f"sqlite:///{proxy.home / 'headroom.db'}")
    deadline = time.monotonic() + timeout
    while True:
        with sessions() as s:
            n = s.scalar(select(func.max(ToolUsage.offered)).where(ToolUsage.tool_name == "Read")) or 0
        if n >= at_least or time.monotonic() > deadline:
            return n
        time.sleep(0.2)


def _a_day_later(proxy) -> None:
    """The ledger's requests moved a day back (the earlier sessions were yesterday)."""
    sessions = open_database(f"sqlite:///{proxy.home / 'headroom.db'}")
    with sessions.begin() as s:
        for row in s.scalars(select(ToolUsage)):
            row.last_seen_at = row.last_seen_at - timedelta(days=1)


def _tools_text(rec) -> str:
    a, b = jsonedit.span(rec.text, ("tools",))
    return rec.text[a:b]


@pytest.mark.parametrize("stream", [False, True])
def test_model_asks_headroom_tool_docs_and_the_proxy_answers_with_the_full_definition(
    upstream, proxy_factory, corpus_tools, stream
):
    px = proxy_factory(
        ADDON_SCRIPT,
        options={
            "headroom_tools_on_demand": "true",
            "headroom_tools_on_demand_idle_requests": str(IDLE),
            "headroom_compress_timeout_seconds": 300,
        },
    )
    client = anthropic_client(upstream, px, http_kw={"timeout": 120})
    # earlier sessions of the project: the model calls Read, never the MCP tools
    for i in range(IDLE):
        upstream.script(Reply.tool_call("Read", {"file_path": "/home/user/app/a.py"}, text="Reading."))
        msg = client.messages.create(
            model=MODEL,
            max_tokens=100,
            system=SYSTEM,
            tools=corpus_tools,
            messages=[{"role": "user", "content": f"earlier task {i}"}],
        )
        assert msg.content[-1].type == "tool_use" and msg.content[-1].name == "Read"
    assert _usage_rows(px, IDLE) >= IDLE
    _a_day_later(px)  # the provider's prompt cache of those sessions is cold: the statuses are decided anew
    first_new = len(upstream.requests)

    # a new session: the idle tools go as skeletons; the model asks for one tool's docs
    upstream.script(
        Reply.tool_call(TOOL_NAME, {"name": WANTED}, text="Let me read how that tool works."),
        Reply.text("Pre-commit checks planned."),
    )
    kwargs = dict(
        model=MODEL,
        max_tokens=100,
        system=SYSTEM,
        tools=corpus_tools,
        messages=[{"role": "user", "content": "run the pre-commit review"}],
    )
    if stream:
        with client.messages.stream(**kwargs) as s:
            msg = s.get_final_message()
    else:
        msg = client.messages.create(**kwargs)

    # the client sees one answer without the proxy's call
    assert [b.type for b in msg.content] == ["text", "text"]
    assert [b.text for b in msg.content] == ["Let me read how that tool works.", "Pre-commit checks planned."]
    assert msg.stop_reason == "end_turn"

    first, follow = upstream.requests[first_new:]
    sent = {t["name"]: t for t in first.json["tools"]}
    assert first.json["tools"][-1]["name"] == TOOL_NAME
    assert (
        sent[WANTED]["description"].endswith(NOTE)
        and sent["Read"]["description"].split()
        == next(t for t in corpus_tools if t["name"] == "Read")["description"].split()
    )
    shortened = [n for n, t in sent.items() if t.get("description", "").endswith(NOTE)]
    assert len(shortened) >= 100
    assert len(_tools_text(first)) < len(json.dumps(corpus_tools)) / 2
    # the follow-up: the same tools byte for byte, then the model's call and the proxy's answer
    assert _tools_text(follow) == _tools_text(first)
    call = follow.json["messages"][-2]["content"][-1]
    assert call["type"] == "tool_use" and call["name"] == TOOL_NAME and call["input"] == {"name": WANTED}
    result = follow.json["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == call["id"]
    content = result["content"] if isinstance(result["content"], str) else result["content"][0]["text"]
    full = next(t for t in corpus_tools if t["name"] == WANTED)
    assert content == definition_text(full)
    assert content.startswith(f"Tool: {WANTED}\nDescription:\n{full['description']}\n")  # the description verbatim
    assert content.split("(JSON Schema, input_schema):\n", 1)[1] == json.dumps(
        full["input_schema"], ensure_ascii=False, separators=(",", ":")
    )
