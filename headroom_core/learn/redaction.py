"""Secrets out of commands and outputs before anything is stored or shown: API keys, bearer
tokens, ``password=...`` style values."""

from __future__ import annotations

import re

_SECRET_PATTERNS = (
    re.compile(
        r"(?i)\b(authorization|x-api-key|api[_-]?key|access[_-]?token|auth[_-]?token|token|secret|password|passwd)(\s*[:=]\s*|\s+)(bearer\s+)?(['\"]?)[^\s'\"]{6,}\4"
    ),
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{12,}"),
    re.compile(
        r"\b(sk-(?:ant-)?[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16})\b"
    ),
)


def redact(text: str) -> str:
    """``text`` with API keys, bearer tokens and ``password=...`` style values replaced by ``***``."""

    def keep_name(m: re.Match[str]) -> str:
        return f"{m.group(1)}{m.group(2)}***" if m.re is _SECRET_PATTERNS[0] else "***"

    for p in _SECRET_PATTERNS:
        text = p.sub(keep_name, text)
    return text
