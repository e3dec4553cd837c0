"""``headroom learn``'s optional LLM pass (:mod:`headroom_core.learn.rephrase`) through the real
``anthropic`` SDK to the local upstream server (moved from ``tests/unit/test_learn_offline.py``:
it needs a server)."""

from __future__ import annotations

import json

from headroom_core.learn.pairing import find_pairs
from headroom_core.learn.rules import rule_for_pair
from headroom_core.learn.steps import make_step


def test_optional_llm_pass_rephrases_and_merges_through_the_messages_api(upstream):
    """The provider is the local upstream (the one thing mocked); the reply is accepted only
    when it keeps every backticked command."""
    import anthropic

    from headroom_core.learn.rephrase import rephrase
    from tests.support.clients import direct_http_client
    from tests.support.upstream import Reply

    a = rule_for_pair(
        find_pairs(
            [
                make_step("Bash", {"command": "pytest tests"}, "pytest: command not found", is_error=True),
                make_step("Bash", {"command": "python -m pytest tests"}, "ok"),
            ]
        )[0]
    )
    b = rule_for_pair(
        find_pairs(
            [
                make_step("Bash", {"command": "pytest tests -x"}, "pytest: command not found", is_error=True),
                make_step("Bash", {"command": "python -m pytest tests -x"}, "ok"),
            ]
        )[0]
    )
    same = "Run the tests as `python -m pytest tests` (plain `pytest tests` is not installed); the same for `pytest tests -x` -> `python -m pytest tests -x`."
    upstream.script(Reply.text(json.dumps([{"id": a.id, "text": same}, {"id": b.id, "text": same}])))
    client = anthropic.Anthropic(
        base_url=upstream.url, api_key="test-key", http_client=direct_http_client(upstream), max_retries=0
    )
    out, note = rephrase([a, b], client)
    assert [(r.text, r.evidence) for r in out] == [(same, 2)] and note == "LLM pass: 2 rules -> 1"
    assert "python -m pytest tests" in upstream.last.json["messages"][0]["content"]
    # a reply that drops a command is refused: the deterministic rules stay
    upstream.script(
        Reply.text(
            json.dumps([{"id": a.id, "text": "Use the module form of the test runner."}, {"id": b.id, "text": b.text}])
        )
    )
    kept, note = rephrase([a, b], client)
    assert [r.text for r in kept] == [a.text, b.text] and "lost a command" in note
