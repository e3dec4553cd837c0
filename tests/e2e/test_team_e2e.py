"""A team: three ``mitmdump -s addons/headroom.py`` processes on one PostgreSQL, sharing one
``secret_key_file``, behave as one system (issue 18). One agent's session is spread over them
request by request, as a load balancer would; real ``anthropic`` SDK and httpx clients, a real
local upstream, the real embedding model.

The PostgreSQL server is this module's own (``tests/support/pg_cluster.py``: the test suite's
``scripts/postgres`` with a private folder and port), so its log holds exactly the errors these
proxies caused: the module ends by asserting there were none (no unique-constraint violation,
no deadlock, nothing).

- the three start at the same moment on an empty database: one migrates (Alembic under a
  PostgreSQL advisory lock), the others wait and find nothing to do;
- an original offloaded through proxy A is retrieved through proxy B, byte for byte (the proxy
  answers the ``headroom_retrieve`` call itself);
- the real Claude Code session, its turns sent to A, B, C, A, …: 0 prefix breaks earlier than
  the client's (:func:`headroom_core.cache.prefix_check.earlier_break`), and the upstream gets
  the very bytes a single proxy sends for the same session;
- a memory saved through A for project P is injected through C (and B) for P, never for Q;
- a rule learned from sessions through A and B is fed back by A, B and C, in P only;
- ``/stats`` and ``/metrics`` of every proxy, and ``headroom stats --json``, give the same
  totals: one row per request, none counted twice;
- 32 concurrent agents over the three proxies (``HEADROOM_TEAM_LOAD`` requests, 384 by
  default: two whole sessions per agent, bounded for a 2-core CI box; ``bench/bench_team.py``
  runs thousands): 0 errors, every retrieve answered byte-exact,
  every session's prefix kept, one ledger row per request, no deadlock.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from sqlalchemy import func, select

from headroom_core.cache import prefix_check
from headroom_core.compress import markers
from headroom_core.db.engine import PG_MAX_OVERFLOW, PG_POOL_SIZE, open_database
from headroom_core.db.models import RequestOutcome
from headroom_core.learn.store import LearnStore
from tests.conftest import CORPUS, flow_files, load_flow
from tests.e2e.test_cache_prefix_e2e import OPTIONS as REPLAY_OPTIONS
from tests.e2e.test_cache_prefix_e2e import Exchange, prefix_violations, recorded_reply, with_json_output
from tests.e2e.test_isolation_e2e import MEMORY, QUESTION, SYSTEM, carries_memory, headroom_cli
from tests.e2e.test_learn_live_e2e import RULE, failing_then_fixed, injected
from tests.e2e.test_learn_live_e2e import system as learn_system
from tests.e2e.test_memory_e2e import BASH, wait_for_model
from tests.support.clients import anthropic_client, http_client
from tests.support.pg_cluster import PgCluster
from tests.support.proxy import ADDON_SCRIPT, MitmProxy
from tests.support.team_load import TURNS, run_load
from tests.support.team_load import payloads as load_payloads
from tests.support.upstream import Reply
from tests.unit.test_request_plan import github_scenario

#: What every proxy of the team runs with (memory on, a rule after 2 sessions, compression
#: given all the time it needs on a loaded machine).
TEAM_OPTIONS = {"headroom_memory": "true", "headroom_learn_min_evidence": "2", **REPLAY_OPTIONS}
#: Requests of the concurrent run in the suite (32 agents x 2 sessions x 6 turns; the benchmark runs more).
LOAD_REQUESTS = int(os.environ.get("HEADROOM_TEAM_LOAD", "384"))
CONCURRENCY = 32
#: Proxy log lines that mean something went wrong (a request that failed, a lost write).
PROXY_ERRORS = re.compile(
    r"Traceback \(most recent call last\)|IntegrityError|UniqueViolation|[Dd]eadlock|OperationalError|QueuePool limit|"
    r"could not record|extension .* failed|compression failed|warm-up failed|stats page failed"
)


@dataclass
class Team:
    """The module's system: the cluster, the database URL, the three proxies, the shared key
    file, and how many LLM requests the tests sent through them (each must be one ledger row)."""

    cluster: PgCluster
    url: str
    proxies: list[MitmProxy]
    env: dict[str, str]
    sent: int = 0
    log_offset: int = 0
    started: float = field(default_factory=time.monotonic)

    def ask(self, upstream, n: int, project: str, question: str = QUESTION, key: str = "sk-ant-team-one") -> dict:
        """One request through proxy ``n`` for ``project``; the body the upstream received."""
        before = len(upstream.requests)
        client = anthropic_client(
            upstream, self.proxies[n], api_key=key, default_headers={"x-headroom-project": project}
        )
        client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=100,
            system=SYSTEM,
            tools=[BASH],
            messages=[{"role": "user", "content": question}],
        )
        self.sent += 1
        return upstream.requests[before].json

    def rows(self) -> int:
        with open_database(self.url)() as s:
            return s.scalar(select(func.count()).select_from(RequestOutcome)) or 0


def _start_at_once(proxies: list[MitmProxy]) -> None:
    errors: list[BaseException] = []

    def start(p: MitmProxy) -> None:
        try:
            p.start()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=start, args=(p,)) for p in proxies]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


@pytest.fixture(scope="module")
def team(upstream_server, tmp_path_factory):
    cluster, why = PgCluster.start_or_skip_reason()
    if cluster is None:
        pytest.skip(why)
    proxies: list[MitmProxy] = []
    try:
        offset = len(cluster.log_text())
        url = cluster.create_database("headroom_team_e2e")
        key_file = tmp_path_factory.mktemp("team-key") / "secret.key"
        env = {"HEADROOM_DB_URL": url, "HEADROOM_SECRET_KEY_FILE": str(key_file)}
        proxies = [MitmProxy(ADDON_SCRIPT, options=TEAM_OPTIONS, env=env, startup_timeout=120) for _ in range(3)]
        _start_at_once(proxies)
        t = Team(cluster, url, proxies, env, log_offset=offset)
        for p in proxies:
            wait_for_model(p)
        upstream_server.reset()
        yield t
    finally:
        for p in proxies:
            p.cleanup()
        cluster.destroy()


def proxy_errors(team: Team) -> list[str]:
    return [f"proxy {n}: {m.group(0)}" for n, p in enumerate(team.proxies) for m in PROXY_ERRORS.finditer(p.log_text())]


def test_three_proxies_started_at_once_migrate_once(team):
    logs = [p.log_text() for p in team.proxies]
    migrated = [n for n, log in enumerate(logs) if "headroom: database migrated to" in log]
    assert len(migrated) == 1, (migrated, [log[-2000:] for log in logs])
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(Path(__file__).resolve().parents[2] / "migrations"))
    script = ScriptDirectory.from_config(cfg)
    db = team.url.rsplit("/", 1)[1]
    at = tuple(r[0] for r in team.cluster.query("SELECT version_num FROM alembic_version", db))
    applied = {r.revision for r in script.iterate_revisions(at, "base")}  # with what they depend on
    assert applied == {r.revision for r in script.walk_revisions()}  # every migration, once
    assert team.cluster.errors(team.log_offset) == []  # no proxy tripped over another's CREATE TABLE
    assert proxy_errors(team) == []


def test_original_offloaded_through_a_is_retrieved_through_b(upstream, team):
    payload = github_scenario("paginate-issues.json")
    call = {"type": "tool_use", "id": "toolu_gh1", "name": "mcp__gh__issues", "input": {}}
    tools = [
        BASH,
        {
            "name": "mcp__gh__issues",
            "description": "List issues.",
            "input_schema": {"type": "object", "properties": {}},
        },
    ]
    turn1 = [
        {"role": "user", "content": "List the open issues. " * 200},
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_gh1", "content": payload}]},
    ]

    def client(n: int):
        return anthropic_client(
            upstream, team.proxies[n], api_key="sk-ant-team-one", default_headers={"x-headroom-project": "/team/P"}
        )

    upstream.script(Reply.text("30 are open."))
    client(0).messages.create(model="claude-sonnet-4-5", max_tokens=100, system=SYSTEM, tools=tools, messages=turn1)
    team.sent += 1
    sent1 = upstream.requests[-1].json
    forwarded = sent1["messages"][2]["content"][0]["content"]
    assert set(markers.find_marker_keys(forwarded)) == {markers.offload_key(payload)}
    key = markers.offload_key(payload)

    # the next turn of the same session goes to proxy B, where the model asks for the original
    turn2 = turn1 + [
        {"role": "assistant", "content": [{"type": "text", "text": "30 are open."}]},
        {"role": "user", "content": "Show issue 3 in full."},
    ]
    n = len(upstream.requests)
    upstream.script(Reply.tool_call("headroom_retrieve", {"key": key}), Reply.text("Issue 3 is about pagination."))
    msg = client(1).messages.create(
        model="claude-sonnet-4-5", max_tokens=100, system=SYSTEM, tools=tools, messages=turn2
    )
    team.sent += 1
    assert [b.type for b in msg.content] == ["text"] and msg.content[0].text == "Issue 3 is about pagination."
    sent2, follow = upstream.requests[n].json, upstream.requests[n + 1].json
    assert sent2["messages"][:3] == sent1["messages"]  # B replays what A sent (the cached prefix)
    assert sent2["tools"] == sent1["tools"]
    answer = follow["messages"][-1]["content"][0]
    assert answer["type"] == "tool_result" and answer["content"] == payload  # byte-exact, answered by B


def replay_spread(proxies: list[MitmProxy], upstream, flows: list[tuple[str, dict]]) -> list[Exchange]:
    """Send each flow's request through the next proxy in turn (A, B, C, A, …); the upstream
    answers with the recorded response."""
    clients = [http_client(p, timeout=300) for p in proxies]
    out: list[Exchange] = []
    try:
        for n, (name, flow) in enumerate(flows):
            body = flow["request"]["body"]
            path = "/v1/messages" if "max_tokens" in body else "/v1/messages/count_tokens"
            data, headers, chunks = recorded_reply(flow)
            upstream.raw(200, data, headers, chunks=chunks)
            raw = json.dumps(body).encode()
            r = clients[n % len(clients)].post(
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
        for c in clients:
            c.close()
    return out


def test_session_spread_over_three_proxies_sends_what_one_proxy_sends(upstream, team, proxy_factory):
    flows = [(f.name, load_flow(f)) for f in flow_files()]
    changed, _ = with_json_output(flows, github_scenario("paginate-issues.json"))  # a block compressed and offloaded
    spread = replay_spread(team.proxies, upstream, changed)
    team.sent += sum(1 for ex in spread if ex.path == "/v1/messages")
    violations, compared = prefix_violations(spread)
    assert violations == [], violations[:10]
    assert compared > 900
    assert sum(ex.client != ex.upstream for ex in spread) >= 25  # the proxies rewrote (compared real edits)

    single = proxy_factory(ADDON_SCRIPT, options=TEAM_OPTIONS)  # its own SQLite database and key
    upstream.reset()
    alone = replay_spread([single], upstream, changed)
    differ = [a.name for a, b in zip(spread, alone) if a.upstream != b.upstream]
    assert differ == [], (
        f"{len(differ)} of {len(spread)} requests reached the upstream differently through three proxies: {differ[:5]}"
    )


def test_memory_saved_through_a_is_injected_through_c_for_its_project_only(upstream, team):
    upstream.script(
        Reply.tool_call("memory_save", {"text": MEMORY, "kind": "fact"}, text="Noted."),
        Reply.text("Noted for next time."),
    )
    team.ask(
        upstream,
        0,
        "/team/P",
        "Remember this: migrations run with pnpm db:migrate; prisma migrate dev breaks the schema.",
    )
    question = QUESTION + " (team)"
    for_q = team.ask(upstream, 2, "/team/Q", question)
    for_p = team.ask(upstream, 2, "/team/P", question)
    for_p_b = team.ask(upstream, 1, "/team/P", question, key="sk-ant-team-two")  # another user of the team
    assert carries_memory(for_p) and carries_memory(for_p_b)
    assert not carries_memory(for_q)


def test_rule_learned_through_two_proxies_is_served_by_all(upstream, team):
    p, q = "/team/rules-p", "/team/rules-q"

    def send(n: int, project: str, messages: list[dict]) -> dict:
        before = len(upstream.requests)
        anthropic_client(upstream, team.proxies[n]).messages.create(
            model="claude-sonnet-4-5", max_tokens=64, system=learn_system(project), messages=messages
        )
        team.sent += 1
        return upstream.requests[before]

    send(0, p, failing_then_fixed("task 1: run the test suite"))  # session 1 through A
    send(1, p, failing_then_fixed("task 2: run the test suite"))  # session 2 through B: evidence 2
    rules = LearnStore(open_database(team.url)).rules(p)
    assert [(r.text, r.evidence, r.source) for r in rules] == [(RULE, 2, "live")]
    for n in range(3):  # a new session through each proxy is given the rule
        rec = send(n, p, [{"role": "user", "content": f"task {3 + n}: add a test for the parser"}])
        assert f"- {RULE}" in injected(rec), (n, injected(rec))
    rec = send(2, q, [{"role": "user", "content": "task 1 in another project"}])
    assert RULE not in injected(rec)


def _ledger_settled(team: Team, want: int, timeout: float = 120.0) -> int:
    """Rows in the ledger once it holds ``want`` (the ledger is written off the response path)."""
    deadline = time.monotonic() + timeout
    while True:
        n = team.rows()
        if n >= want or time.monotonic() > deadline:
            return n
        time.sleep(0.2)


def _metrics(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def test_stats_and_metrics_agree_on_every_proxy_with_no_row_counted_twice(team):
    assert _ledger_settled(team, team.sent) == team.sent  # one row per request, no more
    stats, metrics = [], []
    for p in team.proxies:
        with http_client(p, timeout=120) as c:
            r = c.get("http://headroom.localhost/stats")
            assert r.status_code == 200, r.text[:300]
            stats.append(r.json())
            r = c.get("http://headroom.localhost/metrics")
            assert r.status_code == 200, r.text[:300]
            metrics.append(_metrics(r.text))
    cli = json.loads(headroom_cli(str(team.proxies[0].home), "stats", "--json", env=team.env))
    assert stats[0] == stats[1] == stats[2]
    assert cli["totals"] == stats[0]["totals"] and cli["by"] == stats[0]["by"]
    assert stats[0]["totals"]["requests"] == team.sent
    assert sum(r["requests"] for r in stats[0]["by"]["agent"]) == team.sent
    assert metrics[0] == metrics[1] == metrics[2]
    assert sum(v for k, v in metrics[0].items() if k.startswith("headroom_requests_total{")) == team.sent


def test_concurrent_agents_over_three_proxies(upstream, team):
    offset = len(team.cluster.log_text())
    db = team.url.rsplit("/", 1)[1]
    peak, done = [0], threading.Event()

    def sample_connections() -> None:  # the database's connections while the load runs
        while not done.wait(0.5):
            peak[0] = max(
                peak[0], team.cluster.query(f"SELECT count(*) FROM pg_stat_activity WHERE datname = '{db}'")[0][0] - 1
            )

    sampler = threading.Thread(target=sample_connections, daemon=True)
    sampler.start()
    try:
        result = run_load(team.proxies, upstream, LOAD_REQUESTS, CONCURRENCY, load_payloads(CORPUS))
    finally:
        done.set()
        sampler.join()
    responder = upstream.responder
    print(
        f"\n{len(result.sent)} requests from {CONCURRENCY} agents over 3 proxies in {result.wall_seconds:.1f} s ({result.per_second:.1f}/s), {responder.retrieved} retrieved, {peak[0]} connections at most"
    )
    assert 0 < peak[0] <= 3 * (PG_POOL_SIZE + PG_MAX_OVERFLOW)  # the documented bound per proxy
    assert [f"{s.load_id} via {s.proxy}: {s.error}" for s in result.errors] == []
    assert len(result.sent) == LOAD_REQUESTS
    assert responder.mismatches == []
    retrieves = sum(1 for s in result.sent if s.load_id.endswith(f"/{TURNS - 1}"))
    assert responder.retrieved == retrieves > 0  # every last turn's retrieve answered, byte-exact

    # every session's prefix kept across the proxies (the first upstream request of each turn)
    first: dict[str, dict] = {}
    for rec in upstream.requests:
        first.setdefault(rec.header("x-load-id") or "", rec.json)
    clients = {s.load_id: json.loads(s.body) for s in result.sent}
    breaks = []
    for load_id, body in clients.items():
        agent, session, turn = load_id.split("/")
        if turn == "0":
            continue
        prev = f"{agent}/{session}/{int(turn) - 1}"
        b = prefix_check.earlier_break(clients[prev], body, first[prev], first[load_id])
        if b is not None:
            breaks.append((load_id, b))
    assert breaks == []

    team.sent += len(result.sent)
    assert _ledger_settled(team, team.sent) == team.sent  # one ledger row per request, none lost
    assert team.cluster.query(f"SELECT deadlocks FROM pg_stat_database WHERE datname = '{db}'")[0][0] == 0
    assert team.cluster.errors(offset) == []
    assert proxy_errors(team) == []


def test_no_database_error_in_the_whole_module(team):
    """Runs last: nothing any test did made PostgreSQL log an error."""
    assert team.cluster.errors(team.log_offset) == []
    assert proxy_errors(team) == []
