"""Which conversation a Responses WebSocket frame belongs to, and what of the connection's
conversation the observers see with it.

Codex sends a warm-up (``generate: false``, only its developer message: no working directory),
then frames that continue it by ``previous_response_id`` whose ``input`` holds only the new
items (the second one its ``<environment_context>`` with the ``<cwd>`` and the prompt, later ones
only the new ``function_call_output`` items). Planned on their own, those would name no project
and get session keys of their own, splitting one conversation. So a connection keeps ONE
session key, that of its first frame, and the project first named by any frame
(:func:`continues`): a connection whose first frames named none adopts the project a later frame
names, and what was kept under its own conversation's scope until then moves to that project
(:func:`adoption`; :mod:`headroom_core.conversation_move` does the move).

The observers (live learning) read a request's tool calls with their results. Over HTTP each
request holds the whole conversation; a continuing frame holds only its new items, the calls
they answer being in the previous response. The connection therefore keeps its history (every
frame's input items and each response's output items, :func:`frame_items`,
:func:`with_response`) and the observers get a frame as the whole conversation so far
(:func:`observed_body`, the frame's live zone shifted behind the history), the view the HTTP
path gives them.

Pure decisions; :class:`headroom_core.ws_connection.WsConnection` keeps the pinned
:class:`~headroom_core.scope.Conversation` and the history per connection.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

from headroom_core.extensions import RequestContext
from headroom_core.project import find_project, is_conversation
from headroom_core.scope import Conversation, Scope
from headroom_core.wire.request_view import view_of
from headroom_core.wire.responses_ws import is_continuation

#: Most items of a connection's history kept for the observers (the oldest go first): live
#: learning pairs a new result with calls at most a few dozen steps back
#: (:data:`~headroom_core.learn.pairing.SETUP_WINDOW`), so a long connection costs bounded memory.
MAX_HISTORY_ITEMS = 600


def continues(
    pinned: Conversation | None, body: Mapping[str, Any], headers: Mapping[str, str], scope_for: Callable[[str], Scope]
) -> Conversation | None:
    """The conversation a frame's ``body`` belongs to, or None when the frame is planned on its
    own: nothing pinned yet, or a fresh start (no ``previous_response_id``, not a warm-up) that
    names its own project while the connection already has one. A frame naming a project
    (header or a stated working directory) on a connection whose conversation named none gets
    that project (``scope_for(project)``: its :class:`~headroom_core.scope.Scope` for the
    frame's credential) with the connection's session key; any other frame continues ``pinned``.
    ``headers``: the upgrade request's, lowercase."""
    if pinned is None:
        return None
    named = find_project(headers, body)
    if named is not None and is_conversation(pinned.scope.project):
        return Conversation(scope_for(named), pinned.session_key)
    if is_continuation(dict(body)) or named is None:
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


@dataclass(frozen=True)
class Adoption:
    """A connection's conversation named its project late: what was kept under
    ``old_project`` (its own, ``conversation:…``) and ``old_scope`` now belongs to
    ``new_project`` and ``new_scope`` (scope ids: 32 hex digits)."""

    old_project: str
    new_project: str
    old_scope: str
    new_scope: str


def adoption(pinned: Conversation | None, planned: Conversation | None) -> Adoption | None:
    """The :class:`Adoption` when a frame planned as ``planned`` gave the connection's
    project-less conversation ``pinned`` a project (same session key), else None."""
    if pinned is None or planned is None or planned.session_key != pinned.session_key:
        return None
    if not is_conversation(pinned.scope.project) or is_conversation(planned.scope.project):
        return None
    return Adoption(pinned.scope.project, planned.scope.project, pinned.scope.id, planned.scope.id)


def row_conversation(adopted: Adoption | None, pinned: Conversation | None, project: str) -> Conversation | None:
    """The conversation a turn planned under ``project`` is recorded under when it is not its
    plan's: the connection's (``pinned``) once it adopted a named project (``adopted``) and the
    turn was planned under the old one; else None."""
    if adopted is not None and pinned is not None and project == adopted.old_project:
        return pinned
    return None


def _input_items(body: Mapping[str, Any]) -> tuple[Any, ...]:
    """A Responses body's ``input`` as items (a string input is one user message)."""
    v = body.get("input")
    if isinstance(v, list):
        return tuple(v)
    if isinstance(v, str) and v:
        return ({"type": "message", "role": "user", "content": v},)
    return ()


def _capped(items: tuple[Any, ...]) -> tuple[Any, ...]:
    return items[-MAX_HISTORY_ITEMS:] if len(items) > MAX_HISTORY_ITEMS else items


def history_before(history: tuple[Any, ...], body: Mapping[str, Any]) -> tuple[Any, ...]:
    """The items a frame follows: the connection's ``history`` for a frame that continues it
    (``previous_response_id`` or a warm-up), none for a fresh start (it carries everything)."""
    return history if is_continuation(dict(body)) else ()


def frame_items(before: tuple[Any, ...], body: Mapping[str, Any]) -> tuple[Any, ...]:
    """``before`` and the frame's own input items: the conversation through this frame (at most
    :data:`MAX_HISTORY_ITEMS`, the latest)."""
    return _capped(before + _input_items(body))


def with_response(items: tuple[Any, ...], output: Any) -> tuple[Any, ...]:
    """The history after a response: ``items`` (through its frame) and the response's
    ``output`` items (a list; anything else adds nothing), at most :data:`MAX_HISTORY_ITEMS`."""
    return _capped(items + tuple(output)) if isinstance(output, list) else items


def observed_body(before: tuple[Any, ...], body: Mapping[str, Any]) -> dict[str, Any]:
    """The frame's ``body`` as the observers see it: its ``input`` preceded by the items it
    follows (``before``); a frame without history is its body as it is."""
    if not before:
        return dict(body)
    return {**body, "input": [*before, *_input_items(body)]}


def observed_context(ctx: RequestContext, before: tuple[Any, ...]) -> RequestContext:
    """What the observers see of a frame planned as ``ctx``: the conversation through it
    (:func:`observed_body`), its tool outputs read from that whole, and its live zone behind the
    ``before`` items (only this frame's results are new). ``ctx`` itself without history."""
    if not before:
        return ctx
    body = observed_body(before, ctx.body)
    outputs = tuple(view_of(ctx.dialect, body).tool_outputs)
    return replace(ctx, body=body, tool_outputs=outputs, live_from=ctx.live_from + len(before))
