"""A worker process for compressing large tool outputs, so a timeout really stops the work.

Compressors run regular expressions, tree-sitter and Drain3: work a thread cannot be stopped in.
Inside the proxy a compression that runs over ``compress_timeout_seconds`` is given up (the
request goes on with earlier decisions only), but a thread would go on burning the CPU the other
flows need. Large outputs (at least :data:`WORKER_MIN_CHARS` characters) are therefore
compressed in one child process (``multiprocessing``, spawn start method) that is killed when
its job runs out of time and started again for the next one. Small outputs, and prose (which
needs the embedding model the proxy process holds), are compressed in the calling thread.

The child loads the token counter once; jobs go over a pipe one at a time (a lock serialises
callers). A killed or crashed child costs the job in flight only.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from headroom_core.compress.result import CompressResult
from headroom_core.errors import EnvironmentProblem

#: Outputs at least this long (characters) are compressed in the worker process.
WORKER_MIN_CHARS = 256 * 1024


class CompressTimeout(TimeoutError, EnvironmentProblem):
    """The worker did not finish a job in time; it was stopped (the message says how long)."""


@dataclass(frozen=True)
class Job:
    """One compression: :func:`headroom_core.compress.router.compress_text`'s arguments."""

    text: str
    query: str
    min_tokens: int
    min_saving_ratio: float
    hint: Any
    lossless: bool


def _serve(conn: Connection, home: str, tokenizer_path: str) -> None:
    """The child's loop: load the counter, then answer jobs until the pipe closes. Ctrl-C in
    the terminal reaches the whole process group: the child leaves it to its parent, which
    stops it by closing the pipe (no KeyboardInterrupt traceback of the child in the log). It
    starts with SIGINT blocked (:meth:`CompressWorker._start`), so a Ctrl-C during its
    interpreter's start-up and imports is dropped too; a parent gone before the child is ready
    ends it quietly."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # discards a Ctrl-C pending since the spawn
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    from headroom_core.compress.router import compress_text
    from headroom_core.compress.tokens import TokenCounter

    counter = TokenCounter(home, tokenizer_path)
    try:
        warm_compressors(counter)
    except Exception:  # noqa: BLE001 - a job would meet the same error and report it
        pass
    try:
        conn.send(None)  # ready: what a job needs is loaded (see CompressWorker.warm)
    except OSError:  # the parent is gone (stopped while this child started)
        return
    while True:
        try:
            job: Job = conn.recv()
        except (EOFError, OSError):
            return
        try:
            res: Any = compress_text(
                job.text,
                job.query,
                counter,
                min_tokens=job.min_tokens,
                min_saving_ratio=job.min_saving_ratio,
                hint=job.hint,
                lossless=job.lossless,
            )
        except Exception as e:  # noqa: BLE001 - reported to the caller, the worker goes on
            res = CompressResult.unchanged(job.text, "text", f"worker failed: {type(e).__name__}")
        conn.send(res)


def warm_compressors(counter: Any) -> None:
    """Load what compressing a tool output needs besides the code imported with the router: the
    vocabulary (``counter``, a :class:`~headroom_core.compress.tokens.TokenCounter`), the log and
    HTML compressors (imported on first use) and every tree-sitter grammar. Not the prose
    compressor's embedding model (about 490 MiB, loaded on first need). Raises what loading raises
    (:class:`~headroom_core.compress.tokens.TokenizerUnavailable`, ``ImportError``)."""
    from headroom_core.compress import code, html, logs  # noqa: F401 - imported to load them

    counter.count("warm up")
    for language in code.GRAMMARS:
        code.grammar(language)


class CompressWorker:
    """The worker process for one runtime (``home`` and ``tokenizer_path`` as the runtime's
    counter). Thread-safe; started by :meth:`warm` (the proxy's warm-up) or on first use."""

    def __init__(self, home: str, tokenizer_path: str = "") -> None:
        self._home = home
        self._tokenizer_path = tokenizer_path
        self._lock = threading.Lock()
        self._proc: Any = None
        self._conn: Connection | None = None

    def _start(self) -> Connection:
        """Spawn the child with SIGINT blocked (the calling thread's mask, which the child
        inherits; restored here at once), as multiprocessing's resource tracker is spawned: a
        Ctrl-C that reaches the process group while the child's interpreter starts is never a
        KeyboardInterrupt traceback in it (:func:`_serve` ignores SIGINT before unblocking it).
        The tracker is started first: starting it unblocks SIGINT in the calling thread."""
        import signal
        from multiprocessing import resource_tracker

        resource_tracker.ensure_running()
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        self._proc = ctx.Process(
            target=_serve, args=(child, self._home, self._tokenizer_path), name="headroom-compress", daemon=True
        )
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            self._proc.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
        child.close()
        self._conn = parent
        return parent

    def _stop(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.join(5)
        if self._conn is not None:
            self._conn.close()
        self._proc = self._conn = None

    def warm(self, timeout_s: float, stop: threading.Event | None = None) -> bool:
        """Start the worker now (if it does not run) and wait up to ``timeout_s`` seconds for it
        to have loaded what a job needs (:func:`warm_compressors`), so the first large output's
        compression time is compression only. True when it is ready; False past ``timeout_s``
        or as soon as ``stop`` is set (the proxy shutting down: checked every 0.1 s). Never
        raises (a worker that does not start is started again by the next job)."""
        deadline = time.monotonic() + timeout_s
        if not self._lock.acquire(timeout=max(0.0, timeout_s)):
            return False
        try:
            if self._proc is not None and self._proc.is_alive():
                return True
            self._stop()
            conn = self._start()
            while not conn.poll(max(0.0, min(0.1, deadline - time.monotonic()))):
                if time.monotonic() >= deadline or (stop is not None and stop.is_set()):
                    return False
            conn.recv()  # the ready marker
            return True
        except (EOFError, OSError):
            self._stop()
            return False
        finally:
            self._lock.release()

    def run(self, job: Job, timeout_s: float) -> CompressResult:
        """Compress ``job`` in the worker within ``timeout_s`` seconds (the wait for a busy worker
        included). Raises :class:`CompressTimeout` (the worker is stopped) when it takes longer,
        ``RuntimeError`` when the worker died."""
        deadline = time.monotonic() + timeout_s
        if not self._lock.acquire(timeout=max(0.0, timeout_s)):
            raise CompressTimeout(f"the compression worker stayed busy for {timeout_s:.1f} s")
        try:
            conn = self._conn if self._proc is not None and self._proc.is_alive() else None
            if conn is None:
                self._stop()
                conn = self._start()
            conn.send(job)
            while True:
                if not conn.poll(max(0.0, deadline - time.monotonic())):
                    self._stop()
                    raise CompressTimeout(
                        f"compressing {len(job.text)} characters took over {timeout_s:.1f} s; the worker was stopped"
                    )
                try:
                    res = conn.recv()
                except (EOFError, OSError) as e:
                    self._stop()
                    raise RuntimeError(f"the compression worker died: {e}") from e
                if res is not None:  # None: a new worker's ready marker, before the job's result
                    return res
        finally:
            self._lock.release()

    def close(self) -> None:
        """Stop the worker (if it runs)."""
        with self._lock:
            self._stop()
