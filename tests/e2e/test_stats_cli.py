"""``headroom stats`` and the ledger's read side on a real ledger: per-kind figures add up to
the totals (a block replayed from an earlier turn counts under its own kind, never
"unknown"), money from the provider's usage priced per model (Anthropic cache write 1.25x and
read 0.1x of input, OpenAI cached input at its own price; user prices override), plain output
within 80 columns, ``--wide``, ``--csv``, the 30-day chart, ``--days`` ≥ 1, and a read that
never creates a database."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from headroom_core import ledger
from headroom_core.db.models import RequestOutcome
from headroom_core.pricing import Price, PriceError, PriceTable, parse_entry, request_cost
from headroom_core.request_plan import plan_request
from headroom_core.settings import SettingsError, load_settings
from headroom_core.wire.blocks import Usage
from tests.unit.test_request_plan import anthropic_request, github_scenario

HEADROOM = str(Path(sys.executable).parent / "headroom")
SONNET = "claude-sonnet-4-5-20250929"
# the usage the provider reported for each request (Anthropic: input excludes cache read/write)
TURN1 = Usage(input_tokens=1000, output_tokens=50, cache_read_tokens=0, cache_write_tokens=9000)
TURN2 = Usage(input_tokens=200, output_tokens=40, cache_read_tokens=9000, cache_write_tokens=800)
OPENAI = Usage(input_tokens=3000, output_tokens=40, cache_read_tokens=2500, cache_write_tokens=None)


def _plan(rt, body: dict, ua: str = "claude-cli/1.0.62"):
    return plan_request(
        rt, "POST", "/v1/messages", {"user-agent": ua, "content-type": "application/json"}, json.dumps(body).encode()
    )


@pytest.fixture
def ledger_db(runtime):
    """Two turns of one Claude Code session (turn 2 replays turn 1's compressed tool output),
    one OpenAI Chat request, and one request of a model the price table does not know."""
    big = github_scenario("paginate-issues.json")
    t1 = anthropic_request(big)
    p1 = _plan(runtime, t1)
    assert p1.action == "rewrite" and p1.pipeline.blocks[0].changed
    ledger.record(
        runtime.sessions, p1, user_agent="claude-cli/1.0.62", model=SONNET, status_code=200, usage=TURN1, rounds=0
    )
    t2 = json.loads(json.dumps(t1))
    t2["messages"] += [
        {"role": "assistant", "content": "Three are open."},
        {"role": "user", "content": "And which are closed?"},
    ]
    p2 = _plan(runtime, t2)
    assert p2.live is not None and [i for i, _ in p2.live.replay] == [2] and not p2.pipeline.blocks
    ledger.record(
        runtime.sessions, p2, user_agent="claude-cli/1.0.62", model=SONNET, status_code=200, usage=TURN2, rounds=0
    )
    o = {"model": "gpt-4o", "messages": [{"role": "user", "content": "open issues?"},
         {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "gh", "arguments": "{}"}}]},
         {"role": "tool", "tool_call_id": "c1", "content": big}]}  # fmt: skip
    p3 = plan_request(
        runtime, "POST", "/v1/chat/completions", {"user-agent": "openai-python/1.0"}, json.dumps(o).encode()
    )
    ledger.record(
        runtime.sessions, p3, user_agent="OpenAI/Python 1.0", model="gpt-4o", status_code=200, usage=OPENAI, rounds=0
    )
    p4 = plan_request(
        runtime,
        "POST",
        "/v1/chat/completions",
        {"user-agent": "local/1"},
        json.dumps({**o, "model": "llama-3-local", "messages": o["messages"][:1]}).encode(),
    )
    ledger.record(
        runtime.sessions,
        p4,
        user_agent="local/1",
        model="llama-3-local",
        status_code=200,
        usage=Usage(100, 10, 0, None),
        rounds=0,
    )
    runtime.plans = (p1, p2, p3)
    return runtime


def test_prices_follow_the_providers_rules():
    t = PriceTable()
    assert t.price(SONNET) == Price(3.0, 15.0, 0.30, 3.75)
    assert t.price("claude-opus-4-1-20250805") == Price(15.0, 75.0, 1.5, 18.75)
    assert t.price("claude-opus-4-5-20251101").input == 5.0
    assert t.price("us.anthropic.claude-3-5-haiku-20241022-v1:0") == Price(0.8, 4.0, 0.08, 1.0)
    assert t.price("gpt-4o-2024-08-06") == Price(2.5, 10.0, 1.25, 2.5)
    assert t.price("gpt-4o-mini").input == 0.15 and t.price("gpt-5-mini").cache_read == 0.025
    assert t.price("llama-3-local") is None
    # Anthropic: cache write 1.25x, read 0.1x of input; the saving at the request's own rate
    c = request_cost(
        t.price(SONNET),
        separate_cache=True,
        input_tokens=1000,
        cache_read=0,
        cache_write=9000,
        output_tokens=50,
        tokens_saved=4000,
    )
    assert c.prompt == pytest.approx((1000 * 3 + 9000 * 3.75) / 1e6) and c.output == pytest.approx(50 * 15 / 1e6)
    assert c.saved == pytest.approx(4000 * c.prompt / 10000)
    # OpenAI: the input figure holds the cached tokens, priced at the cached price
    c = request_cost(
        t.price("gpt-4o"),
        separate_cache=False,
        input_tokens=3000,
        cache_read=2500,
        cache_write=0,
        output_tokens=40,
        tokens_saved=0,
    )
    assert c.prompt == pytest.approx((500 * 2.5 + 2500 * 1.25) / 1e6)
    # the user's entries come first; missing cache prices follow the provider's rule
    user = PriceTable(user=["claude-sonnet-4*=2/10", "llama-*=0.5/1/0.05/0.5"])
    assert user.price(SONNET) == Price(2.0, 10.0, 0.2, 2.5) and user.price("llama-3-local") == Price(
        0.5, 1.0, 0.05, 0.5
    )
    assert parse_entry("my-model=1/2") == ("my-model", Price(1.0, 2.0, 0.5, 1.0))
    with pytest.raises(PriceError):
        parse_entry("gpt-4o=cheap")
    with pytest.raises(SettingsError, match="prices: price entry 'x=1'"):
        load_settings({"prices": "x=1"}, env={})


def test_kinds_add_up_and_replays_count_under_their_kind(ledger_db):
    rt = ledger_db
    ((_, whole),) = ledger.totals(rt.sessions)
    kinds = dict(ledger.kind_totals(rt.sessions))
    assert "unknown" not in kinds and set(kinds) == {"json", ledger.TOOL_DEFINITIONS}
    # turn 1 compressed the output, turn 2 replayed it (counted again, as reused), OpenAI compressed it
    # too: a conversation of no project, its own scope, so its own decision (not reused)
    assert kinds["json"].blocks == 3 and kinds["json"].reused == 1
    assert whole.tokens_before == kinds["json"].tokens_before and whole.tokens_after == kinds["json"].tokens_after
    assert whole.tools_tokens_before == kinds[ledger.TOOL_DEFINITIONS].tokens_before
    assert whole.tokens_saved == sum(k.tokens_saved for k in kinds.values())
    p1, p2, _ = rt.plans
    with rt.sessions() as s:
        rows = s.query(RequestOutcome).order_by(RequestOutcome.id).all()
        replayed = json.loads(rows[1].detail)
    assert [b.get("replayed") for b in replayed] == [True] and replayed[0]["kind"] == "json"
    assert rows[1].tokens_before == p1.pipeline.tokens_before and rows[1].tokens_after == p1.pipeline.tokens_after
    # the replay weighs what the frozen prefix says it weighs
    assert (rows[1].tokens_before, rows[1].tokens_after) == (p2.live.tokens_before, p2.live.tokens_after)


def test_money_from_usage(ledger_db):
    rt = ledger_db
    t = PriceTable()
    by_row = []
    with rt.sessions() as s:
        for r in s.query(RequestOutcome).order_by(RequestOutcome.id):
            price = t.price(r.model)
            if price is None:
                continue
            saved = r.tokens_before - r.tokens_after + r.tools_tokens_before - r.tools_tokens_after
            by_row.append(request_cost(price, separate_cache=r.dialect == "anthropic-messages", input_tokens=r.usage_input_tokens, cache_read=r.usage_cache_read_tokens or 0,
                                       cache_write=r.usage_cache_write_tokens or 0, output_tokens=r.usage_output_tokens, tokens_saved=saved))  # fmt: skip
    ((_, whole),) = ledger.totals(rt.sessions)
    assert whole.priced_requests == 3 and whole.usage_requests == 4  # the local model is not priced
    assert whole.cost_prompt_usd == pytest.approx(sum(c.prompt for c in by_row))
    assert whole.cost_output_usd == pytest.approx(sum(c.output for c in by_row))
    assert whole.cost_saved_usd == pytest.approx(sum(c.saved for c in by_row)) and whole.cost_saved_usd > 0
    # per kind, the money adds up to the total too
    assert sum(k.cost_saved_usd for _, k in ledger.kind_totals(rt.sessions)) == pytest.approx(whole.cost_saved_usd)
    agents = dict(ledger.totals(rt.sessions, "agent"))
    assert agents["claude-cli"].cost_prompt_usd == pytest.approx(by_row[0].prompt + by_row[1].prompt)
    # a user's price overrides the table
    ((_, cheap),) = ledger.totals(rt.sessions, prices=PriceTable(user=["claude-sonnet-4*=1.5/7.5"]))
    assert cheap.cost_output_usd == pytest.approx((50 + 40) * 7.5 / 1e6 + 40 * 10 / 1e6)


def _stats(home: Path, *args: str, columns: int = 80) -> subprocess.CompletedProcess[str]:
    env = {
        "HEADROOM_HOME": str(home),
        "HOME": str(Path.home()),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "COLUMNS": str(columns),
        "LINES": "50",
    }
    return subprocess.run([HEADROOM, "stats", *args], env=env, capture_output=True, text=True, timeout=120)


def test_stats_fit_80_columns_and_show_every_figure(ledger_db):
    rt = ledger_db
    out = _stats(Path(rt.settings.home))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, "\n".join(line for line in lines if len(line) > 80)
    text = out.stdout
    ((_, whole),) = ledger.totals(rt.sessions)
    assert f"{whole.tokens_saved:,} ({100 * whole.saved_share:.1f}%)" in text
    assert f"${whole.cost_usd:.4f}" in text and f"${whole.cost_saved_usd:.4f}" in text
    for title in ("per agent", "per project", "per content kind", "tokens saved per day, last 30 days (UTC)"):
        assert title in text
    agents = dict(ledger.totals(rt.sessions, "agent"))
    assert f"{agents['claude-cli'].tokens_saved:,}" in text  # numbers are never cut
    kinds = dict(ledger.kind_totals(rt.sessions))
    assert f"{kinds['json'].tokens_saved:,}" in text
    # the chart: 30 day columns, today's bar the full height
    chart = [line for line in lines if "┤" in line or "│" in line]
    assert len(chart) == 8 and chart[0].rstrip().endswith("█")
    today = datetime.now(timezone.utc).strftime("%m-%d")
    first = (datetime.now(timezone.utc) - timedelta(days=29)).strftime("%m-%d")
    assert any(line.strip().startswith(first) and line.rstrip().endswith(today) for line in lines)
    wide = _stats(Path(rt.settings.home), "--wide", columns=250)
    assert wide.returncode == 0 and "cache write" in wide.stdout and "$ paid" in wide.stdout and "reused" in wide.stdout


def test_stats_csv_and_json(ledger_db):
    rt = ledger_db
    out = _stats(Path(rt.settings.home), "--csv")
    assert out.returncode == 0, out.stderr
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    total = next(r for r in rows if r["breakdown"] == "total")
    ((_, whole),) = ledger.totals(rt.sessions)
    assert int(total["tokens_saved"]) == whole.tokens_saved and float(total["cost_saved_usd"]) == pytest.approx(
        whole.cost_saved_usd, abs=1e-6
    )
    assert {r["key"] for r in rows if r["breakdown"] == "kind"} == {"json", ledger.TOOL_DEFINITIONS}
    assert sum(int(r["tokens_saved"]) for r in rows if r["breakdown"] == "kind") == whole.tokens_saved
    only = list(csv.DictReader(io.StringIO(_stats(Path(rt.settings.home), "--csv", "--by", "agent").stdout)))
    assert {r["breakdown"] for r in only} == {"agent"} and {r["key"] for r in only} == {
        "claude-cli",
        "openai-python",
        "local",
    }
    snap = json.loads(_stats(Path(rt.settings.home), "--json").stdout)
    assert (
        snap["totals"]["cost_saved_usd"] == pytest.approx(whole.cost_saved_usd, abs=1e-6) and "money" in snap["notes"]
    )


def test_days_must_be_positive_and_reading_creates_no_database(tmp_path):
    out = _stats(tmp_path, "--days", "0")
    assert (
        out.returncode == 2 and "--days" in out.stderr and "greater than or equal to 1" in " ".join(out.stderr.split())
    )
    out = _stats(tmp_path)
    assert out.returncode == 0 and out.stdout.startswith(
        f"No requests recorded yet: there is no database at sqlite:///{tmp_path}/headroom.db"
    )
    assert not (tmp_path / "headroom.db").exists() and list(tmp_path.iterdir()) == []
    assert json.loads(_stats(tmp_path, "--json").stdout)["totals"] is None
    assert not (tmp_path / "headroom.db").exists()


def test_a_refused_request_saves_nothing(runtime):
    """A body over ``max_body_bytes`` gets 413 and goes nowhere: its bytes count before and after
    alike (no saving), and it is counted as rejected."""
    from headroom_core.runtime import Runtime

    rt = Runtime(load_settings({"home": runtime.settings.home, "max_body_bytes": 1000}, env={}))
    body = json.dumps(
        {"model": SONNET, "max_tokens": 10, "messages": [{"role": "user", "content": "x" * 5000}]}
    ).encode()
    p = plan_request(rt, "POST", "/v1/messages", {"content-type": "application/json"}, body)
    assert p.action == "reject" and p.status == 413
    ledger.record(
        rt.sessions,
        p,
        user_agent="curl/8",
        model=SONNET,
        status_code=413,
        usage=Usage(None, None, None, None),
        rounds=0,
    )
    with rt.sessions() as s:
        row = s.query(RequestOutcome).one()
    assert (row.action, row.body_bytes_before, row.body_bytes_after) == ("rejected", len(body), len(body))
    ((_, whole),) = ledger.totals(rt.sessions)
    assert whole.tokens_saved == 0
