"""Whose data a request touches: its project and the client identity behind its credential.

Everything the proxy keeps for a conversation (the bytes it forwarded, its compression
decisions, offloaded originals, the proxy tools it offered) belongs to one :class:`Scope` and is
read only within it: two projects, or two users of one project (a team sharing a database),
never share any of it. Memories, learned rules and failures are kept per project (their own
tables carry the project). A request that names no project is its own conversation's scope
(:func:`~headroom_core.project.conversation_project`): nothing of it is pooled with another
conversation.

The identity is a keyed hash (HMAC-SHA256 under the local secret, :mod:`headroom_core.db.sealed`)
of the credential the client sent: the credential itself is never stored or logged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import parse_qsl, urlsplit

from headroom_core.cache.session import SESSION_HEADER, session_key
from headroom_core.db.sealed import Sealer
from headroom_core.project import conversation_project, find_project

#: Request headers that carry a client credential, in the order they are looked at:
#: Anthropic (``x-api-key``), OpenAI and OAuth bearers (``authorization``), Azure OpenAI
#: (``api-key``), Google (``x-goog-api-key``).
CREDENTIAL_HEADERS = ("x-api-key", "authorization", "api-key", "x-goog-api-key")
#: Query parameters that carry a credential (Google's ``?key=``, some gateways' ``api-key``).
CREDENTIAL_PARAMS = ("key", "api-key", "api_key")


@dataclass(frozen=True)
class Scope:
    """``project`` (see :func:`~headroom_core.project.find_project`; a conversation's own,
    :func:`~headroom_core.project.conversation_project`, when it names none), ``identity`` (32 hex
    digits, the keyed hash of the credential; ``""`` when the request carried none) and ``id``
    (32 hex digits naming the pair; what stored rows are keyed by)."""

    project: str
    identity: str
    id: str


def credential(headers: Mapping[str, str], path: str = "") -> str:
    """The credential a request carries (``headers`` keys lowercase), or ``""``."""
    for h in CREDENTIAL_HEADERS:
        v = (headers.get(h) or "").strip()
        if v:
            return f"{h}:{v}"
    if "?" in path:
        for k, v in parse_qsl(urlsplit(path).query, keep_blank_values=False):
            if k.lower() in CREDENTIAL_PARAMS and v:
                return f"?{k.lower()}:{v}"
    return ""


def scope_of(project: str, cred: str, sealer: Sealer) -> Scope:
    """The :class:`Scope` of ``project`` and credential ``cred`` (hashed, never kept)."""
    identity = sealer.digest("identity", cred)[:32] if cred else ""
    return Scope(project, identity, sealer.digest("scope", project, identity)[:32])


@dataclass(frozen=True)
class Conversation:
    """Whose a request is and which conversation: its :class:`Scope` and its session key (32
    hex digits, :func:`~headroom_core.cache.session.session_key` within the scope)."""

    scope: Scope
    session_key: str


def request_conversation(
    headers: Mapping[str, str], body: Mapping[str, Any] | None, path: str, sealer: Sealer, dialect: str
) -> Conversation:
    """The scope and session of one request (``dialect`` a
    :class:`~headroom_core.wire.detect.Dialect` value): its project (the header, else the
    working directory the agent states, else the conversation's own: the session key the
    request has without a project, within its client identity) and the keyed hash of its
    credential; the session key within that scope."""
    cred = credential(headers, path)
    explicit = headers.get(SESSION_HEADER)
    parsed = dict(body or {})
    project = find_project(headers, parsed)
    if project is None:
        project = conversation_project(session_key(dialect, parsed, explicit, scope_of("", cred, sealer).id))
    scope = scope_of(project, cred, sealer)
    return Conversation(scope, session_key(dialect, parsed, explicit, scope.id))
