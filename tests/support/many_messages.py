"""Messages API bodies of a long agent session: many tiny ``tool_use`` / ``tool_result`` turns.

The shape a fresh-user test found slow (60,000 messages, 13.7 MB): a user's question, then
assistant messages each calling ``Bash`` once and user messages each carrying that call's short
result. Every message is small, so the proxy's per-message costs (parsing, hashing, the
session's state, the learner's steps) dominate, not compression. Built in memory by the tests
and benches that need one (never stored as a file). Deterministic: the same ``n`` and ``salt``
give the same bytes.
"""

from __future__ import annotations

import json

#: The headers of a Claude Code-like client (an agent: the proxy offers ``headroom_retrieve``).
AGENT_HEADERS = {
    "content-type": "application/json",
    "anthropic-version": "2023-06-01",
    "user-agent": "claude-cli/1.0.62 (external, cli)",
    "x-api-key": "test-many-messages",
}

BASH = {
    "name": "Bash",
    "description": "Executes a given bash command and returns its output.",
    "input_schema": {
        "type": "object",
        "properties": {"command": {"type": "string"}, "description": {"type": "string"}},
        "required": ["command"],
    },
}


def tool_turns(n: int, salt: str = "") -> list[dict]:
    """``n`` messages (``n`` >= 1), the last one the user's: the user's question, then ``Bash``
    calls and their results, alternating (~230 bytes a message as compact JSON), and for an
    even ``n`` a last user message asking to go on. ``salt`` changes every call id and result,
    so two salts share no message but the first."""
    msgs: list[dict] = [
        {"role": "user", "content": "Run the checks of every module, one by one, and tell me which fail."}
    ]
    k = 0
    while len(msgs) < n - (1 - n % 2):
        cid = f"toolu_01{salt}{k:07d}Xq7rN2bVfT9kLm"
        msgs.append(
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": cid,
                        "name": "Bash",
                        "input": {
                            "command": f"grep -n check src/module_{k}.py | head -5",
                            "description": "Find the checks",
                        },
                    }
                ],
            }
        )
        msgs.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": cid,
                        "content": f'12:    check = compile(r"step {k}{salt}")\n48:    return check.match(line)',
                    }
                ],
            }
        )
        k += 1
    if n % 2 == 0:
        msgs.append({"role": "user", "content": "Go on."})
    return msgs


def tool_turns_body(n: int, salt: str = "", stream: bool = False) -> bytes:
    """The Messages API body (compact JSON, as Claude Code sends it) of :func:`tool_turns`
    ``(n, salt)`` with one ``Bash`` tool and a system prompt."""
    body = {
        "model": "claude-sonnet-4-20250514",
        "max_tokens": 1024,
        "stream": stream,
        "system": [{"type": "text", "text": "You are a coding agent.", "cache_control": {"type": "ephemeral"}}],
        "tools": [BASH],
        "messages": tool_turns(n, salt),
    }
    return json.dumps(body, separators=(",", ":")).encode()
