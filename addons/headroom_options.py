"""The ``headroom_*`` mitmproxy options, parsed once in ``configure`` into a frozen Settings."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
from typing import Optional

from mitmproxy import ctx, exceptions

from headroom_core import heap
from headroom_core.gc_tuning import freeze_long_lived
from headroom_core.compress.worker import warm_compressors
from headroom_core.memory.service import service as memory_service
from headroom_core.runtime import Runtime
from headroom_core.settings import Settings, SettingsError, load_settings, setting_help, unknown_environment

OPTION_NAMES = [f.name for f in dataclasses.fields(Settings)]


class State:
    """What the Headroom addons share: the runtime built from the current options."""

    def __init__(self) -> None:
        self.runtime: Runtime | None = None


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

    def running(self) -> None:
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
            logging.warning("headroom: unknown option(s) %s ignored; known: %s", ", ".join(unknown), ", ".join(f"headroom_{n}" for n in OPTION_NAMES))
        for line in unknown_environment():
            logging.warning("headroom: %s", line)

    def configure(self, updated) -> None:
        # only the settings' own options rebuild the runtime (other addons declare headroom_* options too)
        if self.state.runtime is not None and not any(u.startswith("headroom_") and u[len("headroom_"):] in OPTION_NAMES for u in updated):
            return
        overrides = {n: getattr(ctx.options, f"headroom_{n}") for n in OPTION_NAMES if getattr(ctx.options, f"headroom_{n}") is not None}
        try:
            settings = load_settings(overrides)
        except SettingsError as e:
            raise exceptions.OptionsError(str(e)) from e
        self.state.runtime = rt = Runtime(settings)
        # open (and migrate) the database and load the vocabulary now, off the request path;
        # requests arriving meanwhile wait for it (headroom_core.readiness)
        rt.ready.begin()
        threading.Thread(target=_warm_up, args=(rt,), name="headroom-warm-up", daemon=True).start()
        logging.info("headroom: database %s, max body %d bytes", settings.database_url, settings.max_body_bytes)


def _warm_up(rt: Runtime) -> None:
    # The embedding model (torch included, about 490 MiB resident) is not loaded here: with
    # memory on it starts loading once mitmproxy runs (see ``running``), otherwise prose/HTML
    # compression starts loading it the first time it needs it.
    heap.start_trimmer()
    try:
        rt.sessions
        rt.sealer
        rt.extensions
        warm_compressors(rt.counter)
        if not rt.compress_worker.warm(WORKER_WARM_SECONDS):
            logging.warning("headroom: the compression worker was not ready within %.0f s; the first large output starts it", WORKER_WARM_SECONDS)
    except Exception as e:  # noqa: BLE001 - requests will fail open and log it again
        rt.ready.end(f"{type(e).__name__}: {e}")
        logging.exception("headroom: warm-up failed (database or tokenizer); traffic passes unchanged until it works")
        _recover_ledger(rt)  # the journal waits for the database, and is written once it opens
        return
    _recover_ledger(rt)
    # full collections stop walking what lives as long as the process; the collection before it
    # holds the GIL for 0.1-0.3 s: done before requests are let in (they wait for readiness, not
    # counted in their compression time), not over the first ones
    freeze_long_lived("the warm-up")
    rt.ready.end()
    logging.info("headroom: ready (database, secret key, vocabulary and compressors loaded)")


def _recover_ledger(rt: Runtime) -> None:
    """Write what a killed proxy answered but had not committed (the ledger journal); a failure
    is logged as the ledger's and never stops the start."""
    try:
        rt.ledger.recover()
    except Exception:  # noqa: BLE001 - the proxy runs on; the journal stays for a later start
        logging.exception("headroom: the ledger journal of a stopped proxy could not be written")
