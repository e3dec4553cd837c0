"""opencode (npm ``opencode-ai``, installed by ``scripts/agents``) through ``headroom wrap`` against
the scripted model speaking Chat Completions (opencode's ``@ai-sdk/openai-compatible`` provider).

One run of ``opencode run`` on a scratch workspace plays the whole task: a JSON array on stdout,
a long build log, a file read, a command that fails (opencode reports only the error text: no
exit code, no error flag on the wire) and then its fix, one ``headroom_retrieve`` call with a key
from a marker the upstream saw, a final answer. Asserted: opencode finishes with the final text;
the JSON and the log went upstream compressed and the retrieve call gave back the exact JSON; no
request was one the provider refuses; the prefix rule; opencode's own storage (SQLite
``$XDG_DATA_HOME/opencode/opencode.db``) never holds the proxy's tool; the ledger names the
workspace as the project; live learning and ``headroom learn`` over opencode's storage find the
failed -> fixed pair.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from headroom_core.compress import markers
from tests.support.agents import HEADROOM, agent_exe, query, settled
from tests.support.proxy import free_port
from tests.support.scripted import ScriptedModel, chat, make_workspace, play
from tests.support.upstream import OPENAI_CHAT, RecordedRequest, Upstream

RETRIEVE = "headroom_retrieve"
GLOBAL = "global"  # the shared bucket no conversation may land in
JSON_CMD, LOG_CMD = "python3 list_records.py", "python3 build.py"
FAILING, FIXED = "python3 tool/stats.py", "python3 tools/stats.py"


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Iterator[dict[str, Any]]:
    """opencode played once through ``headroom wrap``; what the tests look at."""
    exe = agent_exe("opencode")
    root = tmp_path_factory.mktemp("opencode")
    home, hh = root / "home", root / "headroom-home"
    task = make_workspace(root / "ws")
    ws = task.workspace
    with Upstream() as up:
        model = ScriptedModel(task).install(up)
        cfg = home / ".config" / "opencode"
        cfg.mkdir(parents=True)
        cfg.joinpath("opencode.json").write_text(
            json.dumps(
                {
                    "provider": {
                        "scripted": {
                            "npm": "@ai-sdk/openai-compatible",
                            "name": "Scripted",
                            "options": {"baseURL": f"{up.url}/v1", "apiKey": "sk-test-opencode"},
                            "models": {"play-1": {"name": "Play 1", "tool_call": True}},
                        }
                    },
                    "model": "scripted/play-1",
                    "autoupdate": False,
                    "share": "disabled",
                }
            )
        )
        keep = ("PATH", "LANG", "TERM", "TMPDIR")
        env = {k: os.environ[k] for k in keep if k in os.environ}
        env.update(
            HOME=str(home),
            XDG_CONFIG_HOME=str(home / ".config"),
            XDG_DATA_HOME=str(home / ".local" / "share"),
            XDG_CACHE_HOME=str(home / ".cache"),
            XDG_STATE_HOME=str(home / ".local" / "state"),
            HEADROOM_HOME=str(hh),
            OPENCODE_DISABLE_MODELS_FETCH="1",
            OPENCODE_DISABLE_AUTOUPDATE="1",
            OPENCODE_DISABLE_LSP_DOWNLOAD="1",
            OPENCODE_DISABLE_SHARE="1",
            NO_COLOR="1",
        )
        port = free_port()
        cmd = [
            HEADROOM,
            "wrap",
            "--port",
            str(port),
            "--set",
            f"ssl_verify_upstream_trusted_ca={up.cert_path}",
            "--no-proxy",
            "",
            "--quiet",
            str(exe),
            "run",
            play.PROMPT,
        ]
        try:
            out = subprocess.run(cmd, cwd=ws, env=env, capture_output=True, text=True, timeout=300)
        finally:
            subprocess.run([HEADROOM, "proxy", "--stop", "--port", str(port)], env=env, capture_output=True, timeout=60)
        yield {
            "out": out,
            "up": up,
            "model": model,
            "ws": ws,
            "home": home,
            "hh": hh,
            "env": env,
            "requests": up.requests_to(OPENAI_CHAT),
        }


def main_thread(run: dict[str, Any]) -> list[RecordedRequest]:
    """The requests of the task's conversation (not opencode's title requests)."""
    return [r for r in run["requests"] if play.is_task(chat.conversation(r.json), chat.SHELL_TOOLS)]


def tool_text(req: RecordedRequest, command: str) -> str:
    """The tool message answering the ``bash`` call that ran ``command``, as the upstream saw it."""
    for o in chat.view(req.json).outputs:
        if o.arguments.get("command") == command:
            return o.text
    raise AssertionError(f"no output of {command!r} upstream")


def test_completes_with_the_final_text_and_no_request_refused(run):
    out = run["out"]
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert play.FINAL_SENTINEL in out.stdout, out.stdout[-3000:]
    assert run["model"].invalid == []
    steps = [m.step for _, m in run["model"].moves if isinstance(m, (play.Shell, play.Read, play.Retrieve))]
    assert steps == ["json", "log", "read", "fail", "fix", "retrieve"]
    assert run["up"].errors == []


def test_json_compressed_upstream_and_retrieve_gives_it_back(run):
    last = main_thread(run)[-1]
    original = play.records_text()
    sent = tool_text(last, JSON_CMD)
    assert len(sent) < len(original) * 0.4, (len(sent), len(original))
    assert markers.find_marker_keys(sent), sent[:500]
    # the proxy answered the retrieve call itself: its answer upstream is the exact original
    got = [o for o in chat.view(last.json).outputs if o.name == RETRIEVE]
    assert len(got) == 1 and original.strip() in got[0].text, got[0].text[:300] if got else "no retrieve answer"
    assert RETRIEVE in chat.view(last.json).tools


def test_build_log_compressed_upstream_keeping_its_errors(run):
    last = main_thread(run)[-1]
    log = play.build_log_text()
    sent_log = tool_text(last, LOG_CMD)
    assert len(sent_log) < len(log) * 0.5, (len(sent_log), len(log))
    for line in log.splitlines():
        if "error" in line:  # the two errors and the summary line are kept
            assert line in sent_log


def test_prefix_rule_holds(run):
    reqs = [
        r
        for r in main_thread(run)
        if chat.view(r.json).outputs[-1:] == () or chat.view(r.json).outputs[-1].name != RETRIEVE
    ]
    assert len(reqs) >= 6
    for a, b in zip(reqs, reqs[1:]):
        assert b.json["tools"] == a.json["tools"], f"tools changed between requests {a.index} and {b.index}"
        n = len(a.json["messages"])
        assert b.json["messages"][:n] == a.json["messages"], (
            f"earlier messages changed between requests {a.index} and {b.index}"
        )


def test_opencode_storage_never_holds_the_proxys_tool(run):
    data = run["home"] / ".local" / "share" / "opencode"
    db = data / "opencode.db"
    assert db.is_file()
    texts = [row[0] for row in query(db, "select data from part")]
    assert any(play.FINAL_SENTINEL in t for t in texts)  # the right place: the final answer is there
    for f in data.rglob("*"):
        if f.is_file():
            assert RETRIEVE.encode() not in f.read_bytes(), f"{f} names {RETRIEVE}"


def test_ledger_names_the_workspace(run):
    db = run["hh"] / "headroom.db"
    n = len(run["requests"])
    rows = settled(lambda: query(db, "select project from request_outcomes"), lambda r: len(r) >= n - 1)
    projects = [p for (p,) in rows]
    assert GLOBAL not in projects
    assert projects.count(str(run["ws"])) >= len(main_thread(run)) - 1, projects


def test_live_learning_records_the_failed_then_fixed_pair(run):
    db = run["hh"] / "headroom.db"
    ws = str(run["ws"])
    rows = settled(lambda: query(db, "select project, text from learn_evidence"), lambda r: bool(r))
    assert any(p == ws and FAILING in t and FIXED in t.replace(FAILING, "") for p, t in rows), rows
    failures = query(db, "select project, command, error from learn_failures")
    assert any(p == ws and FAILING in c and "No such file or directory" in e for p, c, e in failures), failures


def test_headroom_learn_finds_the_pair_in_opencodes_storage(run):
    env = dict(run["env"], HEADROOM_HOME=str(run["hh"].parent / "learn-home"), COLUMNS="300")
    out = subprocess.run(
        [HEADROOM, "learn", "--project", str(run["ws"]), "--dry-run", "--min-evidence", "1"],
        cwd=run["ws"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert FAILING in out.stdout and FIXED in out.stdout, out.stdout + out.stderr
