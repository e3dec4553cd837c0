"""Whose data a request touches: its project and the client identity behind its credential.

Everything the proxy keeps for a conversation (the bytes it forwarded, its compression
decisions, offloaded originals, the proxy tools it offered) belongs to one :class:`Scope` and is
read only within it: two projects, or two users of one project (a team sharing a database),
never share any of it. Memories, learned rules and failures are kept per project (their own
tables carry the project).

The identity is a keyed hash (HMAC-SHA256 under the local secret, :mod:`headroom_core.db.sealed`)
of the credential the client sent: the credential itself is never stored or logged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import parse_qsl, urlsplit

from headroom_core.db.sealed import Sealer
from headroom_core.project import resolve_project

#: Request headers that carry a client credential, in the order they are looked at:
#: Anthropic (``x-api-key``), OpenAI and OAuth bearers (``authorization``), Azure OpenAI
#: (``api-key``), Google (``x-goog-api-key``).
CREDENTIAL_HEADERS = ("x-api-key", "authorization", "api-key", "x-goog-api-key")
#: Query parameters that carry a credential (Google's ``?key=``, some gateways' ``api-key``).
CREDENTIAL_PARAMS = ("key", "api-key", "api_key")


@dataclass(frozen=True)
class Scope:
    """``project`` (see :func:`~headroom_core.project.resolve_project`), ``identity`` (32 hex
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


def request_scope(headers: Mapping[str, str], body: Mapping[str, Any] | None, path: str, sealer: Sealer) -> Scope:
    """The scope of one request: its project (header, else the working directory the agent
    states) and the keyed hash of its credential."""
    return scope_of(resolve_project(headers, body), credential(headers, path), sealer)
