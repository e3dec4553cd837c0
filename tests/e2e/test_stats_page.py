"""The stats page at ``http://headroom.localhost/`` served by a real mitmdump: ``/stats`` JSON
equals the ledger, ``/metrics`` parses with prometheus-client's own parser and carries the
same figures, and the HTML page rendered in headless Chromium shows them."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
from bs4 import BeautifulSoup
from prometheus_client.parser import text_string_to_metric_families

from headroom_core import ledger
from headroom_core.db.engine import open_database
from tests.support.clients import anthropic_client, openai_client
from tests.support.proxy import ADDON_SCRIPT
from tests.support.upstream import Reply
from tests.unit.test_request_plan import anthropic_request, github_scenario

PAGE = "http://headroom.localhost"
# Anthropic: prompt = input + cache read + cache write; OpenAI: prompt = input (it holds the cached tokens)
A_USAGE = dict(input_tokens=1234, output_tokens=56, cache_read=1000, cache_creation=200)
O_USAGE = dict(input_tokens=3000, output_tokens=40, cache_read=2500)
EXPECTED_HIT = (2 * 1000 + 2500) / (2 * (1234 + 1000 + 200) + 3000)


@pytest.fixture(scope="module")
def proxy(module_proxy_factory, upstream_server):
    """One proxy that has seen two Anthropic requests and one OpenAI Chat request, each with a
    large JSON tool output (real GitHub API records) and scripted provider usage."""
    px = module_proxy_factory(ADDON_SCRIPT, options={"headroom_compress_timeout_seconds": 300})
    big = github_scenario("paginate-issues.json")
    upstream_server.reset()
    upstream_server.script(Reply.text("a1", **A_USAGE), Reply.text("a2", **A_USAGE), Reply.text("o1", **O_USAGE))
    client = anthropic_client(upstream_server, px)
    for q in ("Which issues are open?", "Which issues are closed?"):
        body = anthropic_request(big, question=q)
        client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=100,
            system=body["system"],
            tools=body["tools"],
            messages=body["messages"],
        )
    openai_client(upstream_server, px).chat.completions.create(
        model="gpt-4o",
        messages=[
            {"role": "user", "content": "which issues are open?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "gh", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": big},
        ],
    )
    sessions = open_database(f"sqlite:///{px.home / 'headroom.db'}")
    from headroom_core.db.models import RequestOutcome

    for _ in range(100):  # the ledger row is written after the response went out
        with sessions() as s:
            if s.query(RequestOutcome).count() == 3:
                break
        __import__("time").sleep(0.1)
    px.sessions = sessions
    return px


def _get(px, path: str) -> httpx.Response:
    with httpx.Client(proxy=px.url, trust_env=False, timeout=30) as c:
        return c.get(PAGE + path)


def test_stats_json_equals_the_ledger(proxy):
    r = _get(proxy, "/stats")
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    got = r.json()
    assert got == ledger.snapshot(proxy.sessions)
    t = got["totals"]
    assert (t["requests"], t["compressed"]) == (3, 3)
    assert t["usage_prompt_tokens"] == 2 * (1234 + 1000 + 200) + 3000
    assert t["cache_hit_rate"] == pytest.approx(EXPECTED_HIT)
    agents = {a["key"]: a for a in got["by"]["agent"]}
    assert agents["anthropic-python"]["requests"] == 2 and agents["openai-python"]["requests"] == 1
    kinds = {k["key"]: k for k in got["by"]["kind"]}
    assert kinds["json"]["blocks"] == 3 and kinds["json"]["tokens_after"] < kinds["json"]["tokens_before"] / 2
    assert t["tokens_before"] == kinds["json"]["tokens_before"] and t["tokens_saved"] == sum(
        k["tokens_saved"] for k in kinds.values()
    )


def test_metrics_parse_and_match(proxy):
    r = _get(proxy, "/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain; version=0.0.4")
    fams = {f.name: f for f in text_string_to_metric_families(r.text)}
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in fams.values() for s in f.samples}
    t = ledger.totals(proxy.sessions)[0][1]
    assert fams["headroom_requests"].type == "counter"
    assert samples[("headroom_requests_total", (("agent", "anthropic-python"),))] == 2
    assert samples[("headroom_requests_total", (("agent", "openai-python"),))] == 1
    assert sum(v for (n, _), v in samples.items() if n == "headroom_estimated_tokens_saved_total") == t.tokens_saved
    assert sum(v for (n, _), v in samples.items() if n == "headroom_usage_cache_read_tokens_total") == 2 * 1000 + 2500
    assert samples[("headroom_cache_hit_ratio", ())] == pytest.approx(EXPECTED_HIT)
    kinds = dict(ledger.kind_totals(proxy.sessions))
    assert samples[("headroom_kind_estimated_tokens_before_total", (("kind", "json"),))] == kinds["json"].tokens_before


def test_page_is_served_at_the_reserved_host_and_on_the_proxy_port(proxy):
    via = _get(proxy, "/")
    with httpx.Client(trust_env=False, timeout=30) as c:
        direct = c.get(f"{proxy.url}/")
    for r in (via, direct):
        assert r.status_code == 200 and "<h1>Headroom savings</h1>" in r.text
    assert _get(proxy, "/nope").status_code == 404


def _chromium() -> str:
    """Chromium's path; ``scripts/chromium`` installs Debian's package when it is missing and
    this is root (``scripts/test`` runs it before the suite). Skips, saying why, otherwise."""
    script = Path(__file__).resolve().parents[2] / "scripts" / "chromium"
    out = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=1200)
    exe = out.stdout.strip()
    if out.returncode != 0 or not exe or not shutil.which(exe):
        pytest.skip(
            f"headless Chromium is not available: {out.stderr.strip().splitlines()[-1] if out.stderr.strip() else 'scripts/chromium failed'}"
        )
    return exe


def _chrome_args(exe: str, profile: Path, proxy_url: str) -> list[str]:
    return [
        exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={profile}", f"--proxy-server={proxy_url}", "--proxy-bypass-list=<-loopback>",
    ]  # fmt: skip


def test_page_in_headless_chromium_shows_the_figures(proxy, tmp_path):
    exe = _chromium()
    args = _chrome_args(exe, tmp_path / "profile", proxy.url)
    out = subprocess.run(args + ["--dump-dom", PAGE + "/"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    soup = BeautifulSoup(out.stdout, "html.parser")
    t = ledger.totals(proxy.sessions)[0][1]
    fig = {el["data-figure"]: el for el in soup.select("[data-figure]")}
    assert fig["requests"]["data-value"] == "3" and fig["requests"].get_text() == "3"
    assert fig["tokens_saved"].get_text() == f"{t.tokens_saved:,}"
    assert fig["usage_prompt_tokens"].get_text() == f"{t.usage_prompt_tokens:,}"
    assert fig["cache_hit_rate"].get_text() == f"{100 * EXPECTED_HIT:.1f}%"
    agents = {tr["data-key"] for tr in soup.select('table[data-group="agent"] tr[data-key]')}
    assert agents == {"anthropic-python", "openai-python"}
    bars = {(r["data-label"], r["data-series"]): int(r["data-value"]) for r in soup.select("svg rect[data-label]")}
    kinds = dict(ledger.kind_totals(proxy.sessions))
    assert (
        bars[("json", "before")] == kinds["json"].tokens_before
        and bars[("json", "after")] == kinds["json"].tokens_after
    )
    (day,) = ledger.totals(proxy.sessions, "day")
    assert bars[(day[0], "tokens saved (estimated)")] == t.tokens_saved
    assert fig["cost_saved_usd"].get_text() == _usd(t.cost_saved_usd) and t.cost_saved_usd > 0
    assert fig["cost_usd"].get_text() == _usd(t.cost_usd)
    assert soup.select_one('meta[http-equiv="refresh"]')["content"] == "30"  # the page refreshes itself
    shot = Path(os.environ.get("HEADROOM_SCREENSHOT_DIR", tmp_path)) / "stats-page.png"
    out = subprocess.run(
        args + ["--hide-scrollbars", "--window-size=1024,1700", f"--screenshot={shot}", PAGE + "/"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0 and shot.is_file(), out.stderr[-2000:]
    _assert_not_blank(shot)


def _usd(v: float) -> str:
    return f"${v:,.2f}" if v >= 1 else f"${v:.4f}"


def _assert_not_blank(png: Path) -> None:
    """The screenshot shows a rendered page: text and charts in several colours over a good
    part of the picture, not one flat colour (a blank or an error page)."""
    from PIL import Image

    img = Image.open(png).convert("RGB")
    assert img.size == (1024, 1700)
    small = img.resize((256, 425))
    colors = small.getcolors(maxcolors=256 * 425)
    background, _ = max((n, c) for n, c in colors)[1], None
    inked = sum(n for n, c in colors if sum(abs(a - b) for a, b in zip(c, background)) > 60)
    assert len(colors) > 100, f"only {len(colors)} colours: a blank page"
    assert inked / (256 * 425) > 0.03, f"only {inked} of {256 * 425} pixels differ from the background"
    # the chart's bar colours (tokens saved: #2e9d6a; per kind, after: #2e6fd0) are on screen
    full = img.getcolors(maxcolors=1024 * 1700)
    assert any(c == (0x2E, 0x9D, 0x6A) and n > 200 for n, c in full) and any(
        c == (0x2E, 0x6F, 0xD0) and n > 200 for n, c in full
    )


def _stats_cli(px, *args: str) -> str:
    import sys

    env = {"HEADROOM_HOME": str(px.home), "PATH": "/usr/bin:/bin", "COLUMNS": "250"}
    out = subprocess.run(
        [str(Path(sys.executable).parent / "headroom"), "stats", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.replace(",", "")


def test_stats_cli_prints_the_same_figures(proxy):
    t = ledger.totals(proxy.sessions)[0][1]
    text = _stats_cli(proxy)
    for title in ("per agent", "per project", "per content kind", "per day"):
        assert title in text
    assert f"{t.tokens_saved} ({100 * t.saved_share:.1f}%)" in text
    assert str(t.usage_prompt_tokens) in text and f"{100 * EXPECTED_HIT:.1f}%" in text
    kinds = dict(ledger.kind_totals(proxy.sessions))
    by_kind = _stats_cli(proxy, "--by", "kind")
    assert "per agent" not in by_kind and str(kinds["json"].tokens_before) in by_kind
    by_agent = _stats_cli(proxy, "--by", "agent")
    assert "anthropic-python" in by_agent and "openai-python" in by_agent


def test_ledger_kinds_skip_unreadable_detail(runtime):
    from datetime import datetime

    from headroom_core.db.models import RequestOutcome

    good = '[{"kind": "logs", "changed": true, "cached": false, "tokens_before": 900, "tokens_after": 300}, {"kind": "", "reason": "tool excluded", "tokens_before": 0, "tokens_after": 0}]'
    with runtime.sessions.begin() as s:
        for detail, dialect in ((good, "anthropic-messages"), ("not json", "openai-chat"), ("{}", "openai-chat")):
            s.add(RequestOutcome(created_at=datetime(2026, 1, 2, 3, 4), dialect=dialect, client="c", model="m", session_key="k", project="p", action="compressed",
                                 reason="", body_bytes_before=10, body_bytes_after=5, tokens_before=900, tokens_after=300, blocks_compressed=1,
                                 usage_input_tokens=100, usage_cache_read_tokens=50, usage_cache_write_tokens=10, detail=detail))  # fmt: skip
    kinds = dict(ledger.kind_totals(runtime.sessions))
    assert (
        set(kinds) == {"logs", ledger.EXCLUDED} and kinds["logs"].tokens_saved == 600 and kinds["logs"].compressed == 1
    )
    ((_, t),) = ledger.totals(runtime.sessions)
    # Anthropic: 100 + 50 + 10 prompt tokens; OpenAI: 100 each (their input holds the cached tokens)
    assert t.usage_prompt_tokens == 160 + 2 * 100 and t.cache_hit_rate == pytest.approx(150 / 360)
    ((day, _),) = ledger.totals(runtime.sessions, "day")
    assert day == "2026-01-02"
