"""Client-side tool deferral (issue 31): a client that defers its own tools (Anthropic
``defer_loading`` with a tool-search tool, Codex's ``tool_search`` and namespace tools) gets no
skeleton of them from tools on demand, and its deferred tools, namespaces and tool-search tools
go upstream as it wrote them (the minifier leaves them be)."""

from __future__ import annotations

import copy
import json

import pytest

from headroom_core import ledger
from headroom_core.cache.prefix_check import earlier_break
from headroom_core.request_plan import plan_request
from headroom_core.tools.minify import minify_tools
from headroom_core.tools.on_demand import NOTE, TOOL_NAME
from headroom_core.tools.skeleton import skeleton
from headroom_core.wire import jsonedit
from headroom_core.wire.blocks import Usage
from headroom_core.wire.tool_deferral import client_defers, defers_inside, is_deferred, is_tool_search
from tests.unit.test_tool_docs import HEADERS, TOOLS, UA, _body, _by_name, _cool, _runtime, _seed, _send

SPACED = "Looks   things up.\n\n\n   Use it   when needed.  "


def _fn(name: str, description: str = SPACED, **extra) -> dict:
    """A Responses function tool as Codex writes it."""
    return {"type": "function", "name": name, "description": description, "strict": False, **extra,
            "parameters": {"type": "object", "properties": {"q": {"type": "string", "description": "The   query."}}, "required": ["q"]}}  # fmt: skip


# --- detection -------------------------------------------------------------------------------


def test_deferral_is_recognised_by_structure_in_every_dialect():
    anthropic = {
        "name": "mcp__gh__issues",
        "description": "d",
        "input_schema": {"type": "object"},
        "defer_loading": True,
    }
    assert is_deferred(anthropic) and is_deferred(_fn("lookup", defer_loading=True))
    assert is_deferred(
        {"type": "function", "function": {"name": "f", "parameters": {}}, "defer_loading": True}
    )  # a Chat gateway
    assert is_deferred({"type": "function", "function": {"name": "f", "parameters": {}, "defer_loading": True}})
    for not_deferred in (
        {**anthropic, "defer_loading": False},
        {**anthropic, "defer_loading": "true"},
        _fn("x"),
        "defer_loading",
        None,
    ):
        assert not is_deferred(not_deferred)
    # tool-search tools, whatever the variant or date; a function merely named so is not one
    for search in ({"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"},
                   {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"},
                   {"type": "tool_search_tool_bm25_20270301", "name": "tool_search_tool_bm25"},
                   {"type": "tool_search", "execution": "client", "description": "Search.", "parameters": {"type": "object"}}):  # fmt: skip
        assert is_tool_search(search) and client_defers([_fn("a"), search])
    assert (
        not is_tool_search(_fn("tool_search"))
        and not is_tool_search({"type": "tool_searcher"})
        and not is_tool_search({"type": 3})
    )
    # groups that defer what they hold
    ns = {
        "type": "namespace",
        "name": "mcp__gh__",
        "description": "GitHub.",
        "tools": [_fn("issues", defer_loading=True), _fn("pulls")],
    }
    assert defers_inside(ns) and client_defers([ns])
    assert not defers_inside({**ns, "tools": [_fn("issues")]}) and not client_defers([{**ns, "tools": [_fn("issues")]}])
    toolset = {"type": "mcp_toolset", "mcp_server_name": "gh", "default_config": {"defer_loading": True}}
    assert defers_inside(toolset) and defers_inside(
        {"type": "mcp_toolset", "mcp_server_name": "gh", "configs": {"issues": {"defer_loading": True}}}
    )
    assert not client_defers(TOOLS) and not client_defers(None) and not client_defers({"tools": [anthropic]})


# --- the minifier and skeletons ---------------------------------------------------------------


def test_the_minifier_leaves_deferred_tools_namespaces_and_tool_search_as_written():
    long = "This paragraph is long enough to be referenced by a later tool if it were a source. " * 4
    deferred = {
        "name": "mcp__gh__issues",
        "description": SPACED + "\n\n" + long,
        "input_schema": {"type": "object", "title": "mcp__gh__issuesArguments"},
        "defer_loading": True,
    }
    later = {"name": "Bash", "description": "Runs   a command.\n\n" + long, "input_schema": {"type": "object"}}
    ns = {"type": "namespace", "name": "mcp__gh__", "description": SPACED, "tools": [_fn("issues", defer_loading=True)]}
    search = {"type": "tool_search", "execution": "client", "description": SPACED, "parameters": {"type": "object"}}
    tools = [deferred, later, ns, search, _fn("lookup", defer_loading=True), _fn("run")]
    res = minify_tools(tools)
    assert res.changed and res.changed_names == ("Bash", "run")
    for i in (0, 2, 3, 4):
        assert res.tools[i] is tools[i]  # the very same object: written upstream from the client's own bytes
    # the deferred tool's text is not in the model's context: never the source of a reference
    assert res.tools[1]["description"] == "Runs a command.\n\n" + long.strip()
    assert res.tools[5]["description"] == "Looks things up.\n\nUse it when needed." and res.tools[5]["strict"] is False
    # without the flag the first tool is minified and becomes the source
    plain = minify_tools([{k: v for k, v in deferred.items() if k != "defer_loading"}, later])
    assert plain.changed_names == ("mcp__gh__issues", "Bash") and plain.tools[1]["description"].startswith(
        "Runs a command.\n\n[same text as in mcp__gh__issues"
    )


def test_a_deferred_tool_has_no_skeleton():
    full = {
        "name": "mcp__gh__issues",
        "description": SPACED,
        "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
    }
    assert skeleton(full, NOTE) is not None
    assert skeleton({**full, "defer_loading": True}, NOTE) is None
    assert skeleton(_fn("lookup", defer_loading=True), NOTE) is None and skeleton(_fn("lookup"), NOTE) is not None


# --- tools on demand stands down ----------------------------------------------------------------


def _elements(text: str) -> dict[str, str]:
    """The ``tools`` elements of a request's JSON text by tool id, as written."""
    out = {}
    for a, b in jsonedit.element_spans(text, ("tools",)):
        t = json.loads(text[a:b])
        out[t.get("name") or "type:" + t["type"]] = text[a:b]
    return out


def _deferring(tools: list[dict]) -> list[dict]:
    """``tools`` with the MCP tools deferred, and Anthropic's regex tool search."""
    out = [dict(t, defer_loading=True) if t["name"].startswith("mcp__") else t for t in copy.deepcopy(tools)]
    return out + [{"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"}]


def test_a_client_that_defers_gets_no_skeleton_and_its_deferred_tools_go_as_written(tmp_path, counter):
    rt = _runtime(tmp_path, counter)
    _seed(rt, 6)  # Bash and the MCP tools idle for six requests, Read called
    b = _body([{"role": "user", "content": "a new task"}], _deferring(TOOLS))
    raw = json.dumps(b)
    p = plan_request(rt, "POST", "/v1/messages", HEADERS, raw.encode())
    sent_text = p.body.decode() if p.body else raw
    sent = json.loads(sent_text)
    assert TOOL_NAME not in [t["name"] for t in sent["tools"]] and TOOL_NAME not in p.hidden_tools
    assert not [
        t["name"] for t in sent["tools"] if t.get("description", "").endswith(NOTE)
    ]  # not even Bash (idle, not deferred)
    client, upstream = _elements(raw), _elements(sent_text)
    for name in ("mcp__gh__issues", "mcp__gh__pulls", "mcp__zen__chat", "tool_search_tool_regex"):
        assert upstream[name] == client[name], name  # byte for byte, defer_loading in place
    assert json.loads(upstream["Bash"])["description"].split() == TOOLS[0]["description"].split()
    # the same request without deferral: the evidence is there, the idle tools go as skeletons
    p2, s2 = _send(rt, _body([{"role": "user", "content": "another task"}]))
    assert {n for n, t in _by_name(s2).items() if t.get("description", "").endswith(NOTE)} == {
        "Bash",
        "mcp__gh__issues",
        "mcp__gh__pulls",
        "mcp__zen__chat",
    }


def test_a_known_session_whose_client_starts_deferring_sends_that_tool_as_written(tmp_path, counter):
    rt = _runtime(tmp_path, counter)
    _seed(rt, 6)
    m1 = [{"role": "user", "content": "fix it"}]
    b1 = _body(m1)
    p1, s1 = _send(rt, b1)
    assert _by_name(s1)["mcp__zen__chat"]["description"].endswith(NOTE)
    # the client now defers its last MCP tool and adds a tool search (a new tool: after the known ones)
    tools = copy.deepcopy(TOOLS)
    tools[4]["defer_loading"] = True
    tools.append({"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"})
    tools.append(
        {
            "name": "Idle",
            "description": "Idle tool. " + "More words here. " * 100,
            "input_schema": {"type": "object"},
            "defer_loading": False,
        }
    )
    b2 = _body(m1 + [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "go on"}], tools)
    raw = json.dumps(b2)
    p2 = plan_request(rt, "POST", "/v1/messages", HEADERS, raw.encode())
    s2_text = p2.body.decode()
    s2 = json.loads(s2_text)
    assert _elements(s2_text)["mcp__zen__chat"] == _elements(raw)["mcp__zen__chat"]  # as the client wrote it
    sent = _by_name(s2)
    # the other skeletons keep their status (the prefix before the client's change holds), nothing new is shortened
    assert (
        sent["mcp__gh__issues"] == _by_name(s1)["mcp__gh__issues"]
        and sent["mcp__gh__pulls"] == _by_name(s1)["mcp__gh__pulls"]
    )
    assert not sent["Idle"]["description"].endswith(NOTE) and [t["name"] for t in s2["tools"]][-1] == TOOL_NAME
    assert earlier_break(b1, b2, s1, s2) is None


@pytest.mark.parametrize("path", ["/v1/responses", "/v1/chat/completions"])
def test_codex_tool_search_and_namespaces_stand_tools_on_demand_down(tmp_path, counter, path):
    rt = _runtime(tmp_path, counter)
    chat = path.endswith("completions")
    key = "messages" if chat else "input"

    def fn(t, **extra):
        inner = {"name": t["name"], "description": t["description"], "parameters": t["input_schema"]}
        return {"type": "function", "function": inner, **extra} if chat else {"type": "function", **inner, **extra}

    plain = [fn(t) for t in TOOLS]
    for i in range(6):
        b = {"model": "gpt-5", "tools": plain, key: [{"role": "user", "content": f"earlier {i}"}]}
        p = plan_request(rt, "POST", path, HEADERS, json.dumps(b).encode())
        ledger.record(
            rt.sessions,
            p,
            user_agent=UA,
            model="gpt-5",
            status_code=200,
            usage=Usage(),
            rounds=0,
            offered=[t["name"] for t in TOOLS],
            called=["Read"],
        )
    _cool(rt)
    if chat:  # a gateway's deferral beside "function"
        tools = [fn(t, defer_loading=True) if t["name"].startswith("mcp__") else fn(t) for t in TOOLS]
    else:  # Codex: MCP tools in a namespace, deferred, and its tool_search
        ns = {"type": "namespace", "name": "mcp__gh__", "description": "Tools in the   mcp__gh__ namespace.",
              "tools": [fn(t, defer_loading=True) for t in TOOLS if t["name"] in ("mcp__gh__pulls", "mcp__zen__chat")]}  # fmt: skip
        search = {"type": "tool_search", "execution": "client", "description": "Search   deferred tools.",
                  "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}  # fmt: skip
        tools = [fn(t) for t in TOOLS if not t["name"].startswith("mcp__")] + [
            ns,
            search,
            fn(TOOLS[2], defer_loading=True),
        ]
    b = {"model": "gpt-5", "tools": tools, key: [{"role": "user", "content": "now"}]}
    raw = json.dumps(b)
    p = plan_request(rt, "POST", path, HEADERS, raw.encode())
    sent_text = p.body.decode() if p.body else raw
    inner = [t.get("function", t) for t in json.loads(sent_text)["tools"]]
    assert TOOL_NAME not in [t.get("name") for t in inner] and not [
        t["name"] for t in inner if str(t.get("description", "")).endswith(NOTE)
    ]
    client_el = [raw[a:c] for a, c in jsonedit.element_spans(raw, ("tools",))]
    sent_el = [sent_text[a:c] for a, c in jsonedit.element_spans(sent_text, ("tools",))]
    for el in client_el:
        t = json.loads(el)
        if is_deferred(t) or t["type"] in ("namespace", "tool_search"):
            assert el in sent_el, el[:80]  # byte for byte
    # the bare request without deferral is shortened: the evidence is there
    b3 = {"model": "gpt-5", "tools": plain, key: [{"role": "user", "content": "other"}]}
    p3 = plan_request(rt, "POST", path, HEADERS, json.dumps(b3).encode())
    inner3 = [t.get("function", t) for t in json.loads(p3.body)["tools"]]
    assert [t["name"] for t in inner3 if t["description"].endswith(NOTE)] == [
        "Bash",
        "mcp__gh__issues",
        "mcp__gh__pulls",
        "mcp__zen__chat",
    ]
