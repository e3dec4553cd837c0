"""Codex CLI 0.171 over the Responses WebSocket through ``headroom wrap`` when the provider fails
the proxy's follow-up (issue 36): the scripted task of tests/e2e/agents/test_codex.py, whose model
calls ``headroom_retrieve`` once; the first follow-up the proxy sends for that call gets a
rate-limit ``error`` event (``status`` 429, ``rate_limit_exceeded``, "Please try again in 1.2s")
after the response began. The proxy ends Codex's response with a ``response.failed`` carrying
that error, which Codex retries (on a new socket, after the stated delay): the model is asked
again, calls ``headroom_retrieve`` again, and this time the follow-up goes through and the task
ends. Before, the response ended as ``response.completed`` with a ``[headroom: retrieval failed
…]`` message, which Codex took as the model's last word (the task never finished)."""

from __future__ import annotations

import json

from tests.e2e.agents.test_codex import codex_exe, llm_requests, rollout, run_codex
from tests.support.scripted import ScriptedModel, make_workspace, play
from tests.support.upstream import RawReply, RecordedRequest, Upstream

RATE_LIMIT = {
    "type": "requests",
    "code": "rate_limit_exceeded",
    "message": "Rate limit reached for gpt-5.5 on tokens per min (TPM): Limit 30000, Used 29950, Requested 800. Please try again in 1.2s.",
    "param": None,
}
STARTED = {
    "type": "response.created",
    "sequence_number": 0,
    "response": {"id": "resp_fault", "object": "response", "status": "in_progress", "model": "gpt-5.5", "output": []},
}


def answers_retrieve(rec: RecordedRequest) -> bool:
    """Whether ``rec`` is the proxy's follow-up: a frame that answers a ``headroom_retrieve`` call."""
    body = rec.json if isinstance(rec.json, dict) else {}
    return any(
        isinstance(it, dict) and it.get("type") == "function_call" and it.get("name") == "headroom_retrieve"
        for it in body.get("input") or []
    )


def test_codex_retries_a_follow_up_the_provider_rate_limited(tmp_path):
    codex_exe()  # skips, saying why, when Codex is not installed
    with Upstream() as up:
        model = ScriptedModel(make_workspace(tmp_path / "project")).install(up)
        inner = up.responder
        assert inner is not None
        failed: list[int] = []

        def responder(rec: RecordedRequest) -> object:
            if rec.method == "WS" and not failed and answers_retrieve(rec):
                failed.append(rec.index)
                return RawReply(
                    chunks=(
                        json.dumps(STARTED).encode(),
                        json.dumps({"type": "error", "status": 429, "error": RATE_LIMIT}).encode(),
                    )
                )
            return inner(rec)

        up.responder = responder  # type: ignore[assignment]
        run = run_codex(tmp_path, up, model, websocket=True)
        out = run["out"]
        assert out.returncode == 0, out.stderr[-3000:]
        assert play.FINAL_SENTINEL in out.stdout, out.stdout[-2000:] + out.stderr[-2000:]
        assert model.invalid == [], model.invalid
        assert len(failed) == 1  # the follow-up the provider rate-limited
        frames = llm_requests(up)
        follow_ups = [r.index for r in frames if answers_retrieve(r)]
        assert len(follow_ups) == 2 and follow_ups[0] == failed[0]  # Codex retried; the next follow-up went through
        # the retry is Codex's own: a frame from Codex between the failed follow-up and the next one
        assert any(failed[0] < r.index < follow_ups[1] and not answers_retrieve(r) for r in frames)
        retrieves = [mv for _, mv in model.moves if isinstance(mv, play.Retrieve)]
        assert len(retrieves) == 2
        text, _ = rollout(run["codex_home"])
        assert "headroom_retrieve" not in text and "retrieval failed" not in text
