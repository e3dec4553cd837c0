"""Tools of the Gemini and Bedrock Converse bodies through their dialects (issue 32): where a
``tools`` array's tools are (Gemini groups its function declarations inside one ``Tool``) and
where each keeps its definition (Converse: ``toolSpec``, the schema under ``inputSchema.json``),
so minification, skeletons and tools on demand work there as in the Messages body; the
``tools`` bytes stay as sent before on later turns; ``headroom_tool_docs`` answers in the
dialect's shape. In-process, on a real runtime and database (the end-to-end tests drive the
real SDKs through mitmdump: tests/e2e/test_tools_dialects_e2e.py)."""

from __future__ import annotations

import copy
import json

import pytest

from headroom_core import ledger
from headroom_core.cache.prefix_check import earlier_break
from headroom_core.extensions import answer_call
from headroom_core.request_plan import plan_request
from headroom_core.tools.minify import minify_tools
from headroom_core.tools.on_demand import NOTE, TOOL_NAME, definition_text
from headroom_core.tools.skeleton import skeleton, skeleton_schema
from headroom_core.tools.units import units
from headroom_core.wire import jsonedit
from headroom_core.wire.blocks import ToolCall, Usage
from headroom_core.wire.detect import Dialect
from headroom_core.wire.dialects import REGISTRY
from headroom_core.wire.tool_defs import ToolShape
from tests.unit.test_tool_docs import HEADERS, TOOLS, UA, _cool, _runtime

GEMINI = REGISTRY[Dialect.GEMINI]
CONVERSE = REGISTRY[Dialect.BEDROCK_CONVERSE]
GEMINI_PATH = "/v1beta/models/gemini-2.5-pro:generateContent"
CONVERSE_PATH = "/model/us.anthropic.claude-sonnet-4-20250514-v1%3A0/converse"
BEARER = {**HEADERS, "authorization": "Bearer bedrock-api-key-test"}
CP = {"cachePoint": {"type": "default"}}
NAMES = [t["name"] for t in TOOLS]

# A description as agents write them: indented lines, runs of spaces, a trailing blank line.
LOOSE = "Runs   a shell command.\n\n    Use it for builds  and tests.\n    Prefer   rg over grep.\n\n"


def declaration(t: dict, key: str = "parametersJsonSchema") -> dict:
    """A Gemini ``FunctionDeclaration`` of a Messages tool definition."""
    return {"name": t["name"], "description": t["description"], key: t["input_schema"]}


def tool_spec(t: dict) -> dict:
    """A Converse ``toolSpec`` tool of a Messages tool definition."""
    return {
        "toolSpec": {"name": t["name"], "description": t["description"], "inputSchema": {"json": t["input_schema"]}}
    }


def gemini_tools(tools: list[dict]) -> list[dict]:
    """Gemini CLI's shape: one ``Tool`` with every declaration, and a built-in ``Tool``."""
    return [{"functionDeclarations": [declaration(t) for t in tools]}, {"googleSearch": {}}]


def gemini_body(text: str, tools: list[dict] | None = None, **extra) -> dict:
    return {"contents": [{"role": "user", "parts": [{"text": text}]}], "systemInstruction": {"parts": [{"text": "You are a coding agent. " * 200}]},
            "tools": gemini_tools(TOOLS) if tools is None else tools, **extra}  # fmt: skip


def converse_body(text: str, tools: list[dict] | None = None, **extra) -> dict:
    config = {"tools": [tool_spec(t) for t in TOOLS] + [CP] if tools is None else tools, **extra}
    return {
        "messages": [{"role": "user", "content": [{"text": text}]}],
        "system": [{"text": "You are a coding agent. " * 200}, CP],
        "toolConfig": config,
    }


def _plan(rt, path: str, body: dict, headers=HEADERS):
    p = plan_request(rt, "POST", path, headers, json.dumps(body).encode())
    return p, (json.loads(p.body) if p.body else body)


def _tools_text(wire, body: bytes) -> str:
    """The forwarded ``tools`` array's text, as sent."""
    text = body.decode()
    a, b = jsonedit.span(text, wire.tools_path)
    return text[a:b]


def _seed(rt, path: str, make, headers, n: int = 6) -> None:
    """``n`` earlier sessions that offered every tool and called ``Read``, a day ago."""
    for i in range(n):
        p, _ = _plan(rt, path, make(f"earlier session {i}"), headers)
        ledger.record(
            rt.sessions,
            p,
            user_agent=UA,
            model="m",
            status_code=200,
            usage=Usage(),
            rounds=0,
            offered=NAMES,
            called=["Read"],
        )
    _cool(rt)


# --- places and shapes --------------------------------------------------------------------------


def test_gemini_places_each_declaration_of_a_group_and_names_it():
    tools = [
        {"functionDeclarations": [declaration(TOOLS[0]), declaration(TOOLS[1], "parameters")]},
        {"googleSearch": {}},
        {"functionDeclarations": []},
    ]
    assert GEMINI.tool_places(tools) == [
        (0, ("functionDeclarations", 0)),
        (0, ("functionDeclarations", 1)),
        (1, ()),
        (2, ()),
    ]
    assert [(u.element, u.id) for u in units(GEMINI, tools)] == [(0, "Bash"), (0, "Read"), (1, ""), (2, "#2")]
    assert GEMINI.tool_shape(tools[0]["functionDeclarations"][0]) == ToolShape((), ("parametersJsonSchema",))
    assert GEMINI.tool_shape(tools[0]["functionDeclarations"][1]) == ToolShape((), ("parameters",))
    assert [GEMINI.tool_shape(t) for t in tools] == [None, None, None]  # a Tool is no definition
    # protobuf JSON's other spelling, as google-genai 1.x sends a declaration's JSON Schema
    snake = [{"function_declarations": [{"name": "f", "parameters_json_schema": {"type": "object"}}]}]
    assert [(u.at, u.id) for u in units(GEMINI, snake)] == [(("function_declarations", 0), "f")]
    assert GEMINI.tool_shape(snake[0]["function_declarations"][0]) == ToolShape((), ("parameters_json_schema",))
    body = {"toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["Read"]}}}
    assert GEMINI.forced_tool_names(body) == {"Read"} and GEMINI.forced_tool_names({}) == set()


def test_converse_keeps_a_definition_in_tool_spec_and_a_cache_point_is_none():
    tools = [tool_spec(TOOLS[0]), CP]
    assert CONVERSE.tool_places(tools) == [(0, ()), (1, ())]
    assert [u.id for u in units(CONVERSE, tools)] == ["Bash", ""]
    shape = CONVERSE.tool_shape(tools[0])
    assert shape == ToolShape(("toolSpec",), ("inputSchema", "json")) and CONVERSE.tool_shape(CP) is None
    assert shape.schema_of(shape.container_of(tools[0])) == (True, TOOLS[0]["input_schema"])
    assert CONVERSE.forced_tool_names({"toolConfig": {"toolChoice": {"tool": {"name": "Read"}}}}) == {"Read"}
    assert CONVERSE.forced_tool_names({"toolConfig": {"toolChoice": {"auto": {}}}}) == set()
    assert (
        units(REGISTRY[Dialect.ANTHROPIC_MESSAGES], [tool_spec(TOOLS[0])])[0].id == ""
    )  # no toolSpec in the Messages body


def test_skeletons_and_definitions_in_each_shape():
    openapi = {
        "type": "OBJECT",
        "properties": {"path": {"type": "STRING", "nullable": True, "description": "Where. " * 9, "maxLength": 9}},
        "required": ["path"],
    }
    d = {"name": "read", "description": "Reads a file. Then more.", "parameters": openapi, "behavior": "BLOCKING"}
    s = skeleton(d, NOTE, GEMINI.tool_shape)
    assert s == {"name": "read", "description": "Reads a file." + NOTE, "behavior": "BLOCKING",
                 "parameters": {"type": "OBJECT", "properties": {"path": {"type": "STRING", "nullable": True}}, "required": ["path"]}}  # fmt: skip
    assert list(s) == list(d)  # members in their places
    spec = tool_spec(TOOLS[2])
    s = skeleton(spec, NOTE, CONVERSE.tool_shape)
    assert list(s) == ["toolSpec"] and list(s["toolSpec"]) == ["name", "description", "inputSchema"]
    assert s["toolSpec"]["description"] == "mcp__gh__issues does one thing." + NOTE
    assert s["toolSpec"]["inputSchema"] == {"json": skeleton_schema(TOOLS[2]["input_schema"])}
    assert (
        skeleton(CP, NOTE, CONVERSE.tool_shape) is None and skeleton(spec, NOTE) is None
    )  # read as a Messages tool: none
    text = definition_text(spec, CONVERSE.tool_shape)
    assert text.startswith(
        "Tool: mcp__gh__issues\nDescription:\n"
        + TOOLS[2]["description"]
        + "\nInput schema (JSON Schema, inputSchema.json):\n"
    )
    assert text.endswith(json.dumps(TOOLS[2]["input_schema"], separators=(",", ":")))


def test_minify_in_each_shape_changes_whitespace_only():
    decl = {
        "name": "run",
        "description": LOOSE,
        "parameters": {
            "type": "OBJECT",
            "title": "Run",
            "properties": {"cmd": {"type": "STRING", "title": "cmd", "description": "The  command."}},
        },
    }
    got = minify_tools([decl], shape_of=GEMINI.tool_shape)
    assert got.changed and got.tools[0] == {"name": "run", "description": "Runs a shell command.\n\nUse it for builds and tests.\nPrefer rg over grep.",
                                            "parameters": {"type": "OBJECT", "properties": {"cmd": {"type": "STRING", "description": "The command."}}}}  # fmt: skip
    spec = {"toolSpec": {"name": "run", "description": LOOSE, "inputSchema": {"json": decl["parameters"]}}}
    got = minify_tools([spec, CP], shape_of=CONVERSE.tool_shape)
    assert got.tools[1] is CP and got.tools[0]["toolSpec"]["inputSchema"]["json"] == {
        "type": "OBJECT",
        "properties": {"cmd": {"type": "STRING", "description": "The command."}},
    }
    assert not minify_tools([spec, CP]).changed  # the Messages shapes do not read it


# --- the plan: minified, stable, on demand -------------------------------------------------------


def _loose(tools: list[dict]) -> list[dict]:
    return [dict(t, description=LOOSE + t["description"]) for t in tools]


@pytest.mark.parametrize("dialect", ["gemini", "converse"])
def test_tools_go_minified_and_byte_stable_on_later_turns(tmp_path, counter, dialect):
    rt = _runtime(tmp_path, counter, tools_on_demand=False)
    loose = _loose(TOOLS)
    if dialect == "gemini":
        path, headers, client_tools = GEMINI_PATH, HEADERS, gemini_tools(loose)
        b1 = gemini_body("turn 1", client_tools)
        flat = [declaration(t) for t in loose]
        expect = minify_tools(flat, shape_of=GEMINI.tool_shape).tools
    else:
        path, headers, client_tools = CONVERSE_PATH, BEARER, [tool_spec(t) for t in loose] + [CP]
        b1 = converse_body("turn 1", client_tools)
        expect = minify_tools(client_tools, shape_of=CONVERSE.tool_shape).tools
    wire = REGISTRY[Dialect.GEMINI if dialect == "gemini" else Dialect.BEDROCK_CONVERSE]
    p1, s1 = _plan(rt, path, b1, headers)
    sent = wire.tools_of(s1)
    if dialect == "gemini":
        assert sent[0] == {"functionDeclarations": expect} and sent[1] == {"googleSearch": {}}
        names = [fd["name"] for t in sent for fd in t.get("functionDeclarations", [])]
        assert names[: len(NAMES)] == NAMES
    else:
        assert sent[: len(expect)] == expect and sent[len(TOOLS)] == CP  # the cache point where the client put it
    assert all(
        len(json.dumps(a)) < len(json.dumps(b))
        for a, b in zip(expect, flat if dialect == "gemini" else client_tools)
        if a != CP
    )
    # a later turn: the client resends its tools; what goes upstream is the same bytes
    b2 = copy.deepcopy(b1)
    conv, role, part = ("contents", "model", "parts") if dialect == "gemini" else ("messages", "assistant", "content")
    b2[conv] += [{"role": role, part: [{"text": "ok"}]}, {"role": "user", part: [{"text": "turn 2"}]}]
    p2, s2 = _plan(rt, path, b2, headers)
    assert _tools_text(wire, p2.body) == _tools_text(wire, p1.body)
    assert earlier_break(b1, b2, s1, s2) is None


@pytest.mark.parametrize("dialect", ["gemini", "converse"])
def test_idle_tools_go_as_skeletons_and_headroom_tool_docs_answers_in_the_dialect(tmp_path, counter, dialect):
    rt = _runtime(tmp_path, counter)
    gem = dialect == "gemini"
    path, headers, make = (GEMINI_PATH, HEADERS, gemini_body) if gem else (CONVERSE_PATH, BEARER, converse_body)
    wire = GEMINI if gem else CONVERSE
    _seed(rt, path, make, headers)
    b1 = make("a new session")
    p1, s1 = _plan(rt, path, b1, headers)
    sent = wire.tools_of(s1)
    assert TOOL_NAME in p1.hidden_tools
    us = units(wire, sent)
    defs = {u.id: (wire.tool_shape(u.value).container_of(u.value) if wire.tool_shape(u.value) else None) for u in us}
    short = [n for n, c in defs.items() if c is not None and c.get("description", "").endswith(NOTE)]
    assert short == [
        "Bash",
        "mcp__gh__issues",
        "mcp__gh__pulls",
        "mcp__zen__chat",
    ]  # Read: called; tiny: nothing to gain
    assert us[-1].id == TOOL_NAME  # the proxy's tool last, in the dialect's shape
    if gem:
        assert sent[0]["functionDeclarations"][0] == skeleton(declaration(TOOLS[0]), NOTE, GEMINI.tool_shape) and sent[
            1
        ] == {"googleSearch": {}}
    else:
        assert sent[0] == skeleton(tool_spec(TOOLS[0]), NOTE, CONVERSE.tool_shape) and sent[len(TOOLS)] == CP
    read = defs["Read"]  # in full, minified: every word kept
    assert (
        read["description"].split() == TOOLS[1]["description"].split()
        and read["description"] != TOOLS[1]["description"]
    )
    text = answer_call(rt, p1.context, ToolCall("c1", TOOL_NAME, {"name": "mcp__gh__pulls"}))
    label = "parametersJsonSchema" if gem else "inputSchema.json"
    assert (
        text
        == f"Tool: mcp__gh__pulls\nDescription:\n{TOOLS[3]['description']}\nInput schema (JSON Schema, {label}):\n"
        + json.dumps(TOOLS[3]["input_schema"], separators=(",", ":"))
    )
    # the next turn of the session: the same tools, byte for byte
    b2 = copy.deepcopy(b1)
    conv, role, part = ("contents", "model", "parts") if gem else ("messages", "assistant", "content")
    b2[conv] += [{"role": role, part: [{"text": "ok"}]}, {"role": "user", part: [{"text": "next"}]}]
    p2, s2 = _plan(rt, path, b2, headers)
    assert _tools_text(wire, p2.body) == _tools_text(wire, p1.body) and earlier_break(b1, b2, s1, s2) is None


def _full(c: dict, t: dict) -> bool:
    """Whether the definition ``c`` went in full (minified: the same words) for the tool ``t``."""
    return c["description"].split() == t["description"].split()


def test_a_forced_tool_stays_in_full(tmp_path, counter):
    rt = _runtime(tmp_path, counter)
    _seed(rt, CONVERSE_PATH, converse_body, BEARER)
    p, s = _plan(rt, CONVERSE_PATH, converse_body("go", toolChoice={"tool": {"name": "Bash"}}), BEARER)
    assert TOOL_NAME not in p.hidden_tools  # toolChoice forces Bash: the model cannot call headroom_tool_docs
    assert _full(s["toolConfig"]["tools"][0]["toolSpec"], TOOLS[0])
    rt2 = _runtime(tmp_path / "g", counter)
    _seed(rt2, GEMINI_PATH, gemini_body, HEADERS)
    fcc = {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["Bash", "mcp__gh__pulls", TOOL_NAME]}}
    p, s = _plan(rt2, GEMINI_PATH, gemini_body("go", toolConfig=fcc))
    fds = {d["name"]: d for d in s["tools"][0]["functionDeclarations"]}
    assert TOOL_NAME in p.hidden_tools and _full(fds["Bash"], TOOLS[0]) and _full(fds["mcp__gh__pulls"], TOOLS[3])
    assert fds["mcp__gh__issues"]["description"].endswith(NOTE)
