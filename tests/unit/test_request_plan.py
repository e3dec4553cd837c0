"""The request plan on real inputs: corpus replay, JSON tool outputs, bypass, limits, sessions."""

from __future__ import annotations

import json

import pytest

from headroom_core.ccr import retrieve
from headroom_core.compress import markers
from headroom_core.request_plan import plan_request
from headroom_core.runtime import Runtime
from headroom_core.settings import load_settings
from tests.conftest import corpus_dir, flow_files, load_flow


def github_payload(name: str) -> str:
    """The largest array payload of a github-api scenario, printed as an agent's tool would."""
    data = json.loads((corpus_dir("github-api") / name).read_text())
    arrays = [x["response"] for x in data if isinstance(x.get("response"), list)]
    best = max(arrays or [x["response"] for x in data], key=lambda r: len(json.dumps(r)))
    return json.dumps(best, indent=2)


def github_scenario(name: str) -> str:
    """A whole recorded github-api scenario (every exchange with its payload), as a tool would
    print it after reading the file: large arrays of similar nested objects."""
    return json.dumps(json.loads((corpus_dir("github-api") / name).read_text()), indent=2)


def anthropic_request(tool_text: str, question: str = "Which issues are still open?") -> dict:
    return {
        "model": "claude-sonnet-4",
        "max_tokens": 1024,
        "system": [{"type": "text", "text": "You are a coding agent.", "cache_control": {"type": "ephemeral"}}],
        "tools": [
            {
                "name": "github_api",
                "description": "Call the GitHub REST API.",
                "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
            }
        ],
        "messages": [
            {"role": "user", "content": question},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "toolu_01", "name": "github_api", "input": {"path": "/repos/o/r/issues"}}
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": tool_text}]},
        ],
    }


def plan(rt: Runtime, body: dict | bytes, path: str = "/v1/messages", headers: dict | None = None):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return plan_request(rt, "POST", path, headers or {}, raw)


def test_corpus_replay_keeps_every_conversation_intact(runtime):
    """Every real Claude Code request: valid JSON out, same roles, messages and tool ids."""
    for f in flow_files():
        body = load_flow(f)["request"]["body"]
        p = plan(runtime, body)
        assert p.action in ("passthrough", "rewrite"), (f.name, p.reason)
        out = json.loads(p.body) if p.body else body
        assert [m["role"] for m in out["messages"]] == [m["role"] for m in body["messages"]]

        def ids(b):
            return [
                (x.get("type"), x.get("id"), x.get("tool_use_id"))
                for m in b["messages"]
                if isinstance(m["content"], list)
                for x in m["content"]
                if x.get("type")
                != "text"  # text blocks: a string content may be replayed as one text block, plus the proxy's context block
            ]

        assert ids(out) == ids(body)


@pytest.mark.parametrize("scenario", ["paginate-issues.json", "search-issues.json", "labels.json", "git-refs.json"])
@pytest.mark.parametrize("whole", [True, False], ids=["scenario", "page"])
def test_github_payload_shrinks_and_round_trips(runtime, scenario, whole):
    text = github_scenario(scenario) if whole else github_payload(scenario)
    body = anthropic_request(text)
    p = plan(runtime, body)
    assert p.action == "rewrite", p.reason
    out = json.loads(p.body)
    new_text = out["messages"][2]["content"][0]["content"]
    assert runtime.counter.count(new_text) < runtime.counter.count(text)
    # everything except the tool output and the appended retrieve tool is unchanged
    assert out["messages"][:2] == body["messages"][:2] and out["system"] == body["system"]
    keys = markers.find_marker_keys(new_text)
    if len(json.dumps(body)) < runtime.settings.retrieve_min_bytes:
        # a small session gets no proxy tools (decided at its first request): lossless only
        assert out["tools"] == body["tools"] and keys == []
        return
    # the session's tools are fixed at its first request: the client's, then the proxy's
    assert out["tools"][-1]["name"] == retrieve.TOOL_NAME
    assert out["tools"][:-1] == body["tools"]
    if keys:  # lossy: the original is retrievable byte-exact, in the request's scope only
        assert set(keys) == {markers.offload_key(text)}
        assert runtime.store.get(keys[0], p.context.scope).text == text
        assert runtime.store.get(keys[0], "another scope").text is None


def test_same_input_same_bytes_across_processes_and_queries(tmp_path, counter):
    """Two fresh stores give identical bytes for the same request; within one store, a later
    turn with another question reuses the first decision (the cached prefix stays stable).
    Both conversations are of one project: conversations that name none share nothing."""
    text = github_scenario("paginate-issues.json")
    project = {"x-headroom-project": "/p"}

    def fresh(name: str) -> Runtime:
        rt = Runtime(load_settings({"home": str(tmp_path / name)}, env={}))
        rt.__dict__["counter"] = counter
        return rt

    a = plan(fresh("a"), anthropic_request(text, "Which issues are open?"), headers=project).body
    b = plan(fresh("b"), anthropic_request(text, "Which issues are open?"), headers=project).body
    assert a == b
    later = plan(fresh("a"), anthropic_request(text, "Anything about sesame seeds?"), headers=project).body
    tool_result = lambda raw: json.loads(raw)["messages"][2]["content"][0]["content"]  # noqa: E731
    assert tool_result(later) == tool_result(a)


def test_retrieve_tool_stays_once_offered(runtime):
    text = github_scenario("paginate-issues.json")
    first = plan(runtime, anthropic_request(text))
    assert json.loads(first.body)["tools"][-1]["name"] == retrieve.TOOL_NAME
    later = anthropic_request("small output")
    later["messages"][0]["content"] = "Which issues are still open?"
    p = plan(runtime, later)
    assert p.action == "rewrite" and json.loads(p.body)["tools"][-1]["name"] == retrieve.TOOL_NAME


def test_bypass_nonjson_nonllm_pass_untouched(runtime):
    body = anthropic_request(github_payload("paginate-issues.json"))
    assert plan(runtime, body, headers={"x-headroom-bypass": "true"}).action == "passthrough"
    assert plan(runtime, b"{not json", path="/v1/messages").action == "passthrough"
    assert plan(runtime, body, path="/v1/files").action == "passthrough"


def test_oversized_body_is_refused_in_the_dialects_error_shape(tmp_path, counter):
    rt = Runtime(load_settings({"home": str(tmp_path), "max_body_bytes": 1000}, env={}))
    p = plan(rt, anthropic_request("x" * 2000))
    assert (p.action, p.status) == ("reject", 413)
    err = json.loads(p.error_body)
    assert err["type"] == "error" and err["error"]["type"] == "request_too_large"
    assert "Compact the conversation" in err["error"]["message"]
    p = plan(rt, {"model": "gpt", "messages": [{"role": "user", "content": "y" * 2000}]}, path="/v1/chat/completions")
    assert p.status == 413 and json.loads(p.error_body)["error"]["code"] == "request_too_large"


def test_openai_chat_and_responses_tool_outputs_are_compressed(runtime):
    text = github_scenario("paginate-issues.json")
    chat = {
        "model": "gpt-4o",
        "messages": [
            {"role": "user", "content": "list open issues"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "gh", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": text},
        ],
    }
    p = plan(runtime, chat, path="/v1/chat/completions")
    out = json.loads(p.body)
    assert len(out["messages"][2]["content"]) < len(text)
    assert out["tools"][-1]["function"]["name"] == retrieve.TOOL_NAME
    resp = {
        "model": "gpt-5",
        "input": [
            {"role": "user", "content": "list open issues"},
            {"type": "function_call", "call_id": "c1", "name": "gh", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": text},
        ],
    }
    p = plan(runtime, resp, path="/v1/responses")
    out = json.loads(p.body)
    assert len(out["input"][2]["output"]) < len(text)
    assert out["tools"][-1] == {
        "type": "function",
        "name": retrieve.TOOL_NAME,
        "description": retrieve.TOOL_DESCRIPTION,
        "parameters": retrieve.TOOL_SCHEMA,
    }


def test_internal_error_fails_open(runtime, monkeypatch):
    import headroom_core.request_plan as rp

    def boom(*a, **k):
        raise RuntimeError("compressor exploded")

    monkeypatch.setattr(rp, "compress_outputs", boom)
    p = plan(runtime, anthropic_request(github_payload("labels.json")))
    assert p.action == "passthrough" and "compressor exploded" in p.reason
