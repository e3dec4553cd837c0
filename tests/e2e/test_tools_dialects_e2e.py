"""Tool definitions of the Gemini and Bedrock Converse bodies end to end (issue 32): the real
``google-genai`` SDK and ``boto3`` (a Bedrock API key: unsigned) through a real
``mitmdump -s addons/headroom.py`` to a local upstream speaking each format
(tests/support/upstream.py), with the 229 real Claude Code tool definitions of the corpus as
Gemini ``functionDeclarations`` and Converse ``toolSpec`` tools.

- the tools go upstream minified (the values :func:`~headroom_core.tools.minify.minify_tools`
  gives in the dialect's shape), and byte for byte the same on the next turn;
- with tools on demand, after earlier sessions of the project that never called the MCP tools,
  a new session's idle tools go as skeletons in the dialect's shape and ``headroom_tool_docs``
  is offered; the model asks it for one tool's docs, the proxy answers with the full definition
  the client sent, the client gets only the final answer, and the follow-up and the next turn
  carry the same ``tools`` bytes as the first request;
- a SigV4-signed Converse request goes upstream byte-identical, its tools as the client wrote them.
"""

from __future__ import annotations

import json
import time

import pytest
from sqlalchemy import func, select

from headroom_core.db.engine import open_database
from headroom_core.db.models import ToolUsage
from headroom_core.tools.minify import minify_tools
from headroom_core.tools.on_demand import NOTE, TOOL_NAME, definition_text
from headroom_core.wire import jsonedit
from headroom_core.wire.detect import Dialect
from headroom_core.wire.dialects import REGISTRY
from tests.e2e.test_hosted_claude_e2e import boto_client
from tests.e2e.test_tool_docs_e2e import _a_day_later, corpus_tools  # noqa: F401 (fixture)
from tests.support.dialect_e2e import (
    OPTIONS,
    proxy,  # noqa: F401 (fixture)
)
from tests.support.proxy import ADDON_SCRIPT
from tests.support.upstream import Reply

genai = pytest.importorskip("google.genai")
pytest.importorskip("boto3")
from google.genai import types  # noqa: E402

from tests.e2e.test_gemini_e2e import SESSION_CONTEXT, gemini_client  # noqa: E402

GEMINI = REGISTRY[Dialect.GEMINI]
CONVERSE = REGISTRY[Dialect.BEDROCK_CONVERSE]
GEMINI_MODEL = "gemini-2.5-pro"
CONVERSE_MODEL = "us.anthropic.claude-sonnet-4-20250514-v1:0"
SYSTEM = "You are an interactive CLI agent. Working directory: /home/dev/app"
CP = {"cachePoint": {"type": "default"}}
IDLE = 3  # tools_on_demand_idle_requests for the test
WANTED = "mcp__zen__precommit"
ON_DEMAND = {**OPTIONS, "headroom_tools_on_demand": "true", "headroom_tools_on_demand_idle_requests": str(IDLE)}


#: Where google-genai 1.x puts a declaration's JSON Schema (protobuf JSON's proto field name)
SCHEMA_KEY = "parameters_json_schema"


def declaration(t: dict) -> dict:
    """A Messages tool definition as ``google-genai`` sends it for ``parameters_json_schema=``."""
    return {"name": t["name"], "description": t["description"], SCHEMA_KEY: t["input_schema"]}


def tool_spec(t: dict) -> dict:
    return {
        "toolSpec": {"name": t["name"], "description": t["description"], "inputSchema": {"json": t["input_schema"]}}
    }


def _tools_text(req, wire) -> str:
    """The ``tools`` array of an upstream request, its text as it arrived."""
    a, b = jsonedit.span(req.text, wire.tools_path)
    return req.text[a:b]


def _offered(proxy, at_least: int, timeout: float = 60.0) -> int:
    """The requests that offered ``Read`` in the proxy's ledger, once there are ``at_least``."""
    sessions = open_database(f"sqlite:///{proxy.home / 'headroom.db'}")
    deadline = time.monotonic() + timeout
    while True:
        with sessions() as s:
            n = s.scalar(select(func.max(ToolUsage.offered)).where(ToolUsage.tool_name == "Read")) or 0
        if n >= at_least or time.monotonic() > deadline:
            return n
        time.sleep(0.2)


# --- Gemini ---------------------------------------------------------------------------------------


def _config(tools: list[dict]) -> types.GenerateContentConfig:
    fds = [
        types.FunctionDeclaration(
            name=t["name"], description=t["description"], parameters_json_schema=t["input_schema"]
        )
        for t in tools
    ]
    return types.GenerateContentConfig(system_instruction=SYSTEM, tools=[types.Tool(function_declarations=fds)],
                                       automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True))  # fmt: skip


def _contents(task: str, *turns: str) -> list[types.Content]:
    """A conversation as Gemini CLI starts it (its session context, then the task, in the first
    user content: a new task is a new session), then ``turns`` alternating model and user."""
    out = [types.Content(role="user", parts=[types.Part(text=SESSION_CONTEXT), types.Part(text=task)])]
    for i, t in enumerate(turns):
        out.append(types.Content(role="model" if i % 2 == 0 else "user", parts=[types.Part(text=t)]))
    return out


def test_gemini_declarations_go_minified_and_byte_stable(upstream, proxy, corpus_tools):
    client = gemini_client(upstream, proxy)
    config = _config(corpus_tools)
    upstream.script(Reply.text("First."), Reply.text("Second."))
    assert (
        client.models.generate_content(model=GEMINI_MODEL, contents=_contents("list the files"), config=config).text
        == "First."
    )
    assert (
        client.models.generate_content(
            model=GEMINI_MODEL, contents=_contents("list the files", "First.", "and now?"), config=config
        ).text
        == "Second."
    )
    first, second = upstream.requests[-2:]
    expect = minify_tools([declaration(t) for t in corpus_tools], shape_of=GEMINI.tool_shape).tools
    sent = first.json["tools"]
    assert sent[0]["functionDeclarations"] == expect  # the minified values, in Gemini's shape
    assert [fd["name"] for t in sent[1:] for fd in t["functionDeclarations"]] == ["headroom_retrieve"]
    assert len(_tools_text(first, GEMINI)) < 0.9 * len(
        json.dumps([{"functionDeclarations": [declaration(t) for t in corpus_tools]}])
    )
    assert _tools_text(second, GEMINI) == _tools_text(first, GEMINI)  # the next turn: the same bytes


def test_gemini_idle_tools_as_skeletons_and_headroom_tool_docs_answered(upstream, proxy_factory, corpus_tools):
    px = proxy_factory(ADDON_SCRIPT, options=ON_DEMAND)
    client = gemini_client(upstream, px)
    config = _config(corpus_tools)
    for i in range(IDLE):  # earlier sessions of the project: the model calls Read, never the MCP tools
        upstream.script(Reply.tool_call("Read", {"file_path": "/home/gem/app/a.py"}, text="Reading."))
        resp = client.models.generate_content(
            model=GEMINI_MODEL, contents=_contents(f"earlier task {i}"), config=config
        )
        assert [c.name for c in resp.function_calls or []] == ["Read"]
    assert _offered(px, IDLE) >= IDLE
    _a_day_later(px)  # the provider's cache of those sessions is cold: the statuses are decided anew
    first_new = len(upstream.requests)

    upstream.script(
        Reply.tool_call(TOOL_NAME, {"name": WANTED}, text="Let me read how that tool works."),
        Reply.text("Pre-commit checks planned."),
    )
    resp = client.models.generate_content(
        model=GEMINI_MODEL, contents=_contents("run the pre-commit review"), config=config
    )
    assert (
        resp.text == "Let me read how that tool works.Pre-commit checks planned." and not resp.function_calls
    )  # one answer, no proxy call
    first, follow = upstream.requests[first_new:]
    fds = {fd["name"]: fd for t in first.json["tools"] for fd in t["functionDeclarations"]}
    assert first.json["tools"][-1]["functionDeclarations"][0]["name"] == TOOL_NAME  # offered last, in Gemini's shape
    full = next(t for t in corpus_tools if t["name"] == WANTED)
    assert (
        fds[WANTED]["description"].endswith(NOTE)
        and len(json.dumps(fds[WANTED])) < len(json.dumps(declaration(full))) / 2
    )
    assert (
        fds["Read"]["description"].split()
        == next(t for t in corpus_tools if t["name"] == "Read")["description"].split()
    )
    assert len([n for n, fd in fds.items() if fd.get("description", "").endswith(NOTE)]) >= 100
    assert _tools_text(follow, GEMINI) == _tools_text(first, GEMINI)  # the follow-up: the same tools, byte for byte
    model_turn, answer = follow.json["contents"][-2:]
    call = model_turn["parts"][-1]["functionCall"]
    assert call["name"] == TOOL_NAME and call["args"] == {"name": WANTED}
    fr = answer["parts"][0]["functionResponse"]
    assert fr["name"] == TOOL_NAME and fr["response"]["output"] == definition_text(declaration(full), GEMINI.tool_shape)
    assert (
        f"(JSON Schema, {SCHEMA_KEY}):\n" + json.dumps(full["input_schema"], ensure_ascii=False, separators=(",", ":"))
        in fr["response"]["output"]
    )

    # the next turn of the session: the same tools bytes again
    upstream.script(Reply.text("Done."))
    contents = _contents(
        "run the pre-commit review", "Let me read how that tool works.Pre-commit checks planned.", "go on"
    )
    assert client.models.generate_content(model=GEMINI_MODEL, contents=contents, config=config).text == "Done."
    assert _tools_text(upstream.requests[-1], GEMINI) == _tools_text(first, GEMINI)


# --- Bedrock Converse -------------------------------------------------------------------------------


def _converse(client, tools: list[dict], *texts: str) -> dict:
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": [{"text": t}]} for i, t in enumerate(texts)]
    config = {"tools": [tool_spec(t) for t in tools] + [CP]}
    return client.converse(
        modelId=CONVERSE_MODEL,
        messages=msgs,
        system=[{"text": SYSTEM}, CP],
        toolConfig=config,
        inferenceConfig={"maxTokens": 100},
    )


def _text(resp: dict) -> str:
    return "".join(b.get("text", "") for b in resp["output"]["message"]["content"])


def test_converse_tool_specs_go_minified_and_byte_stable(upstream, proxy, corpus_tools, monkeypatch):
    client = boto_client(upstream, proxy, monkeypatch, bearer=True)
    upstream.script(Reply.text("First."), Reply.text("Second."))
    assert _text(_converse(client, corpus_tools, "list the files")) == "First."
    assert _text(_converse(client, corpus_tools, "list the files", "First.", "and now?")) == "Second."
    first, second = upstream.requests[-2:]
    client_tools = [tool_spec(t) for t in corpus_tools] + [CP]
    expect = minify_tools(client_tools, shape_of=CONVERSE.tool_shape).tools
    sent = first.json["toolConfig"]["tools"]
    assert (
        sent[: len(expect)] == expect and sent[len(corpus_tools)] == CP
    )  # minified values; the cache point where the client put it
    assert [t["toolSpec"]["name"] for t in sent[len(expect) :]] == ["headroom_retrieve"]
    assert len(_tools_text(first, CONVERSE)) < 0.9 * len(json.dumps(client_tools))
    assert _tools_text(second, CONVERSE) == _tools_text(first, CONVERSE)


def test_converse_idle_tools_as_skeletons_and_headroom_tool_docs_answered(
    upstream, proxy_factory, corpus_tools, monkeypatch
):
    px = proxy_factory(ADDON_SCRIPT, options=ON_DEMAND)
    client = boto_client(upstream, px, monkeypatch, bearer=True)
    for i in range(IDLE):
        upstream.script(Reply.tool_call("Read", {"file_path": "/home/dev/app/a.py"}, text="Reading."))
        resp = _converse(client, corpus_tools, f"earlier task {i}")
        assert [b["toolUse"]["name"] for b in resp["output"]["message"]["content"] if "toolUse" in b] == ["Read"]
    assert _offered(px, IDLE) >= IDLE
    _a_day_later(px)
    first_new = len(upstream.requests)

    upstream.script(
        Reply.tool_call(TOOL_NAME, {"name": WANTED}, text="Let me read how that tool works."),
        Reply.text("Pre-commit checks planned."),
    )
    resp = _converse(client, corpus_tools, "run the pre-commit review")
    assert (
        _text(resp) == "Let me read how that tool works.Pre-commit checks planned." and resp["stopReason"] == "end_turn"
    )
    assert not any("toolUse" in b for b in resp["output"]["message"]["content"])
    first, follow = upstream.requests[first_new:]
    sent = first.json["toolConfig"]["tools"]
    specs = {t["toolSpec"]["name"]: t["toolSpec"] for t in sent if "toolSpec" in t}
    assert sent[len(corpus_tools)] == CP and sent[-1]["toolSpec"]["name"] == TOOL_NAME
    full = next(t for t in corpus_tools if t["name"] == WANTED)
    assert specs[WANTED]["description"].endswith(NOTE) and "json" in specs[WANTED]["inputSchema"]
    assert len(json.dumps(specs[WANTED])) < len(json.dumps(tool_spec(full)["toolSpec"])) / 2
    assert len([n for n, s in specs.items() if s["description"].endswith(NOTE)]) >= 100
    assert _tools_text(follow, CONVERSE) == _tools_text(first, CONVERSE)
    use = follow.json["messages"][-2]["content"][-1]["toolUse"]
    result = follow.json["messages"][-1]["content"][0]["toolResult"]
    assert use["name"] == TOOL_NAME and use["input"] == {"name": WANTED} and result["toolUseId"] == use["toolUseId"]
    assert result["content"] == [{"text": definition_text(tool_spec(full), CONVERSE.tool_shape)}]

    upstream.script(Reply.text("Done."))
    assert _text(_converse(client, corpus_tools, "run the pre-commit review", _text(resp), "go on")) == "Done."
    assert _tools_text(upstream.requests[-1], CONVERSE) == _tools_text(first, CONVERSE)


def test_signed_converse_tools_go_byte_identical(upstream, proxy, corpus_tools, monkeypatch):
    client = boto_client(upstream, proxy, monkeypatch, bearer=False)  # SigV4 with dummy keys
    upstream.script(Reply.text("Signed."))
    assert _text(_converse(client, corpus_tools, "list the files")) == "Signed."
    req = upstream.requests[-1]
    assert req.header("authorization", "").startswith("AWS4-HMAC-SHA256 ")
    assert (
        req.json["toolConfig"]["tools"] == [tool_spec(t) for t in corpus_tools] + [CP]
        and "headroom_retrieve" not in req.text
    )
