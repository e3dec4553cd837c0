"""Close a live WebSocket flow with a status code and reason, on mitmproxy 11.0.2 exactly.

mitmproxy 11 has no public call for this (mitmproxy issue #4773, "Allow to close WS
connections", open; PR #4774 declined in favour of a future core mechanism). ``flow.kill()``
drops the TCP connections without a close frame, so the client never learns why. This module is
the one place that reaches into mitmproxy's internals for it, and refuses to load on any other
mitmproxy version (the internals it relies on are private and may change):

- :class:`CloseInjected` is a ``WebSocketMessageInjected`` event, so mitmproxy routes it exactly
  like ``inject.websocket`` (``Proxyserver.inject_event`` → the HTTP layer → the flow's stream →
  its ``WebsocketLayer``), queued behind a ``websocket_message`` hook that is still running.
- ``WebsocketLayer.relay_messages`` is wrapped: for a :class:`CloseInjected` it queues a wsproto
  ``CloseConnection(code, reason)`` as if the *server* had sent it and lets mitmproxy's own close
  handling run (it sends the close frame to both peers, closes both connections, records
  ``flow.websocket.close_code``/``close_reason`` and fires ``websocket_end``).

Covered end to end by ``tests/e2e/test_ws_e2e.py`` (a real ``websockets`` client through a real
``mitmdump``).
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import mitmproxy.version
import wsproto.events
from mitmproxy import ctx, http
from mitmproxy.proxy import events
from mitmproxy.proxy.layers import websocket as ws_layer
from mitmproxy.websocket import WebSocketMessage
from wsproto.frame_protocol import Opcode

log = logging.getLogger("headroom")

PINNED_VERSION = "11.0.2"

if mitmproxy.version.VERSION != PINNED_VERSION:  # pragma: no cover - fails loudly on purpose
    raise ImportError(
        f"addons/headroom_ws_close.py relies on private internals of mitmproxy {PINNED_VERSION} "
        f"(WebsocketLayer.relay_messages), but mitmproxy {mitmproxy.version.VERSION} is installed: "
        "install mitmproxy==11.0.2 or re-check the mechanism against the new version."
    )


@dataclass
class CloseInjected(ws_layer.WebSocketMessageInjected):
    """Close the flow's WebSocket: ``headroom_close_code`` (RFC 6455 status code) and ``reason``
    (at most 123 bytes of UTF-8) go to both the client and the server."""

    headroom_close_code: int = 1000
    reason: str = ""


# The unwrapped method survives a reload of this module (mitmproxy reloads changed scripts).
_original_relay = getattr(ws_layer.WebsocketLayer, "_headroom_original_relay", ws_layer.WebsocketLayer.relay_messages)


def _relay_messages(self: ws_layer.WebsocketLayer, event: events.Event) -> Generator[Any, Any, None]:
    code = getattr(event, "headroom_close_code", None)  # duck-typed: layers started before a reload
    if code is not None:
        # As if the server had just sent this close frame: mitmproxy's own close handling relays
        # it to the client, answers it to the server, closes both connections, fires websocket_end.
        self.server_ws._events.append(wsproto.events.CloseConnection(code=code, reason=getattr(event, "reason", "")))
        event = events.DataReceived(self.context.server, b"")
    return _original_relay(self, event)


ws_layer.WebsocketLayer._headroom_original_relay = _original_relay  # type: ignore[attr-defined]
ws_layer.WebsocketLayer.relay_messages = _relay_messages  # type: ignore[method-assign]


def close(flow: http.HTTPFlow, code: int, reason: str) -> bool:
    """Close ``flow``'s live WebSocket with ``code`` and ``reason`` on both sides.

    Takes effect once the running ``websocket_message`` hook (if any) has returned: mitmproxy
    queues the event behind it. Returns False (and logs) when the flow's connection is gone.
    Raises ``ValueError`` if ``reason`` is longer than 123 bytes of UTF-8 (RFC 6455 §5.5).
    """
    size = len(reason.encode("utf-8"))
    if size > 123:
        raise ValueError(f"close reason is {size} bytes; at most 123 fit a close frame")
    # the message is a placeholder: only the event's type, code and reason are used
    event = CloseInjected(flow, WebSocketMessage(Opcode.TEXT, False, b""), headroom_close_code=code, reason=reason)
    try:
        ctx.master.addons.get("proxyserver").inject_event(event)
    except ValueError as e:  # "Flow is not from a live connection."
        log.warning("headroom: could not close the WebSocket to %s: %s", flow.request.host, e)
        return False
    return True
