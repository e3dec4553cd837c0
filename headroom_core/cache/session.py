"""Which client session a request belongs to, without any client cooperation."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from headroom_core.cache.carry import normal
from headroom_core.wire.detect import Dialect
from headroom_core.wire.dialects import REGISTRY, for_body

_KNOWN = frozenset(m.value for m in Dialect)

#: The request header that names a session explicitly.
SESSION_HEADER = "x-headroom-session"


def session_key(dialect: str, body: dict[str, Any], explicit: str | None = None, scope: str = "") -> str:
    """A 32-hex-digit session key within ``scope`` (a :class:`~headroom_core.scope.Scope` id:
    project and client identity, so two projects or two users never share a session).

    From ``explicit`` (the ``x-headroom-session`` header) if given, else the SHA-256 of the
    dialect, the system prompt (``system``, ``instructions`` or the first ``system`` message)
    and the first user message, which a client repeats on every turn of one conversation
    (``cache_control`` markers left out: they move between turns; a string and one text block
    are the same, :func:`headroom_core.cache.carry.normal`).
    """
    if explicit:
        return hashlib.sha256(f"explicit\0{scope}\0{explicit}".encode("utf-8", "surrogatepass")).hexdigest()[:32]
    d = REGISTRY.get(Dialect(dialect)) if dialect in _KNOWN else None
    d = d or for_body(body)
    parts = (
        normal({"content": d.system_value(body)}).get("content"),
        normal({"content": d.first_user_content(body)}).get("content"),
    )
    blob = json.dumps([scope, dialect, *parts], ensure_ascii=False, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:32]
