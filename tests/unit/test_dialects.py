"""The dialects behind one protocol, the neutral request view, the route decided once, the
WebSocket size policy by code, and the one ledger entry point."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from types import SimpleNamespace

import pytest
from sqlalchemy import select

from headroom_core import ledger, ws_policy
from headroom_core.db.engine import open_database
from headroom_core.db.models import RequestOutcome, ToolUsage
from headroom_core.ledger_writer import LedgerWriter
from headroom_core.request_plan import Action, Code, RequestPlan, plan_request
from headroom_core.runtime import Runtime
from headroom_core.settings import load_settings
from headroom_core.too_large import too_large_message
from headroom_core.turn import Turn
from headroom_core.wire import dialects
from headroom_core.wire import responses_ws as rws
from headroom_core.wire.blocks import Usage
from headroom_core.wire.detect import Dialect
from headroom_core.wire.dialects import REGISTRY, Route, WireDialect, route
from headroom_core.wire.request_view import view_of
from headroom_core.wire.view import parse_view

ANTHROPIC = {
    "model": "claude-sonnet-4",
    "system": [{"type": "text", "text": "You are Claude Code."}],
    "tools": [{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}],
    "messages": [
        {"role": "user", "content": "list the files"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "a.py\nb.py"},
                {"type": "text", "text": "which is bigger?"},
            ],
        },
    ],
}
CHAT = {
    "model": "gpt-4.1",
    "tools": [{"type": "function", "function": {"name": "shell", "parameters": {"type": "object"}}}],
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "list the files"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "shell", "arguments": '{"cmd": "ls"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.py\nb.py"},
        {"role": "user", "content": [{"type": "text", "text": "which is bigger?"}]},
    ],
}
RESPONSES = {
    "model": "gpt-5-codex",
    "instructions": "You are Codex.",
    "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object"}}],
    "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list the files"}]},
        {"type": "function_call", "call_id": "f1", "name": "shell", "arguments": '{"cmd": "ls"}'},
        {"type": "function_call_output", "call_id": "f1", "output": "a.py\nb.py"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "which is bigger?"}]},
    ],
}
BODIES = {Dialect.ANTHROPIC_MESSAGES: ANTHROPIC, Dialect.OPENAI_CHAT: CHAT, Dialect.OPENAI_RESPONSES: RESPONSES}


def test_every_dialect_is_registered_and_implements_the_protocol():
    assert set(REGISTRY) == set(Dialect)
    for d, impl in REGISTRY.items():
        assert isinstance(impl, WireDialect)
        assert impl.id is d
        assert dialects.dialect(d.value) is impl
    assert dialects.SEPARATE_CACHE_DIALECTS == (
        "anthropic-messages",
        "vertex-anthropic",
        "bedrock-invoke",
        "bedrock-converse",
    )  # Messages usage on every host


@pytest.mark.parametrize(
    "method,path,expected",
    [
        ("POST", "/v1/messages", Route(Dialect.ANTHROPIC_MESSAGES)),
        ("POST", "/v1/messages/count_tokens", Route(Dialect.ANTHROPIC_MESSAGES, True)),
        ("POST", "/v1/chat/completions?x=1", Route(Dialect.OPENAI_CHAT)),
        ("POST", "/backend-api/codex/responses", Route(Dialect.OPENAI_RESPONSES)),
        ("POST", "/v1/responses/input_tokens", Route(Dialect.OPENAI_RESPONSES, True)),
        ("GET", "/v1/messages", Route(None)),
        ("POST", "/v1/embeddings", Route(None)),
    ],
)
def test_route_names_dialect_and_token_counts(method, path, expected):
    assert route(method, path) == expected


@pytest.mark.parametrize("d", list(BODIES))
def test_request_view_reads_every_dialect_the_same_way(d):
    body = BODIES[d]
    text = json.dumps(body)
    v = view_of(d, json.loads(text), parse_view(text))
    key = "input" if d is Dialect.OPENAI_RESPONSES else "messages"
    assert v.conversation_key == key and len(v.conversation) == len(body[key])
    assert v.latest_user_text == "which is bigger?"
    assert v.latest_is_user
    assert (
        v.system
        == {
            Dialect.ANTHROPIC_MESSAGES: "You are Claude Code.",
            Dialect.OPENAI_CHAT: "Be brief.",
            Dialect.OPENAI_RESPONSES: "You are Codex.",
        }[d]
    )
    assert [o.text for o in v.tool_outputs] == ["a.py\nb.py"]
    (out,) = v.tool_outputs
    assert out.path[:2] == (key, out.message_index) and out.tool_name in ("Bash", "shell")
    (call,) = v.tool_calls.values()
    assert call.name == out.tool_name and call.arguments in ({"command": "ls"}, {"cmd": "ls"})
    assert v.tool_names == [out.tool_name]
    assert v.tool_choice_allows("headroom_retrieve")
    assert v.roles[-1] == "user"
    assert len(v.spans) == len(v.conversation)  # built from the one parse: spans known
    a, b = v.spans[-1]
    assert json.loads(text[a:b]) == v.conversation[-1]
    assert v.text_part("x")["type"] == REGISTRY[d].text_part
    assert v.user_texts(len(v.conversation) - 1) == ["which is bigger?"]


def test_a_responses_string_input_is_the_user_text_only_there():
    assert view_of(Dialect.OPENAI_RESPONSES, {"input": "hi"}).input_text == "hi"
    assert view_of(Dialect.ANTHROPIC_MESSAGES, {"messages": "hi"}).input_text is None


def test_plan_uses_the_route_it_is_given(tmp_path, monkeypatch):
    """Detected once: with a route given, the plan does not look at the path again."""
    rt = Runtime(load_settings({"home": str(tmp_path)}, env={}))

    def boom(*a, **k):
        raise AssertionError("dialect detected a second time")

    monkeypatch.setattr(dialects, "dialect_for_path", boom)
    monkeypatch.setattr(dialects, "token_count_dialect", boom)
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    plan = plan_request(rt, "POST", "/anything", {}, body, route_=Route(Dialect.ANTHROPIC_MESSAGES))
    assert plan.dialect is Dialect.ANTHROPIC_MESSAGES and plan.code is Code.PLANNED
    assert plan_request(rt, "POST", "/anything", {}, body, route_=Route(None)).code is Code.NOT_LLM


def test_ws_size_policy_decides_by_code():
    s = load_settings({"ws_max_frame_bytes": 1000, "max_body_bytes": 500, "fail_open_max_bytes": 300}, env={})
    assert ws_policy.frame_refusal(s, 1000) is None
    r = ws_policy.frame_refusal(s, 1001)
    assert (
        r is not None
        and r.code == rws.CLOSE_MESSAGE_TOO_BIG
        and r.plan.code is Code.TOO_LARGE
        and "1001 B exceeds 1000 B" in r.reason
    )
    too_large = RequestPlan(
        Action.REJECT, "any words", Dialect.OPENAI_RESPONSES, status=413, bytes_before=600, code=Code.TOO_LARGE
    )
    assert "600 B exceeds 500 B" in ws_policy.plan_refusal(s, too_large).reason
    failed = RequestPlan(
        Action.REJECT,
        "any words",
        Dialect.OPENAI_RESPONSES,
        status=413,
        bytes_before=400,
        code=Code.NOT_COMPRESSED_TOO_LARGE,
    )
    assert "could not compress this 400 B request (> 300 B)" in ws_policy.plan_refusal(s, failed).reason
    assert (
        ws_policy.plan_refusal(s, RequestPlan(Action.PASSTHROUGH, "frame over ws_max_frame_bytes", code=Code.TOO_LARGE))
        is None
    )
    assert all(len(x.encode()) <= rws.MAX_CLOSE_REASON_BYTES for x in (r.reason,))
    # before the close, the in-band error event Codex reads as "compact, then retry"
    assert json.loads(r.event) == {
        "type": "error",
        "status": 400,
        "error": {"type": "invalid_request_error", "code": "context_length_exceeded", "param": "input",
                  "message": too_large_message(1001, 1000, "ws_max_frame_bytes")},  # the words of an HTTP 413
    }  # fmt: skip
    assert json.loads(ws_policy.plan_refusal(s, too_large).event)["error"]["message"] == too_large_message(600, 500)
    assert (
        json.loads(ws_policy.plan_refusal(s, failed).event)["error"]["message"]
        == ws_policy.plan_refusal(s, failed).reason
    )


def _record_turn(sessions, plan: RequestPlan, *, user_agent: str, **figures) -> None:
    """Record ``plan`` as the proxy does (:meth:`headroom_core.turn.Turn.record`), committed
    before returning."""
    writer = LedgerWriter(sessions)
    try:
        committed = Turn(SimpleNamespace(ledger=writer), plan, user_agent=user_agent).record(**figures)
        assert committed is not None
        committed.result(timeout=10)
        assert writer.flush(10.0)  # the tool counts too
    finally:
        writer.close(10.0)


@pytest.mark.parametrize("d", list(BODIES))
def test_record_turn_reads_model_tools_usage_and_calls_through_the_dialect(tmp_path, d):
    sessions = open_database(f"sqlite:///{tmp_path / 'h.db'}")
    body = dict(BODIES[d])
    plan = RequestPlan(
        Action.PASSTHROUGH, "nothing to compress", d, client_body=body, project="/src/app", session_key="s"
    )
    resp = {
        Dialect.ANTHROPIC_MESSAGES: {
            "content": [{"type": "tool_use", "id": "t2", "name": "Bash", "input": {}}],
            "usage": {"input_tokens": 7, "output_tokens": 2},
        },
        Dialect.OPENAI_CHAT: {
            "choices": [{"message": {"tool_calls": [{"id": "c2", "function": {"name": "shell", "arguments": "{}"}}]}}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 2},
        },
        Dialect.OPENAI_RESPONSES: {
            "output": [{"type": "function_call", "call_id": "f2", "name": "shell", "arguments": "{}"}],
            "usage": {"input_tokens": 7, "output_tokens": 2},
        },
    }[d]
    _record_turn(sessions, plan, user_agent="claude-cli/1.0", status_code=200, response=resp)
    with sessions() as s:
        row = s.execute(select(RequestOutcome)).scalar_one()
        tools = {t.tool_name: (t.offered, t.called) for t in s.execute(select(ToolUsage)).scalars()}
    assert (row.model, row.dialect, row.usage_input_tokens, row.usage_output_tokens) == (body["model"], d.value, 7, 2)
    (name,) = tools
    assert name in ("Bash", "shell") and tools[name] == (1, 1)


@pytest.mark.parametrize("d", list(BODIES))
def test_a_row_prepared_before_the_response_is_the_row_written_in_one_step(tmp_path, d):
    """The HTTP addon builds the row off the event loop while the upstream answers
    (prepare_turn) and adds the response at its end (finish_turn): same row, same counts."""
    body = dict(BODIES[d])
    plan = RequestPlan(
        Action.REWRITE,
        "compressed 1 block",
        d,
        client_body=body,
        project="/src/app",
        session_key="s",
        bytes_before=900,
        bytes_after=400,
    )
    usage = Usage(input_tokens=7, output_tokens=2, cache_read_tokens=5, cache_write_tokens=1)
    rows = []
    for how in ("one step", "prepared"):
        sessions = open_database(f"sqlite:///{tmp_path / (how + '.db')}")
        if how == "one step":
            _record_turn(
                sessions, plan, user_agent="claude-cli/1.0", status_code=200, usage=usage, rounds=1, called=["Bash"]
            )
        else:
            prepared = ledger.prepare_turn(plan, user_agent="claude-cli/1.0")
            answered = datetime.now(timezone.utc).replace(tzinfo=None)  # the response ends after the row was prepared
            ledger.finish_turn(
                prepared, status_code=200, usage=usage, rounds=1, called=["Bash"], writer=None, sessions=sessions
            )
        with sessions() as s:
            row = s.execute(select(RequestOutcome)).scalar_one()
            if how == "prepared":  # dated when the response ended, as a row written in one step is
                assert row.created_at >= answered and all(
                    t.last_seen_at >= answered for t in s.execute(select(ToolUsage)).scalars()
                )
            tools = sorted(
                (t.client, t.project, t.tool_name, t.offered, t.called) for t in s.execute(select(ToolUsage)).scalars()
            )
        assert row.entry_id is not None and len(row.entry_id) == 32  # each answered request its own id
        cols = {
            c.name: getattr(row, c.name)
            for c in RequestOutcome.__table__.columns
            if c.name not in ("id", "created_at", "entry_id")
        }
        rows.append((cols, tools))
    assert rows[0] == rows[1]
    cols, tools = rows[1]
    assert (
        cols["status_code"],
        cols["retrieve_rounds"],
        cols["usage_input_tokens"],
        cols["usage_cache_read_tokens"],
        cols["model"],
    ) == (200, 1, 7, 5, body["model"])
    assert cols["action"] == "compressed" and cols["body_bytes_after"] == 400 and tools


@pytest.mark.parametrize(
    ("code", "internal_error", "action"),
    [
        (Code.BYPASS, False, "bypass"),
        (Code.SIGNED, False, "unchanged"),
        (Code.FALLBACK, True, "error"),
        (Code.NOT_COMPRESSED, True, "error"),
        (Code.FALLBACK, False, "unchanged"),
    ],
)
def test_ledger_action_follows_the_plan_code_not_its_words(tmp_path, code, internal_error, action):
    sessions = open_database(f"sqlite:///{tmp_path / 'h.db'}")
    d = Dialect.ANTHROPIC_MESSAGES
    # the reason's words are deliberately misleading: the row must follow the code
    plan = RequestPlan(
        Action.PASSTHROUGH,
        "internal error: bypass header",
        d,
        client_body=dict(BODIES[d]),
        code=code,
        internal_error=internal_error,
    )
    _record_turn(sessions, plan, user_agent="claude-cli/1.0", status_code=200)
    with sessions() as s:
        assert s.execute(select(RequestOutcome)).scalar_one().action == action
