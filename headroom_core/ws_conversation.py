"""Which conversation a Responses WebSocket frame belongs to: the socket keeps the project and
session of its first frame that names them.

Codex sends one full ``response.create`` (its environment context names the working
directory), then frames that continue it: a warm-up (``generate: false``) and turns with
``previous_response_id`` whose ``input`` holds only the new items. Planned on their own, those
would name no project and get session keys of their own, splitting one conversation. Pure
decisions; the WebSocket addon keeps the pinned :class:`~headroom_core.scope.Conversation` per
connection.
"""

from __future__ import annotations

from typing import Any, Mapping

from headroom_core.project import find_project, is_conversation
from headroom_core.scope import Conversation
from headroom_core.wire.responses_ws import is_continuation


def continues(pinned: Conversation | None, body: Mapping[str, Any], headers: Mapping[str, str]) -> Conversation | None:
    """The conversation a frame's ``body`` continues (its project and session key are then
    ``pinned``'s), or None when the frame is planned on its own: nothing pinned yet, or a fresh
    start (no ``previous_response_id``, not a warm-up) that names its own project (header or a
    stated working directory). ``headers``: the upgrade request's, lowercase."""
    if pinned is None:
        return None
    if is_continuation(dict(body)) or find_project(headers, body) is None:
        return pinned
    return None


def pin(pinned: Conversation | None, planned: Conversation | None) -> Conversation | None:
    """The socket's conversation after a frame was planned as ``planned`` (None: not
    identified, e.g. refused): the first one, except that a conversation of a named project
    replaces one that named none (the first frames may state no working directory)."""
    if planned is None:
        return pinned
    if pinned is None or (is_conversation(pinned.scope.project) and not is_conversation(planned.scope.project)):
        return planned
    return pinned
