"""Aider (PyPI ``aider-chat``, in its own venv from ``scripts/agents``) through ``headroom wrap``
against the scripted model speaking Chat Completions (``--model openai/...`` goes through litellm
and the OpenAI SDK).

Aider has no tool calls: it edits with SEARCH/REPLACE blocks in the model's text and runs
``--test-cmd`` itself after an edit (``--auto-test``). On a failing test it sends the command and
its whole output as a user message ("I ran this command: ... And got this output: ...") and asks
the model again. The play: the task asks for ``mul``; the model's first edit is wrong, the test
command prints a long build log and fails, the next edit fixes it, the test passes and Aider ends.

Asserted: Aider completes with the fix and the final text; no request was one the provider
refuses; the proxy adds no tools to a tool-less client and the test output reaches the model
whole (it is the user's message); what went upstream before goes upstream again unchanged;
the ledger never pools the run in ``global`` (Aider states no working directory: the
conversation is its own scope); ``headroom learn`` over Aider's history reads the failing test
run (the ``--test-cmd`` of the command line Aider quotes) and the edit that fixed it, and says
that a fix of the code makes no rule (Aider's history holds no command output, and a test made
to pass by editing the code teaches nothing about how to run things).

Aider's test output reaches the model as the user's own text, not as a tool result: the proxy
leaves it whole. Only lossless transforms could apply to it (a tool-less client cannot call
``headroom_retrieve``, and the proxy adds no tools to it), and the user's messages are what the
user said: never rewritten.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.agents import HEADROOM, agent_exe, query, settled
from tests.support.proxy import free_port
from tests.support.scripted.aider_play import (
    CHECK_PY,
    EDIT,
    FINAL,
    TEST_CMD,
    WRONG,
    Play,
    aider_args,
    is_main,
    make_workspace,
)
from tests.support.upstream import OPENAI_CHAT, RecordedRequest, Upstream

GLOBAL = "global"


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Iterator[dict[str, Any]]:
    """Aider played once through ``headroom wrap``; what the tests look at."""
    exe = str(agent_exe("aider"))
    root = tmp_path_factory.mktemp("aider")
    home, hh = root / "home", root / "headroom-home"
    ws = make_workspace(root / "ws")
    home.mkdir()
    with Upstream() as up:
        play = Play()
        up.responder = play
        keep = ("PATH", "LANG", "TMPDIR")
        env = {k: os.environ[k] for k in keep if k in os.environ}
        env.update(
            HOME=str(home),
            HEADROOM_HOME=str(hh),
            TERM="dumb",
            NO_COLOR="1",
            LITELLM_LOCAL_MODEL_COST_MAP="True",
            OPENAI_API_KEY="sk-test-aider",
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
            exe,
            *aider_args(f"{up.url}/v1"),
        ]
        try:
            out = subprocess.run(cmd, cwd=ws, env=env, capture_output=True, text=True, timeout=300)
        finally:
            subprocess.run([HEADROOM, "proxy", "--stop", "--port", str(port)], env=env, capture_output=True, timeout=60)
        yield {
            "out": out,
            "up": up,
            "play": play,
            "ws": ws,
            "home": home,
            "hh": hh,
            "env": env,
            "requests": up.requests_to(OPENAI_CHAT),
        }


def main_thread(run: dict[str, Any]) -> list[RecordedRequest]:
    return [r for r in run["requests"] if isinstance(r.json, dict) and is_main(r.json)]


def test_completes_with_the_fix_and_the_final_text(run):
    out = run["out"]
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert FINAL in out.stdout, out.stdout[-3000:]
    assert (run["ws"] / "calc.py").read_text().endswith("def mul(a, b):\n    return a * b\n")
    assert run["play"].refused == [] and run["up"].errors == []
    assert len(main_thread(run)) == 2


def test_no_tools_added_and_the_test_output_reaches_the_model_whole(run):
    first, second = main_thread(run)
    for r in (first, second):
        assert "tools" not in r.json, "the proxy gave a tool-less client tools"
    log = subprocess.run(
        [sys.executable, "-B", "-c", CHECK_PY.replace("from calc import add, mul", "mul = lambda a, b: a + b")],
        capture_output=True,
        text=True,
    ).stdout
    ran = [m["content"] for m in second.json["messages"] if m["role"] == "user" and TEST_CMD in str(m["content"])]
    assert ran and all(log in c for c in ran), "Aider's test output did not reach the model whole"


def test_what_went_upstream_goes_again_unchanged(run):
    first, second = main_thread(run)
    # Aider's head (system prompt, example conversation) up to its files message, which the
    # client itself rewrites after an edit: byte for byte as before
    files = next(i for i, m in enumerate(first.json["messages"]) if "calc.py\n```" in str(m["content"]))
    assert second.json["messages"][:files] == first.json["messages"][:files]
    # the model's first answer comes back in the next request as the model gave it (Aider
    # strips the trailing newline itself) and as it was sent before
    mine = [m for m in second.json["messages"] if m["role"] == "assistant" and m["content"] == WRONG.rstrip("\n")]
    assert len(mine) == 1


def test_the_conversation_is_its_own_scope_never_global(run):
    db = run["hh"] / "headroom.db"

    got = settled(lambda: query(db, "select project from request_outcomes"), lambda r: len(r) >= len(run["requests"]))
    projects = {p for (p,) in got}
    assert GLOBAL not in projects, projects
    assert len(got) >= 2 and len(projects) == 1, projects  # one conversation, one scope


def test_aider_history_names_the_failing_test_and_learn_reads_it(run):
    history = (run["ws"] / ".aider.chat.history.md").read_text()
    # what Aider logs: the command line (with --test-cmd), each edit, and the test's outcome
    assert re.search(r"^> .*--test-cmd python3 -B check\.py", history, re.M)
    assert history.count(EDIT) == 2 and history.count("Attempt to fix test errors?") == 1
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
    # the failed test run is read as the configured test command, the edits as edits of calc.py;
    # the test passing after an edit is a fix of the code, which makes no rule: learn says so
    text = " ".join(out.stdout.split())
    assert "1 failed call(s); 1 were fixed, but only by content-specific changes" in text, out.stdout + out.stderr
    assert f"`{TEST_CMD}` failed, `{TEST_CMD}` then worked" in text, out.stdout + out.stderr
