"""The prompt-cache rule (issue: cache-priced cost), in the core: what counts as a change, how
the client's ``cache_control`` is carried onto bytes sent before, the tool order, the proxy's
tools fixed per session, injected context kept across turns, originals kept alive, token counts
planned like the request they measure, and lossless-only requests."""

from __future__ import annotations

import json
import time

from headroom_core.cache import prefix_check
from headroom_core.cache.carry import carry, norm_hash
from headroom_core.ccr import retrieve
from headroom_core.compress import markers
from headroom_core.compress.json_crush import decode_table
from headroom_core.extensions import RequestContext
from headroom_core.request_plan import plan_request
from headroom_core.runtime import Runtime
from headroom_core.settings import load_settings
from headroom_core.tools.order import ordered, unique_ids
from headroom_core.wire import jsonedit
from tests.unit.test_request_plan import github_scenario

EPH = {"type": "ephemeral"}


def tool(name: str, desc: str = "A tool.") -> dict:
    return {
        "name": name,
        "description": desc,
        "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
    }


TOOLS = [
    tool("Bash", "Run a shell command. " * 30),
    tool("Read", "Read a file. " * 30),
    tool("mcp__gh__issues", "List issues."),
    tool("mcp__gh__pulls", "List pulls."),
]
SYSTEM = [
    {
        "type": "text",
        "text": "You are a coding agent. Working directory: /work/shop\n" + "Be careful. " * 300,
        "cache_control": EPH,
    }
]


def body(messages: list, tools: list | None = None, **extra) -> dict:
    return {
        "model": "claude-sonnet-4",
        "max_tokens": 1024,
        "system": SYSTEM,
        "tools": TOOLS if tools is None else tools,
        "messages": messages,
        **extra,
    }


def send(rt: Runtime, b: dict, path: str = "/v1/messages", headers: dict | None = None):
    p = plan_request(rt, "POST", path, headers or {}, json.dumps(b).encode())
    return p, (json.loads(p.body) if p.body else b)


def turn(i: int, output: str = "ok") -> list:
    """An assistant tool call and the user's tool result, numbered ``i``."""
    return [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": f"toolu_{i}", "name": "mcp__gh__issues", "input": {"q": str(i)}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": output}]},
    ]


def with_marker_on_last(msgs: list) -> list:
    """Claude Code's habit: the breakpoint on the latest message's last block only."""
    out = json.loads(json.dumps(msgs))
    for m in out:
        for b in m["content"] if isinstance(m["content"], list) else []:
            b.pop("cache_control", None)
    last = out[-1]
    if isinstance(last["content"], str):
        last["content"] = [{"type": "text", "text": last["content"]}]
    last["content"][-1]["cache_control"] = EPH
    return out


def test_norm_hash_ignores_markers_and_string_versus_one_text_block():
    a = {"role": "user", "content": "hi"}
    b = {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": EPH}]}
    assert norm_hash(json.dumps(a)) == norm_hash(json.dumps(b))
    assert norm_hash(
        json.dumps({"content": [{"type": "text", "text": "hi"}, {"type": "text", "text": "x"}]})
    ) != norm_hash(json.dumps(a))
    # numbers by their exact text
    assert norm_hash('{"x": 1e400}') != norm_hash('{"x": 1e401}')
    assert norm_hash('{"x": 0.10000000000000000001}') != norm_hash('{"x": 0.1}')


def test_carry_puts_the_clients_markers_on_the_bytes_sent_before():
    sent = '{"role":"user","content":[{"type":"text","text":"q","cache_control":{"type":"ephemeral"}},{"type":"text","text":"<headroom-context>x</headroom-context>"}]}'
    # the client moved its marker away: the earlier bytes go without it, nothing else changes
    assert (
        carry(sent, {"role": "user", "content": "q"})
        == '{"role":"user","content":[{"type":"text","text":"q"},{"type":"text","text":"<headroom-context>x</headroom-context>"}]}'
    )
    # the client marks its last block: the marker follows the context block appended after it
    moved = carry(sent, {"role": "user", "content": [{"type": "text", "text": "q", "cache_control": EPH}]})
    assert (
        json.loads(moved)["content"][1]["cache_control"] == EPH
        and "cache_control" not in json.loads(moved)["content"][0]
    )
    # a nested marker (inside a tool_result) stays at its path
    tr = '{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"OUT"}]}]}'
    client = {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "t",
                "content": [{"type": "text", "text": "OUT", "cache_control": EPH}],
            }
        ],
    }
    assert json.loads(carry(tr, client))["content"][0]["content"][0]["cache_control"] == EPH


def test_strip_and_insert_member_keep_every_other_byte():
    s = '{"a" : 1,\n "cache_control": {"type":"ephemeral"} , "b":[{"cache_control":{}}, {"x": 1e400, "cache_control":{}}]}'
    assert jsonedit.strip_member(s, "cache_control") == '{"a" : 1 , "b":[{}, {"x": 1e400}]}'
    assert jsonedit.insert_member('{"x": 1e400}', (), "k", "[1]") == '{"x": 1e400,"k":[1]}'


def test_tool_order_is_the_scopes_first_seen_order():
    ids = unique_ids([tool("b"), tool("a"), tool("a"), {"type": "web_search"}])
    assert ids == ["b", "a", "a#2", "type:web_search"]
    seq = {"a": 0, "b": 1}
    assert ordered(["b", "c", "a"], seq) == [2, 0, 1]  # known by their place, the new one after


def test_proxy_tool_is_there_from_the_first_request_and_tools_never_change(runtime):
    """The issue's smallest case: 4 tools; request 2 carries a 1,000-item JSON array from an MCP
    tool. Upstream, request 2's ``tools`` equal request 1's (the retrieve tool was there from the
    session's first request), and the array was compressed with a retrievable original."""
    items = json.dumps(
        [
            {
                "id": i,
                "title": f"Issue {i}",
                "state": "open" if i % 7 else "closed",
                "labels": ["bug"] if i % 5 == 0 else [],
            }
            for i in range(1000)
        ],
        indent=1,
    )
    first = [{"role": "user", "content": "List the open issues of the repo, " + "please " * 1200}]
    p1, up1 = send(runtime, body(with_marker_on_last(first)))
    assert [t["name"] for t in up1["tools"]] == [t["name"] for t in TOOLS] + [retrieve.TOOL_NAME]
    second = first + turn(1, items)
    p2, up2 = send(runtime, body(with_marker_on_last(second)))
    assert up2["tools"] == up1["tools"]
    out = up2["messages"][2]["content"][0]["content"]
    (key,) = set(markers.find_marker_keys(out))
    assert runtime.store.get(key, p2.context.scope).text == items
    assert prefix_check.earlier_break(body(first), body(second), up1, up2) is None


def test_reordered_equal_tools_go_upstream_in_one_order_even_in_a_new_session(runtime):
    msgs = [{"role": "user", "content": "start " * 2000}]
    _, up1 = send(runtime, body(msgs))
    # a resumed conversation: another first message (a new session for the proxy), tools re-ordered
    _, up2 = send(runtime, body([{"role": "user", "content": "resumed " * 2000}], tools=list(reversed(TOOLS))))
    assert up2["tools"] == up1["tools"]
    # a tool added in the middle goes after the known ones (the first difference is not earlier)
    added = TOOLS[:2] + [tool("Grep", "Search files.")] + TOOLS[2:]
    _, up3 = send(
        runtime, body(msgs + [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "more"}], tools=added)
    )
    assert [t["name"] for t in up3["tools"]] == [
        "Bash",
        "Read",
        "mcp__gh__issues",
        "mcp__gh__pulls",
        "Grep",
        retrieve.TOOL_NAME,
    ]
    assert up3["tools"][:4] == up1["tools"][:4]


def test_client_cache_control_on_tools_stays_in_place(runtime):
    marked = json.loads(json.dumps(TOOLS))
    marked[-1]["cache_control"] = EPH
    _, up = send(runtime, body([{"role": "user", "content": "x " * 5000}], tools=list(reversed(marked))))
    assert [("cache_control" in t) for t in up["tools"]] == [
        True,
        False,
        False,
        False,
        False,
    ]  # the client's position 0
    assert sum("cache_control" in t for t in up["tools"]) == 1


def test_injected_context_is_replayed_when_the_client_moves_its_marker(tmp_path, counter):
    """Cause 3: the context block appended to the latest user message is sent again, byte for
    byte (markers aside), on every later turn, although Claude Code moves ``cache_control``."""
    rt = Runtime(load_settings({"home": str(tmp_path)}, env={}))
    rt.__dict__["counter"] = counter
    rt.extensions.injectors.append(lambda _rt, ctx: f"turn {len(ctx.body['messages'])}: use pnpm")
    m1 = [{"role": "user", "content": "How do I migrate? " * 400}]
    _, up1 = send(rt, body(with_marker_on_last(m1)))
    first = up1["messages"][0]["content"]
    assert first[-1]["text"].startswith("<headroom-context>") and first[-1]["cache_control"] == EPH
    m2 = m1 + [{"role": "assistant", "content": "Run it."}, {"role": "user", "content": "And seeds?"}]
    p2, up2 = send(rt, body(with_marker_on_last(m2)))
    assert up2["messages"][0]["content"] == [
        {"type": "text", "text": m1[0]["content"]},
        {"type": "text", "text": first[-1]["text"]},
    ]
    assert up2["messages"][2]["content"][-1]["text"] == "<headroom-context>\nturn 3: use pnpm\n</headroom-context>"
    assert prefix_check.earlier_break(body(m1), body(m2), up1, up2) is None
    # the next turn replays both, whatever the client does with its markers
    m3 = m2 + [
        {"role": "assistant", "content": "Also pnpm."},
        {"role": "user", "content": [{"type": "text", "text": "Thanks", "cache_control": EPH}]},
    ]
    _, up3 = send(rt, body(m3))
    assert prefix_check.first_change(up2, up3) is None


def test_expired_original_is_stored_again_from_the_clients_copy(tmp_path, counter):
    rt = Runtime(load_settings({"home": str(tmp_path), "ccr_ttl_seconds": 1}, env={}))
    rt.__dict__["counter"] = counter
    payload = github_scenario("paginate-issues.json")
    msgs = [{"role": "user", "content": "Which issues are open? " * 300}] + turn(1, payload)
    p1, up1 = send(rt, body(msgs))
    (key,) = set(markers.find_marker_keys(up1["messages"][2]["content"][0]["content"]))
    time.sleep(1.3)
    assert rt.store.get(key, p1.context.scope).text is None  # expired
    more = msgs + [{"role": "assistant", "content": "There are 30."}, {"role": "user", "content": "Which are bugs?"}]
    p2, up2 = send(rt, body(more))
    assert up2["messages"][2] == up1["messages"][2]  # the marker is replayed ...
    assert rt.store.get(key, p2.context.scope).text == payload  # ... and its original is there again


def test_count_tokens_is_planned_like_the_request_it_measures_and_stores_nothing(tmp_path, counter):
    rt = Runtime(load_settings({"home": str(tmp_path)}, env={}))
    rt.__dict__["counter"] = counter
    b = body(
        [{"role": "user", "content": "Which issues are open? " * 300}]
        + turn(1, github_scenario("paginate-issues.json"))
    )
    pc, counted = send(rt, {k: v for k, v in b.items() if k != "max_tokens"}, path="/v1/messages/count_tokens")
    assert pc.dry_run and pc.action == "rewrite"
    from sqlalchemy import func, select

    from headroom_core.db.models import CompressionDecision, Original, SessionState

    with rt.sessions() as s:
        assert [
            s.scalar(select(func.count()).select_from(t)) for t in (Original, CompressionDecision, SessionState)
        ] == [0, 0, 0]
    pm, sent = send(rt, b)
    assert {k: v for k, v in sent.items() if k != "max_tokens"} == counted
    # and after the request went upstream, a count of the same body measures the same again
    _, again = send(rt, {k: v for k, v in b.items() if k != "max_tokens"}, path="/v1/messages/count_tokens")
    assert again == counted


def test_tool_choice_that_forbids_retrieve_gets_lossless_compression_only(runtime):
    payload = github_scenario("paginate-issues.json")
    msgs = [{"role": "user", "content": "Which issues are open? " * 300}] + turn(1, payload)
    for choice in ({"type": "none"}, {"type": "tool", "name": "Bash"}):
        _, up = send(
            runtime,
            body(msgs, tool_choice=choice, metadata={"user_id": json.dumps(choice)}),
            headers={"x-headroom-session": json.dumps(choice)},
        )
        out = up["messages"][2]["content"][0]["content"]
        assert markers.find_marker_keys(out) == []
        assert decode_table(json.loads(out)) == json.loads(payload)  # the same data, re-encoded at most
    _, up = send(runtime, body(msgs), headers={"x-headroom-session": "auto"})
    assert markers.find_marker_keys(up["messages"][2]["content"][0]["content"])  # lossy when it can be retrieved


def test_small_sessions_get_no_proxy_tool(runtime):
    _, up = send(runtime, body([{"role": "user", "content": "hi"}], tools=[tool("get_weather")], system="Be brief."))
    assert [t["name"] for t in up["tools"]] == ["get_weather"]


def test_retrieve_tool_answers_only_within_its_scope(runtime):
    payload = github_scenario("paginate-issues.json")
    b = body([{"role": "user", "content": "Which issues are open? " * 300}] + turn(1, payload))
    pa, up = send(runtime, b, headers={"x-headroom-project": "A", "x-api-key": "sk-ant-one"})
    (key,) = set(markers.find_marker_keys(up["messages"][2]["content"][0]["content"]))
    call = retrieve.ToolCall("c", retrieve.TOOL_NAME, {"key": key})
    ctx_a = pa.context
    assert retrieve.RetrieveTool().answer(runtime, ctx_a, call) == payload
    for project, cred in (("B", "sk-ant-one"), ("A", "sk-ant-two")):
        pb, _ = send(
            runtime,
            body([{"role": "user", "content": "other " * 2000}]),
            headers={"x-headroom-project": project, "x-api-key": cred},
        )
        assert isinstance(pb.context, RequestContext) and pb.context.scope != ctx_a.scope
        refused = retrieve.RetrieveTool().answer(runtime, pb.context, call)
        assert (
            refused
            == f"headroom_retrieve error: no original is stored under key {key} (unknown, or expired); work with the shortened output."
        )
