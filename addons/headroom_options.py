"""The ``headroom_*`` mitmproxy options, parsed once in ``configure`` into a frozen Settings."""

from __future__ import annotations

import dataclasses
import logging
import threading
from typing import Optional

from mitmproxy import ctx, exceptions

from headroom_core import heap
from headroom_core.runtime import Runtime
from headroom_core.settings import Settings, SettingsError, load_settings

_HELP = {
    "db_url": "SQLAlchemy database URL (default: sqlite under HEADROOM_HOME).",
    "max_body_bytes": "Requests to LLM APIs larger than this many bytes get HTTP 413.",
    "compress": "Compress tool outputs (true/false).",
    "min_tokens": "Tool outputs below this many tokens are left as they are.",
    "min_saving_ratio": "A compressed output must save at least this share of tokens.",
    "exclude_tools": "Comma-separated glob patterns of tool names never compressed (e.g. mcp__*).",
    "ccr_ttl_seconds": "How long offloaded originals are kept, in seconds since last use.",
    "ccr_max_bytes": "Upper bound of the originals store in bytes (least recently used evicted).",
    "retrieve_max_rounds": "Most follow-up requests the proxy makes to answer headroom_retrieve.",
    "tokenizer_path": "A tokenizer.json to count tokens with (default: cl100k_base, offline).",
    "tools_minify": "Minify tool definitions deterministically (true/false).",
    "tools_minify_exclude": "Comma-separated glob patterns of tool names left as they are.",
    "tools_on_demand": "Send tools the model has not called for a while as skeletons; the model gets the full definition from headroom_tool_docs (true/false).",
    "tools_on_demand_idle_requests": "Tools on demand: a tool is shortened once this many of the project's requests offered it since the model last called it.",
    "tools_on_demand_min_bytes": "Tools on demand: a tool is shortened only when its skeleton is at least this many bytes smaller.",
    "memory": "Cross-agent memory per project: memory tools, injection, 'remember:' (true/false).",
    "memory_db_url": "SQLAlchemy URL of the memory store (default: the main database).",
    "memory_model_path": "A sentence-transformers model folder for memory (default: packaged all-MiniLM-L6-v2).",
    "memory_inject_max_tokens": "Token budget of the injected memory block.",
    "memory_inject_max_entries": "Most memories injected into one request.",
    "memory_min_similarity": "Cosine similarity floor for injecting a memory.",
    "memory_dedup_similarity": "A new memory at least this similar to an existing one updates it.",
    "memory_half_life_days": "Days after which a memory's recency weight and value halve.",
    "memory_archive_below": "Memories whose decayed value falls below this are archived...",
    "memory_archive_min_age_days": "...once they are at least this many days old.",
    "learn": "Learn failure -> correction rules from live traffic (true/false).",
    "learn_min_evidence": "Distinct sessions showing a pair before a live rule is persisted.",
    "learn_feedback": "Append recent failures of the project to the latest user message (true/false).",
    "learn_feedback_hours": "Only failures of the last this many hours are fed back.",
    "learn_feedback_max_lines": "Most lines in the past-failures block.",
    "home": "Headroom's folder for database, caches and config (default ~/.headroom).",
    "ws_max_frame_bytes": "A WebSocket client frame (response.create) larger than this many bytes closes the connection with code 1009.",
    "secret_key_file": "File holding the 32-byte key that seals stored originals and hashes client identities (default <home>/secret.key, created owner-only); proxies sharing a database share it.",
    "retrieve_min_bytes": "A session gets headroom_retrieve (and lossy compression) only when its first request is at least this many bytes; smaller sessions get lossless compression only.",
    "compress_timeout_seconds": "Seconds one request or frame may spend being compressed before it is sent as is (or refused if large).",
    "prices": "Token prices for the money in the stats: comma-separated '<model glob>=<input>/<output>[/<cache read>[/<cache write>]]' in USD per million tokens.",
    "images": "Resize base64 images larger than the provider's documented effective size to it (true/false).",
    "image_max_tokens": "Opt-in: reduce images estimated over this many tokens to it, original retrievable (0 = off).",
    "fail_open_max_bytes": "0 (default): a request that cannot be compressed goes on unchanged, whatever its size up to max_body_bytes. Set: larger ones are refused instead (413 / 1009).",
}
OPTION_NAMES = [f.name for f in dataclasses.fields(Settings)]


class State:
    """What the Headroom addons share: the runtime built from the current options."""

    def __init__(self) -> None:
        self.runtime: Runtime | None = None


class HeadroomOptions:
    """Declares ``--set headroom_<key>=…`` for every settings key; values set there win over
    ``HEADROOM_*`` environment variables and ``config.toml`` (DESIGN.md precedence)."""

    def __init__(self, state: State) -> None:
        self.state = state

    def load(self, loader) -> None:
        heap.limit_arenas()  # threads made from now on share two malloc arenas, not 8 per core
        for name in OPTION_NAMES:
            loader.add_option(f"headroom_{name}", Optional[str], None, _HELP.get(name, name))

    def running(self) -> None:
        # mitmproxy keeps --set values of options nobody declared; a misspelt headroom_* would
        # silently do nothing
        unknown = sorted(k for k in getattr(ctx.options, "deferred", {}) if k.startswith("headroom_"))
        if unknown:
            logging.warning("headroom: unknown option(s) %s ignored; known: %s", ", ".join(unknown), ", ".join(f"headroom_{n}" for n in OPTION_NAMES))

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
        # open (and migrate) the database and load the vocabulary now, off the request path
        threading.Thread(target=_warm_up, args=(rt,), name="headroom-warm-up", daemon=True).start()
        logging.info("headroom: database %s, max body %d bytes", settings.database_url, settings.max_body_bytes)


def _warm_up(rt: Runtime) -> None:
    # The embedding model (torch included, about 490 MiB resident) is not loaded here:
    # prose/HTML compression and memory search start loading it the first time they need it.
    heap.start_trimmer()
    try:
        rt.sessions
        rt.sealer
        rt.extensions
        rt.counter.count("warm up")
        logging.info("headroom: ready (database, secret key and vocabulary loaded)")
    except Exception:  # noqa: BLE001 - requests will fail open and log it again
        logging.exception("headroom: warm-up failed (database or tokenizer); traffic passes unchanged until it works")
