"""Agents' envelopes through a real mitmdump: a Codex exec_command output (Responses API
``function_call_output``) and a Claude Code tool_result with a trailing ``<system-reminder>``
(Messages API) have their payload compressed by its kind while the envelope reaches the
upstream byte for byte; ``headroom_retrieve`` gives back the whole output, envelope included."""

from __future__ import annotations

import json

import pytest

from headroom_core.ccr import retrieve
from headroom_core.compress import markers
from tests.support.clients import anthropic_client, openai_client
from tests.support.upstream import Reply
from tests.unit.test_request_plan import github_scenario

CODEX_HEAD = (
    "Chunk ID: 9b0c2e\nWall time: 0.8807 seconds\nProcess exited with code 0\nOriginal token count: 10654\nOutput:\n"
)
REMINDER = "<system-reminder>\nWhenever you read a file, consider whether it looks malicious.\n</system-reminder>\n"
EXEC_TOOL = {
    "type": "function",
    "name": "exec_command",
    "description": "Runs a command in a PTY, returning output or a session ID for ongoing interaction.",
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
}


@pytest.fixture(scope="module")
def proxy(module_proxy_factory):
    return module_proxy_factory(
        __import__("tests.support.proxy", fromlist=["ADDON_SCRIPT"]).ADDON_SCRIPT,
        options={"headroom_max_body_bytes": 4_000_000, "headroom_compress_timeout_seconds": 300},
    )


@pytest.fixture(scope="module")
def issues() -> str:
    return github_scenario("paginate-issues.json")


def codex_items(output: str) -> list[dict]:
    return [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Which issues are still open?"}],
        },
        {
            "type": "function_call",
            "call_id": "call_7",
            "name": "exec_command",
            "arguments": json.dumps({"cmd": "gh api /repos/o/r/issues"}),
        },
        {"type": "function_call_output", "call_id": "call_7", "output": output},
    ]


def test_codex_enveloped_json_is_compressed_and_the_envelope_arrives_byte_identical(upstream, proxy, issues, counter):
    original = CODEX_HEAD + issues + "\n"
    upstream.script(Reply.text("noted"))
    r = openai_client(upstream, proxy).responses.create(model="gpt-5", input=codex_items(original), tools=[EXEC_TOOL])
    assert r.output_text == "noted"
    sent = upstream.requests[0].json["input"][-1]
    assert sent["type"] == "function_call_output" and sent["call_id"] == "call_7"
    out = sent["output"]
    assert out.startswith(CODEX_HEAD) and out.endswith("\n")
    assert 1 - counter.count(out) / counter.count(original) >= 0.60
    assert set(markers.find_marker_keys(out)) == {markers.offload_key(original)}
    # the envelope's bytes are in the forwarded body as the client's JSON writer put them
    assert json.dumps(CODEX_HEAD)[1:-1].encode() in upstream.requests[0].body


def test_retrieve_of_an_enveloped_output_gives_the_whole_output_back(upstream, proxy, issues):
    mark = "…9870 tokens truncated…"
    original = CODEX_HEAD + issues[:30000] + mark + issues[-30000:] + "\n"
    key = markers.offload_key(original)
    upstream.script(Reply.tool_call(retrieve.TOOL_NAME, {"key": key}), Reply.text("all there"))
    r = openai_client(upstream, proxy).responses.create(model="gpt-5", input=codex_items(original), tools=[EXEC_TOOL])
    assert r.output_text == "all there"
    first = upstream.requests[0].json["input"][-1]["output"]
    assert first.startswith(CODEX_HEAD) and mark in first and len(first) < 0.7 * len(original)
    assert set(markers.find_marker_keys(first)) == {key}
    follow = upstream.requests[1].json["input"]
    assert follow[-1] == {"type": "function_call_output", "call_id": follow[-2]["call_id"], "output": original}


def test_claude_code_reminder_after_a_compressed_output_keeps_its_blank_line(upstream, proxy, issues):
    original = issues + "\n\n" + REMINDER
    upstream.script(Reply.text("ok"))
    client = anthropic_client(upstream, proxy)
    client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=100,
        tools=[
            {
                "name": "Bash",
                "description": "Run a shell command.",
                "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
            }
        ],
        messages=[
            {"role": "user", "content": "Which issues are still open?"},
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "toolu_01",
                        "name": "Bash",
                        "input": {"command": "gh api /repos/o/r/issues"},
                    }
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": original}]},
        ],
    )
    content = upstream.requests[0].json["messages"][2]["content"][0]["content"]
    sent = content if isinstance(content, str) else "".join(b["text"] for b in content)
    assert len(sent) < len(original) / 2
    assert sent.endswith("]\n\n" + REMINDER) or sent.endswith("}\n\n" + REMINDER), sent[-300:]
