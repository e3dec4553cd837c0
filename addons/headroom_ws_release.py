"""Release WebSocket messages once handled: memory stays flat over long and many sessions.

mitmproxy appends every message of a WebSocket flow to ``flow.websocket.messages`` and keeps
them for the flow's life (for its UI and ``-w`` flow files); a proxy that runs for days
under an agent holding a socket open would keep every frame of every turn. Hooks only ever look
at the newest message (``messages[-1]``, as mitmproxy's own addons do), so on each
``websocket_message`` the older ones are dropped, and at ``websocket_end`` the last one too.

Messages are kept when the user records flows (mitmproxy's ``save_stream_file`` option, ``-w``):
then they are what the user asked for.
"""

from __future__ import annotations

from mitmproxy import ctx, http


class ReleaseWebSocketMessages:
    """mitmproxy addon (hooks ``websocket_message``, ``websocket_end``)."""

    @staticmethod
    def _keeping() -> bool:
        return bool(getattr(ctx.options, "save_stream_file", None))

    def websocket_message(self, flow: http.HTTPFlow) -> None:
        ws = flow.websocket
        if ws is not None and len(ws.messages) > 1 and not self._keeping():
            del ws.messages[:-1]

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        ws = flow.websocket
        if ws is not None and not self._keeping():
            ws.messages.clear()


def make(state: object) -> ReleaseWebSocketMessages:
    """The addon instance ``addons/headroom.py`` loads (``state`` unused)."""
    return ReleaseWebSocketMessages()
