"""Send more bytes on a streamed HTTP response from an async hook, on mitmproxy 11.0.2 exactly.

Why: when the model calls one of the proxy's tools in a streamed (SSE) response, the proxy asks
the model again and the client must receive that follow-up's events as the continuation of the
same response. mitmproxy 11 calls ``flow.response.stream`` synchronously inside its HTTP layer,
so a follow-up made there blocks the event loop, and every other flow with it, for as long as
the model generates. The ``response`` hook, by contrast, may be async: mitmproxy awaits it
before it ends the client's response (``HttpStream.send_response`` runs the hook, then
``flow_done`` sends the end of the message), and other flows run meanwhile. But mitmproxy has no
public call to write body bytes to a client from a hook.

This module is the one place that reaches into mitmproxy's internals for it, and refuses to
load on any other mitmproxy version (the internals it relies on are private and may change):

- :class:`ChunkInjected` is a ``MessageInjected`` event; mitmproxy routes injected events from
  the connection's root layer down to the flow's ``HttpLayer`` (through a ``CONNECT`` tunnel's
  layers too), as it does for ``inject.websocket``.
- ``HttpLayer._handle_event`` is wrapped: for a :class:`ChunkInjected` whose flow is one of the
  layer's streams it sends ``ResponseData`` for that stream straight to the client connection
  (HTTP/1 chunked framing or HTTP/2 DATA frames come from mitmproxy's own connection layer);
  the stream itself is paused in the ``response`` hook and is not involved. Events for flows of
  other layers are passed on unchanged.
- :func:`send` awaits the connection handler's ``server_event`` (mitmproxy's own entry point for
  injected events), so chunks go out in order, then waits for the client's socket to drain.
- :func:`on_client_gone`: while a hook of a flow runs (the ``response`` hook running a
  follow-up), mitmproxy holds the flow's stream paused and queues what happens to it: a client
  that closes its connection (HTTP/1, HTTP/2) or resets the flow's HTTP/2 stream
  (``RST_STREAM``, e.g. ``CANCEL``) reaches no hook until the hook returns (the ``error`` hook
  never runs for it; ``client_disconnected`` only at a connection's end, never for a reset
  stream). ``HttpLayer.event_to_child`` is wrapped: when the client side's protocol error
  (``RequestProtocolError``, mitmproxy's event for all three) is routed to a flow's stream, the
  flow's callback runs at once, before the event is queued.

Covered end to end by ``tests/e2e/test_sse_followup_e2e.py`` (HTTP/1.1 and HTTP/2 clients through a
real ``mitmdump``; a second flow completing while a slow follow-up streams) and
``tests/e2e/test_followup_faults_e2e.py`` (a client that leaves, or resets its HTTP/2 stream,
during a follow-up).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import mitmproxy.version
from mitmproxy import ctx, http
from mitmproxy.proxy import events
from mitmproxy.proxy.layers import http as http_layers
from mitmproxy.proxy.layers.http._events import RequestProtocolError, ResponseData

from headroom_core.errors import EnvironmentProblem

log = logging.getLogger("headroom")

PINNED_VERSION = "11.0.2"

if mitmproxy.version.VERSION != PINNED_VERSION:  # pragma: no cover - fails loudly on purpose
    raise ImportError(
        f"addons/headroom_stream_relay.py relies on private internals of mitmproxy {PINNED_VERSION} "
        f"(HttpLayer._handle_event, HttpLayer.event_to_child, ConnectionHandler.server_event), but mitmproxy "
        f"{mitmproxy.version.VERSION} is installed: install mitmproxy==11.0.2 or re-check the mechanism."
    )


class RelayError(RuntimeError, EnvironmentProblem):
    """The client's connection is gone (or never was live): nothing more can be sent."""


@dataclass
class ChunkInjected(events.MessageInjected):
    """Body bytes for the streamed response of ``flow`` (``message`` is unused: None)."""

    headroom_data: bytes = b""


# The unwrapped method survives a reload of this module (mitmproxy reloads changed scripts).
_original = getattr(http_layers.HttpLayer, "_headroom_original_handle_event", http_layers.HttpLayer._handle_event)


def _handle_event(self: http_layers.HttpLayer, event: events.Event) -> Generator[Any, Any, None]:
    data = getattr(event, "headroom_data", None)  # duck-typed: layers started before a reload
    if data is not None and isinstance(event, events.MessageInjected):
        for stream in list(self.streams.values()):
            if getattr(stream, "flow", None) is event.flow:
                client = self.connections.get(self.context.client)
                if client is not None and data:
                    yield from self.event_to_child(client, ResponseData(stream.stream_id, data))
                return
    yield from _original(self, event)


http_layers.HttpLayer._headroom_original_handle_event = _original  # type: ignore[attr-defined]
http_layers.HttpLayer._handle_event = _handle_event  # type: ignore[method-assign]

#: ``flow.metadata`` key of the callback :func:`on_client_gone` registers
GONE = "headroom_client_gone"
_original_to_child = getattr(
    http_layers.HttpLayer, "_headroom_original_event_to_child", http_layers.HttpLayer.event_to_child
)


def _event_to_child(self: http_layers.HttpLayer, child: Any, event: events.Event) -> Generator[Any, Any, None]:
    if isinstance(event, RequestProtocolError):
        flow = getattr(child, "flow", None)
        gone = flow.metadata.pop(GONE, None) if flow is not None else None
        if gone is not None:
            try:
                gone(event.message)
            except Exception:  # noqa: BLE001 - never break mitmproxy's event routing
                log.exception("headroom: the client-gone callback failed")
    yield from _original_to_child(self, child, event)


http_layers.HttpLayer._headroom_original_event_to_child = _original_to_child  # type: ignore[attr-defined]
http_layers.HttpLayer.event_to_child = _event_to_child  # type: ignore[method-assign]


def on_client_gone(flow: http.HTTPFlow, callback: Callable[[str], None]) -> None:
    """Call ``callback(why)`` once, at once, when the client of ``flow`` goes away before the
    flow ends: its connection closed, or (HTTP/2) its stream reset. ``why`` is mitmproxy's
    words (``Client disconnected.``, ``stream reset by client (CANCEL)``). Runs on the event
    loop, inside mitmproxy's event routing: ``callback`` must be quick and never block. A later
    call replaces the callback; :func:`forget_client_gone` removes it."""
    flow.metadata[GONE] = callback


def forget_client_gone(flow: http.HTTPFlow) -> None:
    """The flow's :func:`on_client_gone` callback is no longer called."""
    flow.metadata.pop(GONE, None)


async def send(flow: http.HTTPFlow, data: bytes) -> None:
    """Write ``data`` to the client as more of ``flow``'s streamed response body.

    Only valid while ``flow``'s ``response`` hook runs (the response was streamed:
    ``flow.response.stream`` set in ``responseheaders``). Returns once mitmproxy handed the bytes
    to the client's socket and its buffer drained. Raises :class:`RelayError` when the client's
    connection is gone.
    """
    if not data:
        return
    proxyserver = ctx.master.addons.get("proxyserver")
    handler = proxyserver.connections.get(flow.client_conn.id) if proxyserver is not None else None
    if handler is None or not flow.client_conn.connected:
        raise RelayError("the client's connection is closed")
    await handler.server_event(ChunkInjected(flow, None, headroom_data=data))
    io = handler.transports.get(handler.client)
    writer = getattr(io, "writer", None)
    closing = getattr(writer, "is_closing", None)
    if writer is None or (closing is not None and closing()):
        raise RelayError("the client's connection is closed")
    drain = getattr(writer, "drain", None)  # asyncio streams; mitmproxy_rs streams may lack it
    if drain is not None:
        try:
            await drain()
        except (ConnectionError, OSError) as e:
            raise RelayError(f"the client's connection failed: {e}") from e
