"""The play for an agent without tool calls (Aider): an edit, a failing test, the fixing edit.

Aider (PyPI ``aider-chat``) edits with SEARCH/REPLACE blocks in the model's text and runs
``--test-cmd`` itself after an edit (``--auto-test``). On a failing test it sends the command and
its whole output as a user message ("I ran this command: ... And got this output: ...") and asks
the model again. The play: the task (:data:`TASK`) asks for ``mul``; the model's first edit is
wrong (:data:`WRONG`), the test command prints a long build log and fails, the next edit
(:data:`FIX`) fixes it and says :data:`FINAL`; the test passes and Aider ends.

Used by tests/e2e/agents/test_aider.py and bench/bench_agents.py::

    ws = make_workspace(tmp / "ws")            # calc.py and check.py
    with Upstream() as up:
        play = Play()
        up.responder = play                    # answers /v1/chat/completions
        run(aider, *aider_args(f"{up.url}/v1"), cwd=ws)
        assert play.refused == []
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.scripted import chat
from tests.support.upstream import OPENAI_CHAT, RawReply, RecordedRequest, Reply

__all__ = [
    "FINAL",
    "TEST_CMD",
    "CALC",
    "CHECK_PY",
    "WRONG",
    "FIX",
    "EDIT",
    "TASK",
    "is_main",
    "Play",
    "make_workspace",
    "aider_args",
]

#: In the fixing answer (the caller checks Aider printed it).
FINAL = "FINAL: mul multiplies now and the tests pass."
#: The test command Aider runs after each edit.
TEST_CMD = "python3 -B check.py"
CALC = "def add(a, b):\n    return a + b\n"
#: The test: a 300-line build log, then a check of ``mul`` (exit 1 when it is wrong).
CHECK_PY = """import sys
from calc import add, mul
for i in range(300):
    print(f"2026-03-01 12:{i // 60:02d}:{i % 60:02d} INFO  [builder] compiling module_{i % 30}/file_{i}.c ({i + 1}/300)")
bad = [(a, b, mul(a, b)) for a in range(1, 4) for b in range(1, 4) if mul(a, b) != a * b]
if bad:
    print("FAILED test_mul: mul(a, b) != a * b for", bad)
    sys.exit(1)
print("2 passed")
"""
WRONG = "I will add mul.\n\ncalc.py\n```python\n<<<<<<< SEARCH\n    return a + b\n=======\n    return a + b\n\n\ndef mul(a, b):\n    return a + b\n>>>>>>> REPLACE\n```\n"
FIX = (f"The test shows mul adds. Fixing it.\n\ncalc.py\n```python\n<<<<<<< SEARCH\ndef mul(a, b):\n    return a + b\n"
       f"=======\ndef mul(a, b):\n    return a * b\n>>>>>>> REPLACE\n```\n\n{FINAL}\n")  # fmt: skip
EDIT = "<<<<<<< SEARCH"
#: The message Aider is started with.
TASK = "Add mul(a, b) to calc.py."


def make_workspace(directory: Path) -> Path:
    """Write ``calc.py`` (``add`` only) and ``check.py`` (the test) into ``directory`` (created
    if missing); returns its resolved path."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "calc.py").write_text(CALC)
    (directory / "check.py").write_text(CHECK_PY)
    return directory.resolve()


def aider_args(base_url: str) -> list[str]:
    """Aider's arguments for the play, non-interactive, with the model at ``base_url`` (an
    OpenAI-compatible ``…/v1``) through litellm's ``openai/`` provider: diff edits, no git, no
    update checks or analytics, :data:`TEST_CMD` run after each edit, :data:`TASK` as the
    message, ``calc.py`` in the chat."""
    return ["--model", "openai/play-1", "--openai-api-base", base_url, "--edit-format", "diff",
            "--no-git", "--yes-always", "--no-check-update", "--analytics-disable", "--no-show-model-warnings",
            "--no-pretty", "--no-show-release-notes", "--max-chat-history-tokens", "30000",
            "--test-cmd", TEST_CMD, "--auto-test", "--message", TASK, "calc.py"]  # fmt: skip


def is_main(body: Any) -> bool:
    """A request of Aider's coding conversation (its side requests, the history summarizer, carry
    no earlier assistant edits and no file listing)."""
    return any(
        m.get("role") == "user" and "calc.py\n```" in chat.view({"messages": [m]}).user for m in body["messages"]
    )


class Play:
    """The wrong edit, then (after the failing test output) the fix with the final text; other
    requests get a short text. Every request is checked strictly first (Chat Completions,
    :func:`tests.support.scripted.chat.problems`); ``refused``: ``(request index, problems)`` of
    each refused one. An ``Upstream.responder``."""

    def __init__(self) -> None:
        self.refused: list[tuple[int, list[str]]] = []

    def __call__(self, rec: RecordedRequest) -> Reply | RawReply | None:
        if rec.path_only != OPENAI_CHAT:
            return None
        found = chat.problems(rec.json)
        if found:
            self.refused.append((rec.index, found))
            return chat.refusal(found)
        if not is_main(rec.json):
            return Reply.text_reply("The user asked for a mul function in calc.py.")
        msgs = rec.json["messages"]
        start = next(
            (i for i, m in enumerate(msgs) if m["role"] == "user" and TASK in str(m.get("content"))), len(msgs)
        )
        # edits after the task (Aider's prompt carries example edits before it)
        edits = sum(1 for m in msgs[start:] if m["role"] == "assistant" and EDIT in str(m.get("content")))
        return Reply.text_reply(WRONG if edits == 0 else FIX)
