"""The cached prefix stays byte-stable end to end: the real Claude Code session
(``../shared/corpus/anthropic-flows``) replayed through a real ``mitmdump -s addons/headroom.py``
to a local upstream that answers with the recorded responses, with a proxy restart in the middle
of the session.

For every request after the first of its conversation, each part the previous request also
sent — a ``tools`` entry, a ``system`` block, a message — that the client sent with the same
bytes both times reaches the upstream with the same bytes both times (compressed or not), and
the proxy's own tools stay where they were. Violations are counted per request; the goal is
zero. A second replay puts a large JSON tool output (real GitHub API data) into the session, so
a block is compressed in one turn and must be re-sent identically in every later turn while the
user's question changes, across the restart and across the client's own history edit (resume).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from headroom_core.cache import cost_model, prefix_check
from headroom_core.cache.hit_rate import cache_hit_rate
from headroom_core.cache.prefix_log import prefix_events
from headroom_core.ccr import retrieve
from headroom_core.compress import markers
from headroom_core.db.engine import open_database
from headroom_core.wire import jsonedit
from tests.conftest import flow_files, load_flow
from tests.e2e.test_learn_live_e2e import settled
from tests.support.clients import http_client
from tests.support.proxy import ADDON_SCRIPT
from tests.unit.test_request_plan import github_scenario

PARTS = ("tools", "system", "messages")
# Compression is given all the time it needs, so the replays prove the steady state on a machine
# shared with other test suites; the last test proves the timeout fallback keeps the prefix too.
OPTIONS = {"headroom_compress_timeout_seconds": "600"}


@dataclass(frozen=True)
class Exchange:
    """One replayed request: the client's bytes and the bytes the upstream received."""

    name: str
    path: str
    client: str
    upstream: str


@dataclass(frozen=True)
class Violation:
    """``part[index]`` was sent by the client identically in ``previous`` and ``name`` but
    reached the upstream with different bytes (index -1: the proxy's own tools moved)."""

    name: str
    previous: str
    part: str
    index: int


def elements(text: str, part: str) -> list[str] | None:
    """The exact JSON text of each element of the top-level array ``part`` (None if absent)."""
    try:
        return [text[a:b] for a, b in jsonedit.element_spans(text, (part,))]
    except jsonedit.JSONPathError:
        return None


def _strip_cc(v):
    if isinstance(v, dict):
        return {k: _strip_cc(x) for k, x in v.items() if k != "cache_control"}
    if isinstance(v, list):
        return [_strip_cc(x) for x in v]
    return v


def conversation(ex: Exchange) -> str:
    """The test's own grouping (independent of the proxy's session key): the endpoint and the
    first message without its ``cache_control`` (which Claude Code moves from turn to turn)."""
    first = json.loads(ex.client)["messages"][:1]
    return ex.path + json.dumps(_strip_cc(first), sort_keys=True)


def prefix_violations(exchanges: list[Exchange]) -> tuple[list[Violation], int]:
    """Compare each request with the previous request of its conversation (the prompt-cache
    rule, :mod:`headroom_core.cache.prefix_check`): every part before the client's first change
    must reach the upstream with the same bytes as last time (``cache_control`` aside, which the
    client moves), and the proxy's first change must not come before the client's. Returns the
    violations and how many parts were compared."""
    last: dict[str, Exchange] = {}
    found: list[Violation] = []
    compared = 0
    for ex in exchanges:
        key = conversation(ex)
        prev = last.get(key)
        last[key] = ex
        if prev is None:
            continue
        c0, c1, u0, u1 = (json.loads(x) for x in (prev.client, ex.client, prev.upstream, ex.upstream))
        broke = prefix_check.earlier_break(c0, c1, u0, u1)
        if broke is not None:
            found.append(Violation(ex.name, prev.name, PARTS[broke[0]], broke[1]))
        change = prefix_check.first_change(c0, c1, tools_as_set=True)
        for part in PARTS:
            a, b = elements(prev.upstream, part), elements(ex.upstream, part)
            if a is None or b is None:
                continue
            for i, (x, y) in enumerate(zip(a, b)):
                pos = (PARTS.index(part), 0 if part == "tools" else i)
                if change is not None and pos >= change:
                    break
                compared += 1
                if jsonedit.strip_member(x, "cache_control") != jsonedit.strip_member(y, "cache_control"):
                    found.append(Violation(ex.name, prev.name, part, i))
    return found, compared


def recorded_reply(flow: dict) -> tuple[bytes, dict[str, str], list[bytes] | None]:
    body = flow["response"]["body"]
    if isinstance(body, str):
        data = body.encode()
        step = len(data) // 3 + 1
        return data, {"content-type": "text/event-stream"}, [data[i : i + step] for i in range(0, len(data), step)]
    return json.dumps(body).encode(), {"content-type": "application/json"}, None


def replay(proxy, upstream, flows: list[tuple[str, dict]], restart_after: int) -> list[Exchange]:
    """Send each flow's request through ``proxy`` (restarting it after ``restart_after``
    requests); the upstream answers with the recorded response."""
    out: list[Exchange] = []
    client = http_client(proxy, timeout=120)
    try:
        for n, (name, flow) in enumerate(flows):
            if n == restart_after:
                client.close()
                proxy.restart()
                client = http_client(proxy, timeout=120)
            body = flow["request"]["body"]
            path = "/v1/messages" if "max_tokens" in body else "/v1/messages/count_tokens"
            data, headers, chunks = recorded_reply(flow)
            upstream.raw(200, data, headers, chunks=chunks)
            raw = json.dumps(body).encode()
            r = client.post(
                upstream.url + path,
                content=raw,
                headers={
                    "content-type": "application/json",
                    "user-agent": flow["request"]["headers"].get("user-agent", ""),
                },
            )
            assert r.status_code == 200, (name, r.text[:300])
            assert r.content == data, name
            out.append(Exchange(name, path, raw.decode(), upstream.requests[-1].body.decode()))
    finally:
        client.close()
    return out


def ledger_reasons(proxy) -> list[str]:
    """``action: reason`` of every request the proxy recorded, in order (for failure messages)."""
    from sqlalchemy import select

    from headroom_core.db.models import RequestOutcome

    sessions = open_database(f"sqlite:///{Path(proxy.home) / 'headroom.db'}")
    with sessions() as s:
        return [f"{r.action}: {r.reason}" for r in s.scalars(select(RequestOutcome).order_by(RequestOutcome.id))]


def recorded_usage(flows: list[tuple[str, dict]]) -> tuple[int, int, int]:
    """Sums of input, cache-read and cache-write tokens in the recorded SSE ``message_start``
    events (the provider's own figures)."""
    inp = read = write = 0
    for _name, flow in flows:
        body = flow["response"]["body"]
        if not isinstance(body, str):
            continue
        for line in body.splitlines():
            if line.startswith("data:") and '"message_start"' in line:
                u = json.loads(line[5:])["message"]["usage"]
                inp += u["input_tokens"]
                read += u["cache_read_input_tokens"]
                write += u["cache_creation_input_tokens"]
                break
    return inp, read, write


@pytest.fixture(scope="module")
def flows() -> list[tuple[str, dict]]:
    return [(f.name, load_flow(f)) for f in flow_files()]


def cache_priced(exchanges: list[Exchange], counter) -> tuple[cost_model.Cost, cost_model.Cost]:
    """The session's input cost under Anthropic's prompt caching without the proxy (the client's
    bodies) and with it (the bodies the upstream received); token counts are free."""
    cutter = cost_model.Blocks(counter.count)
    without, with_proxy = cost_model.AnthropicCache(), cost_model.AnthropicCache()
    a = b = cost_model.ZERO
    for ex in exchanges:
        if ex.path.endswith("count_tokens"):
            continue
        c, u = json.loads(ex.client), json.loads(ex.upstream)
        a += without.request(c["model"], cutter.of(c))
        b += with_proxy.request(c["model"], cutter.of(u))
    return a, b


def test_recorded_session_prefix_is_byte_stable_across_turns_and_restart(upstream, proxy_factory, flows, counter):
    proxy = proxy_factory(ADDON_SCRIPT, options=OPTIONS)
    exchanges = replay(proxy, upstream, flows, restart_after=9)
    violations, compared = prefix_violations(exchanges)
    print(
        f"\nrecorded session: {len(exchanges)} requests, {compared} client-unchanged parts compared, {len(violations)} prefix violations"
    )
    assert violations == [], (violations[:10], ledger_reasons(proxy))
    assert compared > 900  # the check did look at the growing history (tools, system, messages)
    # requests the proxy rewrote (tool definitions minified) were compared, not just passthroughs
    assert sum(ex.client != ex.upstream for ex in exchanges) >= 25
    # the client escapes every non-ASCII character: what the proxy wrote into its bodies too
    assert all(ex.client.isascii() for ex in exchanges) and all(ex.upstream.isascii() for ex in exchanges)
    # what the user pays: the session costs less with the proxy than without, cache-priced
    without, with_proxy = cache_priced(exchanges, counter)
    print(f"cache-priced input cost: {without.usd:.4f} USD without, {with_proxy.usd:.4f} USD with the proxy")
    assert with_proxy.usd < without.usd

    # item 4: the provider's cache figures are in the ledger, and the volatile parts are recorded
    sessions = open_database(f"sqlite:///{Path(proxy.home) / 'headroom.db'}")
    (total,) = cache_hit_rate(sessions, by=None)
    inp, read, write = recorded_usage(flows)
    assert (total.input_tokens, total.cache_read_tokens, total.cache_write_tokens) == (inp, read, write)
    assert total.rate == pytest.approx(read / (inp + read + write))
    want = {("tools-added",), ("tool-order", "git-status"), ("model",)}
    # the prefix log is written after the answers (a diagnostic nothing waits for)
    kinds = settled(lambda: {tuple(c.kind for c in e.changes) for e in prefix_events(sessions) if e.changes}, want)
    assert kinds == want


def with_json_output(flows: list[tuple[str, dict]], payload: str) -> tuple[list[tuple[str, dict]], str]:
    """The flows with the first ``Grep`` tool output replaced by ``payload`` wherever the client
    re-sends it (the same ``tool_use_id``); returns them and that id."""
    first = flows[1][1]["request"]["body"]["messages"]
    call = next(
        b
        for m in first
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_use" and b.get("name") == "Grep"
    )
    out = []
    for name, flow in flows:
        flow = json.loads(json.dumps(flow))
        for m in flow["request"]["body"]["messages"]:
            for b in m["content"] if isinstance(m["content"], list) else []:
                if b.get("type") == "tool_result" and b.get("tool_use_id") == call["id"]:
                    b["content"] = payload
        out.append((name, flow))
    return out, call["id"]


def test_compressed_block_is_resent_identically_after_restart_and_resume(upstream, proxy_factory, flows):
    payload = github_scenario("paginate-issues.json")
    changed, call_id = with_json_output(flows[:17], payload)  # session-a-01..17: turns, restart, resume
    proxy = proxy_factory(ADDON_SCRIPT, options=OPTIONS)
    exchanges = replay(proxy, upstream, changed, restart_after=7)
    violations, compared = prefix_violations(exchanges)
    print(
        f"\nwith a JSON tool output: {len(exchanges)} requests, {compared} parts compared, {len(violations)} prefix violations"
    )
    assert violations == [], (violations[:10], ledger_reasons(proxy))

    def sent_output(ex: Exchange) -> str | None:
        for m in json.loads(ex.upstream)["messages"]:
            for b in m["content"] if isinstance(m["content"], list) else []:
                if b.get("type") == "tool_result" and b.get("tool_use_id") == call_id:
                    return b["content"]
        return None

    outputs = [sent_output(ex) for ex in exchanges[1:]]
    assert all(o is not None for o in outputs)
    # compressed (reversibly) in turn 2, and the very same bytes in every later turn
    assert len(set(outputs)) == 1 and len(outputs[0]) < len(payload) / 2
    assert set(markers.find_marker_keys(outputs[0])) == {markers.offload_key(payload)}
    # the retrieve tool, once added, stays at the end of the tools the client sent
    for ex in exchanges[1:]:
        tools = json.loads(ex.upstream)["tools"]
        assert tools[-1]["name"] == retrieve.TOOL_NAME and len(tools) == len(json.loads(ex.client)["tools"]) + 1, (
            ex.name
        )


def test_timeout_fallback_keeps_the_prefix(upstream, proxy_factory, flows):
    proxy = proxy_factory(ADDON_SCRIPT, options=OPTIONS)
    first = flows[:6]
    exchanges = replay(proxy, upstream, first[:3], restart_after=99)
    proxy.options["headroom_compress_timeout_seconds"] = "0.000001"  # every plan times out from now on
    exchanges += replay(proxy, upstream, first[3:], restart_after=0)
    violations, _ = prefix_violations(exchanges)
    assert violations == [], (violations[:5], ledger_reasons(proxy), proxy.log_text()[-3000:])
