"""Benchmark: real coding agents on the scripted task, direct and through the proxy.

Run ``python bench/bench_agents.py [--agents claude,...] [--passes N]`` from the project root
(after ``bash scripts/agents``, which installs the pinned agents).

Each agent (:data:`AGENTS`) plays the scripted task of :mod:`tests.support.scripted.play` (a JSON
array, a build log, a file read, a failing command and its fix, a final answer) against the
scripted model upstream (a local HTTPS server speaking the provider's API), on a fresh workspace
and home, twice per pass: straight to the upstream ("direct") and through ``headroom wrap``
("proxy", a proxy of its own per run, started by ``wrap``). Every model request the upstream
received is priced as one session through a simulation of the provider's prompt cache
(:mod:`headroom_core.cache.cost_model`: Anthropic's breakpoints with 1.25x writes and 0.1x reads,
OpenAI's automatic prefix caching; tokens counted with the project's counter, cl100k_base);
token-count requests are free and not priced. Through the proxy the model also gets the
proxy's ``headroom_retrieve`` answer (one request more): part of the price of using it.

Columns: requests, input tokens and cache-priced input cost (USD) direct and through the proxy,
the saving, the median wall time of the agent run (start to exit) and what the proxy added to
it, and the median time the proxy took to start (``wrap`` starts it once; later runs reuse it:
not part of the agent run's time). Adding an agent is one :class:`Agent` entry: its ``scripts/agents`` name, its
command line and environment, and its pricing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
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
from tests.support.scripted import ScriptedModel, make_workspace, play  # noqa: E402
from tests.support.upstream import Upstream  # noqa: E402


@dataclass(frozen=True)
class Agent:
    """One agent to measure: ``name`` (as ``scripts/agents`` installs it), ``command(exe, task)``
    -> argv, ``env(home, upstream)`` -> the variables it needs (its HOME, the upstream URL, a
    dummy key, trust of the upstream's certificate for the direct run), and ``pricing``
    (``anthropic`` or ``openai``)."""

    name: str
    command: Callable[[Path, play.Task], list[str]]
    env: Callable[[Path, Upstream], dict[str, str]]
    pricing: str
    #: why the agent cannot talk to the scripted upstream directly ("" when it can): then only
    #: the run through the proxy is measured
    no_direct: str = ""


def _claude_env(home: Path, up: Upstream) -> dict[str, str]:
    return {
        "HOME": str(home), "IS_SANDBOX": "1", "ANTHROPIC_BASE_URL": up.url, "ANTHROPIC_API_KEY": "sk-ant-bench-not-a-key",
        "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "TERM": "dumb",
        "NODE_EXTRA_CA_CERTS": str(up.cert_path),  # the direct run trusts the upstream (wrap sets its own)
    }


def _codex_env(home: Path, up: Upstream) -> dict[str, str]:
    """Codex CLI over HTTP (Responses API, SSE) with a custom provider at the upstream, in a
    ``CODEX_HOME`` of its own (its config written here)."""
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(
        f'model = "gpt-5.5"\nmodel_provider = "scripted"\n\n[model_providers.scripted]\nname = "scripted"\n'
        f'base_url = "{up.url}/v1"\nwire_api = "responses"\nenv_key = "SCRIPTED_API_KEY"\nsupports_websockets = false\n'
    )
    return {"HOME": str(home), "CODEX_HOME": str(codex_home), "SCRIPTED_API_KEY": "sk-bench-not-a-key", "COLUMNS": "200",
            "CODEX_CA_CERTIFICATE": str(up.cert_path)}  # the direct run trusts the upstream (wrap sets its own bundle)


def _opencode_env(home: Path, up: Upstream) -> dict[str, str]:
    """opencode with an ``@ai-sdk/openai-compatible`` provider (Chat Completions) at the upstream."""
    cfg = home / ".config" / "opencode"
    cfg.mkdir(parents=True, exist_ok=True)
    cfg.joinpath("opencode.json").write_text(json.dumps({
        "provider": {"scripted": {"npm": "@ai-sdk/openai-compatible", "name": "Scripted",
                                  "options": {"baseURL": f"{up.url}/v1", "apiKey": "sk-bench-not-a-key"},
                                  "models": {"play-1": {"name": "Play 1", "tool_call": True}}}},
        "model": "scripted/play-1", "autoupdate": False, "share": "disabled",
    }))
    return {
        "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"), "XDG_STATE_HOME": str(home / ".local" / "state"), "NO_COLOR": "1",
        "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_SHARE": "1",
        "NODE_EXTRA_CA_CERTS": str(up.cert_path),
    }  # fmt: skip


AGENTS = [
    Agent("claude", lambda exe, task: [str(exe), "-p", play.PROMPT, "--dangerously-skip-permissions"], _claude_env, "anthropic"),
    Agent("codex", lambda exe, task: [str(exe), "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "-C", str(task.workspace), play.PROMPT],
          _codex_env, "openai", no_direct="Codex's TLS refuses the scripted upstream's self-signed CA:TRUE certificate (it needs a CA and a leaf)"),
    Agent("opencode", lambda exe, task: [str(exe), "run", play.PROMPT], _opencode_env, "openai"),
]


@dataclass(frozen=True)
class Result:
    """One run: model requests, cache-priced cost, wall seconds of the agent run, seconds the
    proxy took to start (0 direct), and whether the task completed."""

    requests: int
    cost: Cost
    seconds: float
    completed: bool
    start_seconds: float = 0.0


def exe_of(name: str) -> Path | None:
    """The installed executable of agent ``name`` (``scripts/agents``'s stamp), else None."""
    stamp = agents_dir() / f"{name}-"
    found = sorted(stamp.parent.glob(f"{name}-*/stamp"))
    if not found:
        return None
    exe = Path(found[-1].read_text().strip())
    return exe if os.access(exe, os.X_OK) else None


def price(bodies: list[dict], pricing: str, counter: TokenCounter) -> Cost:
    """The session's input cost: each body in order through one simulated prompt cache."""
    cutter = Blocks(counter.count)
    cache = AnthropicCache() if pricing == "anthropic" else OpenAICache()
    total = ZERO
    for b in bodies:
        total += cache.request(str(b.get("model", "")), cutter.of(b))
    return total


def run_once(agent: Agent, exe: Path, through_proxy: bool, counter: TokenCounter, timeout: float) -> Result:
    """One run of ``agent`` on a fresh workspace, direct or through ``headroom wrap``."""
    with tempfile.TemporaryDirectory(prefix=f"bench-agents-{agent.name}-") as tmp:
        root = Path(tmp)
        task = make_workspace(root / "workspace")
        home = root / "home"
        home.mkdir()
        with Upstream() as up:
            model = ScriptedModel(task).install(up)
            env = base_env(**agent.env(home, up), PWD=str(task.workspace))  # as a shell starting it there sets it (opencode reads PWD)
            argv = agent.command(exe, task)
            t0 = time.perf_counter()
            start = 0.0
            if through_proxy:
                assert up.cert_path is not None
                proxy = Wrapped(root / "headroom-home", free_port(), up.cert_path)
                env.pop("NODE_EXTRA_CA_CERTS", None)
                try:
                    proxy.run(["true"], env=env, cwd=task.workspace, timeout=timeout)  # starts the proxy; the agent's wrap reuses it
                    start = time.perf_counter() - t0
                    t0 = time.perf_counter()
                    proc = proxy.run(argv, env=env, cwd=task.workspace, timeout=timeout)
                    seconds = time.perf_counter() - t0
                finally:
                    proxy.stop()
            else:
                import subprocess

                try:
                    proc = subprocess.run(argv, env=env, cwd=task.workspace, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
                except subprocess.TimeoutExpired:
                    proc = subprocess.CompletedProcess(argv, -1, "", "timed out")
                seconds = time.perf_counter() - t0
            reqs = [r for r in up.requests if r.method == "POST" and not r.path_only.endswith("count_tokens") and isinstance(r.json, dict)]
            done = proc.returncode == 0 and play.FINAL_SENTINEL in proc.stdout and not model.invalid
            return Result(len(reqs), price([r.json for r in reqs], agent.pricing, counter), seconds, done, start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agents", default=",".join(a.name for a in AGENTS), help="comma-separated agent names")
    ap.add_argument("--passes", type=int, default=1, help="runs per agent and mode (wall time: the median)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per run")
    args = ap.parse_args()
    counter = TokenCounter(Path(tempfile.mkdtemp(prefix="bench-agents-tok-")))
    table = Table(title="agents on the scripted task: direct vs through the proxy (cache-priced input)")
    for col in ("agent", "requests d/p", "tokens direct", "tokens proxy", "saved", "USD direct", "USD proxy", "saved",
                "wall s direct", "wall s proxy", "added s", "proxy start s", "completed"):
        table.add_column(col, justify="left" if col == "agent" else "right")
    want = set(args.agents.split(","))
    for agent in AGENTS:
        if agent.name not in want:
            continue
        exe = exe_of(agent.name)
        if exe is None:
            print(f"{agent.name}: not installed (bash scripts/agents {agent.name}); skipped", file=sys.stderr)
            continue
        if agent.no_direct:
            print(f"{agent.name}: no direct run ({agent.no_direct}); through the proxy only", file=sys.stderr)
        direct = [] if agent.no_direct else [run_once(agent, exe, False, counter, args.timeout) for _ in range(args.passes)]
        proxied = [run_once(agent, exe, True, counter, args.timeout) for _ in range(args.passes)]
        p = proxied[-1]
        wp = statistics.median(r.seconds for r in proxied)
        start = f"{statistics.median(r.start_seconds for r in proxied):.1f}"
        ok = "yes" if all(r.completed for r in direct + proxied) else "NO"
        if not direct:
            table.add_row(agent.name, f"-/{p.requests}", "-", f"{p.cost.tokens:,}", "-", "-", f"{p.cost.usd:.4f}", "-", "-", f"{wp:.1f}", "-", start, ok)
            continue
        d = direct[-1]
        wd = statistics.median(r.seconds for r in direct)
        tok_saved = 100 * (d.cost.tokens - p.cost.tokens) / d.cost.tokens if d.cost.tokens else 0.0
        usd_saved = 100 * (d.cost.usd - p.cost.usd) / d.cost.usd if d.cost.usd else 0.0
        table.add_row(agent.name, f"{d.requests}/{p.requests}", f"{d.cost.tokens:,}", f"{p.cost.tokens:,}", f"{tok_saved:.1f}%",
                      f"{d.cost.usd:.4f}", f"{p.cost.usd:.4f}", f"{usd_saved:.1f}%", f"{wd:.1f}", f"{wp:.1f}", f"{wp - wd:+.1f}",
                      start, ok)  # fmt: skip
    Console(width=200).print(table)


if __name__ == "__main__":
    main()
