"""Dialect detection by method, path suffix and body shape, on any host (each dialect's own
``serves``/``counts``/``shape_error``, asked in registry order: :func:`headroom_core.wire.dialects.route`).

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
    GEMINI = "gemini"
    VERTEX_GEMINI = "vertex-gemini"
    VERTEX_ANTHROPIC = "vertex-anthropic"
    BEDROCK_INVOKE = "bedrock-invoke"
    BEDROCK_CONVERSE = "bedrock-converse"
    OLLAMA_CHAT = "ollama-chat"
    GEMINI_CODE_ASSIST = "gemini-code-assist"


@dataclass(frozen=True)
class Detection:
    """The verdict on one request: ``dialect`` is None when the proxy must leave it untouched,
    and ``reason`` says why; ``body`` is the parsed JSON object when there is a dialect."""

    dialect: Dialect | None
    reason: str
    body: dict[str, Any] | None = None


def path_only(path: str) -> str:
    """``path`` without its query, fragment and trailing slashes."""
    return path.split("?", 1)[0].split("#", 1)[0].rstrip("/")


def detect(method: str, path: str, body: bytes) -> Detection:
    """Decide whether (and as which dialect) a request is an LLM API call.

    ``body`` is the request body (decoded of any content-encoding). Never raises.
    """
    from headroom_core.wire.dialects import REGISTRY, route  # the registry imports this module

    d = route(method, path).dialect
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
    why = REGISTRY[d].shape_error(parsed)
    if why:
        return Detection(None, why)
    return Detection(d, "ok", parsed)
