"""The ``headroom_*`` mitmproxy options, parsed once in ``configure`` into a frozen Settings;
the proxy's warm-up, and its end on Ctrl-C or SIGTERM.

Stopping: ``headroom proxy`` in the foreground starts ``mitmdump`` with SIGINT blocked, so a
Ctrl-C while it imports and loads this script waits (it is not a KeyboardInterrupt traceback
out of an import); once mitmproxy has installed its signal handlers (the first turn of its
event loop) this addon takes SIGINT and SIGTERM (noting which came) and unblocks SIGINT. On
either signal the warm-up stops between its steps and logs nothing more, the compression worker
is stopped, and after mitmproxy's own shutdown (``done`` hooks: the ledger committed) the process
ends with ``os._exit``: 130 after Ctrl-C (one line, ``headroom: interrupted``), 0 after SIGTERM;
a signal before mitmproxy runs (its servers still starting, nothing served) ends it at once.
Without ``os._exit`` the interpreter's finalization meets threads still inside native code (the
tokenizers' Rust threads panic, "The Python interpreter is not initialized"; once a SIGSEGV).
"""

from __future__ import annotations

import asyncio
import atexit
import dataclasses
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Optional

from mitmproxy import ctx, exceptions

from headroom_core import heap
from headroom_core.cli.proxy_process import unmark_foreground
from headroom_core.compress.worker import warm_compressors
from headroom_core.gc_tuning import freeze_long_lived
from headroom_core.memory.service import service as memory_service
from headroom_core.runtime import Runtime
from headroom_core.settings import (
    Settings,
    SettingsError,
    headroom_home,
    load_settings,
    setting_help,
    unknown_environment,
)

OPTION_NAMES = [f.name for f in dataclasses.fields(Settings)]

log = logging.getLogger("headroom")


class State:
    """What the Headroom addons share: the runtime built from the current options; ``stopping``
    set once the proxy is shutting down (a signal, or mitmproxy's ``done``); ``exit_code`` the
    status a signal asks for (130 Ctrl-C, 0 SIGTERM; None: no signal came)."""

    def __init__(self) -> None:
        self.runtime: Runtime | None = None
        self.stopping = threading.Event()
        self.exit_code: int | None = None
        self.running = False
        #: (home, port) of this proxy's record as one run in a terminal (``headroom proxy``)
        self.record: tuple[Path, int] | None = None


#: Seconds after ``running`` the embedding model starts loading with memory on (mitmproxy's
#: start-up check, which exits on an error logged, ends within the same loop iteration).
MODEL_START_DELAY = 1.0
#: Seconds the warm-up waits for the compression worker process (spawned: a fresh interpreter
#: importing the compressors, about 1-2 s) before it calls the proxy ready without it.
WORKER_WARM_SECONDS = 20.0


class HeadroomOptions:
    """Declares ``--set headroom_<key>=…`` for every settings key; values set there win over
    ``HEADROOM_*`` environment variables and ``config.toml`` (docs/architecture.md precedence)."""

    def __init__(self, state: State) -> None:
        self.state = state

    def load(self, loader) -> None:
        heap.limit_arenas()  # threads made from now on share two malloc arenas, not 8 per core
        for name in OPTION_NAMES:
            loader.add_option(f"headroom_{name}", Optional[str], None, setting_help(name))
        # after logging's and multiprocessing's own (atexit runs the last registered first)
        atexit.register(_at_exit, self.state)
        try:
            # the loop's next turn: after mitmproxy has installed its signal handlers
            asyncio.get_running_loop().call_soon(self._take_signals)
        except RuntimeError:  # no running loop (a test loading the addon): mitmproxy's handlers stay
            pass

    def _take_signals(self) -> None:
        """SIGINT and SIGTERM shut mitmproxy down as its own handlers do, noting which came;
        then a Ctrl-C held back since the start (``headroom proxy`` blocks SIGINT) arrives."""
        self.state.record = (headroom_home(), ctx.options.listen_port)
        loop = asyncio.get_running_loop()
        for sig, code in ((signal.SIGINT, 130), (signal.SIGTERM, 0)):
            try:
                loop.add_signal_handler(sig, self._signalled, code)
            except (NotImplementedError, RuntimeError, ValueError):  # not on this platform or thread
                return
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

    def _signalled(self, code: int) -> None:
        if self.state.exit_code is None:
            self.state.exit_code = code
        self.state.stopping.set()
        if not self.state.running:
            # mitmproxy, stopped while it sets up its servers, returns without its done hooks and
            # leaves its log handlers on a closed event loop, where the warm-up thread's next
            # line (Alembic's) becomes a traceback; nothing has been served yet: end here
            _at_exit(self.state)
        ctx.master.shutdown()

    def done(self) -> None:
        """mitmproxy shuts down: the warm-up stops (and logs nothing more), the compression
        worker is stopped."""
        _stop(self.state)

    def running(self) -> None:
        self.state.running = True
        rt = self.state.runtime
        if rt is not None and rt.settings.memory:
            # memory search needs the embedding model from the first request: it loads in its
            # own thread, started just after mitmproxy's start-up (its error check exits on any
            # error logged until then, and a missing model only means text search)
            asyncio.get_running_loop().call_later(MODEL_START_DELAY, memory_service, rt)
        # mitmproxy keeps --set values of options nobody declared; a misspelt headroom_* would
        # silently do nothing
        unknown = sorted(k for k in getattr(ctx.options, "deferred", {}) if k.startswith("headroom_"))
        if unknown:
            log.warning(
                "headroom: unknown option(s) %s ignored; known: %s",
                ", ".join(unknown),
                ", ".join(f"headroom_{n}" for n in OPTION_NAMES),
            )
        for line in unknown_environment():
            log.warning("headroom: %s", line)

    def configure(self, updated) -> None:
        # only the settings' own options rebuild the runtime (other addons declare headroom_* options too)
        if self.state.runtime is not None and not any(
            u.startswith("headroom_") and u[len("headroom_") :] in OPTION_NAMES for u in updated
        ):
            return
        overrides = {
            n: getattr(ctx.options, f"headroom_{n}")
            for n in OPTION_NAMES
            if getattr(ctx.options, f"headroom_{n}") is not None
        }
        try:
            settings = load_settings(overrides)
        except SettingsError as e:
            raise exceptions.OptionsError(str(e)) from e
        self.state.runtime = rt = Runtime(settings)
        # open (and migrate) the database and load the vocabulary now, off the request path;
        # requests arriving meanwhile wait for it (headroom_core.readiness)
        rt.ready.begin()
        threading.Thread(target=_warm_up, args=(rt, self.state.stopping), name="headroom-warm-up", daemon=True).start()
        log.info("headroom: database %s, max body %d bytes", settings.database_url, settings.max_body_bytes)


def _warm_up(rt: Runtime, stopping: threading.Event) -> None:
    """Load what the first plan needs, step by step; once ``stopping`` is set (the proxy shuts
    down) it stops after the step it is in and logs nothing more."""
    # The embedding model (torch included, about 490 MiB resident) is not loaded here: with
    # memory on it starts loading once mitmproxy runs (see ``running``), otherwise prose/HTML
    # compression starts loading it the first time it needs it.
    heap.start_trimmer()
    try:
        for step in (
            lambda: rt.sessions,
            lambda: rt.sealer,
            lambda: rt.extensions,
            lambda: warm_compressors(rt.counter),
        ):
            if stopping.is_set():
                return
            step()
        if not rt.compress_worker.warm(WORKER_WARM_SECONDS, stopping) and not stopping.is_set():
            log.warning(
                "headroom: the compression worker was not ready within %.0f s; the first large output starts it",
                WORKER_WARM_SECONDS,
            )
    except Exception as e:  # noqa: BLE001 - requests will fail open and log it again
        rt.ready.end(f"{type(e).__name__}: {e}")
        if stopping.is_set():
            return
        log.exception("headroom: warm-up failed (database or tokenizer); traffic passes unchanged until it works")
        _recover_ledger(rt)  # the journal waits for the database, and is written once it opens
        return
    if stopping.is_set():
        return
    _recover_ledger(rt)
    # full collections stop walking what lives as long as the process; the collection before it
    # holds the GIL for 0.1-0.3 s: done before requests are let in (they wait for readiness, not
    # counted in their compression time), not over the first ones
    freeze_long_lived("the warm-up")
    rt.ready.end()
    if not stopping.is_set():
        log.info("headroom: ready (database, secret key, vocabulary and compressors loaded)")


def _stop(state: State) -> None:
    """The warm-up stops; the compression worker, if one was started, is stopped; the record of
    a proxy run in a terminal is removed (``headroom_core.cli.proxy_process.foreground_file``)."""
    state.stopping.set()
    if state.record is not None:
        unmark_foreground(*state.record, os.getpid())
    rt = state.runtime
    if rt is not None and "compress_worker" in rt.__dict__:
        rt.compress_worker.close()


def _at_exit(state: State) -> None:
    """The interpreter is exiting after mitmproxy returned. After a signal: stop what runs,
    flush the logs and end the process now with the signal's status (module docstring);
    otherwise (an error at start-up, a test) the interpreter's own exit goes on."""
    if state.exit_code is None:
        return
    _stop(state)
    if state.exit_code == 130:
        print("headroom: interrupted", file=sys.stderr)
    logging.shutdown()
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except (OSError, ValueError):
            pass
    os._exit(state.exit_code)


def _recover_ledger(rt: Runtime) -> None:
    """Write what a killed proxy answered but had not committed (the ledger journal); a failure
    is logged as the ledger's and never stops the start."""
    try:
        rt.ledger.recover()
    except Exception:  # noqa: BLE001 - the proxy runs on; the journal stays for a later start
        log.exception("headroom: the ledger journal of a stopped proxy could not be written")
