"""Which project a request belongs to: memories, learned rules and tool statistics are kept
apart per project."""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

from headroom_core.wire.request_view import opening

PROJECT_HEADER = "x-headroom-project"
GLOBAL = "global"

# Claude Code's environment block in the system prompt: "Working directory: /path"
_CLAUDE_CWD = re.compile(r"Working directory: ([^\n\\<]+)")
# Codex's environment context: "<cwd>/path</cwd>"
_CODEX_CWD = re.compile(r"<cwd>([^<\n]+)</cwd>")


MAX_SCAN = 64 * 1024  # characters of each text searched: environment blocks sit near the start


def _texts(body: Mapping[str, Any]) -> list[str]:
    """The texts a client states its environment in: system prompt, instructions, and the
    first messages (Codex sends its environment context as an early user message), each cut to
    its first ``MAX_SCAN`` characters."""
    systems, firsts = opening(body, 3)
    out = [v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for v in systems]
    out.extend(json.dumps(m, ensure_ascii=False) for m in firsts)
    return [t[:MAX_SCAN] for t in out]


def resolve_project(headers: Mapping[str, str], body: Mapping[str, Any] | None) -> str:
    """The project: the ``x-headroom-project`` header, else the working directory the agent
    states (Claude Code's ``Working directory:`` line, Codex's ``<cwd>``), else ``global``.

    ``headers`` keys are lowercase. The result is at most 512 characters, stripped.
    """
    explicit = (headers.get(PROJECT_HEADER) or "").strip()
    if explicit:
        return explicit[:512]
    for text in _texts(body or {}):
        m = _CLAUDE_CWD.search(text) or _CODEX_CWD.search(text)
        if m:
            return m.group(1).strip()[:512]
    return GLOBAL
