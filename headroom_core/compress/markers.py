"""The one marker grammar for everything the proxy offloads.

A marker reads ``[headroom omitted 480 of 500 items; headroom_retrieve key=3f2a…]``: what was
dropped, in words, and the retrieval key. The key is the first 24 lowercase hex digits
(96 bits) of the SHA-256 of the original text's UTF-8 bytes; keys are matched
case-insensitively. A marker-shaped string is only ever resolved through the originals store,
so a marker the proxy did not write (no stored original) is never adopted.
"""

from __future__ import annotations

import hashlib
import re

KEY_HEX_DIGITS = 24

MARKER_RE = re.compile(
    r"\[headroom omitted (?P<what>[^;\]\n]{1,200}); headroom_retrieve key=(?P<key>[0-9a-fA-F]{24})\]"
)


def offload_key(original: str) -> str:
    """Retrieval key of ``original``: 24 lowercase hex digits of SHA-256 over its UTF-8 bytes
    (a lone surrogate, which has no UTF-8 form, as its three-byte ``surrogatepass`` encoding)."""
    return hashlib.sha256(original.encode("utf-8", "surrogatepass")).hexdigest()[:KEY_HEX_DIGITS]


def make_marker(what: str, key: str) -> str:
    """The marker text for ``what`` (e.g. ``"480 of 500 items"``) stored under ``key``.

    Raises ``ValueError`` if ``what`` holds characters the grammar reserves (``;``, ``]``,
    newline) or ``key`` is not 24 hex digits.
    """
    if not what or any(c in what for c in ";]\n") or len(what) > 200:
        raise ValueError(f"marker description not allowed: {what!r}")
    if not re.fullmatch(r"[0-9a-fA-F]{24}", key):
        raise ValueError(f"not a retrieval key: {key!r}")
    return f"[headroom omitted {what}; headroom_retrieve key={key.lower()}]"


def find_marker_keys(text: str) -> list[str]:
    """Every retrieval key named by a marker in ``text``, lowercased, in order of appearance."""
    return [m.group("key").lower() for m in MARKER_RE.finditer(text)]


def normalize_key(key: object) -> str | None:
    """A key as given by the model (any case, surrounding spaces) in canonical form, or None."""
    if not isinstance(key, str):
        return None
    k = key.strip().lower()
    return k if re.fullmatch(r"[0-9a-f]{24}", k) else None
