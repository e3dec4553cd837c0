"""Lone surrogates: text that is valid JSON but has no UTF-8 form.

JSON strings may hold any ``\\uXXXX`` escape, including a lone surrogate such as ``"\\ud83d"``
(a tool that cut an emoji in half). Python's ``json`` decodes it to a ``str`` holding the code
point U+D83D, which ``str.encode("utf-8")`` refuses, and so do Rust-backed libraries
(``tokenizers``: "TextInputSequence must be str") and database drivers. Every text path of the
proxy takes such strings: hashes encode with ``"surrogatepass"``, JSON the proxy writes escapes
them (:func:`escape_in_json`), and code that only needs an
approximation of the text (token counts, embeddings, labels) reads it through :func:`scrub`.
"""

from __future__ import annotations

import re

_LONE = re.compile(r"[\ud800-\udfff]")

#: What a lone surrogate becomes in :func:`scrub`: U+FFFD REPLACEMENT CHARACTER, as a UTF-8
#: decoder in "replace" mode would write it.
REPLACEMENT = "\ufffd"


def has_surrogates(text: str) -> bool:
    """True when ``text`` holds a lone surrogate code point (U+D800..U+DFFF)."""
    return _LONE.search(text) is not None


def escape_in_json(text: str) -> str:
    """JSON ``text`` with every lone surrogate code point written as its ``\\uXXXX`` escape, so it
    has a UTF-8 form; valid JSON stays valid and decodes to the same value (a lone surrogate can
    only stand inside a string literal). The very same object when there is none."""
    if _LONE.search(text) is None:
        return text
    return _LONE.sub(lambda m: "\\u%04x" % ord(m.group()), text)


def scrub(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (same length, valid UTF-8); the very
    same object when there is none. For approximations only (counts, embeddings, labels): the
    original text is what the proxy forwards and stores."""
    if _LONE.search(text) is None:
        return text
    return _LONE.sub(REPLACEMENT, text)
