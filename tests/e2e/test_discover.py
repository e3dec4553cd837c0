"""``headroom discover`` on real session logs (Claude Code and SWE-agent from the corpus) and a
Codex rollout written here: the proxy's pipeline runs on every tool output and the figures
come out per tool, per content kind and per agent, adding up; nothing is written."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from headroom_core.compress.tokens import TokenCounter
from headroom_core.discover import outputs_of
from tests.conftest import TOKENIZER_HOME, corpus_dir
from tests.unit.test_request_plan import github_scenario

HEADROOM = str(Path(sys.executable).parent / "headroom")


def _codex_rollout(path: Path, output: str) -> Path:
    """A Codex rollout (the payload form Codex writes): one shell call whose output is ``output``."""
    records = [
        {
            "timestamp": "2025-09-01T10:00:00Z",
            "type": "session_meta",
            "payload": {"id": "s-1", "cwd": "/work/app", "timestamp": "2025-09-01T10:00:00Z"},
        },
        {
            "timestamp": "2025-09-01T10:00:01Z",
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "which issues are open?"}],
            },
        },
        {
            "timestamp": "2025-09-01T10:00:02Z",
            "type": "response_item",
            "payload": {
                "type": "function_call",
                "name": "shell",
                "call_id": "call_1",
                "arguments": json.dumps({"command": ["bash", "-lc", "gh api repos/o/r/issues"]}),
            },
        },
        {
            "timestamp": "2025-09-01T10:00:03Z",
            "type": "response_item",
            "payload": {
                "type": "function_call_output",
                "call_id": "call_1",
                "output": json.dumps({"output": output, "metadata": {"exit_code": 0}}),
            },
        },
    ]
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return path


def test_discover_reads_every_agent_and_adds_up(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    for p in sorted(corpus_dir("claude-code-sessions").glob("*.jsonl")) + sorted(
        corpus_dir("swe-agent").glob("*.traj")
    ):
        shutil.copy(p, logs / p.name)
    big = github_scenario("paginate-issues.json")
    _codex_rollout(logs / "rollout-2025-09-01T10-00-00-s-1.jsonl", big)
    (logs / "broken.traj").write_text("{not json")
    home = tmp_path / "home"
    env = {
        **{k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")},
        "HEADROOM_HOME": str(home),
        "COLUMNS": "80",
    }
    out = subprocess.run(
        [HEADROOM, "discover", "--from", str(logs), "--json"], env=env, capture_output=True, text=True, timeout=900
    )
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["files"] == 4 and list(d["unreadable"]) == [str(logs / "broken.traj")]
    # every tool output of the logs is found
    found = sum(1 for p in logs.iterdir() if p.name != "broken.traj" for _ in outputs_of(p))
    assert d["outputs"] == found
    assert set(d["by_source"]) == {"claude-code", "codex", "swe-agent"}
    for group in ("by_tool", "by_kind", "by_source"):
        for field in ("outputs", "before", "after", "saved"):
            assert sum(v[field] for v in d[group].values()) == d["total"][field], (group, field)
    # the Codex shell output (real GitHub API records) is JSON and most of it goes
    counter = TokenCounter(TOKENIZER_HOME)
    shell = d["by_tool"]["shell"]
    assert (
        shell["outputs"] == 1
        and shell["compressed"] == 1
        and shell["before"] == counter.count(big)
        and shell["saved_share"] > 0.5
    )
    assert d["by_kind"]["json"]["saved"] >= shell["saved"]
    # Claude Code reads are the latest view of their file when new: kept verbatim, counted
    assert d["by_tool"]["Read"]["saved"] == 0 and d["by_kind"]["latest file read (kept)"]["before"] > 0
    assert {t for t in d["by_tool"] if t.startswith("swe-agent:")} >= {"swe-agent:edit", "swe-agent:open"}
    assert not home.exists() or not (home / "headroom.db").exists()  # nothing stored
    table = subprocess.run(
        [HEADROOM, "discover", "--from", str(logs)], env=env, capture_output=True, text=True, timeout=900
    )
    assert table.returncode == 0
    text = table.stdout
    assert "per tool" in text and "per content kind" in text and "per agent" in text
    assert f"{d['total']['saved']:,} saved" in text and f"{shell['saved']:,}" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_discover_without_logs_says_where_it_looked(tmp_path):
    env = {
        **os.environ,
        "HEADROOM_HOME": str(tmp_path / "h"),
        "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"),
        "CODEX_HOME": str(tmp_path / "codex"),
    }
    out = subprocess.run(
        [HEADROOM, "discover", "--project", str(tmp_path)], env=env, capture_output=True, text=True, timeout=120
    )
    assert (
        out.returncode == 1
        and out.stdout.startswith(f"No session logs found for {tmp_path}.")
        and "--all" in out.stdout
    )
