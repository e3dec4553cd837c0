"""Which client session a request belongs to, without any client cooperation."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def _without_cache_control(value: Any) -> Any:
    """``value`` with every ``cache_control`` member removed: clients move their breakpoints
    from turn to turn (Claude Code marks the latest messages), which must not change the key."""
    if isinstance(value, dict):
        return {k: _without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_cache_control(v) for v in value]
    return value


def _first_user(body: dict[str, Any]) -> Any:
    for key in ("messages", "input"):
        seq = body.get(key)
        if isinstance(seq, str):
            return seq
        if isinstance(seq, list):
            for m in seq:
                if isinstance(m, dict) and m.get("role") == "user":
                    return m.get("content")
    return None


def session_key(dialect: str, body: dict[str, Any], explicit: str | None = None) -> str:
    """A 32-hex-digit session key: from ``explicit`` (the ``x-headroom-session`` header) if
    given, else the SHA-256 of the dialect, the system prompt (``system``, ``instructions`` or
    the first ``system`` message) and the first user message, which a client repeats on every
    turn of one conversation (``cache_control`` markers left out: they move between turns)."""
    if explicit:
        return hashlib.sha256(f"explicit\0{explicit}".encode("utf-8", "surrogatepass")).hexdigest()[:32]
    system = body.get("system", body.get("instructions"))
    if system is None and isinstance(body.get("messages"), list):
        system = next((m.get("content") for m in body["messages"] if isinstance(m, dict) and m.get("role") in ("system", "developer")), None)
    blob = json.dumps([dialect, _without_cache_control(system), _without_cache_control(_first_user(body))], ensure_ascii=False, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:32]
