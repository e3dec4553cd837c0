"""One Responses WebSocket connection, one conversation (issue 31): the pure decisions of
:mod:`headroom_core.ws_conversation` (which conversation a frame belongs to, when a connection
adopts the project a later frame names, the history the observers see) and the move of what a
project-less start kept to the named project (:mod:`headroom_core.conversation_move`) on a real
database."""

from __future__ import annotations

import json
from datetime import datetime

from sqlalchemy import select

from headroom_core import ws_conversation as wc
from headroom_core.conversation_move import move_conversation
from headroom_core.db.engine import open_database
from headroom_core.db.models import Original, RequestOutcome, ToolOrder, ToolUsage
from headroom_core.extensions import RequestContext
from headroom_core.learn.models import LearnEvidence, LearnFailure, LearnGeneration
from headroom_core.memory.models import Memory
from headroom_core.scope import Conversation, Scope
from headroom_core.wire.detect import Dialect

PROJECT = "/work/codex-proj"
ANON = "conversation:1d50533b8f062e5d"
ENV = f"<environment_context>\n  <cwd>{PROJECT}</cwd>\n  <shell>bash</shell>\n</environment_context>"


def scope_for(project: str) -> Scope:
    return Scope(project, "ident", f"scope-of-{project}"[:32])


ANON_CONV = Conversation(scope_for(ANON), "k" * 32)
NAMED_CONV = Conversation(scope_for(PROJECT), "n" * 32)


def msg(role: str, text: str) -> dict:
    return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}


def call(cid: str, cmd: str) -> dict:
    return {"type": "function_call", "call_id": cid, "name": "exec_command", "arguments": json.dumps({"cmd": cmd})}


def out(cid: str, text: str) -> dict:
    return {"type": "function_call_output", "call_id": cid, "output": text}


PREWARM = {
    "model": "m",
    "instructions": "You are Codex.",
    "input": [msg("developer", "sandbox rules")],
    "generate": False,
}
SECOND = {"model": "m", "previous_response_id": "resp_w", "input": [msg("user", ENV), msg("user", "do the task")]}
LATER = {"model": "m", "previous_response_id": "resp_b", "input": [out("c1", "ok")]}


def test_a_connection_adopts_the_project_a_later_frame_names_with_its_one_session_key():
    assert wc.continues(None, PREWARM, {}, scope_for) is None  # the first frame: planned on its own
    got = wc.continues(ANON_CONV, SECOND, {}, scope_for)
    assert got == Conversation(scope_for(PROJECT), ANON_CONV.session_key)
    assert wc.adoption(ANON_CONV, got) == wc.Adoption(ANON, PROJECT, ANON_CONV.scope.id, scope_for(PROJECT).id)
    pinned = wc.pin(ANON_CONV, got)
    assert pinned == got
    # later frames (only tool outputs) continue the named conversation; nothing moves again
    assert wc.continues(pinned, LATER, {}, scope_for) == pinned
    assert wc.adoption(pinned, pinned) is None


def test_the_header_names_the_project_too_and_a_fresh_start_adopts_it_on_a_project_less_connection():
    fresh = {"model": "m", "input": [msg("user", "hello")]}
    got = wc.continues(ANON_CONV, fresh, {"x-headroom-project": "/p"}, scope_for)
    assert got is not None and got.scope.project == "/p" and got.session_key == ANON_CONV.session_key


def test_a_named_connection_keeps_its_project():
    other = {"model": "m", "previous_response_id": "r", "input": [msg("user", ENV.replace(PROJECT, "/elsewhere"))]}
    assert wc.continues(NAMED_CONV, other, {}, scope_for) == NAMED_CONV
    assert wc.adoption(NAMED_CONV, NAMED_CONV) is None
    # a fresh start naming another project is planned on its own (as before)
    fresh = {"model": "m", "input": [msg("user", ENV.replace(PROJECT, "/elsewhere"))]}
    assert wc.continues(NAMED_CONV, fresh, {}, scope_for) is None
    # a project-less frame never takes a named connection's project away
    assert wc.adoption(NAMED_CONV, ANON_CONV) is None and wc.pin(NAMED_CONV, ANON_CONV) == NAMED_CONV


def test_frames_without_a_project_on_a_project_less_connection_continue_it():
    assert wc.continues(ANON_CONV, LATER, {}, scope_for) == ANON_CONV


def test_the_history_holds_inputs_and_response_outputs_and_a_fresh_start_resets_it():
    h: tuple = ()
    before = wc.history_before(h, PREWARM)
    items = wc.frame_items(before, PREWARM)
    h = wc.with_response(items, [])
    before = wc.history_before(h, SECOND)
    assert before == (PREWARM["input"][0],)
    h = wc.with_response(wc.frame_items(before, SECOND), [call("c1", "hrtest tests")])
    before = wc.history_before(h, LATER)
    assert [i.get("type") for i in before] == ["message", "message", "message", "function_call"]
    assert wc.observed_body(before, LATER)["input"] == [*before, out("c1", "ok")]
    # a frame that starts afresh carries the whole conversation: no history before it
    assert wc.history_before(h, {"model": "m", "input": [msg("user", "x")]}) == ()
    # a string input is one user message; output that is not a list adds nothing
    assert wc.frame_items((), {"input": "hi"}) == ({"type": "message", "role": "user", "content": "hi"},)
    assert wc.with_response((1,), None) == (1,)


def test_the_history_is_bounded():
    many = tuple(range(wc.MAX_HISTORY_ITEMS + 50))
    assert wc.with_response(many, [1, 2]) == many[-wc.MAX_HISTORY_ITEMS + 2 :] + (1, 2)


def test_observers_see_the_call_of_the_previous_response_with_the_new_output():
    before = (msg("user", "go"), call("c_fail", "hrtest tests"))
    body = {"model": "m", "previous_response_id": "r", "input": [out("c_fail", "bash: hrtest: command not found")]}
    ctx = RequestContext(Dialect.OPENAI_RESPONSES, body, {}, PROJECT, "k", "", "", (), live_from=0)
    seen = wc.observed_context(ctx, before)
    assert seen.live_from == 2
    (o,) = seen.tool_outputs
    assert o.call_id == "c_fail" and o.message_index == 2
    assert seen.view.tool_calls["c_fail"].name == "exec_command"
    assert wc.observed_context(ctx, ()) is ctx


def test_what_a_project_less_start_kept_moves_to_the_named_project(tmp_path):
    sessions = open_database(f"sqlite:///{tmp_path / 'h.db'}")
    now = datetime(2026, 1, 1)
    old_scope, new_scope = "a" * 32, "b" * 32
    with sessions.begin() as s:
        s.add(RequestOutcome(session_key="k", project=ANON, **_outcome(now)))
        s.add(RequestOutcome(session_key="x", project="conversation:ffff", **_outcome(now)))  # another conversation
        s.add(
            Memory(
                id="m1", text="t", text_hash="h", kind="fact", project=ANON, source="s", created_at=now, updated_at=now
            )
        )
        for project, count in ((ANON, 2), (PROJECT, 1)):
            s.add(
                LearnFailure(
                    project=project,
                    failure_key="f",
                    tool="bash",
                    command="c",
                    target="",
                    args="",
                    error="e",
                    count=count,
                    sessions=1,
                    last_session_key="k",
                    first_seen_at=now,
                    last_seen_at=now,
                )
            )
            s.add(
                ToolUsage(
                    client="codex",
                    project=project,
                    tool_name="exec_command",
                    offered=3,
                    called=1,
                    offered_since_called=0,
                    last_seen_at=now,
                )
            )
        s.add(
            LearnEvidence(
                project=ANON,
                session_key="k",
                pair_hash="p",
                rule_id="r",
                rule_kind="command",
                rule_key="a\0b",
                text="t",
                supersede_key="s",
                failure_key="f",
                created_at=now,
            )
        )
        s.add(
            Original(
                scope=old_scope, key="key1", data=b"x", kind="json", size_bytes=1, created_at=now, last_used_at=now
            )
        )
        s.add(ToolOrder(scope=old_scope, tool_id="exec_command", seq=0, created_at=now))
        s.add(LearnGeneration(project=PROJECT, generation=4))
    moved = move_conversation(sessions, wc.Adoption(ANON, PROJECT, old_scope, new_scope))
    assert moved["request_outcomes"] == 1 and moved["learn_failures"] == 1 and moved["originals"] == 1
    with sessions() as s:
        assert {r.session_key: r.project for r in s.scalars(select(RequestOutcome))} == {
            "k": PROJECT,
            "x": "conversation:ffff",
        }
        assert [m.project for m in s.scalars(select(Memory))] == [PROJECT]
        (f,) = s.scalars(select(LearnFailure)).all()
        assert (f.project, f.count, f.sessions) == (PROJECT, 3, 1)  # merged: one session
        (u,) = s.scalars(select(ToolUsage)).all()
        assert (u.project, u.offered, u.called) == (PROJECT, 6, 2)
        assert [e.project for e in s.scalars(select(LearnEvidence))] == [PROJECT]
        assert [o.scope for o in s.scalars(select(Original))] == [new_scope]
        assert [o.scope for o in s.scalars(select(ToolOrder))] == [new_scope]
        assert s.get(LearnGeneration, PROJECT).generation == 5 and s.get(LearnGeneration, ANON) is None


def test_only_a_conversations_own_project_moves(tmp_path):
    import pytest

    sessions = open_database(f"sqlite:///{tmp_path / 'h.db'}")
    with pytest.raises(ValueError):
        move_conversation(sessions, wc.Adoption("/a", "/b", "s1", "s2"))
    with pytest.raises(ValueError):
        move_conversation(sessions, wc.Adoption(ANON, "conversation:0000", "s1", "s2"))


def _outcome(now: datetime) -> dict:
    """Every non-null column of a ledger row (zeros and empty texts)."""
    vals: dict = {}
    for c in RequestOutcome.__table__.columns:
        if c.primary_key or c.nullable or c.name in ("session_key", "project"):
            continue
        t = c.type.python_type
        vals[c.name] = now if t is datetime else (0 if t is int else (0.0 if t is float else ""))
    return vals
