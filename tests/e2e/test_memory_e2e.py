"""Memory end to end through a real ``mitmdump -s addons/headroom.py``: real Anthropic and OpenAI
SDK clients as different agents, a real local upstream speaking the providers' wire formats, the
real embedding model, SQLite and a real PostgreSQL server."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from tests.e2e.test_memory_store import MIGRATE
from tests.support.clients import anthropic_client, http_client, openai_client
from tests.support.postgres import fresh_pg_database, pg_server_url
from tests.support.proxy import ADDON_SCRIPT, free_port
from tests.support.upstream import Reply

SHOP = "/work/shop"
OTHER = "/work/other"
CLAUDE_SYSTEM = f"You are Claude Code, Anthropic's CLI for coding.\n<env>\nWorking directory: {SHOP}\nIs directory a git repo: Yes\nPlatform: linux\n</env>"
CODEX_ENV = {
    "role": "user",
    "content": [
        {
            "type": "input_text",
            "text": f"<environment_context>\n  <cwd>{SHOP}</cwd>\n  <approval_policy>on-request</approval_policy>\n</environment_context>",
        }
    ],
}
MEMORY_TOOLS = ["memory_save", "memory_search", "memory_update", "memory_delete", "memory_list"]
BASH = {
    "name": "Bash",
    "description": "Run a shell command.",
    "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
}
SHELL = {
    "type": "function",
    "name": "shell",
    "description": "Run a shell command.",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
}


def wait_for_model(proxy) -> None:
    """With memory on the model loads in the background from the start; wait until the log says
    it did."""
    proxy.wait_for_log(r"headroom: embedding model all-MiniLM-L6-v2 loaded", timeout=240)


@pytest.fixture(scope="module")
def proxy(module_proxy_factory, upstream_server):
    p = module_proxy_factory(ADDON_SCRIPT, options={"headroom_memory": "true"})
    wait_for_model(p)
    upstream_server.reset()
    return p


def test_with_memory_on_the_embedding_model_loads_at_start_not_at_the_first_request(upstream_server, proxy):
    # the fixture sent nothing: the model loaded while the proxy warmed up, so a session's first
    # request already gets semantic memory search (not the text fallback)
    log = proxy.log_text()
    loaded = re.search(r"headroom: embedding model all-MiniLM-L6-v2 loaded", log)
    assert loaded is not None
    first_flow = log.find("/v1/messages")
    assert first_flow == -1 or loaded.start() < first_flow
    assert "memory search falls back to text search" not in log


def claude(upstream, proxy):
    return anthropic_client(upstream, proxy, default_headers={"user-agent": "claude-cli/1.0.62 (external, cli)"})


def codex(upstream, proxy):
    return openai_client(upstream, proxy, default_headers={"user-agent": "codex_cli_rs/0.30.0"})


def last_user_texts(body: dict) -> list[str]:
    seq = body.get("messages") or body.get("input")
    content = seq[-1]["content"]
    return [content] if isinstance(content, str) else [p.get("text", "") for p in content]


def test_memory_saved_by_claude_reaches_codex_on_the_same_project_and_no_one_else(upstream, proxy):
    # Agent 1 (Claude Code, Anthropic SDK, non-streaming): the model saves a memory; the proxy answers the call
    upstream.script(
        Reply.tool_call("memory_save", {"text": MIGRATE, "kind": "fact"}, text="Noted."),
        Reply.text("I will use pnpm db:migrate from now on."),
    )
    msg = claude(upstream, proxy).messages.create(
        model="claude-sonnet-4-5", max_tokens=200, system=CLAUDE_SYSTEM, tools=[BASH],
        messages=[{"role": "user", "content": "Migrations here run with pnpm db:migrate, prisma migrate dev breaks the schema."}],
    )  # fmt: skip
    assert [b.type for b in msg.content] == ["text", "text"]
    assert [b.text for b in msg.content] == ["Noted.", "I will use pnpm db:migrate from now on."]
    assert msg.stop_reason == "end_turn"
    first, follow = upstream.requests
    assert [t["name"] for t in first.json["tools"]] == ["Bash"] + MEMORY_TOOLS
    result = follow.json["messages"][-1]["content"][0]
    assert result["type"] == "tool_result"
    mid = re.fullmatch(r"Saved memory ([0-9a-f]{12}) \(fact\): " + re.escape(MIGRATE), result["content"]).group(1)

    # Agent 2 (Codex, OpenAI SDK, Responses API, streaming), same project: the memory is injected
    upstream.reset()
    events = list(codex(upstream, proxy).responses.create(
        model="gpt-5-codex", tools=[SHELL], stream=True,
        input=[CODEX_ENV, {"role": "user", "content": [{"type": "input_text", "text": "How do I run the database migrations?"}]}],
    ))  # fmt: skip
    (rec,) = upstream.requests
    texts = last_user_texts(rec.json)
    assert texts[0] == "How do I run the database migrations?"
    assert texts[1].startswith("<headroom-context>") and f"- [memory {mid}] (fact) {MIGRATE}" in texts[1]
    assert [t["name"] for t in rec.json["tools"]] == ["shell"] + MEMORY_TOOLS
    assert rec.json["input"][0] == CODEX_ENV and "instructions" not in rec.json
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text.startswith("upstream saw 2 messages")

    # Agent 3 (OpenAI SDK, Chat Completions) on another project: never sees it
    upstream.reset()
    r = openai_client(upstream, proxy, default_headers={"x-headroom-project": OTHER}).chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "How do I run the database migrations?"}]
    )
    assert r.choices[0].message.content.startswith("upstream saw 1 messages")
    (rec,) = upstream.requests
    assert "pnpm db:migrate" not in json.dumps(rec.json["messages"]) and "<headroom-context>" not in rec.text
    assert "x-headroom-project" not in rec.headers


def test_memory_tools_answered_in_streaming_responses(upstream, proxy):
    client = claude(upstream, proxy)
    upstream.script(
        Reply.tool_call(
            "memory_save",
            {"text": "The frontend dev server runs with `pnpm dev --filter web` on port 5173.", "kind": "fact"},
        ),
        Reply.text("ok"),
    )
    client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=50,
        system=CLAUDE_SYSTEM,
        messages=[{"role": "user", "content": "note the dev server command"}],
    )
    upstream.reset()
    # Anthropic Messages, SSE: the model searches, the proxy answers, the client sees one message
    upstream.script(
        Reply.tool_call("memory_search", {"query": "frontend dev server"}, text="Let me check my notes."),
        Reply.text(" Run pnpm dev --filter web."),
    )
    with client.messages.stream(
        model="claude-sonnet-4-5",
        max_tokens=100,
        system=CLAUDE_SYSTEM,
        tools=[BASH],
        messages=[{"role": "user", "content": "start the frontend"}],
    ) as stream:
        kinds = [e.type for e in stream]
        final = stream.get_final_message()
    assert [b.type for b in final.content] == ["text", "text"]
    assert "".join(b.text for b in final.content) == "Let me check my notes. Run pnpm dev --filter web."
    assert kinds.count("message_start") == 1 and kinds[-1] == "message_stop"
    assert final.stop_reason == "end_turn"
    follow = upstream.requests[1]
    assert follow.is_stream
    answer = follow.json["messages"][-1]["content"][0]["content"]
    assert (
        answer.startswith("1 memories (vector search), best first:\n- [memory ") and "pnpm dev --filter web" in answer
    )

    # OpenAI Chat Completions, SSE, same project by header
    upstream.reset()
    upstream.script(Reply.tool_call("memory_list", {"kind": "fact"}), Reply.text("There are two facts."))
    chunks = list(openai_client(upstream, proxy, default_headers={"x-headroom-project": SHOP}).chat.completions.create(
        model="gpt-4o", stream=True, messages=[{"role": "user", "content": "what do you know about this repo?"}]
    ))  # fmt: skip
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "There are two facts."
    assert not any(c.choices and c.choices[0].delta.tool_calls for c in chunks)
    listed = upstream.requests[1].json["messages"][-1]
    assert listed["role"] == "tool" and listed["content"].startswith("2 memories of this project, newest first:\n")


def test_malformed_memory_call_gets_a_tool_result_that_says_what_was_wrong(upstream, proxy):
    upstream.script(
        Reply.tool_call("memory_update", {"id": "the-first-one", "text": "x"}),
        Reply.text("Sorry, I could not update it."),
    )
    r = codex(upstream, proxy).responses.create(
        model="gpt-5-codex", input=[CODEX_ENV, {"role": "user", "content": "fix the memory"}]
    )
    assert r.output_text == "Sorry, I could not update it."
    assert all(getattr(o, "name", None) != "memory_update" for o in r.output)
    out = upstream.requests[1].json["input"][-1]
    assert out["type"] == "function_call_output"
    assert out["output"] == "memory_update error: \"id\" must be a memory id (12 hex digits), got 'the-first-one'."


def test_remember_instruction_is_saved_and_bypassed_requests_are_untouched(upstream, proxy):
    codex(upstream, proxy).responses.create(
        model="gpt-5-codex",
        input=[
            CODEX_ENV,
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "Remember: never edit files under config/, they are generated."}
                ],
            },
        ],
    )
    upstream.reset()
    claude(upstream, proxy).messages.create(
        model="claude-sonnet-4-5",
        max_tokens=50,
        system=CLAUDE_SYSTEM,
        messages=[{"role": "user", "content": "Can I change the files in config/ to fix the port?"}],
    )
    injected = last_user_texts(upstream.requests[0].json)[-1]
    assert re.search(
        r"- \[memory [0-9a-f]{12}\] \(rule\) never edit files under config/, they are generated\.", injected
    )
    upstream.reset()
    raw = json.dumps(
        {
            "model": "claude-sonnet-4-5",
            "max_tokens": 50,
            "system": CLAUDE_SYSTEM,
            "messages": [{"role": "user", "content": "Can I change the files in config/?"}],
        }
    ).encode()
    with http_client(proxy) as c:
        c.post(
            upstream.url + "/v1/messages",
            content=raw,
            headers={"content-type": "application/json", "x-headroom-bypass": "true"},
        )
    assert upstream.requests[0].sha256 == hashlib.sha256(raw).hexdigest()


@pytest.fixture(scope="module")
def pg_url():
    server = pg_server_url()
    if server is None:
        pytest.skip(
            'needs PostgreSQL: set HEADROOM_TEST_PG_URL (eval "$(scripts/postgres start)") or install PostgreSQL'
        )
    url, drop = fresh_pg_database(server)
    yield url
    drop()


def test_two_proxies_share_memories_through_postgresql(upstream, proxy_factory, pg_url):
    """Two proxy processes (two developer machines) on one PostgreSQL memory database. The model
    path is wrong on purpose: memory still works, with text search, and the log says so."""
    opts = {
        "headroom_memory": "true",
        "headroom_memory_db_url": pg_url,
        "headroom_memory_model_path": "/nonexistent/model",
    }
    one, two = proxy_factory(ADDON_SCRIPT, options=opts), proxy_factory(ADDON_SCRIPT, options=opts)
    upstream.script(Reply.tool_call("memory_save", {"text": MIGRATE}), Reply.text("saved"))
    assert (
        claude(upstream, one)
        .messages.create(
            model="claude-sonnet-4-5",
            max_tokens=50,
            system=CLAUDE_SYSTEM,
            messages=[{"role": "user", "content": "note it"}],
        )
        .content[0]
        .text
        == "saved"
    )
    upstream.reset()
    codex(upstream, two).responses.create(
        model="gpt-5-codex",
        input=[CODEX_ENV, {"role": "user", "content": "Which command runs the database migration?"}],
    )
    assert MIGRATE in last_user_texts(upstream.requests[0].json)[-1]
    for p in (one, two):
        p.wait_for_log(r"the embedding model could not be loaded \(.*/nonexistent/model")
    two.wait_for_log(
        r"headroom memory: embedding model not available \(it (is still loading|could not be loaded: .*)\); memory search falls back to text search"
    )
    assert "memory: on, store postgresql+psycopg://" in two.log_text()


def test_unreachable_memory_database_does_not_stop_traffic(upstream, proxy_factory):
    dead = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/nothing"
    p = proxy_factory(ADDON_SCRIPT, options={"headroom_memory": "true", "headroom_memory_db_url": dead})
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 50,
        "system": CLAUDE_SYSTEM,
        "tools": [BASH],
        "messages": [{"role": "user", "content": "remember: this is never stored"}],
    }
    msg = claude(upstream, p).messages.create(**body)
    assert msg.content[0].text.startswith("upstream saw 1 messages")
    rec = upstream.requests[0]
    # the session keeps the memory tools it started with (the cached tools prefix); nothing is
    # injected or saved while the store cannot be reached, and a call says why
    assert [t["name"] for t in rec.json["tools"]] == ["Bash"] + MEMORY_TOOLS and rec.json["messages"] == body[
        "messages"
    ]
    p.wait_for_log(
        r"headroom memory: off: cannot open the memory store postgresql\+psycopg://postgres@127\.0\.0\.1:\d+/nothing"
    )
    upstream.script(Reply.tool_call("memory_list", {}), Reply.text("noted"))
    msg = claude(upstream, p).messages.create(**body)
    assert [b.text for b in msg.content] == ["noted"]
    assert (
        upstream.requests[-1].json["messages"][-1]["content"][0]["content"]
        == "memory_list error: the memory store is unavailable right now; nothing was done."
    )
