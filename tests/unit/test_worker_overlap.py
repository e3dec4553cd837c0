"""A request whose new tool outputs go partly to the compression worker (256 KiB and more, not
prose) and partly through the router in the plan's thread: the worker's job starts before the
thread compresses the others, and the request is forwarded byte for byte as when each output
waits for the one before (real outputs: a loghub log and a github-api payload)."""

from __future__ import annotations

import json
from pathlib import Path

from headroom_core import request_plan
from headroom_core.compress.worker import WORKER_MIN_CHARS
from headroom_core.request_plan import plan_request
from headroom_core.runtime import Runtime
from headroom_core.settings import load_settings
from tests.conftest import corpus_dir

HEADERS = {"content-type": "application/json", "user-agent": "claude-cli/1.0.62 (external, cli)", "x-api-key": "k"}


def body() -> bytes:
    log = (corpus_dir("logs") / "HDFS_2k.log").read_text()
    assert len(log) >= WORKER_MIN_CHARS
    outputs = [
        ("gh api repos/o/r/issues", (corpus_dir("github-api") / "paginate-issues.json").read_text()),
        ("journalctl -u hdfs", log),
    ]
    calls = [
        {"type": "tool_use", "id": f"toolu_{k}", "name": "Bash", "input": {"command": c}}
        for k, (c, _) in enumerate(outputs)
    ]
    results = [{"type": "tool_result", "tool_use_id": f"toolu_{k}", "content": t} for k, (_, t) in enumerate(outputs)]
    return json.dumps({
        "model": "claude-sonnet-4", "max_tokens": 1024,
        "tools": [{"name": "Bash", "description": "Runs a command.", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}],
        "messages": [{"role": "user", "content": "Why does the datanode drop blocks?"}, {"role": "assistant", "content": calls}, {"role": "user", "content": results}],
    }).encode()  # fmt: skip


def planned(home: Path, counter, monkeypatch, ahead: bool) -> tuple[bytes, list[str]]:
    """The forwarded body and the order in which the worker's job and the thread's compression
    began, with the worker's jobs started ahead (``ahead``) or each where the pipeline meets it."""
    rt = Runtime(load_settings({"home": str(home)}, env={}))
    rt.__dict__["counter"] = counter
    began: list[str] = []
    run, text = rt.compress_worker.run, request_plan.compress_text
    pool = request_plan._WORKER_WAITS
    # a job counts as begun when this thread hands it over (started ahead) or calls it
    monkeypatch.setattr(
        request_plan,
        "_WORKER_WAITS",
        type("Pool", (), {"submit": staticmethod(lambda fn, *a: began.append("worker") or pool.submit(fn, *a))})(),
    )
    monkeypatch.setattr(
        rt.compress_worker,
        "run",
        lambda job, budget: (None if began.count("worker") else began.append("worker")) or run(job, budget),
    )
    monkeypatch.setattr(request_plan, "compress_text", lambda *a, **k: began.append("thread") or text(*a, **k))
    if not ahead:
        monkeypatch.setattr(request_plan, "_start_worker_jobs", lambda *a, **k: {})
    try:
        plan = plan_request(rt, "POST", "/v1/messages", HEADERS, body())
        assert plan.action == "rewrite" and plan.body is not None, plan.reason
        return plan.body, began
    finally:
        rt.compress_worker.close()


def test_the_workers_job_starts_first_and_the_bytes_are_the_same(tmp_path, counter, monkeypatch):
    ahead, order = planned(tmp_path / "a", counter, monkeypatch, True)
    monkeypatch.undo()
    one_by_one, order_before = planned(tmp_path / "b", counter, monkeypatch, False)
    assert order_before == ["thread", "worker"]  # the JSON first in the conversation, then the log
    assert order == ["worker", "thread"]  # the log's job started before the JSON was compressed
    assert ahead == one_by_one
    assert len(ahead) < len(body()) // 3  # both outputs compressed
