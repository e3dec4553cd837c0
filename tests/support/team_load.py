"""Load for a team of proxies: many agents, each agent's sessions spread request by request over
several proxies (as a load balancer would), concurrently. Shared by ``tests/e2e/test_team_e2e.py``
and ``bench/bench_team.py``.

Each agent is one asyncio task that runs sessions of :data:`TURNS` requests, one after the
other (an agent waits for its answer before its next turn). A session is a coding agent's
conversation (Anthropic Messages): a large system prompt, two tools, and per turn a tool call
with its output — JSON from the GitHub API (compressed and offloaded), a failing test command
and its fix (evidence for the live learner), build logs — the whole history re-sent every turn.
Request ``n`` of agent ``a`` goes to proxy ``(a + n) % len(proxies)``. Agents belong to
:data:`PROJECTS` projects and use :data:`KEYS` API keys (scopes shared by several agents, so
proxies write the same rows at once). Every fourth request streams (SSE).

In the last turn of each session the model calls ``headroom_retrieve`` for a key an earlier
turn's output was offloaded under (by whichever proxy compressed it); the proxy answering the
call must give back that output byte for byte (the :class:`Responder` checks every answer).

Every request carries ``x-load-id: <agent>/<session>/<turn>``, which the upstream sees, so the
bodies the upstream received can be matched with the client's.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from headroom_core.compress.markers import find_marker_keys, offload_key

from .clients import ssl_context
from .upstream import RecordedRequest, Reply

__all__ = ["TURNS", "PROJECTS", "KEYS", "Sent", "LoadResult", "Responder", "session_bodies", "run_load", "payloads"]

#: Requests per session.
TURNS = 6
#: Projects the agents work in (``x-headroom-project``).
PROJECTS = ("/team/alpha", "/team/beta", "/team/gamma")
#: API keys the agents use (two agents of one project may share one: a team's shared key).
KEYS = ("sk-ant-team-one", "sk-ant-team-two", "sk-ant-team-three", "sk-ant-team-four")
MODEL = "claude-sonnet-4-5"
SYSTEM = (
    "You are a coding agent working in the repository below.\n"
    + "Keep changes small and tested; follow the project's conventions. " * 160
)
TOOLS = [
    {
        "name": "Bash",
        "description": "Run a shell command.",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
    },
    {
        "name": "github_api",
        "description": "Call the GitHub REST API.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
]


def payloads(corpus: Path) -> list[str]:
    """Tool outputs for the load: each recorded GitHub API scenario (``corpus/github-api``)
    printed as a tool would (indented JSON; large arrays of similar objects), smallest first.
    Raises :class:`FileNotFoundError` when there is none."""
    out = [json.dumps(json.loads(f.read_text()), indent=2) for f in sorted((corpus / "github-api").glob("*.json"))]
    if not out:
        raise FileNotFoundError(f"no GitHub API scenarios under {corpus / 'github-api'}")
    return sorted(out, key=len)


def _log_output(agent: int, session: int) -> str:
    lines = [
        f"2024-05-0{1 + session % 9}T10:{i // 60:02d}:{i % 60:02d}Z INFO worker-{agent % 4} processed batch {i} in {10 + i % 7} ms"
        for i in range(240)
    ]
    lines[120] = f"2024-05-01T10:02:00Z ERROR worker-{agent % 4} batch 120 failed: connection reset by peer"
    return "\n".join(lines)


def session_bodies(agent: int, session: int, pages: list[str]) -> list[dict[str, Any]]:
    """The request bodies of one session, turn by turn (the history grows by a tool call and
    its output per turn)."""
    project = PROJECTS[agent % len(PROJECTS)]
    task = f"Agent {agent}, task {session}: find out why the nightly build of {project} is red and fix it."
    msgs: list[dict[str, Any]] = [{"role": "user", "content": task}]
    steps: list[tuple[str, dict, str, bool]] = [
        (
            "github_api",
            {"path": f"/repos/acme/app/issues?page={session}"},
            pages[(agent + session) % len(pages)],
            False,
        ),
        ("Bash", {"command": "pytest tests"}, "bash: line 1: pytest: command not found", True),
        (
            "Bash",
            {"command": "python -m pytest tests"},
            f"============ {3 + session % 5} passed in 0.0{agent % 10}s ============",
            False,
        ),
        ("Bash", {"command": "npm run build 2>&1"}, _log_output(agent, session), False),
        (
            "github_api",
            {"path": f"/repos/acme/app/labels?page={agent}"},
            pages[(agent + session + 1) % len(pages)],
            False,
        ),
    ]
    bodies = []
    for turn in range(TURNS):
        if turn:
            tool, args, output, err = steps[(turn - 1) % len(steps)]
            cid = f"toolu_{agent:03d}{session:03d}{turn:03d}"
            msgs = msgs + [
                {"role": "assistant", "content": [{"type": "tool_use", "id": cid, "name": tool, "input": args}]},
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": cid,
                            "content": output,
                            **({"is_error": True} if err else {}),
                        }
                    ],
                },
            ]
        bodies.append({"model": MODEL, "max_tokens": 256, "system": SYSTEM, "tools": TOOLS, "messages": msgs})
    return bodies


class Responder:
    """The upstream's model for the load (``Upstream.responder``): in a request marked
    ``x-load-retrieve`` it calls ``headroom_retrieve`` for the first key the forwarded body
    names; the proxy's follow-up (its ``tool_result`` last) gets a text answer, and the answer's
    text is checked against the original the key names (``originals``: key -> text).
    ``retrieved`` counts the answers, ``exact`` those equal to their original, ``mismatches``
    lists what was wrong."""

    def __init__(self, originals: dict[str, str]) -> None:
        self.originals = originals
        self.mismatches: list[str] = []
        self.retrieved = 0
        self.exact = 0
        self._lock = threading.Lock()

    def __call__(self, rec: RecordedRequest) -> Reply | None:
        body = rec.json if isinstance(rec.json, dict) else {}
        if rec.header("x-load-retrieve") != "1" or not body.get("messages"):
            return None
        last = body["messages"][-1]
        content = last.get("content") if isinstance(last.get("content"), list) else []
        answered = [
            b
            for b in content
            if isinstance(b, dict)
            and b.get("type") == "tool_result"
            and str(b.get("tool_use_id", "")).startswith("toolu_load_")
        ]
        if answered:
            got = answered[0].get("content")
            got = got if isinstance(got, str) else "".join(p.get("text", "") for p in got or [] if isinstance(p, dict))
            key = answered[0]["tool_use_id"][len("toolu_load_") :]
            with self._lock:
                self.retrieved += 1
                want = self.originals.get(key)
                if want is None or got != want:
                    self.mismatches.append(f"{rec.header('x-load-id')}: key {key}: got {got[:120]!r}")
                else:
                    self.exact += 1
            return Reply.text("Retrieved; continuing.")
        keys = find_marker_keys(rec.text)
        if not keys:
            with self._lock:
                self.mismatches.append(f"{rec.header('x-load-id')}: no marker to retrieve")
            return None
        key = keys[0]
        return Reply.tool_call("headroom_retrieve", {"key": key}, call_id=f"toolu_load_{key}")


@dataclass(frozen=True)
class Sent:
    """One client request of the load and how it ended (``error`` empty when it succeeded)."""

    load_id: str
    proxy: int
    body: bytes
    seconds: float
    status: int
    error: str = ""


@dataclass
class LoadResult:
    """All requests of a run, the wall time and the requests per second."""

    sent: list[Sent] = field(default_factory=list)
    wall_seconds: float = 0.0

    @property
    def errors(self) -> list[Sent]:
        return [s for s in self.sent if s.error]

    @property
    def per_second(self) -> float:
        return len(self.sent) / self.wall_seconds if self.wall_seconds else 0.0


def _check(status: int, data: bytes, stream: bool) -> str:
    """Why a response is not a complete successful answer ('' when it is)."""
    if status != 200:
        return f"HTTP {status}: {data[:200]!r}"
    if stream:
        return "" if b"event: message_stop" in data else f"stream without message_stop: {data[-200:]!r}"
    try:
        msg = json.loads(data)
    except ValueError:
        return f"not JSON: {data[:200]!r}"
    if msg.get("type") != "message" or not msg.get("content") or any(b.get("type") != "text" for b in msg["content"]):
        return f"not a text message: {data[:200]!r}"
    return ""


async def _agent(
    agent: int, quota: int, clients: list[httpx.AsyncClient], upstream_url: str, pages: list[str], out: list[Sent]
) -> None:
    n = 0
    session = 0
    while n < quota:
        bodies = session_bodies(agent, session, pages)
        for turn, body in enumerate(bodies):
            if n >= quota:
                return
            p = (agent + n) % len(clients)
            stream = n % 4 == 3
            retrieve = turn == len(bodies) - 1
            raw = json.dumps(dict(body, stream=True) if stream else body).encode()
            load_id = f"{agent}/{session}/{turn}"
            headers = {
                "content-type": "application/json",
                "user-agent": "claude-cli/1.0.62 (external, cli)",
                "anthropic-version": "2023-06-01",
                "x-api-key": KEYS[agent % len(KEYS)],
                "x-headroom-project": PROJECTS[agent % len(PROJECTS)],
                "x-load-id": load_id,
                **({"x-load-retrieve": "1"} if retrieve else {}),
            }
            t0 = time.perf_counter()
            try:
                r = await clients[p].post(upstream_url + "/v1/messages", content=raw, headers=headers)
                err = _check(r.status_code, r.content, stream)
                status = r.status_code
            except Exception as e:  # noqa: BLE001 - every failure is counted and shown
                err, status = f"{type(e).__name__}: {e}", 0
            out.append(Sent(load_id, p, raw, time.perf_counter() - t0, status, err))
            n += 1
        session += 1


async def _run(
    proxies: list[Any], upstream_url: str, requests: int, concurrency: int, pages: list[str], timeout: float
) -> LoadResult:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    clients = [
        httpx.AsyncClient(
            proxy=p.url, verify=ssl_context(p.ca_path), trust_env=False, timeout=httpx.Timeout(timeout), limits=limits
        )
        for p in proxies
    ]
    res = LoadResult()
    quotas = [requests // concurrency + (1 if a < requests % concurrency else 0) for a in range(concurrency)]
    t0 = time.perf_counter()
    try:
        await asyncio.gather(*(_agent(a, q, clients, upstream_url, pages, res.sent) for a, q in enumerate(quotas)))
    finally:
        res.wall_seconds = time.perf_counter() - t0
        for c in clients:
            await c.aclose()
    return res


def run_load(
    proxies: list[Any], upstream: Any, requests: int, concurrency: int, pages: list[str], timeout: float = 600.0
) -> LoadResult:
    """Send ``requests`` requests from ``concurrency`` agents through ``proxies`` (objects with
    ``url`` and ``ca_path``) to ``upstream``; its responder is set to a :class:`Responder`
    (returned on ``upstream.responder``) for the retrieve calls. Returns every request's outcome."""
    originals = {}
    for a in range(concurrency):
        for s in range(requests // (concurrency * TURNS) + 2):
            for m in session_bodies(a, s, pages)[-1]["messages"]:
                for b in m["content"] if isinstance(m["content"], list) else []:
                    if b.get("type") == "tool_result":
                        originals[offload_key(b["content"])] = b["content"]
    upstream.responder = Responder(originals)
    return asyncio.run(_run(proxies, upstream.url, requests, concurrency, pages, timeout))
