"""Hold at most ``ws_max_frame_bytes`` of a WebSocket client message, on mitmproxy 11.0.2 exactly.

mitmproxy hands a WebSocket message to the ``websocket_message`` hook only once all of it has
arrived, kept in memory until then (``WebsocketConnection.frame_buf``), and has no option that
bounds it. A client frame over ``ws_max_frame_bytes`` is refused in that hook (an ``error``
event, then close 1009: :mod:`headroom_core.ws_policy`), so before this module a 1 GiB frame
was held whole first. Worse, mitmproxy grows the message with ``bytes +=`` per piece read, which
copies all of it each time: time grows with the square of its size (a 40 MiB frame took 11 s to
take in on the 2-core test machine; a 128 MiB one had not arrived after 60 s, when the upstream
gave up on the silent connection).

Both are fixed here, reaching into mitmproxy's (and wsproto's) internals, so the module refuses
to load on another mitmproxy version:

- ``WebsocketLayer.relay_messages`` is wrapped. Before a piece is read, the message being put
  together grows in a ``bytearray`` (in place: linear time), for both directions.
- After a piece from the client is read: a text message still arriving (wsproto's
  ``MessageDecoder.opcode``) that holds more than ``ws_max_frame_bytes``, and that the
  connection will refuse by its size (:meth:`~headroom_core.ws_connection.WsConnection.drops`:
  a ``response.create``, or the connection closed already), is dropped as it arrives: what was
  held is freed and counted in ``flow.metadata[DROPPED]``. When its end arrives, the hook gets
  the rest; ``addons/headroom_ws.py`` drops the message (never forwarded, not one byte of it
  went upstream) and refuses it by its whole size as before: the client gets the ``error``
  event and the close 1009 after it has sent the whole frame, as it would have. Any other
  message (binary, or a frame the connection passes unchanged) is kept whole, as before.

So the proxy holds at most the limit plus one read of a client message it will refuse.
Covered by ``tests/e2e/test_body_limit_e2e.py``; memory and time in ``bench/bench_transport.py
--oversized``.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import mitmproxy.version
from mitmproxy import http
from mitmproxy.proxy import events
from mitmproxy.proxy.layers import websocket as ws_layer
from wsproto.frame_protocol import Opcode

from headroom_core.ws_connection import WsConnection

PINNED_VERSION = "11.0.2"

if mitmproxy.version.VERSION != PINNED_VERSION:  # pragma: no cover - fails loudly on purpose
    raise ImportError(
        f"addons/headroom_ws_limit.py relies on private internals of mitmproxy {PINNED_VERSION} "
        f"(WebsocketLayer.relay_messages, WebsocketConnection.frame_buf), but mitmproxy {mitmproxy.version.VERSION} "
        "is installed: install mitmproxy==11.0.2 or re-check the mechanism."
    )

#: ``flow.metadata`` key: bytes of the client message now arriving that were dropped
DROPPED = "headroom_ws_dropped"
#: ``flow.metadata`` key: ``(connection, limit)`` of a guarded flow (:func:`guard`)
GUARD = "headroom_ws_guard"
#: The first bytes of a message a connection tells a ``response.create`` by (``carries``).
HEAD = 4096

_original_relay = ws_layer.WebsocketLayer.relay_messages


def _growing_in_place(ws: Any) -> None:
    """Make the last piece of ``ws``'s message being put together a ``bytearray``, so that
    mitmproxy's ``frame_buf[-1] += data`` appends in place."""
    if not isinstance(ws.frame_buf[-1], bytearray):
        ws.frame_buf[-1] = bytearray(ws.frame_buf[-1])


def _head(frame_buf: list[Any]) -> bytes:
    out = bytearray()
    for piece in frame_buf:
        out += piece[: HEAD - len(out)]
        if len(out) >= HEAD:
            break
    return bytes(out)


def _relay_messages(self: ws_layer.WebsocketLayer, event: events.Event) -> Generator[Any, Any, None]:
    from_client = None
    if isinstance(event, events.DataReceived):
        from_client = event.connection == self.context.client
        _growing_in_place(self.client_ws if from_client else self.server_ws)
    yield from _original_relay(self, event)
    if not from_client:
        return
    flow, ws = self.flow, self.client_ws
    guarded = flow.metadata.get(GUARD)
    if guarded is None or ws._proto._message_decoder.opcode is not Opcode.TEXT:
        return  # no limit here, or no text message still arriving
    conn, limit = guarded
    held = sum(len(piece) for piece in ws.frame_buf)
    dropped = flow.metadata.get(DROPPED, 0)
    if dropped or (held > limit and conn.drops(_head(ws.frame_buf))):
        flow.metadata[DROPPED] = dropped + held
        ws.frame_buf = [bytearray()]  # type: ignore[list-item]  # bytes-like: mitmproxy joins and measures it


ws_layer.WebsocketLayer.relay_messages = _relay_messages  # type: ignore[method-assign]


def guard(flow: http.HTTPFlow, conn: WsConnection, limit: int) -> None:
    """Hold at most ``limit`` bytes (``ws_max_frame_bytes``) of a client text message of
    ``flow`` that ``conn`` will refuse by its size (the module); the bytes dropped are in
    ``flow.metadata[DROPPED]`` when the message reaches the ``websocket_message`` hook."""
    flow.metadata[GUARD] = (conn, limit)
