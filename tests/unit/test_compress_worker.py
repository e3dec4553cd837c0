"""The compression worker: large outputs are compressed in a child process that a timeout
really stops (issue: no flow ever waits), with the same result as in the proxy's own thread."""

from __future__ import annotations

from pathlib import Path

import pytest

from headroom_core.compress.router import Hint, compress_text
from headroom_core.compress.worker import WORKER_MIN_CHARS, CompressTimeout, CompressWorker, Job
from tests.conftest import TOKENIZER_HOME, corpus_dir


def big_log() -> str:
    text = (corpus_dir("logs") / "Hadoop_2k.log").read_text()
    while len(text) < WORKER_MIN_CHARS:
        text += text
    return text


@pytest.fixture(scope="module")
def worker():
    w = CompressWorker(str(TOKENIZER_HOME))
    yield w
    w.close()


def test_worker_gives_the_same_result_as_the_thread(worker, counter):
    text = big_log()
    job = Job(text, "which jobs failed?", 250, 0.1, Hint(tool_name="Bash"), False)
    got = worker.run(job, 600)
    want = compress_text(
        text, "which jobs failed?", counter, min_tokens=250, min_saving_ratio=0.1, hint=Hint(tool_name="Bash")
    )
    assert got == want and got.changed


def test_a_job_past_its_time_is_stopped_and_the_next_one_runs(worker):
    text = big_log()
    job = Job(text, "", 250, 0.1, None, False)
    worker.run(job, 600)  # started
    pid = worker._proc.pid
    with pytest.raises(CompressTimeout):
        worker.run(Job(text + "\nonce more", "", 250, 0.1, None, False), 0.001)
    assert worker._proc is None  # killed, not left running
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
    assert worker.run(job, 600).changed  # a fresh worker takes the next job


def test_a_warmed_worker_is_running_and_loaded_before_the_first_job(counter):
    """warm() starts the child and returns once it has loaded the compressors and the vocabulary
    (its ready marker read), so the first job only compresses; warming a running worker is a no-op."""
    w = CompressWorker(str(TOKENIZER_HOME))
    try:
        assert w.warm(600) is True
        pid = w._proc.pid
        assert w.warm(600) is True and w._proc.pid == pid
        text = big_log()
        got = w.run(Job(text, "", 250, 0.1, None, False), 600)
        assert got == compress_text(text, "", counter, min_tokens=250, min_saving_ratio=0.1) and w._proc.pid == pid
    finally:
        w.close()
