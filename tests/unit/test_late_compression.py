"""Late compression (issue 33, headroom_core/cache/late.py): an output a compression timeout sent
whole is recorded as such, and a later turn with time compresses it once, where the cost model
says the saving pays for the cache write it costs, else keeps it whole for the session; never
a flip back.

The cost model's decision as pure figures, the frozen entry's change as a pure function, and the
walk on a real runtime (SQLite): the timed-out turn is :func:`~headroom_core.request_plan.replay_only`
(what the proxy sends after a compression timeout), the others :func:`plan_request`; a second
runtime on the same home is a second proxy of a team.
"""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from headroom_core.cache import late
from headroom_core.cache.cost_model import LateCost, expected_remaining
from headroom_core.cache.frozen import FrozenEntry, LiveZone
from headroom_core.compress import markers
from headroom_core.compress.result import DEFERRED, CompressResult, Offload
from headroom_core.db.models import CompressionDecision
from headroom_core.pricing import PriceTable
from headroom_core.request_plan import plan_request, replay_only
from headroom_core.runtime import Runtime
from headroom_core.settings import load_settings
from headroom_core.wire.blocks import ToolOutput

EPH = {"type": "ephemeral"}
SYSTEM = [
    {
        "type": "text",
        "text": "You are a coding agent. Working directory: /work/shop\n" + "Be careful. " * 800,
        "cache_control": EPH,
    }
]
TOOLS = [
    {
        "name": "Bash",
        "description": "Run a shell command.",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
    }
]
UA = {"user-agent": "claude-cli/1.0.62 (external, cli)"}
#: Where the output of the timed-out turn sits in ``messages``.
AT = 2


def log_output(n: int = 1600) -> str:
    lines = [
        f"2024-05-01T10:{i // 60 % 60:02d}:{i % 60:02d}Z INFO worker-{i % 4} processed batch {i} in {10 + i % 7} ms"
        for i in range(n)
    ]
    lines[800] = "2024-05-01T10:13:20Z ERROR worker-0 batch 800 failed: connection reset by peer"
    return "\n".join(lines)


def grep_output(n: int = 2400) -> str:
    """Distinct matches: the search compressor keeps them all, so it saves little."""
    return "\n".join(
        f"src/app/module_{i // 40}.py:{10 + i % 40}:        retries = config.get('retry_{i % 17}', {i % 5}) if attempt < limit else None"
        for i in range(n)
    )


def conversation(output: str, turns: int) -> list[list[dict]]:
    """The ``messages`` of ``turns`` requests: the task, then ``output`` (new in request 2), then
    a short call and output per request."""
    msgs: list[dict] = [{"role": "user", "content": [{"type": "text", "text": "Find out why the nightly job fails."}]}]
    out = [json.loads(json.dumps(msgs))]
    for n in range(1, turns):
        text = output if n == 1 else f"step {n}: ok"
        call = {"type": "tool_use", "id": f"toolu_{n}", "name": "Bash", "input": {"command": f"run {n}"}}
        msgs += [
            {"role": "assistant", "content": [call]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": text}]},
        ]
        out.append(json.loads(json.dumps(msgs)))
    return out


def raw(messages: list[dict]) -> bytes:
    msgs = json.loads(json.dumps(messages))
    msgs[-1]["content"][-1]["cache_control"] = EPH  # Claude Code's breakpoint on the latest message
    return json.dumps(
        {"model": "claude-sonnet-4-5", "max_tokens": 512, "system": SYSTEM, "tools": TOOLS, "messages": msgs}
    ).encode()


def sent(plan, body: bytes) -> dict:
    return json.loads(plan.body if plan.body else body)


def bare(v):
    if isinstance(v, dict):
        return {k: bare(x) for k, x in v.items() if k != "cache_control"}
    return [bare(x) for x in v] if isinstance(v, list) else v


# -- the cost model's decision -----------------------------------------------------------------


def test_a_large_output_at_the_end_of_the_cached_prefix_pays_at_once():
    c = LateCost(42_200, 421, tail_tokens=0, remaining=1)
    assert c.extra_now < 0 and c.pays  # writing 421 tokens costs less than reading 42,200
    assert c.turns_to_pay == 0.0


def test_the_same_output_behind_a_long_tail_pays_only_over_a_long_session():
    c = LateCost(42_200, 421, tail_tokens=400_000, remaining=3)
    assert c.extra_now == pytest.approx(1.25 * 400_421 - 0.1 * 442_200)
    assert c.saved_per_turn == pytest.approx(0.1 * 41_779)
    assert not c.pays
    assert LateCost(42_200, 421, tail_tokens=400_000, remaining=200).pays
    assert 100 < (c.turns_to_pay or 0) < 200


def test_an_output_that_compresses_little_does_not_pay_for_its_write():
    assert not LateCost(69_599, 53_399, tail_tokens=0, remaining=3).pays
    assert not LateCost(1_000, 1_000, tail_tokens=0, remaining=100).pays  # nothing saved


def test_a_sessions_expected_remaining_requests():
    assert [expected_remaining(n) for n in (0, 1, 7)] == [1, 1, 7]  # no history: as many again (Lindy)
    # the project's recent sessions that went longer than this one so far: their mean remainder
    assert expected_remaining(3, [10, 12, 2, 20, 3]) == round((7 + 9 + 17) / 3)
    assert expected_remaining(3, [10, 12, 2]) == 3  # too few went longer: Lindy again


def test_cache_prices_from_the_price_table():
    assert late.cache_ratios(PriceTable(), "claude-sonnet-4-5") == pytest.approx((1.25, 0.1))
    assert late.cache_ratios(PriceTable(), "gpt-4o") == pytest.approx((1.0, 0.5))
    assert late.cache_ratios(PriceTable(), "no-such-model") == pytest.approx((1.25, 0.1))  # the dearest write premium
    assert late.cache_ratios(PriceTable(user=["my-model=2/8/1/2"]), "my-model") == pytest.approx((1.0, 0.5))
    # an OpenAI model: no write premium, so a change costs the tail once at the full price
    c = late.price(42_200, 421, tail_chars=0, remaining=3, ratios=late.cache_ratios(PriceTable(), "gpt-4o"))
    assert c.pays and c.extra_now == pytest.approx(421 - 0.5 * 42_200)


# -- the frozen entry ----------------------------------------------------------------------------


def test_candidates_and_the_entry_as_it_goes_once_decided():
    whole = "x" * 50
    msg = json.dumps(
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": whole, "cache_control": EPH}],
        }
    )
    e = FrozenEntry(1, "raw", "norm", msg, deferred=(("content", 0, "content"),))
    zone = LiveZone(2, (), (FrozenEntry(0, "r0", "n0", '{"role":"user","content":"go"}'), e))
    outs = [
        ToolOutput(("messages", 1, "content", 0, "content"), whole, "Bash", "t1", 1),
        ToolOutput(("messages", 3, "content", 0, "content"), "y", "Bash", "t2", 3),
    ]
    assert late.candidates(zone, outs) == [(1, ("content", 0, "content"), outs[0])]
    res = CompressResult(
        "x [50 chars: headroom_retrieve k1]", True, "log", "templates", "kept 1", (Offload("k1", whole, "original"),)
    )
    done = late.with_output(e, ("content", 0, "content"), res, 12, 3, "Bash")
    assert json.loads(done.sent_text)["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": res.text,
        "cache_control": EPH,
    }
    assert (done.modified, done.deferred, done.offloads, done.blocks) == (
        True,
        (),
        (("k1", ("content", 0, "content")),),
        (("log", "Bash", 12, 3),),
    )
    assert (done.tokens_before, done.tokens_after) == (12, 3)
    kept = late.with_output(e, ("content", 0, "content"), None, 0, 0, "Bash")
    assert (kept.sent_text, kept.modified, kept.deferred) == (msg, False, ())


# -- the walk, on a real runtime -----------------------------------------------------------------


@pytest.fixture
def home(tmp_path):
    return str(tmp_path)


def proxy(home: str, counter) -> Runtime:
    """A proxy of the team: a runtime on the shared home (its database and secret key)."""
    rt = Runtime(load_settings({"home": home}, env={}))
    rt.__dict__["counter"] = counter
    return rt


def deferred_rows(rt: Runtime) -> int:
    with rt.sessions() as s:
        return len(s.scalars(select(CompressionDecision).where(CompressionDecision.strategy == DEFERRED)).all())


def test_an_output_a_timeout_sent_whole_is_compressed_once_the_next_turn_and_replayed_by_another_proxy(home, counter):
    a, b = proxy(home, counter), proxy(home, counter)
    turns = [raw(m) for m in conversation(log_output(), 5)]
    out = [sent(plan_request(a, "POST", "/v1/messages", UA, turns[0]), turns[0])]
    p = replay_only(a, "POST", "/v1/messages", UA, turns[1], "compression timed out after 10.0 s")  # the timed-out turn
    out.append(sent(p, turns[1]))
    assert out[1]["messages"][AT]["content"][0]["content"] == log_output()  # whole
    assert deferred_rows(a) == 1  # and recorded: every proxy sends the same bytes
    assert [blk.strategy for blk in p.pipeline.blocks] == [DEFERRED]

    p = plan_request(b, "POST", "/v1/messages", UA, turns[2])  # the next turn, another proxy, with time
    out.append(sent(p, turns[2]))
    assert p.late is not None and (p.late.outputs, p.late.kept) == (1, 0)
    assert "1 earlier tool outputs compressed late" in p.reason
    compressed = out[2]["messages"][AT]["content"][0]["content"]
    assert len(compressed) < len(log_output()) / 10
    assert (
        b.store.get(markers.find_marker_keys(compressed)[0], p.context.scope).text == log_output()
    )  # stored before it went
    assert deferred_rows(b) == 0

    for n, rt in ((3, a), (4, b)):  # and from then on, through either proxy, the same bytes
        p = plan_request(rt, "POST", "/v1/messages", UA, turns[n])
        out.append(sent(p, turns[n]))
        assert p.late is None
    assert [bare(o["messages"][AT]) for o in out[2:]] == [bare(out[2]["messages"][AT])] * 3
    # nothing else earlier changed: each turn repeats the previous one's messages but that one, once
    changed = [
        (n, i)
        for n in range(1, 5)
        for i, (x, y) in enumerate(zip(out[n - 1]["messages"], out[n]["messages"]))
        if bare(x) != bare(y)
    ]
    assert changed == [(2, AT)]


def test_an_output_whose_compression_does_not_pay_yet_stays_whole_and_is_weighed_without_compressing_again(
    home, counter
):
    a, b = proxy(home, counter), proxy(home, counter)
    turns = [raw(m) for m in conversation(grep_output(), 4)]
    out = [sent(plan_request(a, "POST", "/v1/messages", UA, turns[0]), turns[0])]
    out.append(
        sent(replay_only(a, "POST", "/v1/messages", UA, turns[1], "compression timed out after 10.0 s"), turns[1])
    )
    p = plan_request(a, "POST", "/v1/messages", UA, turns[2])
    out.append(sent(p, turns[2]))
    assert p.late is not None and (p.late.outputs, p.late.kept, p.late.waiting) == (0, 0, 1)
    assert "left whole until compressing them late pays" in p.reason
    with a.sessions() as s:  # the placeholder notes what compressing gives, for every proxy
        row = s.scalars(select(CompressionDecision).where(CompressionDecision.strategy == DEFERRED)).one()
    assert 0 < row.tokens_after < row.tokens_before
    p = plan_request(b, "POST", "/v1/messages", UA, turns[3])  # weighed again, by another proxy: still no
    out.append(sent(p, turns[3]))
    assert p.late is None
    assert {o["messages"][AT]["content"][0]["content"] for o in out[1:]} == {grep_output()}
    rec = b.session_store.load(p.session_key)
    assert rec.messages[AT].deferred == (("content", 0, "content"),)  # and asked again next turn


def test_a_token_count_and_a_fallback_decide_nothing_again(home, counter):
    a = proxy(home, counter)
    turns = [raw(m) for m in conversation(log_output(), 3)]
    plan_request(a, "POST", "/v1/messages", UA, turns[0])
    replay_only(a, "POST", "/v1/messages", UA, turns[1], "compression timed out after 10.0 s")
    count = plan_request(a, "POST", "/v1/messages/count_tokens", UA, turns[2])
    assert count.dry_run and count.late is None
    again = replay_only(a, "POST", "/v1/messages", UA, turns[2], "compression timed out after 10.0 s")
    assert again.late is None and sent(again, turns[2])["messages"][AT]["content"][0]["content"] == log_output()
    assert deferred_rows(a) == 1


def test_a_timeout_records_that_it_sent_an_output_whole_and_the_session_remembers_where(home, counter):
    a, b = proxy(home, counter), proxy(home, counter)
    turns = [raw(m) for m in conversation(log_output(), 2)]
    plan_request(a, "POST", "/v1/messages", UA, turns[0])
    p = replay_only(a, "POST", "/v1/messages", UA, turns[1], "compression timed out after 10.0 s")
    assert sent(p, turns[1])["messages"][AT]["content"][0]["content"] == log_output()
    assert [(blk.strategy, blk.changed) for blk in p.pipeline.blocks] == [(DEFERRED, False)]
    assert deferred_rows(a) == 1  # a decision like any other, in the shared database
    rec = b.session_store.load(p.session_key)  # another proxy reads where it went whole
    assert [e.deferred for e in rec.messages] == [(), (), (("content", 0, "content"),)]
    # another proxy with no time either sends the very same bytes
    again = replay_only(b, "POST", "/v1/messages", UA, turns[1], "compression timed out after 10.0 s")
    assert again.body == p.body


def test_a_placeholder_gives_way_to_the_first_real_decision_and_the_session_follows_it(home, counter):
    a, b = proxy(home, counter), proxy(home, counter)
    turns = [raw(m) for m in conversation(log_output(), 3)]
    plan_request(a, "POST", "/v1/messages", UA, turns[0])
    replay_only(a, "POST", "/v1/messages", UA, turns[1], "compression timed out after 10.0 s")
    assert deferred_rows(a) == 1
    # another conversation of the same client and project meets the same output as new: with time,
    # it is decided now, and that decision replaces the placeholder
    other = json.loads(turns[1])
    other["messages"][0]["content"][0]["text"] = "Another task: look at the nightly log."
    p = plan_request(b, "POST", "/v1/messages", UA, json.dumps(other).encode())
    theirs = sent(p, b"")["messages"][AT]["content"][0]["content"]
    assert len(theirs) < len(log_output()) / 10 and deferred_rows(b) == 0
    # the first session, next turn: the decision made since stands, applied as the team sent it
    p = plan_request(a, "POST", "/v1/messages", UA, turns[2])
    assert p.late is not None and p.late.outputs == 1
    assert sent(p, turns[2])["messages"][AT]["content"][0]["content"] == theirs
