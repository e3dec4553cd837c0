"""Refuse an LLM request over ``max_body_bytes`` without holding its body, on mitmproxy 11.0.2 exactly.

What (issue 36, ``headroom_core/body_limit.py`` decides): a request whose head declares a
``Content-Length`` over the limit gets its 413, in its provider's error shape, as soon as the
head is read, before any of its body; one without a length (chunked, HTTP/2) gets it when the
bytes read pass the limit. The proxy never holds more than the limit plus one chunk of a
refused body, and forwards nothing upstream (no connection is asked for). The rest of the body
is read and dropped as it arrives (RFC 9112 §9.6: a client that writes its whole body before
it reads, as the SDKs do, then sees the 413 instead of a reset connection); an HTTP/1 answer
says ``connection: close``. The LLM addon records the ledger row as for any 413.

Why not mitmproxy's own mechanisms (read from its source, ``proxy/layers/http/__init__.py``):

- ``body_size_limit`` answers with mitmproxy's own HTML page ("Request body exceeds
  mitmproxy's body_size_limit."), not the provider's error shape the agents read; and it is one
  limit for every flow through the proxy and for responses too (a response over it becomes a
  502), not for LLM requests only.
- ``stream_large_bodies`` / ``flow.request.stream`` stream the body upstream: the upstream gets
  the request, which a refusal must not.
- ``flow.response`` set in the public ``requestheaders`` hook: mitmproxy 11 still reads the whole
  body into ``HttpStream.request_body_buf`` and answers only after its last byte.

So, like ``headroom_ws_close`` and ``headroom_stream_relay``, this module reaches into
mitmproxy's internals, and refuses to load on any other mitmproxy version:

- the public ``requestheaders`` hook decides from the head (:func:`body_limit`): over at once,
  it sets the 413 as ``flow.response`` and marks the flow (:func:`answer_at_once`); else it
  keeps a :class:`Counted` in ``flow.metadata``;
- ``HttpStream.state_wait_for_request_headers`` is wrapped: right after the hook, a marked
  flow is answered (:func:`_answer`);
- ``HttpStream.state_consume_request_body`` is wrapped: a counted flow's body bytes are counted
  as mitmproxy buffers them; the chunk that passes the limit empties the buffer and answers.

Answering: the stream is dropped from the HTTP layer first (``DropStream``), so the rest of the
body is dropped by mitmproxy's connection layer as it is read (it parses the framing, so an
HTTP/1 connection stays in step) and nothing queues while the hooks run; then mitmproxy's own
path for a response an addon set runs (``responseheaders`` and ``response`` hooks, the response
sent, the flow done), as in ``state_consume_request_body`` at the end of a message.

Covered end to end by ``tests/e2e/test_body_limit_e2e.py`` (raw sockets to a base-URL port
and through ``HTTPS_PROXY``, a real ``mitmdump``); memory in ``bench/bench_transport.py
--oversized``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import mitmproxy.version
from headroom_headers import header_dict
from headroom_llm import FlowState, where
from headroom_options import State
from mitmproxy import http
from mitmproxy.proxy import events
from mitmproxy.proxy.layers import http as http_layers
from mitmproxy.proxy.layers.http._events import RequestData
from mitmproxy.proxy.layers.http._hooks import HttpResponseHeadersHook

from headroom_core.body_limit import BodyLimit, body_limit
from headroom_core.request_plan import RequestPlan
from headroom_core.turn import Turn

log = logging.getLogger("headroom")

PINNED_VERSION = "11.0.2"

if mitmproxy.version.VERSION != PINNED_VERSION:  # pragma: no cover - fails loudly on purpose
    raise ImportError(
        f"addons/headroom_body_limit.py relies on private internals of mitmproxy {PINNED_VERSION} "
        f"(HttpStream.state_wait_for_request_headers, state_consume_request_body, request_body_buf), but mitmproxy "
        f"{mitmproxy.version.VERSION} is installed: install mitmproxy==11.0.2 or re-check the mechanism."
    )

#: ``flow.metadata`` key: answer the response an addon set in ``requestheaders`` at once
AT_ONCE = "headroom_answer_at_once"
#: ``flow.metadata`` key of a :class:`Counted`
COUNTED = "headroom_body_counted"


@dataclass
class Counted:
    """A request whose body is counted as it arrives: ``limit`` (from its head) and ``refuse``,
    called once with the bytes read when they pass the limit; it sets ``flow.response``."""

    limit: BodyLimit
    refuse: Callable[[int], None]


def answer_at_once(flow: http.HTTPFlow) -> None:
    """Send the ``flow.response`` an addon set in its ``requestheaders`` hook as soon as the
    hooks are done, and drop the request's body as it arrives (never held, never forwarded).
    Without this mitmproxy reads the whole body first. The client gets no ``100 Continue``."""
    flow.metadata[AT_ONCE] = True
    flow.request.stream = False  # a streamed request would be sent upstream (and cannot have a response)
    flow.request.headers.pop("expect", None)


HttpStream = http_layers.HttpStream

# The unwrapped methods survive a reload of this module (mitmproxy reloads changed scripts).
_original_headers = getattr(HttpStream, "_headroom_original_headers", HttpStream.state_wait_for_request_headers)
_original_consume = getattr(HttpStream, "_headroom_original_consume", HttpStream.state_consume_request_body)


def _drop(self: Any, event: events.Event) -> Generator[Any, Any, None]:
    """The client side of an answered stream: what still reaches it is dropped (the body's
    events that queued while a hook ran)."""
    yield from ()


def _answer(self: Any) -> Generator[Any, Any, None]:
    """Send ``self.flow.response`` now, drop the rest of the request body (the module)."""
    self.request_body_buf.clear()
    self.client_state = self._headroom_drop
    yield http_layers.DropStream(self.stream_id)
    if self.flow.request.http_version.startswith("HTTP/1"):
        self.flow.response.headers["connection"] = "close"
    # as state_consume_request_body does for a response an addon set
    self.flow.response.timestamp_start = time.time()
    yield HttpResponseHeadersHook(self.flow)
    if (yield from self.check_killed(True)):
        return
    self.client_state = self.state_done  # so send_response ends the flow (flow_done)
    yield from self.send_response()
    if self.client_state == self.state_done:
        self.client_state = self._headroom_drop


def _state_wait_for_request_headers(self: Any, event: events.Event) -> Generator[Any, Any, None]:
    yield from _original_headers(self, event)
    flow = self.flow
    if (
        flow is not None
        and flow.metadata.get(AT_ONCE)
        and flow.response is not None
        and self.client_state == self.state_consume_request_body
    ):
        yield from _answer(self)


def _state_consume_request_body(self: Any, event: events.Event) -> Generator[Any, Any, None]:
    counted = self.flow.metadata.get(COUNTED)
    if isinstance(counted, Counted) and isinstance(event, RequestData):
        read = len(self.request_body_buf) + len(event.data)
        if counted.limit.passed(read):
            del self.flow.metadata[COUNTED]
            self.request_body_buf.clear()
            counted.refuse(read)
            yield from _answer(self)
            return
    yield from _original_consume(self, event)


HttpStream._headroom_drop = _drop  # type: ignore[attr-defined]
HttpStream._headroom_original_headers = _original_headers  # type: ignore[attr-defined]
HttpStream._headroom_original_consume = _original_consume  # type: ignore[attr-defined]
HttpStream.state_wait_for_request_headers = _state_wait_for_request_headers  # type: ignore[method-assign]
HttpStream.state_consume_request_body = _state_consume_request_body  # type: ignore[method-assign]


class BodyLimitGuard:
    """mitmproxy addon (hook ``requestheaders``): ``max_body_bytes`` from the request's head."""

    def __init__(self, state: State) -> None:
        self.state = state

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        rt = self.state.runtime
        if rt is None or flow.response is not None:
            return
        req = flow.request
        limit = body_limit(req.method, req.path, header_dict(req.headers), rt.settings.max_body_bytes)
        if limit is None:
            return
        if limit.over_at_once:
            assert limit.declared is not None
            self._refuse(
                flow,
                limit.refusal(limit.declared, declared=True),
                f"from its head (Content-Length {limit.declared} bytes)",
            )
            answer_at_once(flow)
            return

        def refuse(read: int) -> None:
            self._refuse(flow, limit.refusal(read, declared=False), f"after {read} bytes read")

        flow.metadata[COUNTED] = Counted(limit, refuse)

    def _refuse(self, flow: http.HTTPFlow, plan: RequestPlan, how: str) -> None:
        """Answer ``flow`` with ``plan``'s 413 (``how``: when, for the log line);
        the LLM addon records it in the ledger (its ``response`` hook)."""
        rt = self.state.runtime
        assert rt is not None
        flow.metadata["headroom"] = FlowState(Turn(rt, plan, user_agent=flow.request.headers.get("user-agent", "")))
        flow.response = http.Response.make(plan.status, plan.error_body or b"", {"content-type": "application/json"})
        log.warning(
            "headroom: %s %s refused %s: over max_body_bytes (%d bytes)",
            flow.request.method,
            where(flow),
            how,
            rt.settings.max_body_bytes,
        )


def make(state: State) -> BodyLimitGuard:
    """The addon instance ``addons/headroom.py`` appends to its ``addons`` list."""
    return BodyLimitGuard(state)
