"""Client-side tool deferral end to end (issue 31): a real ``mitmdump`` with tools on demand on
and the evidence for skeletons in its own ledger. A client that defers its own tools (Anthropic
``defer_loading`` with the regex tool search; Codex's ``tool_search``, a namespace of deferred
MCP tools and a deferred function) gets no skeleton and no ``headroom_tool_docs``, and what it
deferred reaches the upstream byte for byte; the same client without deferral, in the same
proxy, gets skeletons (the evidence is there)."""

from __future__ import annotations

import json
import time

import pytest
from sqlalchemy import func, select

from headroom_core.db.engine import open_database
from headroom_core.db.models import ToolUsage
from headroom_core.tools.on_demand import NOTE, TOOL_NAME
from headroom_core.wire import jsonedit
from tests.conftest import flow_files, load_flow
from tests.e2e.test_tool_docs_e2e import _a_day_later
from tests.support.clients import http_client
from tests.support.proxy import ADDON_SCRIPT

SYSTEM = "You are a coding agent. Working directory: /home/user/app\n" + "Be careful. " * 200
IDLE = 3
HEADERS = {"content-type": "application/json", "x-headroom-project": "/home/user/app"}


@pytest.fixture(scope="module")
def corpus_tools() -> list[dict]:
    """The largest ``tools`` of the real Claude Code session (229 definitions, 200+ MCP tools)."""
    best: list[dict] = []
    for f in flow_files():
        tools = load_flow(f)["request"]["body"].get("tools") or []
        best = tools if len(tools) > len(best) else best
    assert len(best) >= 200
    return best


def _anthropic(tools: list[dict], text: str) -> dict:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "system": SYSTEM,
        "tools": tools,
        "messages": [{"role": "user", "content": text}],
    }


def _responses(tools: list[dict], text: str) -> dict:
    return {
        "model": "gpt-5-codex",
        "instructions": SYSTEM,
        "tools": tools,
        "input": [{"role": "user", "content": [{"type": "input_text", "text": text}]}],
    }


def _function(t: dict, **extra) -> dict:
    """A corpus tool as Codex writes a Responses function tool."""
    return {
        "type": "function",
        "name": t["name"],
        "description": t["description"],
        "strict": False,
        **extra,
        "parameters": t["input_schema"],
    }


def _elements(text: str) -> list[str]:
    return [text[a:b] for a, b in jsonedit.element_spans(text, ("tools",))]


def _names(tools: list[dict]) -> list[str]:
    return [t.get("name", "") for t in tools]


def _shortened(tools: list[dict]) -> list[str]:
    return [t["name"] for t in tools if str(t.get("description", "")).endswith(NOTE)]


@pytest.mark.parametrize("dialect", ["anthropic", "responses"])
def test_a_client_that_defers_its_tools_gets_them_upstream_as_written(upstream, proxy_factory, corpus_tools, dialect):
    px = proxy_factory(
        ADDON_SCRIPT,
        options={
            "headroom_tools_on_demand": "true",
            "headroom_tools_on_demand_idle_requests": str(IDLE),
            "headroom_compress_timeout_seconds": 300,
        },
    )
    path = "/v1/messages" if dialect == "anthropic" else "/v1/responses"
    body = _anthropic if dialect == "anthropic" else _responses
    plain = corpus_tools if dialect == "anthropic" else [_function(t) for t in corpus_tools]
    mcp = [t for t in corpus_tools if t["name"].startswith("mcp__")]
    if dialect == "anthropic":  # every MCP tool deferred, the server's regex tool search
        deferring = [dict(t, defer_loading=True) if t["name"].startswith("mcp__") else t for t in corpus_tools]
        deferring.append({"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"})
    else:  # Codex: one server's tools as a namespace of deferred functions, the rest deferred functions, its tool_search
        server = mcp[0]["name"].split("__")[1]
        ns = [_function(t, defer_loading=True) for t in mcp if t["name"].split("__")[1] == server]
        deferring = [_function(t) for t in corpus_tools if not t["name"].startswith("mcp__")]
        deferring.append(
            {
                "type": "namespace",
                "name": f"mcp__{server}__",
                "description": f"Tools in the mcp__{server}__ namespace.",
                "tools": ns,
            }
        )
        deferring += [_function(t, defer_loading=True) for t in mcp if t["name"].split("__")[1] != server]
        deferring.append({"type": "tool_search", "execution": "client", "description": "Search   deferred tools.",
                          "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "number"}}, "required": ["query"]}})  # fmt: skip
        assert ns and any(t.get("defer_loading") for t in deferring)
    url = upstream.url + path
    with http_client(px, timeout=300) as c:
        # earlier sessions of the project: every tool offered, none called (the upstream's echo)
        for i in range(IDLE):
            r = c.post(url, content=json.dumps(body(plain, f"earlier task {i}")).encode(), headers=HEADERS)
            assert r.status_code == 200, r.text[:300]
        _wait_offered(px, corpus_tools[0]["name"], IDLE)
        _a_day_later(px)  # their prompt cache is cold: a new session decides on the evidence
        first = len(upstream.requests)

        # a new session of a client that defers: its bytes, as written (an indented body)
        raw = json.dumps(body(deferring, "a task that needs a deferred tool"), indent=1)
        r = c.post(url, content=raw.encode(), headers=HEADERS)
        assert r.status_code == 200, r.text[:300]
        got = upstream.requests[first].text
        sent = json.loads(got)["tools"]
        assert TOOL_NAME not in _names(sent) and _shortened(sent) == []
        assert _names(sent).count("headroom_retrieve") <= 1  # only the proxy's usual tool may be added
        mine = _elements(got)
        for el in _elements(raw):
            t = json.loads(el)
            if t.get("defer_loading") is True or t.get("type") in (
                "namespace",
                "tool_search",
                "tool_search_tool_regex_20251119",
            ):
                assert el in mine, el[:120]  # byte for byte: defer_loading, the namespace's members, the search tool
        by_name = {t.get("name"): t for t in sent}
        deferred = [t for t in deferring if t.get("defer_loading") is True]
        assert len(deferred) >= 100 and all(by_name[t["name"]] == t for t in deferred)

        # the same client without deferral, a new session once the scope's prompt cache is cold
        # (while warm it sends the tools as the deferring session did): the idle tools go as skeletons
        _wait_offered(px, corpus_tools[0]["name"], IDLE + 1)  # the deferring request counted too
        _a_day_later(px)
        r = c.post(url, content=json.dumps(body(plain, "another task")).encode(), headers=HEADERS)
        assert r.status_code == 200, r.text[:300]
        control = json.loads(upstream.requests[-1].text)["tools"]
        assert _names(control)[-1] == TOOL_NAME and len(_shortened(control)) >= 100


def _wait_offered(px, name: str, at_least: int, timeout: float = 60.0) -> None:
    """Until the proxy's ledger has ``at_least`` requests that offered ``name``."""
    sessions = open_database(f"sqlite:///{px.home / 'headroom.db'}")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with sessions() as s:
            if (s.scalar(select(func.max(ToolUsage.offered)).where(ToolUsage.tool_name == name)) or 0) >= at_least:
                return
        time.sleep(0.2)
    raise AssertionError(f"the ledger never counted {at_least} requests offering {name}")
