"""Tool definitions on demand (issue 19, part 1): skeletons of tool definitions, the decision
from the ledger's evidence (fixed for the session, the prompt-cache rule kept), and the
``headroom_tool_docs`` answer."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timedelta, timezone

import jsonschema
import pytest
from sqlalchemy import select

from headroom_core import ledger
from headroom_core.cache.prefix_check import earlier_break
from headroom_core.db.models import SessionState, ToolUsage
from headroom_core.extensions import answer_call
from headroom_core.request_plan import plan_request
from headroom_core.runtime import Runtime
from headroom_core.settings import load_settings
from headroom_core.tools import on_demand as tool_docs
from headroom_core.tools.on_demand import NOTE, TOOL_NAME, choose
from headroom_core.tools.skeleton import first_sentence, skeleton, skeleton_schema
from headroom_core.wire.blocks import ToolCall, Usage
from tests.conftest import flow_files, load_flow

UA = "claude-cli/1.0.62 (external, cli)"
HEADERS = {"user-agent": UA, "x-headroom-project": "/work/shop"}


# --- skeletons --------------------------------------------------------------------------------


def test_first_sentence():
    assert (
        first_sentence("Reads a file from the local filesystem. You can access any file.")
        == "Reads a file from the local filesystem."
    )
    assert first_sentence("\n   - Fetches content from a URL\n- Takes a prompt") == "Fetches content from a URL"
    assert first_sentence("Use e.g. grep or i.e. rg. Then more.") == "Use e.g. grep or i.e. rg."
    assert (
        first_sentence("Retrieve metadata about a file including:\n- size\n- mtime")
        == "Retrieve metadata about a file including…"
    )
    assert (
        first_sentence("Appends information to a subtask\nwithout replacing content. More.")
        == "Appends information to a subtask without replacing content."
    )
    assert first_sentence("Version 1.2 is supported. Next.") == "Version 1.2 is supported."
    long = first_sentence("word " * 100)
    assert len(long) <= 200 and long.endswith("…") and long.startswith("word word")
    assert first_sentence("   \n  ") == ""


SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "title": "Args",
    "description": "Long words. " * 50,
    "properties": {
        "path": {"type": "string", "description": "The absolute path. " * 20, "minLength": 3, "pattern": "^/"},
        "mode": {"type": "string", "enum": ["read", "write"], "default": "read", "description": "How."},
        "limit": {"type": "integer", "minimum": 1, "maximum": 10, "examples": [5]},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "minItems": 1, "uniqueItems": True},
        "target": {"oneOf": [{"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "^ab"}]},
        "node": {"$ref": "#/definitions/node"},
        "kind": {"const": "x", "description": "Always x."},
        "other": {"not": {"type": "null"}, "if": {"type": "string"}, "then": {"minLength": 2}},
    },
    "required": ["path", "mode"],
    "additionalProperties": False,
    "definitions": {
        "node": {"type": "object", "properties": {"id": {"type": "integer", "description": "Id."}}, "required": ["id"]}
    },
}


def test_skeleton_schema_keeps_names_types_required_enums_and_drops_the_rest():
    sk = skeleton_schema(SCHEMA)
    assert sk == {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "mode": {"type": "string", "enum": ["read", "write"]},
            "limit": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "target": {"anyOf": [{"type": "string"}, {"type": "string"}]},
            "node": {"$ref": "#/definitions/node"},
            "kind": {"const": "x"},
            "other": {},
        },
        "required": ["path", "mode"],
        "additionalProperties": False,
        "definitions": {"node": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}},
    }
    assert "description" not in json.dumps(sk)
    jsonschema.Draft7Validator.check_schema(sk)
    full, shell = jsonschema.Draft7Validator(SCHEMA), jsonschema.Draft7Validator(sk)
    # overlapping oneOf branches: "abc" matches both, so the full schema rejects it; the skeleton's
    # anyOf accepts what either accepts
    ok = {
        "path": "/abc",
        "mode": "write",
        "limit": 3,
        "tags": ["a"],
        "target": "ac",
        "node": {"id": 1},
        "kind": "x",
        "other": "zz",
    }
    assert full.is_valid(ok) and shell.is_valid(ok)
    assert not full.is_valid(dict(ok, target="abc")) and shell.is_valid(dict(ok, target="abc"))
    # what the skeleton still refuses: a missing required name, a value outside the enum, a wrong type, an unknown name
    for bad in ({"mode": "read"}, {"path": "/a", "mode": "append"}, {"path": 1, "mode": "read"}, {"path": "/a", "mode": "read", "nope": 1},
                {"path": "/a", "mode": "read", "node": {}}):  # fmt: skip
        assert not shell.is_valid(bad), bad


def test_skeleton_of_each_shape_and_none_for_server_tools():
    anth = {
        "name": "Read",
        "description": "Reads a file. Long text follows.",
        "input_schema": SCHEMA,
        "cache_control": {"type": "ephemeral"},
    }
    s = skeleton(anth, NOTE)
    assert list(s) == ["name", "description", "input_schema", "cache_control"]
    assert s["description"] == "Reads a file." + NOTE and s["input_schema"] == skeleton_schema(SCHEMA)
    chat = {
        "type": "function",
        "function": {"name": "read", "description": "Reads. More.", "parameters": SCHEMA, "strict": False},
    }
    s = skeleton(chat, NOTE)
    assert s["type"] == "function" and s["function"]["name"] == "read" and s["function"]["strict"] is False
    assert s["function"]["description"] == "Reads." + NOTE and s["function"]["parameters"] == skeleton_schema(SCHEMA)
    resp = {"type": "function", "name": "read", "description": "Reads. More.", "parameters": SCHEMA}
    assert skeleton(resp, NOTE)["parameters"] == skeleton_schema(SCHEMA)
    nodesc = {"name": "x", "input_schema": {"type": "object"}}
    assert skeleton(nodesc, NOTE)["description"] == NOTE.strip()
    for server in (
        {"type": "web_search_20250305", "name": "web_search"},
        {"type": "bash_20250124", "name": "bash"},
        {"type": "file_search"},
        "x",
    ):
        assert skeleton(server, NOTE) is None
    # a $ref into a part the skeleton drops would not resolve: no skeleton
    dangling = {
        "name": "d",
        "description": "D.",
        "input_schema": {
            "type": "object",
            "properties": {"a": {"not": {"type": "string"}}, "b": {"$ref": "#/properties/a/not"}},
        },
    }
    assert skeleton(dangling, NOTE) is None
    assert skeleton(anth, NOTE) == skeleton(copy.deepcopy(anth), NOTE)  # deterministic, input untouched
    assert anth["input_schema"] == SCHEMA


# instances for the jsonschema check: required-only, and every property


def _resolve(schema, root):
    seen = 0
    while (
        isinstance(schema, dict)
        and isinstance(schema.get("$ref"), str)
        and schema["$ref"].startswith("#")
        and seen < 20
    ):
        node = root
        for part in [p for p in schema["$ref"][1:].split("/") if p]:
            node = node[part.replace("~1", "/").replace("~0", "~")]
        schema, seen = node, seen + 1
    return schema


def _instance(schema, root, every: bool, depth: int = 0):
    """A value the schema is meant to accept: required properties only (``every``: all of them)."""
    schema = _resolve(schema, root)
    if not isinstance(schema, dict) or depth > 8:
        return None
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return _instance(schema[key][0], root, every, depth + 1)
    if schema.get("allOf"):
        merged = {}
        for part in schema["allOf"]:
            part = _resolve(part, root)
            for k, v in part.items():
                merged[k] = {**merged.get(k, {}), **v} if isinstance(v, dict) and isinstance(merged.get(k), dict) else v
        return _instance({**{k: v for k, v in schema.items() if k != "allOf"}, **merged}, root, every, depth + 1)
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), "null")
    if t is None:
        t = "object" if "properties" in schema else "string"
    if t == "object":
        props = schema.get("properties") or {}
        names = list(props) if every else list(schema.get("required") or [])
        return {k: _instance(props.get(k, {}), root, every, depth + 1) for k in names}
    if t == "array":
        n = schema.get("minItems", 1 if every else 0)
        items = schema.get("items") if isinstance(schema.get("items"), dict) else {}
        return [_instance(items, root, every, depth + 1) for _ in range(n)]
    if t in ("integer", "number"):
        return schema.get(
            "minimum",
            schema.get("exclusiveMinimum", -1) + 1 if isinstance(schema.get("exclusiveMinimum"), (int, float)) else 0,
        )
    if t == "boolean":
        return False
    if t == "null":
        return None
    return "a" * max(1, schema.get("minLength", 1))


def _corpus_tools() -> list[dict]:
    seen: dict[str, dict] = {}
    for f in flow_files():
        for t in load_flow(f)["request"]["body"].get("tools") or []:
            seen.setdefault(t["name"], t)
    return list(seen.values())


def test_skeleton_schemas_of_the_real_session_are_valid_and_accept_what_the_full_schema_accepts():
    """Every tool definition of the real Claude Code session (229 tools, MCP tools included):
    the skeleton's schema is valid JSON Schema (jsonschema's check under the schema's own
    draft), keeps the property names, types, required and enums, and accepts every required-only
    and every all-properties input the full schema accepts."""
    tools = _corpus_tools()
    assert len(tools) >= 200
    checked = 0
    for t in tools:
        full = t["input_schema"]
        s = skeleton(t, NOTE)
        assert s is not None, t["name"]
        shell = s["input_schema"]
        cls = jsonschema.validators.validator_for(full, default=jsonschema.Draft202012Validator)
        cls.check_schema(shell)
        assert _names_types(full) == _names_types(shell), t["name"]
        assert len(json.dumps(s)) < len(json.dumps(t)), t["name"]
        for every in (False, True):
            inst = _instance(full, full, every)
            if cls(full).is_valid(inst):
                assert cls(shell).is_valid(inst), (t["name"], inst)
                checked += 1
    assert checked >= 2 * len(tools) * 0.9  # the generator produced an accepted input for (almost) every tool


def _names_types(schema, path=""):
    """Every property path with its type, enum, const and required list."""
    if not isinstance(schema, dict):
        return []
    out = [(path, schema.get("type"), schema.get("enum"), schema.get("const"), schema.get("required"))]
    for name, sub in (schema.get("properties") or {}).items():
        out += _names_types(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        out += _names_types(schema["items"], path + "[]")
    for key in ("anyOf", "oneOf", "allOf"):
        for i, sub in enumerate(schema.get(key) or []):
            out += _names_types(sub, f"{path}|{i}")
    return out


# --- the decision -----------------------------------------------------------------------------


def _tool(name: str, words: int = 120) -> dict:
    return {"name": name, "description": f"{name} does one thing. " + "Details that matter sometimes. " * words,
            "input_schema": {"type": "object", "properties": {"q": {"type": "string", "description": "The query. " * 20}}, "required": ["q"]}}  # fmt: skip


TOOLS = [
    _tool("Bash"),
    _tool("Read"),
    _tool("mcp__gh__issues"),
    _tool("mcp__gh__pulls"),
    _tool("mcp__zen__chat"),
    _tool("tiny", 0),
]


def test_choose_follows_the_evidence_and_never_shortens_kept_or_excluded_tools():
    idle = {"Bash": 100, "Read": 3, "mcp__gh__issues": 100, "mcp__gh__pulls": 60, "mcp__zen__chat": 100, "tiny": 100}
    kw = dict(idle_requests=50, min_bytes=300)
    assert choose(TOOLS, idle, **kw) == (
        "Bash",
        "mcp__gh__issues",
        "mcp__gh__pulls",
        "mcp__zen__chat",
    )  # Read: called lately; tiny: nothing to gain
    assert choose(TOOLS, idle, keep={"Bash"}, exclude=("mcp__gh__*",), **kw) == ("mcp__zen__chat",)
    assert choose(TOOLS, {}, **kw) == ()  # no evidence: every tool in full
    assert choose(TOOLS, idle, idle_requests=80, min_bytes=300) == ("Bash", "mcp__gh__issues", "mcp__zen__chat")
    assert choose(TOOLS + [_tool("Bash")], idle, **kw) == (
        "mcp__gh__issues",
        "mcp__gh__pulls",
        "mcp__zen__chat",
    )  # a name used twice stays
    assert (
        choose([_tool("small", 12)], {"small": 100}, idle_requests=50, min_bytes=1) == ()
    )  # saves less than headroom_tool_docs costs
    server = [{"type": "web_search_20250305", "name": "web_search", "max_uses": 5}]
    assert choose(server + TOOLS[:1], {"web_search": 100, "Bash": 100}, **kw) == ("Bash",)


def _runtime(tmp_path, counter, **settings) -> Runtime:
    rt = Runtime(
        load_settings(
            {"home": str(tmp_path), "tools_on_demand": True, "tools_on_demand_idle_requests": 5, **settings}, env={}
        )
    )
    rt.__dict__["counter"] = counter
    return rt


def _body(messages, tools=None, **extra) -> dict:
    return {"model": "claude-sonnet-4", "max_tokens": 1024, "system": [{"type": "text", "text": "You are a coding agent. " * 400}],
            "tools": TOOLS if tools is None else tools, "messages": messages, **extra}  # fmt: skip


def _send(rt, b, headers=HEADERS):
    p = plan_request(rt, "POST", "/v1/messages", headers, json.dumps(b).encode())
    return p, (json.loads(p.body) if p.body else b)


def _cool(rt):
    """The ledger's requests moved a day back: the provider's prompt cache of the scope is cold."""
    with rt.sessions.begin() as s:
        for r in s.scalars(select(ToolUsage)):
            r.last_seen_at = r.last_seen_at - timedelta(days=1)


def _record(rt, p, sent, called=()):
    offered = [t["name"] for t in sent["tools"] if t["name"] not in p.hidden_tools]
    ledger.record(
        rt.sessions,
        p,
        user_agent=UA,
        model="claude-sonnet-4",
        status_code=200,
        usage=Usage(),
        rounds=0,
        offered=offered,
        called=list(called),
    )


def _seed(rt, n: int, called: tuple[str, ...] = ("Read",), tools=None, cool: bool = True):
    """``n`` requests of earlier sessions recorded as the proxy's ledger records them: every
    tool offered, ``called`` called by the model; then (``cool``) a day passes."""
    for i in range(n):
        b = _body([{"role": "user", "content": f"earlier session, turn {i}"}], tools)
        p, sent = _send(rt, b)
        _record(rt, p, sent, called)
    if cool:
        _cool(rt)


def _by_name(sent: dict) -> dict:
    return {t["name"]: t for t in sent["tools"]}


def test_evidence_gives_skeletons_fixed_for_the_session_and_the_prompt_cache_rule_holds(tmp_path, counter):
    rt = _runtime(tmp_path, counter)
    _seed(rt, 6)
    with rt.sessions() as s:
        rows = {r.tool_name: r for r in s.scalars(select(ToolUsage))}
    assert (
        rows["Read"].offered_since_called == 0 and rows["Bash"].offered_since_called == 6 and rows["Bash"].offered == 6
    )
    # a new session whose history already called Bash
    m1 = [{"role": "user", "content": "fix the bug"},
          {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"q": "ls"}}]},
          {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py"}]}]  # fmt: skip
    b1 = _body(m1)
    p1, s1 = _send(rt, b1)
    names = [t["name"] for t in s1["tools"]]
    assert names[-1] == TOOL_NAME and TOOL_NAME in p1.hidden_tools
    sent = _by_name(s1)
    short = {n for n, t in sent.items() if t["description"].endswith(NOTE)}
    assert short == {
        "mcp__gh__issues",
        "mcp__gh__pulls",
        "mcp__zen__chat",
    }  # not Read (called), Bash (called here), tiny (no gain)
    assert sent["Bash"]["description"].split() == TOOLS[0]["description"].split()
    assert sent["mcp__gh__issues"]["input_schema"] == {
        "type": "object",
        "properties": {"q": {"type": "string"}},
        "required": ["q"],
    }
    assert "skeletons" in p1.tools.reason and p1.tools.tokens_after < p1.tools.tokens_before / 2
    with rt.sessions() as s:
        row = s.scalars(select(SessionState)).all()
    stored = {"skeletons": ["mcp__gh__issues", "mcp__gh__pulls", "mcp__zen__chat"], "seen": [t["name"] for t in TOOLS]}
    assert any(json.loads(r.tool_skeletons or "{}") == stored for r in row)

    # the evidence changes (every tool now idle long enough, Read too): the session keeps its set
    with rt.sessions.begin() as s:
        for r in s.scalars(select(ToolUsage)):
            r.offered_since_called = 1000
    m2 = m1 + [{"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_2", "name": "mcp__gh__issues", "input": {"q": "x"}}]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2", "content": "none"}]}]  # fmt: skip
    b2 = _body(m2)
    p2, s2 = _send(rt, b2)
    assert s2["tools"] == s1["tools"]
    assert earlier_break(b1, b2, s1, s2) is None
    # the same on a runtime that reloads the session from the database (another proxy, a restart)
    rt2 = _runtime(tmp_path, counter)
    p3, s3 = _send(rt2, b2)
    assert s3["tools"] == s1["tools"] and TOOL_NAME in p3.hidden_tools

    # the client changes its tools: adds one, changes a skeleton's long description, drops one
    changed = copy.deepcopy(TOOLS)
    changed[3]["description"] = changed[3]["description"].replace("Details", "Facts")
    changed[4]["input_schema"]["properties"]["extra"] = {"type": "integer", "enum": [1, 2]}
    changed = changed[:5] + [_tool("NewTool")]
    b4 = _body(m2 + [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "go on"}], changed)
    p4, s4 = _send(rt, b4)
    assert earlier_break(b2, b4, s2, s4) is None
    sent4 = _by_name(s4)
    assert sent4["NewTool"]["description"].split() == changed[5]["description"].split()  # added later: in full
    assert sent4["mcp__gh__pulls"] == sent["mcp__gh__pulls"]  # its skeleton did not change with the long text
    assert sent4["mcp__zen__chat"]["input_schema"]["properties"]["extra"] == {"type": "integer", "enum": [1, 2]}
    assert [t["name"] for t in s4["tools"]][-1] == TOOL_NAME


def test_sessions_of_a_warm_scope_keep_the_scope_set_and_a_called_skeleton_goes_back_to_full_when_cold(
    tmp_path, counter
):
    """While the scope's prompt cache may be warm, a new session sends the tools exactly as the
    previous ones did (a cache read across sessions), a skeleton the model has called since
    included; when the cache is cold, tools called lately go back to full and tools newly idle
    join."""
    rt = _runtime(tmp_path, counter)
    _seed(rt, 6)
    ba = _body([{"role": "user", "content": "session A"}])
    pa, sa = _send(rt, ba)
    short_a = {n for n, t in _by_name(sa).items() if t["description"].endswith(NOTE)}
    assert short_a == {"Bash", "mcp__gh__issues", "mcp__gh__pulls", "mcp__zen__chat"}
    _record(rt, pa, sa, called=["Bash"])  # the model called Bash (from its skeleton)
    with rt.sessions.begin() as s:  # and Read has become idle long enough
        s.get(ToolUsage, ("claude-cli", "/work/shop", "Read")).offered_since_called = 100
    # session B resumes A's conversation (its history holds the Bash call): still the same tools
    hist = [{"role": "user", "content": "session A"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_9", "name": "Bash", "input": {"q": "ls"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "a.py"}, {"type": "text", "text": "session B"}]}]  # fmt: skip
    bb = _body(hist)
    pb, sb = _send(rt, bb)
    assert sb["tools"] == sa["tools"]  # byte for byte: Bash stays a skeleton, Read joins only when cold
    assert earlier_break(ba, bb, sa, sb) is None
    _record(rt, pb, sb)
    bc = _body([{"role": "user", "content": "session C"}])
    _, sc = _send(rt, bc)
    assert sc["tools"] == sa["tools"]
    _cool(rt)
    _, sd = _send(rt, _body([{"role": "user", "content": "session D"}]))
    assert {n for n, t in _by_name(sd).items() if t["description"].endswith(NOTE)} == {
        "Read",
        "mcp__gh__issues",
        "mcp__gh__pulls",
        "mcp__zen__chat",
    }


def test_cache_lifetime_follows_the_providers_documents():
    from headroom_core.wire.detect import Dialect

    assert (
        tool_docs.cache_lifetime_seconds(
            Dialect.ANTHROPIC_MESSAGES,
            {"system": [{"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}]},
        )
        == 300
    )
    assert (
        tool_docs.cache_lifetime_seconds(
            Dialect.ANTHROPIC_MESSAGES,
            {"system": [{"type": "text", "text": "x", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]},
        )
        == 3600
    )
    assert tool_docs.cache_lifetime_seconds(Dialect.OPENAI_RESPONSES, {}) == 3600
    assert tool_docs.cache_lifetime_seconds(Dialect.OPENAI_CHAT, {"prompt_cache_retention": "24h"}) == 86400


def test_nothing_on_demand_when_off_forced_or_without_evidence(tmp_path, counter):
    rt = _runtime(tmp_path, counter, tools_on_demand=False)
    _seed(rt, 6)
    _, sent = _send(rt, _body([{"role": "user", "content": "one"}]))
    assert TOOL_NAME not in _by_name(sent) and not any(t["description"].endswith(NOTE) for t in sent["tools"])
    rt = _runtime(tmp_path / "b", counter)
    _seed(rt, 2)  # under the threshold of 5
    _, sent = _send(rt, _body([{"role": "user", "content": "two"}]))
    assert TOOL_NAME not in _by_name(sent)
    _seed(rt, 4)
    # tool_choice forcing a tool: the model could not ask for the docs
    _, sent = _send(rt, _body([{"role": "user", "content": "three"}], tool_choice={"type": "tool", "name": "Bash"}))
    assert TOOL_NAME not in _by_name(sent)
    _, sent = _send(rt, _body([{"role": "user", "content": "four"}], tool_choice={"type": "auto"}))
    assert TOOL_NAME in _by_name(sent)
    # excluded by glob
    rt = _runtime(tmp_path / "c", counter, tools_minify_exclude=("mcp__*",))
    _seed(rt, 6)
    _, sent = _send(rt, _body([{"role": "user", "content": "five"}]))
    assert {n for n, t in _by_name(sent).items() if t["description"].endswith(NOTE)} == {"Bash"}


def test_a_token_count_measures_the_same_tools_and_stores_nothing(tmp_path, counter):
    rt = _runtime(tmp_path, counter)
    _seed(rt, 6)
    b = _body([{"role": "user", "content": "count me"}])
    counted = plan_request(
        rt,
        "POST",
        "/v1/messages/count_tokens",
        HEADERS,
        json.dumps({k: v for k, v in b.items() if k != "max_tokens"}).encode(),
    )
    p, sent = _send(rt, b)
    assert json.loads(counted.body)["tools"] == sent["tools"] and TOOL_NAME in _by_name(sent)


def test_the_ledger_resets_the_evidence_when_a_tool_is_called(tmp_path, counter):
    rt = _runtime(tmp_path, counter)
    _seed(rt, 3, called=())
    _seed(rt, 1, called=("Bash",))
    _seed(rt, 2, called=())
    with rt.sessions() as s:
        rows = {r.tool_name: r for r in s.scalars(select(ToolUsage))}
    assert (rows["Bash"].offered, rows["Bash"].called, rows["Bash"].offered_since_called) == (6, 1, 2)
    assert (rows["Read"].offered, rows["Read"].called, rows["Read"].offered_since_called) == (6, 0, 6)


# --- the answer -------------------------------------------------------------------------------


def test_the_answer_is_the_full_definition_the_client_sent(tmp_path, counter):
    rt = _runtime(tmp_path, counter)
    _seed(rt, 6)
    p, _ = _send(rt, _body([{"role": "user", "content": "docs please"}]))
    text = answer_call(rt, p.context, ToolCall("c1", TOOL_NAME, {"name": "mcp__gh__pulls"}))
    t = TOOLS[3]
    assert text.startswith("Tool: mcp__gh__pulls\nDescription:\n" + t["description"] + "\nInput schema")
    # the schema as the client's compact JSON (what Claude Code's JSON.stringify sends), byte for byte
    assert text.split("(JSON Schema, input_schema):\n", 1)[1] == json.dumps(
        t["input_schema"], ensure_ascii=False, separators=(",", ":")
    )
    assert "error" in answer_call(rt, p.context, ToolCall("c2", TOOL_NAME, {"name": "nope"}))
    assert '"name" argument' in answer_call(rt, p.context, ToolCall("c3", TOOL_NAME, {}))
    assert "lost this request's context" in answer_call(rt, None, ToolCall("c4", TOOL_NAME, {"name": "Bash"}))
    chat = {
        "tools": [
            {
                "type": "function",
                "function": {"name": "f", "description": "Does f.", "parameters": {"type": "object"}, "strict": True},
            }
        ]
    }
    got = tool_docs.answer(chat, ToolCall("c5", TOOL_NAME, {"name": "f"}))
    assert got.startswith("Tool: f\nDescription:\nDoes f.\nInput schema (JSON Schema, parameters):") and got.endswith(
        '\nOther members:\n{"strict":true}'
    )


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses"])
def test_openai_dialects_get_skeletons_too(tmp_path, counter, path):
    rt = _runtime(tmp_path, counter)
    chat = path.endswith("completions")

    def fn(t):
        inner = {"name": t["name"], "description": t["description"], "parameters": t["input_schema"]}
        return {"type": "function", "function": inner} if chat else {"type": "function", **inner}

    tools = [fn(t) for t in TOOLS]
    key = "messages" if chat else "input"
    for i in range(6):
        b = {"model": "gpt-4.1", "tools": tools, key: [{"role": "user", "content": f"earlier {i}"}]}
        p = plan_request(rt, "POST", path, HEADERS, json.dumps(b).encode())
        ledger.record(
            rt.sessions,
            p,
            user_agent=UA,
            model="gpt-4.1",
            status_code=200,
            usage=Usage(),
            rounds=0,
            offered=[t["name"] for t in TOOLS],
            called=["Read"],
        )
    _cool(rt)
    b = {"model": "gpt-4.1", "tools": tools, key: [{"role": "user", "content": "now"}]}
    p = plan_request(rt, "POST", path, HEADERS, json.dumps(b).encode())
    sent = json.loads(p.body)["tools"]
    inner = [t["function"] if chat else t for t in sent]
    assert inner[-1]["name"] == TOOL_NAME and TOOL_NAME in p.hidden_tools
    short = [t["name"] for t in inner if t["description"].endswith(NOTE)]
    assert short == ["Bash", "mcp__gh__issues", "mcp__gh__pulls", "mcp__zen__chat"]
    assert answer_call(rt, p.context, ToolCall("c", TOOL_NAME, {"name": "Bash"})).startswith(
        "Tool: Bash\nDescription:\n" + TOOLS[0]["description"]
    )


# --- the real session -------------------------------------------------------------------------


def _called_in_response(body) -> list[str]:
    """Tool names the recorded response calls (JSON or SSE text)."""
    if isinstance(body, dict):
        return [
            b.get("name", "") for b in body.get("content") or [] if isinstance(b, dict) and b.get("type") == "tool_use"
        ]
    out = []
    for line in str(body or "").splitlines():
        if line.startswith("data:"):
            try:
                ev = json.loads(line[5:])
            except ValueError:
                continue
            block = (
                ev.get("content_block") if isinstance(ev, dict) and ev.get("type") == "content_block_start" else None
            )
            if isinstance(block, dict) and block.get("type") == "tool_use":
                out.append(str(block.get("name", "")))
    return out


def test_real_session_on_demand_keeps_every_prefix_and_costs_less(tmp_path, counter):
    """The real Claude Code session (every request of ``anthropic-flows``, in order) planned with
    tools on demand on, after earlier sessions of the project left evidence (every tool the
    session never calls idle for 100 requests, the ones it calls just called; a day ago): the
    first request sends the idle tools as skeletons and ``headroom_tool_docs`` last; every
    request keeps the prompt-cache rule against the earlier request of its conversation (the
    prefix oracle finds no break earlier than the client's); all requests that send the full
    tool set send it as the same skeletons (sessions of one warm stretch share them); and the
    whole session costs less, cache-priced, than without the proxy."""
    from headroom_core.cache.cost_model import AnthropicCache, Blocks

    flows = [load_flow(f) for f in flow_files()]
    names = [f.stem for f in flow_files()]
    called = {n for fl in flows for n in _called_in_response(fl["response"]["body"])}
    tools = {t["name"] for fl in flows for t in fl["request"]["body"].get("tools") or []}
    assert len(tools) >= 200 and 0 < len(called) < 20
    rt = _runtime(tmp_path, counter, tools_on_demand_idle_requests=50)

    def plan(fl):
        b = fl["request"]["body"]
        path = "/v1/messages" if "max_tokens" in b else "/v1/messages/count_tokens"
        headers = {"user-agent": fl["request"]["headers"].get("user-agent", "")}
        return plan_request(rt, "POST", path, headers, json.dumps(b).encode())

    # the ledger's keys (client, project) as the proxy derives them, from a dry token count
    first = next(fl for fl in flows if fl["request"]["body"].get("tools"))
    probe = plan_request(rt, "POST", "/v1/messages/count_tokens", {"user-agent": first["request"]["headers"].get("user-agent", "")},
                         json.dumps({k: v for k, v in first["request"]["body"].items() if k != "max_tokens"}).encode())  # fmt: skip
    assert probe.dry_run and TOOL_NAME not in probe.hidden_tools  # no evidence yet
    with rt.sessions.begin() as s:
        assert s.scalar(select(SessionState).limit(1)) is None and s.scalar(select(ToolUsage).limit(1)) is None
        yesterday = datetime.now(timezone.utc).replace(tzinfo=None) - timedelta(days=1)
        for n in sorted(tools):
            s.add(ToolUsage(client=probe.context.client, project=probe.context.project[:512], tool_name=n, offered=100, called=int(n in called),
                            offered_since_called=0 if n in called else 100, last_seen_at=yesterday))  # fmt: skip

    cutter = Blocks(counter.count)
    cache_off, cache_on = AnthropicCache(), AnthropicCache()
    usd_off = usd_on = 0.0
    last: dict[str, tuple[dict, dict]] = {}
    shells_of_full_set: set[tuple[str, ...]] = set()
    breaks: list[str] = []
    checked = 0
    for name, fl in zip(names, flows):
        b = fl["request"]["body"]
        p = plan(fl)
        sent = json.loads(p.body) if p.action == "rewrite" and p.body else b
        if p.dry_run:
            continue
        shells = tuple(t["name"] for t in sent.get("tools") or [] if str(t.get("description", "")).endswith(NOTE))
        if len(b.get("tools") or []) == len(tools):
            shells_of_full_set.add(shells)
            assert [t["name"] for t in sent["tools"]][-1] == TOOL_NAME and TOOL_NAME in p.hidden_tools
            assert called.isdisjoint(shells) and len(shells) >= 100
        conv = json.dumps(_strip_cc_all(b["messages"][:1]))
        if conv in last:
            checked += 1
            if earlier_break(last[conv][0], b, last[conv][1], sent) is not None:
                breaks.append(name)
        last[conv] = (b, sent)
        model = str(b.get("model", ""))
        usd_off += cache_off.request(model, cutter.of(b)).usd
        usd_on += cache_on.request(model, cutter.of(sent)).usd
        offered = [t.get("name", "") for t in sent.get("tools") or [] if t.get("name") not in p.hidden_tools]
        ledger.record(rt.sessions, p, user_agent=fl["request"]["headers"].get("user-agent", ""), model=model, status_code=200, usage=Usage(),
                      rounds=0, offered=offered, called=_called_in_response(fl["response"]["body"]))  # fmt: skip
    assert checked >= 20 and breaks == []
    assert len(shells_of_full_set) == 1  # one skeleton set for the whole warm stretch
    print(
        f"cache-priced input: {usd_off:.4f} USD without the proxy, {usd_on:.4f} with it ({usd_on / usd_off:.2f}); {len(next(iter(shells_of_full_set)))} skeletons"
    )
    # measured: 0.52 of the cost without the proxy (tools on demand with every other compression; 0.75 without it)
    assert usd_on < 0.6 * usd_off, (usd_on, usd_off)


def _strip_cc_all(v):
    if isinstance(v, dict):
        return {k: _strip_cc_all(x) for k, x in v.items() if k != "cache_control"}
    if isinstance(v, list):
        return [_strip_cc_all(x) for x in v]
    return v
