"""Which client session a request belongs to, without any client cooperation."""

from __future__ import annotations

import hashlib
import json
from typing import Any


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
    turn of one conversation."""
    if explicit:
        return hashlib.sha256(f"explicit\0{explicit}".encode()).hexdigest()[:32]
    system = body.get("system", body.get("instructions"))
    if system is None and isinstance(body.get("messages"), list):
        system = next((m.get("content") for m in body["messages"] if isinstance(m, dict) and m.get("role") in ("system", "developer")), None)
    blob = json.dumps([dialect, system, _first_user(body)], ensure_ascii=False, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:32]
