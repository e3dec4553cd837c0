"""Removing secrets from text before it is stored as a memory.

Patterns: the published token formats of the major providers (Anthropic ``sk-ant-``, OpenAI
``sk-``/``sk-proj-``, GitHub ``ghp_``/``gho_``/``ghu_``/``ghs_``/``ghr_``/``github_pat_``, GitLab
``glpat-``, Slack ``xox?-``, AWS access key ids ``AKIA``/``ASIA``, Google ``AIza``, Stripe
``sk_live_``/``rk_live_``, npm ``npm_``, Hugging Face ``hf_``), JSON Web Tokens, PEM private keys,
credentials inside URLs (``scheme://user:password@host``), ``Authorization: Bearer/Basic …``
values, and the value after a secret-sounding name (``password=…``, ``api_key: …``,
``AWS_SECRET_ACCESS_KEY=…``, ``token …``). The formats follow the providers' documentation and
the rule set of gitleaks (github.com/gitleaks/gitleaks, ``config/gitleaks.toml``). Each match is
replaced by ``[REDACTED:<what>]``; nothing of the secret is kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TOKEN_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.S)),
    ("anthropic key", re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{16,}")),
    ("openai key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}")),
    ("stripe key", re.compile(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}")),
    ("github token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})")),
    ("gitlab token", re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}")),
    ("slack token", re.compile(r"\bxox[abprs]-[A-Za-z0-9\-]{10,}")),
    ("aws access key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("google api key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b")),
    ("npm token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b")),
    ("hugging face token", re.compile(r"\bhf_[A-Za-z0-9]{30,}\b")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}")),
)

# scheme://user:password@host  -> keep scheme, user and host
_URL_CREDENTIALS = re.compile(r"(?P<pre>\b[a-z][a-z0-9+.\-]*://[^\s:/@]+:)(?P<secret>[^\s@/]+)(?P<post>@)", re.I)
# Authorization: Bearer xxx / Basic xxx (header lines, curl -H, code)
_AUTH_HEADER = re.compile(
    r"(?P<pre>\b(?:authorization|proxy-authorization)\b\s*[:=]\s*[\"']?(?:bearer|basic|token)\s+)(?P<secret>[^\s\"',;]{6,})",
    re.I,
)
_BEARER = re.compile(r"(?P<pre>\bbearer\s+)(?P<secret>[A-Za-z0-9_\-.=+/]{16,})", re.I)
# password = x, password: x, "password": "x", the password is x
_PASSWORD = re.compile(
    r"""(?P<pre>\b[\w.\-]*(?:password|passwd|passphrase|pwd)[\w.\-]*["']?\s*(?:[:=]|=>|\bis\b)\s*["']?)(?P<secret>[^\s"',;}{)(\]\[<>`]{3,})""",
    re.I,
)
# API_KEY=x, "client_secret": "x", token: x -- only values that look machine-made (see _machine_made)
_ASSIGNMENT = re.compile(
    r"""(?P<pre>\b[\w.\-]*(?:secret|token|api[_\-]?key|apikey|access[_\-]?key|private[_\-]?key|credentials?)[\w.\-]*["']?\s*(?:[:=]|=>)\s*["']?)(?P<secret>[^\s"',;}{)(\]\[<>`]{8,})""",
    re.I,
)
# values that are clearly not secrets after a secret-sounding name
_NOT_SECRET = re.compile(
    r"^(?:\[REDACTED:[^\]]*\]|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|<[^>]*>|\*+|x+|\.{3}|none|null|true|false|required|optional|env|environment|string|os\.environ.*|process\.env.*|getenv.*)$",
    re.I,
)


def _machine_made(value: str) -> bool:
    """A value after a generic secret name counts as a secret when it looks generated: not only
    digits, and with digits or mixed case or ``_``/``-`` in it (``max_tokens: 100000000`` and
    ``token: refreshed`` are left alone)."""
    if value.isdigit() or "." in value.strip(".") and value.replace(".", "").isalpha():
        return False
    has_digit = any(c.isdigit() for c in value)
    mixed = any(c.islower() for c in value) and any(c.isupper() for c in value)
    return has_digit or mixed or "_" in value or "-" in value


@dataclass(frozen=True)
class Redaction:
    """``text`` with secrets replaced; ``found`` names each kind of secret removed (in order)."""

    text: str
    found: tuple[str, ...]


def redact(text: str) -> Redaction:
    """Replace every secret in ``text`` with ``[REDACTED:<what>]`` (see the module docstring)."""
    found: list[str] = []

    def sub_token(what: str):
        def f(m: re.Match[str]) -> str:
            found.append(what)
            return f"[REDACTED:{what}]"

        return f

    for what, pat in _TOKEN_PATTERNS:
        text = pat.sub(sub_token(what), text)

    def sub_group(what: str, check=None):
        def f(m: re.Match[str]) -> str:
            secret = m.group("secret")
            if _NOT_SECRET.match(secret) or (check is not None and not check(secret)):
                return m.group(0)
            found.append(what)
            return m.group("pre") + f"[REDACTED:{what}]" + (m.groupdict().get("post") or "")

        return f

    text = _URL_CREDENTIALS.sub(sub_group("password"), text)
    text = _AUTH_HEADER.sub(sub_group("credential"), text)
    text = _BEARER.sub(sub_group("credential"), text)
    text = _PASSWORD.sub(sub_group("password"), text)
    text = _ASSIGNMENT.sub(sub_group("secret", _machine_made), text)
    return Redaction(text, tuple(found))
