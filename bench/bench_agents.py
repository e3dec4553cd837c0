"""Benchmark: real coding agents on the scripted task, direct and through the proxy.

Run ``python bench/bench_agents.py [--agents claude,...] [--passes N]`` from the project root
(after ``bash scripts/agents``, which installs the pinned agents).

Each agent (:data:`AGENTS`) plays a scripted task against the scripted model upstream (a local
HTTPS server speaking the provider's API strictly), on a fresh workspace and home, twice per
pass: straight to the upstream ("direct", trusting the upstream's CA through the agent's own
variables) and through ``headroom wrap`` ("proxy", a proxy of its own per run, started by
``wrap``). The plays are the end-to-end tests' own: agents with tool calls play
:mod:`tests.support.scripted.play` (a JSON array, a build log, a file read, a failing command
and its fix, a final answer) through the dialect adapters of :mod:`tests.support.scripted`
(Messages API, Responses API, Chat Completions, Gemini API); Aider, which makes no tool calls,
plays :mod:`tests.support.scripted.aider_play` (a wrong edit, a failing test with a long log,
the fixing edit). A run is completed when the agent exits 0 having printed the play's final
text and the upstream refused none of its requests.

Every model request the upstream received is priced as one session through a simulation of the
provider's prompt cache (:mod:`headroom_core.cache.cost_model`: Anthropic's breakpoints with
1.25x writes and 0.1x reads; OpenAI's automatic prefix caching, also used for Gemini's implicit
caching, whose prices cost_model does not list: Gemini's USD is at cost_model's price for an
unknown model, its saving in percent is the figure to read; tokens counted with the project's
counter, cl100k_base); token-count requests are free and not priced. Through the proxy the
model also gets the proxy's ``headroom_retrieve`` answer (one request more): part of the price
of using it.

Columns: requests, input tokens and cache-priced input cost (USD) direct and through the proxy,
the saving, the median wall time of the agent run (start to exit) and what the proxy added to
it, and the median time the proxy took to start (``wrap`` starts it once; later runs reuse it:
not part of the agent run's time). Adding an agent is one :class:`Agent` entry: its
``scripts/agents`` name, its command line, environment and trust variables, its pricing and its
play.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from headroom_core.cache.cost_model import ZERO, AnthropicCache, Blocks, Cost, OpenAICache  # noqa: E402
from headroom_core.compress.tokens import TokenCounter  # noqa: E402
from tests.support.agents import Wrapped, agents_dir, base_env  # noqa: E402
from tests.support.proxy import free_port  # noqa: E402
from tests.support.scripted import ScriptedModel, aider_play, make_workspace, play  # noqa: E402
from tests.support.upstream import RecordedRequest, Upstream  # noqa: E402


@dataclass(frozen=True)
class Staged:
    """A play set up for one run: the ``workspace``, the ``prompt`` to start the agent with, the
    ``final`` text a completed run prints, and ``refused()``: the requests the upstream refused
    as invalid so far."""

    workspace: Path
    prompt: str
    final: str
    refused: Callable[[], Sequence[object]]


def shared_play(root: Path, up: Upstream) -> Staged:
    """The task of :mod:`tests.support.scripted.play` on a new workspace under ``root``, its
    scripted model (every dialect adapter) answering ``up``."""
    task = make_workspace(root / "workspace")
    model = ScriptedModel(task).install(up)
    return Staged(task.workspace, play.PROMPT, play.FINAL_SENTINEL, lambda: model.invalid)


def edit_play(root: Path, up: Upstream) -> Staged:
    """The play of :mod:`tests.support.scripted.aider_play` (an agent without tool calls)."""
    ws = aider_play.make_workspace(root / "workspace")
    p = aider_play.Play()
    up.responder = p
    return Staged(ws, aider_play.TASK, aider_play.FINAL, lambda: p.refused)


@dataclass(frozen=True)
class Agent:
    """One agent to measure: ``name`` (as ``scripts/agents`` installs it), ``command(exe,
    staged, upstream)`` -> argv, ``env(home, upstream)`` -> the variables it needs (its HOME and
    config, the upstream URL, a dummy key), ``trust``: the variables that make it trust a CA
    (the direct run points them at the upstream's CA; ``wrap`` sets its own), ``unset``:
    variables of the caller's environment it must not see, ``pricing`` (``anthropic`` or
    ``openai``: the cache simulation) and ``stage``: its play."""

    name: str
    command: Callable[[Path, Staged, Upstream], list[str]]
    env: Callable[[Path, Upstream], dict[str, str]]
    trust: tuple[str, ...]
    pricing: str
    stage: Callable[[Path, Upstream], Staged] = shared_play
    unset: tuple[str, ...] = ()


def _claude_env(home: Path, up: Upstream) -> dict[str, str]:
    return {
        "HOME": str(home), "IS_SANDBOX": "1", "ANTHROPIC_BASE_URL": up.url, "ANTHROPIC_API_KEY": "sk-ant-bench-not-a-key",
        "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "TERM": "dumb",
    }  # fmt: skip


def _codex_env(home: Path, up: Upstream) -> dict[str, str]:
    """Codex CLI over HTTP (Responses API, SSE) with a custom provider at the upstream, in a
    ``CODEX_HOME`` of its own (its config written here)."""
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(
        f'model = "gpt-5.5"\nmodel_provider = "scripted"\n\n[model_providers.scripted]\nname = "scripted"\n'
        f'base_url = "{up.url}/v1"\nwire_api = "responses"\nenv_key = "SCRIPTED_API_KEY"\nsupports_websockets = false\n'
    )
    return {
        "HOME": str(home),
        "CODEX_HOME": str(codex_home),
        "SCRIPTED_API_KEY": "sk-bench-not-a-key",
        "COLUMNS": "200",
    }


def _opencode_env(home: Path, up: Upstream) -> dict[str, str]:
    """opencode with an ``@ai-sdk/openai-compatible`` provider (Chat Completions) at the upstream."""
    cfg = home / ".config" / "opencode"
    cfg.mkdir(parents=True, exist_ok=True)
    cfg.joinpath("opencode.json").write_text(
        json.dumps(
            {
                "provider": {
                    "scripted": {
                        "npm": "@ai-sdk/openai-compatible",
                        "name": "Scripted",
                        "options": {"baseURL": f"{up.url}/v1", "apiKey": "sk-bench-not-a-key"},
                        "models": {"play-1": {"name": "Play 1", "tool_call": True}},
                    }
                },
                "model": "scripted/play-1",
                "autoupdate": False,
                "share": "disabled",
            }
        )
    )
    return {
        "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"), "XDG_STATE_HOME": str(home / ".local" / "state"), "NO_COLOR": "1",
        "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_SHARE": "1",
    }  # fmt: skip


def _aider_env(home: Path, up: Upstream) -> dict[str, str]:
    """Aider (litellm's ``openai/`` provider; the base URL is on its command line)."""
    return {
        "HOME": str(home),
        "TERM": "dumb",
        "NO_COLOR": "1",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "OPENAI_API_KEY": "sk-bench-not-a-key",
    }


def _gemini_env(home: Path, up: Upstream) -> dict[str, str]:
    """Gemini CLI in API-key mode with the Gemini API's base URL at the upstream; user settings
    for a quiet headless run (no usage statistics, no update checks, the API-key sign-in, no
    folder-trust prompt) as tests/e2e/agents/test_gemini_cli.py writes them."""
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps({
        "privacy": {"usageStatisticsEnabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
    }))  # fmt: skip
    return {
        "HOME": str(home),
        "GEMINI_API_KEY": "AIza-bench-not-a-key",
        "GOOGLE_GEMINI_BASE_URL": up.url,
        "GEMINI_CLI_NO_RELAUNCH": "true",
        "TERM": "dumb",
    }


_NODE = ("NODE_EXTRA_CA_CERTS",)
AGENTS = [
    Agent("claude", lambda exe, s, up: [str(exe), "-p", s.prompt, "--dangerously-skip-permissions"], _claude_env, _NODE, "anthropic"),
    Agent("codex", lambda exe, s, up: [str(exe), "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "-C", str(s.workspace), s.prompt],
          _codex_env, ("CODEX_CA_CERTIFICATE", "SSL_CERT_FILE"), "openai", unset=("OPENAI_API_KEY", "OPENAI_BASE_URL")),
    Agent("opencode", lambda exe, s, up: [str(exe), "run", s.prompt], _opencode_env, _NODE, "openai"),
    Agent("aider", lambda exe, s, up: [str(exe), *aider_play.aider_args(f"{up.url}/v1")], _aider_env, ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"), "openai",
          stage=edit_play, unset=("OPENAI_BASE_URL", "OPENAI_API_BASE")),
    Agent("gemini", lambda exe, s, up: [str(exe), "-p", s.prompt, "--approval-mode", "yolo"], _gemini_env, _NODE, "openai",
          unset=("GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_CLOUD_PROJECT", "GEMINI_MODEL")),
]  # fmt: skip


@dataclass(frozen=True)
class Result:
    """One run: model requests, cache-priced cost, wall seconds of the agent run, seconds the
    proxy took to start (0 direct), and whether the task completed (``why`` when not)."""

    requests: int
    cost: Cost
    seconds: float
    completed: bool
    start_seconds: float = 0.0
    why: str = ""


def exe_of(name: str) -> Path | None:
    """The installed executable of agent ``name`` (``scripts/agents``'s stamp), else None."""
    found = sorted(agents_dir().glob(f"{name}-*/stamp"))
    if not found:
        return None
    exe = Path(found[-1].read_text().strip())
    return exe if os.access(exe, os.X_OK) else None


def model_requests(requests: Sequence[RecordedRequest]) -> list[RecordedRequest]:
    """The priced requests: JSON bodies POSTed to a model, token counts left out."""
    return [
        r
        for r in requests
        if r.method == "POST"
        and isinstance(r.json, dict)
        and not r.path_only.lower().endswith(("count_tokens", ":counttokens"))
    ]


def model_of(rec: RecordedRequest) -> str:
    """The model a request names: its body's ``model``, else the path's (Gemini:
    ``…/models/{model}:method``)."""
    body = rec.json if isinstance(rec.json, dict) else {}
    if isinstance(body.get("model"), str):
        return str(body["model"])
    tail = rec.path_only.rsplit("/models/", 1)[-1] if "/models/" in rec.path_only else ""
    return tail.split(":", 1)[0]


def price(requests: Sequence[RecordedRequest], pricing: str, counter: TokenCounter) -> Cost:
    """The session's input cost: each request in order through one simulated prompt cache."""
    cutter = Blocks(counter.count)
    cache = AnthropicCache() if pricing == "anthropic" else OpenAICache()
    total = ZERO
    for r in requests:
        total += cache.request(model_of(r), cutter.of(r.json))
    return total


def run_once(agent: Agent, exe: Path, through_proxy: bool, counter: TokenCounter, timeout: float) -> Result:
    """One run of ``agent`` on a fresh workspace, direct or through ``headroom wrap``."""
    with tempfile.TemporaryDirectory(prefix=f"bench-agents-{agent.name}-") as tmp:
        root = Path(tmp)
        home = root / "home"
        home.mkdir()
        with Upstream() as up:
            assert up.cert_path is not None and up.ca_path is not None
            staged = agent.stage(root, up)
            env = base_env(
                **agent.env(home, up), PWD=str(staged.workspace)
            )  # as a shell starting it there sets it (opencode reads PWD)
            for k in agent.unset:
                env.pop(k, None)
            argv = agent.command(exe, staged, up)
            start = 0.0
            if through_proxy:
                proxy = Wrapped(root / "headroom-home", free_port(), up.cert_path)
                try:
                    t0 = time.perf_counter()
                    proxy.run(
                        ["true"], env=env, cwd=staged.workspace, timeout=timeout
                    )  # starts the proxy; the agent's wrap reuses it
                    start = time.perf_counter() - t0
                    t0 = time.perf_counter()
                    try:
                        proc = proxy.run(argv, env=env, cwd=staged.workspace, timeout=timeout)
                    except subprocess.TimeoutExpired:
                        proc = subprocess.CompletedProcess(argv, -1, "", "timed out")
                    seconds = time.perf_counter() - t0
                finally:
                    proxy.stop()
            else:
                env.update(dict.fromkeys(agent.trust, str(up.ca_path)))
                t0 = time.perf_counter()
                try:
                    proc = subprocess.run(
                        argv,
                        env=env,
                        cwd=staged.workspace,
                        capture_output=True,
                        text=True,
                        timeout=timeout,
                        stdin=subprocess.DEVNULL,
                    )
                except subprocess.TimeoutExpired:
                    proc = subprocess.CompletedProcess(argv, -1, "", "timed out")
                seconds = time.perf_counter() - t0
            reqs = model_requests(up.requests)
            refused = list(staged.refused())
            done = proc.returncode == 0 and staged.final in proc.stdout and not refused
            why = (
                ""
                if done
                else f"rc={proc.returncode} refused={refused[:2]} stdout={proc.stdout[-300:]!r} stderr={proc.stderr[-600:]!r}"
            )
            return Result(len(reqs), price(reqs, agent.pricing, counter), seconds, done, start, why)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agents", default=",".join(a.name for a in AGENTS), help="comma-separated agent names")
    ap.add_argument("--passes", type=int, default=1, help="runs per agent and mode (wall time: the median)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per run")
    args = ap.parse_args()
    counter = TokenCounter(Path(tempfile.mkdtemp(prefix="bench-agents-tok-")))
    table = Table(title="agents on the scripted task: direct vs through the proxy (cache-priced input)")
    for col in (
        "agent",
        "requests d/p",
        "tokens direct",
        "tokens proxy",
        "saved",
        "USD direct",
        "USD proxy",
        "saved",
        "wall s direct",
        "wall s proxy",
        "added s",
        "proxy start s",
        "completed",
    ):
        table.add_column(col, justify="left" if col == "agent" else "right")
    want = set(args.agents.split(","))
    for agent in AGENTS:
        if agent.name not in want:
            continue
        exe = exe_of(agent.name)
        if exe is None:
            print(f"{agent.name}: not installed (bash scripts/agents {agent.name}); skipped", file=sys.stderr)
            continue
        direct = [run_once(agent, exe, False, counter, args.timeout) for _ in range(args.passes)]
        proxied = [run_once(agent, exe, True, counter, args.timeout) for _ in range(args.passes)]
        for mode, runs in (("direct", direct), ("proxy", proxied)):
            for r in runs:
                if not r.completed:
                    print(f"{agent.name} {mode}: not completed: {r.why}", file=sys.stderr)
        d, p = direct[-1], proxied[-1]
        wd = statistics.median(r.seconds for r in direct)
        wp = statistics.median(r.seconds for r in proxied)
        start = f"{statistics.median(r.start_seconds for r in proxied):.1f}"
        ok = "yes" if all(r.completed for r in direct + proxied) else "NO"
        tok_saved = 100 * (d.cost.tokens - p.cost.tokens) / d.cost.tokens if d.cost.tokens else 0.0
        usd_saved = 100 * (d.cost.usd - p.cost.usd) / d.cost.usd if d.cost.usd else 0.0
        table.add_row(agent.name, f"{d.requests}/{p.requests}", f"{d.cost.tokens:,}", f"{p.cost.tokens:,}", f"{tok_saved:.1f}%",
                      f"{d.cost.usd:.4f}", f"{p.cost.usd:.4f}", f"{usd_saved:.1f}%", f"{wd:.1f}", f"{wp:.1f}", f"{wp - wd:+.1f}",
                      start, ok)  # fmt: skip
    Console(width=200).print(table)


if __name__ == "__main__":
    main()
