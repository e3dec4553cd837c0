"""An output is shortened only once its original is stored (issue 36, item 1): the originals of
what a plan shortens are written, with its decisions, in one transaction before the request is
forwarded; when that fails, those outputs go whole or losslessly compressed, the plan says why,
and later turns send the same bytes. On a real SQLite database; the faults are real: a trigger
that refuses the originals' rows as a full disk would (SQLite's own error text), and another
process holding the write lock."""

from __future__ import annotations

import json
import subprocess
import sys

from sqlalchemy import event, func, select, text

from headroom_core import originals_first
from headroom_core.ccr import retrieve
from headroom_core.compress import markers
from headroom_core.compress.pipeline import BlockOutcome, PipelineResult
from headroom_core.compress.result import CompressResult, Offload
from headroom_core.compress.router import compress_text
from headroom_core.db.models import CompressionDecision
from headroom_core.outcomes import LABELS, outcome_of
from headroom_core.plan_codes import Code
from headroom_core.request_plan import plan_request
from headroom_core.wire.blocks import ToolCall
from tests.unit.test_request_plan import anthropic_request, github_scenario

UA = {"user-agent": "claude-cli/2.0.0 (external, cli)"}
#: Refuses every new original as a full disk would (the message is SQLite's SQLITE_FULL text).
FULL = "CREATE TRIGGER originals_full BEFORE INSERT ON originals BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END"
#: Holds ``BEGIN EXCLUSIVE`` on the SQLite file argv[1] until its standard input closes.
LOCKER = """
import sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
c.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.read()
c.execute("ROLLBACK")
"""


def _plan(rt, body: dict):
    return plan_request(rt, "POST", "/v1/messages", UA, json.dumps(body).encode(), defer=True)


def _sent(plan, i: int = 2) -> str:
    return json.loads(plan.body)["messages"][i]["content"][0]["content"]


def _answers(rt, plan) -> dict[str, str]:
    """Every marker key in what ``plan`` forwards -> the proxy's answer to headroom_retrieve."""
    keys = markers.find_marker_keys(plan.body.decode()) if plan.body else []
    return {
        k: retrieve.answer(ToolCall("c1", retrieve.TOOL_NAME, {"key": k}), rt.store, plan.context.scope) for k in keys
    }


def _exec(rt, sql: str) -> None:
    with rt.sessions.kw["bind"].begin() as c:
        c.execute(text(sql))


def _count(rt, model) -> int:
    with rt.sessions() as s:
        return s.scalar(select(func.count()).select_from(model)) or 0


def _lossless(rt, output: str) -> str:
    """What the compressors make of ``output`` without dropping anything (the output itself when nothing)."""
    r = compress_text(
        output,
        "",
        rt.counter,
        min_tokens=rt.settings.min_tokens,
        min_saving_ratio=rt.settings.min_saving_ratio,
        lossless=True,
    )
    assert not r.offloads
    return r.text if r.changed else output


def _turn2(body: dict, new_output: str) -> dict:
    """``body`` continued: the model's answer, another call, its (new) output."""
    messages = body["messages"] + [
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_02", "name": "github_api", "input": {"path": "/search/issues"}}
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_02", "content": new_output}]},
    ]
    return {**body, "messages": messages}


def _turn3(body: dict) -> dict:
    messages = body["messages"] + [
        {"role": "assistant", "content": "Three are open."},
        {"role": "user", "content": "And which are closed?"},
    ]
    return {**body, "messages": messages}


# -- pure parts ------------------------------------------------------------------------------


def _block(path, changed, keys=(), before=100, after=40, reason="r"):
    return BlockOutcome(
        path,
        "github_api",
        "json",
        "crush" if keys else "table",
        reason,
        changed,
        before,
        after if changed else before,
        False,
        keys,
    )


def test_demoted_keeps_lossless_outputs_and_replaces_each_shortened_one():
    a, b, c = (
        ("messages", 2, "content", 0, "content"),
        ("messages", 4, "content", 0, "content"),
        ("messages", 6, "content", 0, "content"),
    )
    result = PipelineResult(
        ((a, "lossy a [marker]"), (b, "table b"), (c, "lossy c [marker]")),
        (Offload("k" * 24, "original a", "items"), Offload("j" * 24, "original c", "items")),
        (_block(a, True, ("k" * 24,)), _block(b, True), _block(c, True, ("j" * 24,))),
    )
    instead = PipelineResult(((a, "table a"),), (), (_block(a, True, reason="lossless table"),))  # c: not decided again
    out = originals_first.demoted(result, instead)
    assert out.offloads == ()
    assert out.replacements == ((a, "table a"), (b, "table b"))  # c goes whole
    assert [(x.changed, x.offload_keys, x.reason) for x in out.blocks] == [
        (True, (), f"lossless table; {originals_first.UNSTORED}"),
        (True, (), "r"),
        (False, (), originals_first.UNSTORED),
    ]
    assert out.blocks[2].tokens_after == out.blocks[2].tokens_before == 100
    assert originals_first.unstorable(result) == {a, c} and originals_first.unstorable(out) == frozenset()


def test_deferred_decisions_hold_their_writes_and_answer_their_own_first(runtime):
    d = originals_first.DeferredDecisions(runtime.decisions)
    h = d.key("scope", "tool_output", "x" * 100)
    res = CompressResult.unchanged("x" * 100, "text", "no gain")
    d.put(h, res, 30, 30)
    assert d.get(h, "x" * 100) == (res, 30, 30)
    assert runtime.decisions.get(h, "x" * 100) is None  # nothing written yet
    assert [p.key for p in d.pending] == [h]


def test_the_outcome_class_and_its_label():
    assert outcome_of(Code.ORIGINALS_UNSTORED, "…", rewritten=True) == "originals_unstored"
    assert LABELS["originals_unstored"].startswith("originals could not be stored")


# -- through the plan ------------------------------------------------------------------------


def test_originals_and_decisions_are_committed_before_forwarding_in_one_transaction(runtime):
    """The normal path: once the plan is made (nothing run after forwarding yet), every marker
    it forwards is answered with its original, byte for byte; one transaction wrote the original
    and the decision that names it."""
    big = github_scenario("paginate-issues.json")
    engine = runtime.sessions.kw["bind"]
    tx: list[set[str]] = [set()]
    event.listen(
        engine,
        "before_cursor_execute",
        lambda conn, cur, stmt, *a: tx[-1].update(
            t for t in ("originals", "compression_decisions") if stmt.startswith(f"INSERT INTO {t} ")
        ),
    )
    event.listen(engine, "commit", lambda conn: tx.append(set()))
    plan = _plan(runtime, anthropic_request(big))
    assert plan.code is Code.PLANNED and plan.persist is not None
    assert [t for t in tx if t] == [{"originals", "compression_decisions"}]
    answers = _answers(runtime, plan)
    assert answers and set(answers.values()) == {big}


def test_a_full_database_sends_the_output_lossless_and_later_turns_the_same_bytes(runtime):
    big = github_scenario("paginate-issues.json")
    first = anthropic_request(github_scenario("search-issues.json"))
    p1 = _plan(runtime, first)
    p1.persist()
    assert _answers(runtime, p1)  # turn 1 stored its original: shortened

    _exec(runtime, FULL)
    second = _turn2(first, big)
    p2 = _plan(runtime, second)
    assert p2.code is Code.ORIGINALS_UNSTORED and "database or disk is full" in p2.reason
    sent = _sent(p2, 4)
    assert sent == _lossless(runtime, big) and not markers.find_marker_keys(sent)
    assert len(sent) < len(big)  # the JSON table form: lossless, and smaller
    assert _sent(p2, 2) == _sent(p1, 2)  # turn 1's output replayed as sent
    assert all(not a.startswith("headroom_retrieve error") for a in _answers(runtime, p2).values())
    assert (
        not any(b.offload_keys for b in p2.pipeline.blocks)
        and originals_first.UNSTORED in p2.pipeline.blocks[-1].reason
    )
    assert _count(runtime, CompressionDecision) == 1  # turn 1's only: this turn's write was all or nothing
    p2.persist()  # the session's state is stored (only the originals table refuses)

    p3 = _plan(runtime, _turn3(second))  # the fault lasts: replayed from the session's state
    assert _sent(p3, 4) == sent
    _exec(runtime, "DROP TRIGGER originals_full")
    p3.persist()
    p4 = _plan(runtime, _turn3(_turn3(second)))  # the fault gone: still the same bytes
    assert _sent(p4, 4) == sent and p4.code is Code.PLANNED


def test_a_new_conversation_with_the_output_gets_what_was_sent_while_the_state_could_not_be_stored(runtime):
    """Neither the originals nor the session's state could be written (the session's next turn
    finds the output in its live zone): the output's decision is what was sent, in memory."""
    big = github_scenario("paginate-issues.json")
    body = anthropic_request(big, question="Which issues are closed?")
    _exec(runtime, FULL)
    p1 = _plan(runtime, body)
    sent = _sent(p1)
    assert p1.code is Code.ORIGINALS_UNSTORED and sent == _lossless(runtime, big)
    _exec(runtime, "DROP TRIGGER originals_full")
    again = _plan(runtime, body)  # the same request again, its session unknown (p1 never stored it)
    assert _sent(again) == sent and again.code is Code.PLANNED


def test_a_write_lock_held_by_another_process_sends_the_output_without_a_marker_and_keeps_it(runtime, tmp_path):
    big = github_scenario("paginate-issues.json")
    first = anthropic_request(github_scenario("search-issues.json"))
    p1 = _plan(runtime, first)
    p1.persist()
    db = runtime.settings.database_url.removeprefix("sqlite:///")
    locker = subprocess.Popen(
        [sys.executable, "-c", LOCKER, db], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert locker.stdout is not None and locker.stdout.readline().strip() == "locked"
        second = _turn2(first, big)
        p2 = _plan(runtime, second)
    finally:
        assert locker.stdin is not None
        locker.stdin.close()
        locker.wait(30)
    assert p2.code is Code.DB_BUSY and "could not be stored (the database was locked by another process" in p2.reason
    sent = _sent(p2, 4)
    assert sent == _lossless(runtime, big) and not markers.find_marker_keys(sent)
    assert all(not a.startswith("headroom_retrieve error") for a in _answers(runtime, p2).values())
    # the lock gone: the same turn again (its state was not stored: p2.persist never ran) sends the same bytes
    p3 = _plan(runtime, second)
    assert _sent(p3, 4) == sent and p3.code is Code.PLANNED


def test_a_cached_decision_whose_original_is_gone_is_stored_again_first_or_not_applied(runtime):
    """The same output in another conversation of the scope reuses the decision made for it;
    its original had expired meanwhile (deleted here). It is stored again before the request is
    forwarded; when it cannot be, the decision is not applied."""
    big = github_scenario("paginate-issues.json")
    _plan(runtime, anthropic_request(big)).persist()
    _exec(runtime, "DELETE FROM originals")
    other = _plan(runtime, anthropic_request(big, question="Which issues are closed?"))
    assert other.code is Code.PLANNED and set(_answers(runtime, other).values()) == {
        big
    }  # stored again, before forwarding

    _exec(runtime, "DELETE FROM originals")
    _exec(runtime, FULL)
    third = _plan(runtime, anthropic_request(big, question="Which issues mention the API?"))
    assert third.code is Code.ORIGINALS_UNSTORED and _sent(third) == _lossless(runtime, big)


def test_an_image_whose_original_cannot_be_stored_is_only_resized(tmp_path, counter):
    """An image reduced below what the model sees (the opt-in target) offloads its original; when
    that cannot be stored the image goes only resized to what the provider uses anyway, without
    a marker."""
    from headroom_core.runtime import Runtime
    from headroom_core.settings import load_settings
    from tests.unit.test_images import screenshot
    from tests.unit.test_images_plan import anthropic_body

    rt = Runtime(load_settings({"home": str(tmp_path), "image_max_tokens": 500}, env={}))
    rt.__dict__["counter"] = counter
    body = anthropic_body(screenshot(3024, 1964, "PNG"))
    _exec(rt, FULL)
    p = _plan(rt, body)
    assert (
        p.code is Code.ORIGINALS_UNSTORED and "2 images only resized: their originals could not be stored" in p.reason
    )
    assert not markers.find_marker_keys(p.body.decode()) and p.images.offloads == ()
    _exec(rt, "DROP TRIGGER originals_full")
    resized = plan_request(
        Runtime(load_settings({"home": str(tmp_path / "plain")}, env={})),
        "POST",
        "/v1/messages",
        UA,
        json.dumps(body).encode(),
    )
    assert (
        json.loads(p.body)["messages"] == json.loads(resized.body)["messages"]
    )  # as a proxy without the target sends it


def test_a_read_only_database_sends_the_output_lossless_and_still_answers_stored_originals(runtime):
    """SQLite in read-only mode (``PRAGMA query_only``: every write fails with SQLITE_READONLY,
    as on a file or filesystem made read-only under the proxy): the new output goes lossless,
    and the original stored before the fault is still answered (its refresh skipped)."""
    small = github_scenario("search-issues.json")
    first = anthropic_request(small)
    p1 = _plan(runtime, first)
    p1.persist()
    engine = runtime.sessions.kw["bind"]
    event.listen(engine, "connect", lambda conn, record: conn.execute("PRAGMA query_only=1"))
    engine.dispose()  # every connection from now on is read-only
    big = github_scenario("paginate-issues.json")
    p2 = _plan(runtime, _turn2(first, big))
    assert p2.code is Code.ORIGINALS_UNSTORED and "attempt to write a readonly database" in p2.reason
    assert _sent(p2, 4) == _lossless(runtime, big)
    assert _answers(runtime, p2) == {markers.offload_key(small): small}
