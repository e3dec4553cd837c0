"""The response side of Bedrock's InvokeModel for Anthropic models (:class:`~headroom_core.wire.protocol.ReplySide`):
the Messages API's (:mod:`headroom_core.wire.reply_anthropic`), whose stream events arrive inside
AWS event-stream ``chunk`` frames (:mod:`headroom_core.wire.eventstream`).

A non-streamed ``invoke`` answers a Messages response object: merge, follow-up, calls and usage
are the Messages API's. ``invoke-with-response-stream`` frames each Messages stream event as
``{"bytes": base64(<event JSON>)}``: :class:`StreamView` hands the Messages view the events inside
and frames what it returns, a frame it passes unchanged keeping its bytes. An exception frame
(``:message-type: exception``) in a follow-up round fails the round, as an ``error`` event does;
a failed follow-up ends the client's stream with an exception frame (:meth:`StreamView.failure`),
as Bedrock ends a stream it fails.
"""

from __future__ import annotations

from typing import Any

from headroom_core.wire import reply_anthropic as _messages
from headroom_core.wire.eventstream import EVENT_STREAM, chunk_frame, exception_event, is_frame
from headroom_core.wire.provider_error import ProviderError
from headroom_core.wire.sse import SSEEvent

#: Streamed responses are AWS event-stream frames.
framing = EVENT_STREAM

ViewState = _messages.ViewState
merge = _messages.merge
followup = _messages.followup
tool_calls = _messages.tool_calls
usage = _messages.usage
completed = _messages.completed
truncated = _messages.truncated
notice_message = _messages.notice_message


def _framed(ev: SSEEvent) -> SSEEvent:
    """``ev`` as a frame: itself when it is one (passed on unchanged), else its data in a new
    ``chunk`` frame."""
    return ev if is_frame(ev.raw) else SSEEvent(chunk_frame(ev.data), "chunk", ev.data)


class StreamView:
    """One round's frames → the client's frames (the Messages view inside ``chunk`` frames)."""

    def __init__(self, hidden: frozenset[str], state: Any, round_no: int) -> None:
        self._inner = _messages.StreamView(hidden, state, round_no)
        self.round_no = round_no
        self.failed: str | None = None
        self._error: SSEEvent | None = None

    @property
    def complete(self) -> bool:
        return self._inner.complete

    def message_text(self) -> str:
        return self._inner.message_text()

    def feed(self, ev: SSEEvent) -> list[SSEEvent]:
        if (ev.event or "").startswith("exception:"):
            if self.round_no > 0:
                msg = ev.parsed.get("message") if isinstance(ev.parsed, dict) else None
                self.failed = str(msg or ev.event)[:200]
                self._error = ev
                return []
            return [ev]
        out = [_framed(e) for e in self._inner.feed(ev)]
        self.failed = self._inner.failed
        return out

    def close(self, notice: str | None, texts: list[str]) -> list[SSEEvent]:
        return [_framed(e) for e in self._inner.close(notice, texts)]

    def failure(self, err: ProviderError | None, texts: list[str]) -> list[SSEEvent]:
        """The client's last frame when the provider failed the response: this round's own
        exception frame (``err`` None) or one for ``err`` (``throttlingException`` for a rate
        limit, …; the provider's message with the wait)."""
        if err is None and self._error is not None:
            return [self._error]
        if err is None:
            err = ProviderError(500, why=self.failed or "the provider failed the stream")
        return [exception_event(err.kind, err.hinted)]
