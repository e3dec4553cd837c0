"""Dialect detection by method, path suffix and body shape, on any host.

Host names are never consulted: a self-hosted gateway or a local model server that speaks a
provider's dialect is handled the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from typing import Any


class Dialect(str, Enum):
    """The wire formats the proxy understands."""

    ANTHROPIC_MESSAGES = "anthropic-messages"
    OPENAI_CHAT = "openai-chat"
    OPENAI_RESPONSES = "openai-responses"


@dataclass(frozen=True)
class Detection:
    """The verdict on one request: ``dialect`` is None when the proxy must leave it untouched,
    and ``reason`` says why; ``body`` is the parsed JSON object when there is a dialect."""

    dialect: Dialect | None
    reason: str
    body: dict[str, Any] | None = None


def _path_only(path: str) -> str:
    return path.split("?", 1)[0].split("#", 1)[0].rstrip("/")


def token_count_dialect(method: str, path: str) -> Dialect | None:
    """The dialect of a token-counting request (Anthropic ``…/v1/messages/count_tokens``, OpenAI
    ``…/v1/responses/input_tokens``): it measures the body of the request it names, so the proxy
    plans it like that request without sending or storing anything. None for other requests."""
    if method.upper() != "POST":
        return None
    p = _path_only(path)
    if p.endswith("/messages/count_tokens"):
        return Dialect.ANTHROPIC_MESSAGES
    if p.endswith("/responses/input_tokens"):
        return Dialect.OPENAI_RESPONSES
    return None


def dialect_for_path(method: str, path: str) -> Dialect | None:
    """The dialect a method and path suggest, before the body is looked at (None: not LLM;
    token-counting paths: :func:`token_count_dialect`)."""
    if method.upper() != "POST":
        return None
    p = _path_only(path)
    if p.endswith("/messages/count_tokens") or p.endswith("/responses/input_tokens"):
        return None
    if p.endswith("/v1/messages") or p == "/messages" or p.endswith("/messages") and "/v1" in p:
        return Dialect.ANTHROPIC_MESSAGES
    if p.endswith("/chat/completions"):
        return Dialect.OPENAI_CHAT
    if p.endswith("/responses"):
        return Dialect.OPENAI_RESPONSES
    return None


def detect(method: str, path: str, body: bytes) -> Detection:
    """Decide whether (and as which dialect) a request is an LLM API call.

    ``body`` is the request body (decoded of any content-encoding). Never raises.
    """
    d = dialect_for_path(method, path) or token_count_dialect(method, path)
    if d is None:
        return Detection(None, "not an LLM API path")
    try:
        parsed = json.loads(body.decode("utf-8"))  # JSON on the wire is UTF-8 (RFC 8259 §8.1)
    except UnicodeDecodeError:
        return Detection(None, "body is not UTF-8")
    except (ValueError, RecursionError):
        return Detection(None, "body is not JSON (or nested too deeply)")
    if not isinstance(parsed, dict):
        return Detection(None, "body is not a JSON object")
    if d in (Dialect.ANTHROPIC_MESSAGES, Dialect.OPENAI_CHAT):
        if not isinstance(parsed.get("messages"), list):
            return Detection(None, "no messages list")
    elif "input" not in parsed:
        return Detection(None, "no input")
    return Detection(d, "ok", parsed)
