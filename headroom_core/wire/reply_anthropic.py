"""What the client gets from an Anthropic Messages turn in which the proxy answered its own tools,
and the request that continues such a turn.

- :class:`StreamView` turns the SSE events of each round (the client's response, then each
  follow-up's) into one stream for the client: one ``message_start``; every content block
  except calls to the proxy's tools, numbered on from block to block across rounds; the
  ``message_delta``/``message_stop`` of the last round only, with usage summed over rounds.
- :func:`merge` does the same for non-streamed responses.
- :func:`followup` is the next request: the request as it was sent, plus the model's turn
  exactly as the provider sent it and the proxy's ``tool_result`` blocks.
- :meth:`StreamView.failure` ends a stream whose follow-up the provider failed with an ``error``
  event, as the API sends one mid-stream (Messages API, "Streaming messages": "error events"):
  the SDKs raise on it and clients retry.

Events and values the proxy does not change keep their exact bytes; changed events keep every
member's text except the one changed (:mod:`headroom_core.wire.rawjson`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from headroom_core.wire import anthropic as _dialect
from headroom_core.wire.assemble_anthropic import MessageAssembler
from headroom_core.wire.blocks import ImageAnswer, ToolCall, sum_usage
from headroom_core.wire.provider_error import ProviderError, with_message
from headroom_core.wire.rawjson import Raw, RawObject, append_to_array, dumps, elements, with_member
from headroom_core.wire.sse import SSE, SSEEvent

#: Streamed responses are SSE.
framing = SSE

#: A response object's usage figures (:class:`~headroom_core.wire.blocks.Usage`).
usage = _dialect.usage

#: Usage figures summed over rounds (the Messages API's ``usage`` members).
USAGE_KEYS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")

#: The error ``type`` the Messages API gives each HTTP status (Messages API, "Errors"); any
#: other 5xx is ``api_error``.
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
               413: "request_too_large", 429: "rate_limit_error", 500: "api_error", 504: "timeout_error", 529: "overloaded_error"}  # fmt: skip


def error_event(err: ProviderError) -> SSEEvent:
    """The ``error`` event for ``err``: the provider's error object when its body is one (its
    message carrying the wait, :attr:`ProviderError.hinted`), else one made from the status."""
    parsed = err.parsed
    if isinstance(parsed, dict) and parsed.get("type") == "error" and isinstance(parsed.get("error"), dict):
        try:
            return SSEEvent.make(with_message(err.body.decode("utf-8"), ("error", "message"), err.hinted), "error")
        except ValueError:
            pass
    return _event({"type": "error", "error": {"type": ERROR_TYPES.get(err.status, "api_error"), "message": err.hinted}})


def _hidden_call(block: Any, hidden: frozenset[str]) -> bool:
    return isinstance(block, dict) and block.get("type") == "tool_use" and block.get("name") in hidden


@dataclass
class ViewState:
    """What the client has been sent so far, shared by every round of one response."""

    next_index: int = 0
    open: set[int] = field(default_factory=set)
    started: bool = False
    client_calls: bool = False


class StreamView:
    """One round's events → the client's events (see the module docstring).

    :meth:`feed` returns the events to send now; ``message_delta`` and ``message_stop`` are held
    until :meth:`close`. In a follow-up round (``round_no`` > 0) an ``error`` event is held: it
    sets :attr:`failed`, and the loop ends the response with it (:meth:`failure`).
    """

    def __init__(self, hidden: frozenset[str], state: ViewState, round_no: int) -> None:
        self.hidden = hidden
        self.state = state
        self.round_no = round_no
        self.asm = MessageAssembler()
        self._map: dict[int, int | None] = {}
        self._held: list[SSEEvent] = []
        self.failed: str | None = None
        self._error: SSEEvent | None = None

    @property
    def complete(self) -> bool:
        """Whether the round's stream reached its end (``message_stop``)."""
        return self.asm.ended

    def message_text(self) -> str:
        """The round's response object, as the provider would have sent it unstreamed."""
        return self.asm.text()

    def feed(self, ev: SSEEvent) -> list[SSEEvent]:
        """The events the client gets now for the upstream event ``ev``."""
        d = ev.parsed
        if not isinstance(d, dict):
            return [ev]
        self.asm.accept(d, ev.data)
        t = d.get("type")
        if t == "message_start":
            if self.state.started:
                return []
            self.state.started = True
            return [ev]
        if t == "error" and self.round_no > 0:
            err = d.get("error")
            self.failed = str(err.get("message") if isinstance(err, dict) else err)[:200]
            self._error = ev
            return []
        if t in ("message_delta", "message_stop"):
            self._held.append(ev)
            return []
        if t in ("content_block_start", "content_block_delta", "content_block_stop") and isinstance(
            d.get("index"), int
        ):
            return self._block_event(ev, t, d)
        return [ev]

    def _block_event(self, ev: SSEEvent, t: str, d: dict[str, Any]) -> list[SSEEvent]:
        idx = d["index"]
        if t == "content_block_start" and idx not in self._map:
            block = d.get("content_block")
            if _hidden_call(block, self.hidden):
                self._map[idx] = None
            else:
                self._map[idx] = self.state.next_index
                self.state.next_index += 1
                self.state.open.add(self._map[idx])  # type: ignore[arg-type]
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    self.state.client_calls = True
        if idx not in self._map:
            return [ev]  # a delta for a block never started: not ours to judge
        ci = self._map[idx]
        if ci is None:
            return []
        if t == "content_block_stop":
            self.state.open.discard(ci)
        return [ev if ci == idx else ev.with_data(with_member(ev.data, "index", ci))]

    def close(self, notice: str | None, texts: list[str]) -> list[SSEEvent]:
        """The client's last events: open blocks stopped, a text block with ``notice`` (if
        given), then this round's ``message_delta`` (stop reason ``end_turn`` when no call is
        left for the client or a notice ends the turn; after follow-ups, the usage of every
        round's response object in ``texts`` summed) and ``message_stop`` (made up when the
        upstream never sent them)."""
        totals = usage_totals([Raw(t).value for t in texts]) if len(texts) > 1 else None
        out = [_event({"type": "content_block_stop", "index": i}) for i in sorted(self.state.open)]
        self.state.open.clear()
        if notice:
            i = self.state.next_index
            self.state.next_index += 1
            out += [
                _event({"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}}),
                _event({"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": notice}}),
                _event({"type": "content_block_stop", "index": i}),
            ]
        held = list(self._held)
        if not any(isinstance(e.parsed, dict) and e.parsed.get("type") == "message_delta" for e in held):
            held.insert(
                0,
                _event(
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": None, "stop_sequence": None},
                        "usage": {"output_tokens": 0},
                    }
                ),
            )
        if not any(isinstance(e.parsed, dict) and e.parsed.get("type") == "message_stop" for e in held):
            held.append(_event({"type": "message_stop"}))
        last_delta = max(
            i for i, e in enumerate(held) if isinstance(e.parsed, dict) and e.parsed.get("type") == "message_delta"
        )
        for i, e in enumerate(held):
            if isinstance(e.parsed, dict) and e.parsed.get("type") == "message_delta":
                out.append(self._edit_delta(e, notice, totals if i == last_delta else None))
            else:
                out.append(e)
        return out

    def failure(self, err: ProviderError | None, texts: list[str]) -> list[SSEEvent]:
        """The client's last event when the provider failed the response: for ``err`` (a
        follow-up refused or whose connection failed) :func:`error_event`; for None this round's
        own ``error`` event as it came (the one that set :attr:`failed`). The blocks sent so far
        stay as they are, as when the API fails a stream itself."""
        if err is None and self._error is not None:
            return [self._error]
        return [error_event(err or ProviderError(500, why=self.failed or "the provider failed the stream"))]

    def _edit_delta(self, ev: SSEEvent, notice: str | None, totals: dict[str, int] | None) -> SSEEvent:
        d = ev.parsed
        obj = RawObject.parse(ev.data)
        changed = False
        delta = d.get("delta") if isinstance(d.get("delta"), dict) else {}
        stop = delta.get("stop_reason")
        if (stop == "tool_use" and not self.state.client_calls) or (notice and stop in (None, "tool_use")):
            old = obj.raw("delta")
            obj["delta"] = Raw(with_member(old.text if old is not None else "{}", "stop_reason", "end_turn"))
            changed = True
        if totals:
            u = obj.raw("usage")
            text = u.text if u is not None and u.text.lstrip().startswith("{") else "{}"
            for k, v in totals.items():
                text = with_member(text, k, v)
            obj["usage"] = Raw(text)
            changed = True
        return ev.with_data(obj.text()) if changed else ev


def _event(data: dict[str, Any]) -> SSEEvent:
    return SSEEvent.make(dumps(data), data["type"])


def tool_calls(message: dict[str, Any]) -> list[ToolCall]:
    """The ``tool_use`` blocks of a response object."""
    calls = []
    for b in message.get("content") or []:
        if isinstance(b, dict) and b.get("type") == "tool_use":
            calls.append(ToolCall(str(b.get("id", "")), str(b.get("name", "")), b.get("input")))
    return calls


def usage_totals(messages: list[dict[str, Any]]) -> dict[str, int]:
    """:data:`USAGE_KEYS` summed over ``messages`` (keys no message reported are left out)."""
    return sum_usage(messages, USAGE_KEYS)


def completed(message: dict[str, Any]) -> bool:
    """Whether a non-streamed body is a complete response (a ``message`` object; servers that
    speak the dialect without ``type`` count too)."""
    return message.get("type", "message") == "message" and isinstance(message.get("content"), list)


#: Stop reasons of a response the provider cut at a limit (Messages API, "Handling stop
#: reasons": ``max_tokens``, and ``model_context_window_exceeded`` when the context window ran out).
TRUNCATED = ("max_tokens", "model_context_window_exceeded")


def truncated(message: dict[str, Any]) -> bool:
    """Whether a response object stopped at a token limit (``stop_reason`` in
    :data:`TRUNCATED`): its last block, a tool call's input among them, may be incomplete."""
    return message.get("stop_reason") in TRUNCATED


def merge(texts: list[str], hidden: frozenset[str], notice: str | None) -> str:
    """One response object for the client from every round's response (``texts``, JSON text,
    in order): the last round's object with the visible blocks of every round, a text block
    with ``notice`` (if given) and, over several rounds, usage summed. Raises ``ValueError``
    when a text is not a response object."""
    last = RawObject.parse(texts[-1])
    blocks: list[Raw] = []
    client_calls = False
    for t in texts:
        content = RawObject.parse(t).raw("content")
        for raw in elements(content.text) if content is not None else []:
            block = raw.value
            if _hidden_call(block, hidden):
                continue
            client_calls = client_calls or (isinstance(block, dict) and block.get("type") == "tool_use")
            blocks.append(raw)
    if notice:
        blocks.append(Raw(dumps({"type": "text", "text": notice})))
    last["content"] = blocks
    stop = last.get("stop_reason")
    if (stop == "tool_use" and not client_calls) or (notice and stop in (None, "tool_use")):
        last["stop_reason"] = "end_turn"
    if len(texts) > 1:
        u = last.raw("usage")
        text = u.text if u is not None and u.text.lstrip().startswith("{") else "{}"
        for k, v in usage_totals([Raw(t).value for t in texts]).items():
            text = with_member(text, k, v)
        last["usage"] = Raw(text)
    return last.text()


def followup(request: str, message: str, results: list[tuple[ToolCall, str]]) -> str:
    """The next request's JSON text: ``request`` (as sent) with the assistant turn (``message``'s
    ``content`` exactly as the provider sent it) and a user turn of ``tool_result`` blocks, one
    per ``(call, answer text)``. Raises ``ValueError`` when ``request`` has no ``messages``
    array or ``message`` is not a response object."""
    content = RawObject.parse(message).raw("content") or Raw("[]")
    turn = {"role": "assistant", "content": content}
    answers = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": c.call_id, "content": _result_content(text)} for c, text in results
        ],
    }
    return append_to_array(request, "messages", [turn, answers])


def _result_content(text: str) -> Any:
    """A ``tool_result``'s content: the text, or for an :class:`~headroom_core.wire.blocks.ImageAnswer`
    a text block and an ``image`` block (a tool result "can be a string or a list of content
    blocks", text and image among them: Messages API reference)."""
    if isinstance(text, ImageAnswer):
        return [
            {"type": "text", "text": str(text)},
            {"type": "image", "source": {"type": "base64", "media_type": text.media_type, "data": text.data}},
        ]
    return str(text)


def notice_message(notice: str, model: str = "") -> str:
    """A whole response object holding only ``notice`` (when nothing the provider sent can be
    used)."""
    return dumps(
        {
            "id": "msg_headroom_notice",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": notice}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
    )
