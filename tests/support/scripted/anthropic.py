"""The scripted model's Anthropic Messages API adapter (``/v1/messages`` and ``count_tokens``).

Validates like the API (the checks below are the API's documented rules and its error messages'
shapes; a refused request gets a 400 ``invalid_request_error`` in the API's error body):

- the body is a JSON object with no top-level field the API does not know (:data:`FIELDS`);
  ``model`` a string, ``max_tokens`` a positive integer (Messages only), ``messages`` a
  non-empty list;
- roles ``user``/``assistant`` alternate, starting with ``user``; content a string or a list of
  known block types; text blocks non-empty; a ``system`` message (text only) between turns only
  under a ``per-turn-control`` beta in ``anthropic-beta`` (Claude Code 2.1.33x sends its
  environment that way and, refused, falls back to ``<system-reminder>`` text in the user turn);
- every ``tool_use`` is answered by a ``tool_result`` in the next (user) message and every
  ``tool_result`` answers a ``tool_use`` of the message before; tool-use ids unique;
- tool names unique and ``^[a-zA-Z0-9_-]{1,128}$``; at most 4 ``cache_control`` breakpoints.

Then maps the play's moves to Claude Code's tools: shell -> ``Bash`` ``{"command",
"description"}``, read -> ``Read`` ``{"file_path"}`` (absolute), ``headroom_retrieve``
``{"key"}``.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import TYPE_CHECKING, Any

from tests.support.scripted import play
from tests.support.upstream import RawReply, RecordedRequest, Reply

if TYPE_CHECKING:
    from tests.support.scripted import ScriptedModel

#: Top-level fields of a Messages API request (GA and beta), per the API reference.
FIELDS = frozenset(
    {
        "model",
        "messages",
        "max_tokens",
        "system",
        "tools",
        "tool_choice",
        "stream",
        "temperature",
        "top_p",
        "top_k",
        "stop_sequences",
        "metadata",
        "thinking",
        "service_tier",
        "container",
        "mcp_servers",
        "context_management",
        "output_config",
        "output_format",
    }
)
#: count_tokens takes no max_tokens/stream/sampling fields.
COUNT_FIELDS = frozenset(
    {
        "model",
        "messages",
        "system",
        "tools",
        "tool_choice",
        "thinking",
        "mcp_servers",
        "context_management",
        "output_config",
        "output_format",
    }
)
BLOCKS = frozenset(
    {
        "text",
        "image",
        "document",
        "tool_use",
        "tool_result",
        "thinking",
        "redacted_thinking",
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "search_result",
        "mcp_tool_use",
        "mcp_tool_result",
        "container_upload",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "tool_reference",
    }
)
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
#: Claude Code's shell tool names (any release so far: ``Bash``).
SHELL_TOOLS = frozenset({"Bash"})
READ_TOOL = "Read"


class Invalid(ValueError):
    """A request the API would refuse (the message is the API's kind of message)."""


def error(message: str, status: int = 400, kind: str = "invalid_request_error") -> RawReply:
    """The API's error response."""
    rid = "req_" + uuid.uuid4().hex[:24]
    body = {"type": "error", "error": {"type": kind, "message": message}, "request_id": rid}
    return RawReply(
        status=status,
        headers=(("Content-Type", "application/json"), ("request-id", rid)),
        body=json.dumps(body).encode(),
    )


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise Invalid(f"{where}.content: Input should be a valid list")
    for j, b in enumerate(content):
        if not isinstance(b, dict) or b.get("type") not in BLOCKS:
            raise Invalid(
                f"{where}.content.{j}: Input tag {b.get('type') if isinstance(b, dict) else b!r} does not match any of the expected tags"
            )
        if b["type"] == "text" and not (isinstance(b.get("text"), str) and b["text"]):
            raise Invalid(f"{where}.content.{j}.text: text content blocks must be non-empty")
    return content


def _cache_points(obj: Any) -> int:
    if isinstance(obj, dict):
        return int("cache_control" in obj and obj["cache_control"] is not None) + sum(
            _cache_points(v) for k, v in obj.items() if k != "cache_control"
        )
    if isinstance(obj, list):
        return sum(_cache_points(v) for v in obj)
    return 0


def validate(body: Any, *, count: bool = False, betas: frozenset[str] = frozenset()) -> None:
    """Raise :class:`Invalid` with the API's kind of message when ``body`` breaks a rule above
    (``betas``: the names in the request's ``anthropic-beta`` header)."""
    turns = any(b.startswith("per-turn-control-") for b in betas)
    if not isinstance(body, dict):
        raise Invalid("Request body must be a JSON object")
    for k in body:
        if k not in (COUNT_FIELDS if count else FIELDS):
            raise Invalid(f"{k}: Extra inputs are not permitted")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise Invalid("model: Field required")
    if not count and not (isinstance(body.get("max_tokens"), int) and body["max_tokens"] >= 1):
        raise Invalid("max_tokens: Field required (a positive integer)")
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise Invalid("messages: at least one message is required")
    system = body.get("system")
    if system is not None and not isinstance(system, str):
        _blocks(system, "system")
    names = [t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)]
    if len(names) != len(body.get("tools") or []):
        raise Invalid("tools: each tool must be an object")
    for i, n in enumerate(names):
        if not isinstance(n, str) or not TOOL_NAME.match(n):
            raise Invalid(f"tools.{i}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'")
    if len(set(names)) != len(names):
        raise Invalid("tools: Tool names must be unique.")
    if (n := _cache_points([body.get("system"), body.get("tools"), msgs])) > 4:
        raise Invalid(f"A maximum of 4 blocks with cache_control may be provided. Found {n}.")
    seen: set[str] = set()
    pending: list[str] = []  # tool_use ids of the previous assistant message
    n_turn = 0
    for i, m in enumerate(msgs):
        if turns and isinstance(m, dict) and m.get("role") == "system":
            if pending:
                raise Invalid(
                    f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {', '.join(pending)}"
                )
            if any(b.get("type") != "text" for b in _blocks(m.get("content"), f"messages.{i}")):
                raise Invalid(f"messages.{i}.content: system messages take text blocks only")
            continue
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
            raise Invalid(f"messages.{i}.role: Input should be 'user' or 'assistant'")
        want = "user" if n_turn % 2 == 0 else "assistant"
        n_turn += 1
        if m["role"] != want:
            raise Invalid(f'messages.{i}: roles must alternate between "user" and "assistant", starting with "user"')
        blocks = _blocks(m.get("content"), f"messages.{i}")
        if m["role"] == "user":
            answered = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
            missing = [t for t in pending if t not in answered]
            if missing:
                raise Invalid(
                    f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                    f"{', '.join(missing)}. Each `tool_use` block must have a corresponding `tool_result` block in the next message."
                )
            extra = [t for t in answered if t not in pending]
            if extra:
                raise Invalid(
                    f"messages.{i}.content: unexpected `tool_use_id` found in `tool_result` blocks: {extra[0]}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                )
            pending = []
        else:
            if pending:
                raise Invalid(
                    f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {', '.join(pending)}"
                )
            pending = []
            for b in blocks:
                if b.get("type") == "tool_use":
                    tid = b.get("id")
                    if not isinstance(tid, str) or not re.fullmatch(r"[a-zA-Z0-9_-]+", tid):
                        raise Invalid(
                            f"messages.{i}.content: tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
                        )
                    if tid in seen:
                        raise Invalid(f"messages.{i}.content: `tool_use` ids must be unique: {tid}")
                    if not isinstance(b.get("input"), dict):
                        raise Invalid(f"messages.{i}.content: tool_use.input: Input should be a valid dictionary")
                    seen.add(tid)
                    pending.append(tid)
    if n_turn == 0:
        raise Invalid("messages: at least one user message is required")
    if pending and msgs[-1].get("role") == "assistant" and not count:
        raise Invalid(f"messages.{len(msgs) - 1}: the final assistant message cannot end with a `tool_use` block")


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for b in content or []:
        if isinstance(b, dict) and b.get("type") == "text":
            parts.append(str(b.get("text", "")))
    return "\n".join(parts)


def conversation(body: dict[str, Any]) -> play.Conversation:
    """The play's view of a (valid) Messages API request."""
    msgs = body["messages"]
    calls: list[play.Call] = []
    outputs: list[play.Output] = []
    for m in msgs:
        for b in _blocks(m["content"], ""):
            if b["type"] == "tool_use":
                calls.append(play.Call(b["id"], b.get("name", ""), dict(b.get("input") or {})))
            elif b["type"] == "tool_result":
                outputs.append(play.Output(str(b.get("tool_use_id")), _text_of(b.get("content")), b.get("is_error")))
    last = msgs[-1]
    ends = last["role"] == "user" and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in _blocks(last["content"], "")
    )
    return play.Conversation(
        first_user_text=next((_text_of(m["content"]) for m in msgs if m["role"] == "user"), ""),
        tools=frozenset(
            str(t["name"]) for t in body.get("tools") or [] if isinstance(t, dict) and isinstance(t.get("name"), str)
        ),
        calls=tuple(calls),
        outputs=tuple(outputs),
        ends_with_output=ends,
    )


def reply_for(move: play.Move, task: play.Task) -> Reply:
    """The Messages API reply that makes ``move`` with Claude Code's tools."""
    if isinstance(move, play.Shell):
        return Reply.tool_call(
            "Bash", {"command": move.command, "description": f"Run {move.command}"}, play.call_id(move.step, "toolu_")
        )
    if isinstance(move, play.Read):
        return Reply.tool_call(READ_TOOL, {"file_path": task.path(move.rel)}, play.call_id(move.step, "toolu_"))
    if isinstance(move, play.Retrieve):
        return Reply.tool_call("headroom_retrieve", {"key": move.key}, play.call_id(move.step, "toolu_"))
    return Reply.text_reply(move.text)


def answer(model: "ScriptedModel", rec: RecordedRequest) -> Reply | RawReply:
    """The reply to a ``/v1/messages`` or ``/v1/messages/count_tokens`` request."""
    if rec.method != "POST":
        return error(f"Method {rec.method} not allowed", 405)
    count = rec.path_only.endswith("/count_tokens")
    betas = frozenset(b.strip() for b in (rec.header("anthropic-beta") or "").split(",") if b.strip())
    try:
        validate(rec.json, count=count, betas=betas)
    except Invalid as e:
        return model.refuse(rec, str(e), error(str(e)))
    if count:
        return Reply.text_reply("")  # the upstream answers count_tokens with input_tokens of the body
    conv = conversation(rec.json)
    move = play.next_move(conv, SHELL_TOOLS)
    if isinstance(move, play.Read) and READ_TOOL not in conv.tools:
        move = play.Shell(move.step, f"cat {move.rel}")
    model.note(rec, move)
    return reply_for(move, model.task)
