"""Naming the client (agent) that sent a request."""

from __future__ import annotations

import re


def client_name(user_agent: str) -> str:
    """The client's product name from a User-Agent (``claude-cli/1.0.62 (…)`` → ``claude-cli``;
    ``Anthropic/Python 0.40`` → ``anthropic-python``); ``unknown`` when empty."""
    ua = (user_agent or "").strip()
    m = re.match(r"([A-Za-z0-9_.\-]+)(?:/([A-Za-z]+))?", ua)
    if not m:
        return "unknown"
    name = m.group(1).lower()
    if m.group(2):
        name += "-" + m.group(2).lower()
    return name[:64]
