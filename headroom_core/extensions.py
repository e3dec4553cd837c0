"""Extension points of the request walk (docs/architecture.md, steps 4, 6, 8 and 9).

- **Proxy tools**: tools the proxy offers the model and answers itself (``headroom_retrieve``,
  memory tools). The client never sees their calls.
- **Injectors**: may contribute one bounded text for the tail of the latest user message
  (memory, past failures); never ``system`` or ``tools``, which are the cached prefix.
- **Observers**: see every planned request (the live learner), off the forwarding decision.

Feature packages register themselves with a module-level ``register(ext)`` function, called by
:func:`headroom_core.runtime.load_extensions`. The types here are generic in the runtime they
are called with (``RT``: :class:`headroom_core.runtime.Runtime`, which holds an
``Extensions[Runtime]``), so this module does not import the runtime that imports it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Generic, Mapping, Protocol, TypeVar

from headroom_core.wire.blocks import ToolCall, ToolOutput
from headroom_core.wire.detect import Dialect
from headroom_core.wire.request_view import RequestView, view_of

log = logging.getLogger("headroom")

#: The runtime extensions are called with (:class:`headroom_core.runtime.Runtime`).
RT = TypeVar("RT")
RT_contra = TypeVar("RT_contra", contravariant=True)


@dataclass(frozen=True)
class RequestContext:
    """What extensions may know of one request.

    ``body`` is the client's parsed JSON (read-only by convention); ``query`` the latest user
    text; ``live_from`` the index of the first message of the live zone (messages before it are
    frozen); ``offloaded`` whether this request offloaded anything; ``client`` the product name
    from the User-Agent; ``scope`` the id of the request's :class:`~headroom_core.scope.Scope`
    (project and client identity: what stored originals are kept under); ``dry_run`` True for a
    token-counting request (nothing may be stored, learned or recorded); ``size`` the body's
    bytes.
    """

    dialect: Dialect
    body: Mapping[str, Any]
    headers: Mapping[str, str]
    project: str
    session_key: str
    query: str
    client: str
    tool_outputs: tuple[ToolOutput, ...]
    live_from: int
    offloaded: bool = False
    scope: str = ""
    dry_run: bool = False
    size: int = 0

    @cached_property
    def view(self) -> RequestView:
        """The request's neutral view (:class:`~headroom_core.wire.request_view.RequestView`)."""
        return view_of(self.dialect, self.body)


class ProxyTool(Protocol[RT_contra]):
    """A tool the proxy offers and answers. ``name``, ``description`` and ``schema`` (JSON
    Schema of its input) define it; ``offered`` decides, once per session at its first request,
    whether the session gets the tool (it then keeps it for the whole session, so the cached
    ``tools`` prefix never changes); ``answer`` returns the tool result text (never raises:
    errors are described in the text; ``ctx`` None when the request's context was lost)."""

    name: str
    description: str
    schema: dict[str, Any]

    def offered(self, rt: RT_contra, ctx: RequestContext) -> bool: ...

    def answer(self, rt: RT_contra, ctx: RequestContext | None, call: ToolCall) -> str: ...


#: May return one bounded text for the tail of the latest user message.
Injector = Callable[[RT, RequestContext], "str | None"]
#: Sees a planned request, after forwarding.
Observer = Callable[[RT, RequestContext], None]


@dataclass
class Extensions(Generic[RT]):
    """The registered proxy tools (in offering order), injectors and observers.

    ``observers`` write what a later request must find (learning, memory): the end of the answer
    waits for them. ``diagnostics`` are observers whose records only reports read (the prefix
    log): they run after the observers, and nothing a client sees waits for them.
    """

    tools: list[ProxyTool[RT]] = field(default_factory=list)
    injectors: list[Injector[RT]] = field(default_factory=list)
    observers: list[Observer[RT]] = field(default_factory=list)
    diagnostics: list[Observer[RT]] = field(default_factory=list)


class HasExtensions(Protocol):
    """What :func:`answer_call` needs of a runtime: its extensions."""

    @property
    def extensions(self) -> Extensions[Any]: ...


def answer_call(rt: HasExtensions, ctx: RequestContext | None, call: ToolCall) -> str:
    """The tool result text for a call to one of the proxy's tools (an error text for an
    unknown name or a tool that raised). The client's answer waits for it: its database
    statements share a lock-wait budget (:mod:`headroom_core.db.lock_wait`)."""
    from headroom_core.db import lock_wait  # SQLAlchemy: imported once a proxy tool is answered

    for tool in rt.extensions.tools:
        if tool.name == call.name:
            try:
                with lock_wait.bounded():
                    return tool.answer(rt, ctx, call)
            except Exception as e:  # noqa: BLE001 - the model gets the error, the proxy goes on
                log.exception("headroom: proxy tool %s failed", call.name)
                return f"{call.name} error: {type(e).__name__}: {e}"
    return f"error: {call.name} is not a tool of this proxy"
