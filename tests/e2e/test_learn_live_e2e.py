"""The live learner end to end: the Anthropic SDK through a real ``mitmdump -s addons/headroom.py``
to the local upstream. A scripted agent runs ``pytest tests`` (fails: command not found) and then
``python -m pytest tests`` (works) in session after session; at the evidence threshold (default
5) the rule is persisted, and the next request of the project carries the past-failures block.
Another project never sees it; a bypassed request is neither learned from nor changed."""

from __future__ import annotations

import json
import time

import pytest

from headroom_core.db.engine import open_database
from headroom_core.inject import BLOCK_HEADER
from headroom_core.learn.live import BLOCK_TITLE
from headroom_core.learn.rules import content_hash
from headroom_core.learn.store import LearnStore
from tests.support.clients import anthropic_client
from tests.support.proxy import ADDON_SCRIPT

MODEL = "claude-sonnet-4-5"
PROJECT_A = "/work/projects/alpha"
PROJECT_B = "/work/projects/beta"
RULE = "`pytest tests` fails (command not found); use `python -m pytest tests`"
RULE_ID = content_hash("command", "pytest tests\0python -m pytest tests")


@pytest.fixture(scope="module")
def proxy(module_proxy_factory):
    return module_proxy_factory(ADDON_SCRIPT)


@pytest.fixture(scope="module")
def store(proxy) -> LearnStore:
    return LearnStore(open_database(f"sqlite:///{proxy.home / 'headroom.db'}"))


def system(project: str) -> str:
    return f"You are a coding agent.\n<env>\nWorking directory: {project}\n</env>"


def failing_then_fixed(task: str) -> list[dict]:
    """One agent turn: ``pytest tests`` fails, ``python -m pytest tests`` passes."""
    return [
        {"role": "user", "content": task},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "Bash",
                    "input": {"command": "pytest tests", "description": "Run the tests"},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "is_error": True,
                    "content": "bash: line 1: pytest: command not found",
                }
            ],
        },
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_2",
                    "name": "Bash",
                    "input": {"command": "python -m pytest tests", "description": "Run the tests"},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": "============ 3 passed in 0.02s ============",
                }
            ],
        },
    ]


def send(client, project: str, messages: list[dict], **kw):
    return client.messages.create(model=MODEL, max_tokens=64, system=system(project), messages=messages, **kw)


def injected(rec) -> str:
    """The proxy's block in the latest user message upstream received ('' if none)."""
    last = rec.json["messages"][-1]
    content = last["content"] if isinstance(last["content"], list) else []
    texts = [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]
    return "\n".join(t for t in texts if t.startswith(BLOCK_HEADER))


def settled(read, want, timeout: float = 60.0):
    """``read()`` once it returns ``want`` (learning runs after the response is forwarded, so a
    test reading the database polls), else its last value after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = read()
        if got == want or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


def test_rule_persisted_at_threshold_then_fed_back_and_projects_stay_apart(upstream, proxy, store):
    client = anthropic_client(upstream, proxy)
    for i in range(1, 6):
        send(client, PROJECT_A, failing_then_fixed(f"task {i}: run the test suite"))
        # one pair per session, however often sent (the longer resend of session 1 is learned
        # from before session 2's request goes on: same client)
        assert settled(lambda: store.evidence(PROJECT_A, RULE_ID), i) == i
        rules = store.rules(PROJECT_A)
        if i < 5:
            assert rules == [], f"persisted after {i} sessions, before the threshold of 5"
        if i == 1:
            # the same session again, one turn longer: the pair is not counted twice
            longer = failing_then_fixed("task 1: run the test suite") + [
                {"role": "assistant", "content": [{"type": "text", "text": "All 3 tests pass."}]},
                {"role": "user", "content": "thanks"},
            ]
            send(client, PROJECT_A, longer)
    want = [(RULE, 5, "live", "command")]  # the rule is written just after its fifth pair: poll
    assert settled(lambda: [(r.text, r.evidence, r.source, r.kind) for r in store.rules(PROJECT_A)], want) == want
    rules = store.rules(PROJECT_A)
    assert rules[0].rule_id == RULE_ID and store.evidence(PROJECT_A, RULE_ID) == 5

    # the next request of project A carries the rule as a past failure
    send(client, PROJECT_A, [{"role": "user", "content": "task 6: add a test for the parser"}])
    block = injected(upstream.last)
    assert block == f"{BLOCK_HEADER}\n{BLOCK_TITLE}\n- {RULE}\n</headroom-context>"
    # the client's own text went unchanged, before the block
    assert upstream.last.json["messages"][-1]["content"][0] == {
        "type": "text",
        "text": "task 6: add a test for the parser",
    }

    # project B never sees project A's failures or rules
    send(client, PROJECT_B, [{"role": "user", "content": "task 1 in beta"}])
    assert injected(upstream.last) == ""
    assert store.rules(PROJECT_B) == []


def test_bypassed_request_is_neither_learned_from_nor_changed(upstream, proxy, store):
    client = anthropic_client(upstream, proxy)
    project = "/work/projects/gamma"
    for i in range(6):
        send(client, project, failing_then_fixed(f"gamma task {i}"), extra_headers={"x-headroom-bypass": "true"})
        assert injected(upstream.last) == ""
    assert store.rules(project) == []
    send(client, project, [{"role": "user", "content": "gamma next"}])
    assert injected(upstream.last) == ""


def test_block_stops_once_the_corrected_command_works_first_time(upstream, proxy, store):
    client = anthropic_client(upstream, proxy)
    project = "/work/projects/delta"
    for i in range(2):
        send(client, project, failing_then_fixed(f"delta task {i}"))
    # a new session gets the (rule-less, below threshold) failure line
    send(client, project, [{"role": "user", "content": "delta task 2"}])
    assert (
        injected(upstream.last)
        == f"{BLOCK_HEADER}\n{BLOCK_TITLE}\n- `pytest tests` failed (command not found)\n</headroom-context>"
    )
    # the agent now runs the corrected command at once: the error stopped recurring
    send(
        client,
        project,
        [
            {"role": "user", "content": "delta task 3"},
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "toolu_9",
                        "name": "Bash",
                        "input": {"command": "python -m pytest tests"},
                    }
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "3 passed"}]},
        ],
    )
    send(client, project, [{"role": "user", "content": "delta task 4"}])
    assert injected(upstream.last) == ""


def test_openai_chat_and_responses_tool_outputs_are_learned_from(upstream, proxy, store):
    """Chat Completions ``role: "tool"`` messages and Responses ``function_call_output`` items
    carry no error flag: the exit code / error line in the output decides."""
    from tests.support.clients import openai_client

    client = openai_client(upstream, proxy)
    project = "/work/projects/epsilon"
    shell = lambda cmd: json.dumps({"command": ["bash", "-lc", cmd]})  # noqa: E731
    chat = [
        {"role": "system", "content": "You are Codex."},
        {"role": "user", "content": "run the tests"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "shell", "arguments": shell("pytest tests")}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "Exit code: 127\nOutput:\nbash: pytest: command not found"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "shell", "arguments": shell("python -m pytest tests")},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c2", "content": "Exit code: 0\nOutput:\n3 passed"},
    ]
    client.chat.completions.create(model="gpt-4.1", messages=chat, extra_headers={"x-headroom-project": project})
    assert settled(lambda: store.evidence(project, RULE_ID), 1) == 1
    items = [
        {"role": "user", "content": [{"type": "input_text", "text": "run the tests again"}]},
        {"type": "function_call", "call_id": "r1", "name": "shell", "arguments": shell("pytest tests")},
        {
            "type": "function_call_output",
            "call_id": "r1",
            "output": json.dumps({"output": "bash: pytest: command not found\n", "metadata": {"exit_code": 127}}),
        },
        {"type": "function_call", "call_id": "r2", "name": "shell", "arguments": shell("python -m pytest tests")},
        {
            "type": "function_call_output",
            "call_id": "r2",
            "output": json.dumps({"output": "3 passed\n", "metadata": {"exit_code": 0}}),
        },
    ]
    client.responses.create(model="gpt-4.1", input=items, extra_headers={"x-headroom-project": project})
    assert settled(lambda: store.evidence(project, RULE_ID), 2) == 2


# --- a team: what one proxy learned is there for the next proxy ------------------------------

#: Loaded before the addon in one proxy: its observers (learning) start 1.5 s late, as on a
#: loaded machine; the answer must still not reach the client before they have written.
SLOW_OBSERVERS = """
import time
import headroom_core.request_plan as request_plan

_real = request_plan.run_observers


def _late(rt, plan):
    time.sleep(1.5)
    _real(rt, plan)


request_plan.run_observers = _late
"""


def test_the_next_turn_on_another_proxy_finds_what_the_answer_taught(upstream, proxy_factory, tmp_path):
    """Two proxies of a team share one database. An agent's turn with a failed command goes
    through proxy A, whose learning runs late; the moment A's answer arrives, a new session of the
    same project goes through proxy B and already carries the failure as a past-failures line
    (before, the answer went out as soon as its ledger row was committed, and B found nothing)."""
    slow = tmp_path / "slow_observers.py"
    slow.write_text(SLOW_OBSERVERS)
    shared = {
        "headroom_db_url": f"sqlite:///{tmp_path / 'team.db'}",
        "headroom_secret_key_file": str(tmp_path / "team.key"),
    }
    a = proxy_factory([slow, ADDON_SCRIPT], options=shared)
    b = proxy_factory(ADDON_SCRIPT, options=shared)
    for p in (a, b):
        p.wait_for_log(r"headroom: ready", timeout=120)
    project = "/work/projects/team"
    send(anthropic_client(upstream, a), project, failing_then_fixed("team task 1"))
    send(anthropic_client(upstream, b), project, [{"role": "user", "content": "team task 2"}])
    assert (
        injected(upstream.last)
        == f"{BLOCK_HEADER}\n{BLOCK_TITLE}\n- `pytest tests` failed (command not found)\n</headroom-context>"
    )
