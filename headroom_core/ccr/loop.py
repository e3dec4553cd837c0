"""The retrieval loop: the proxy answers calls to its own tools and the client sees one response.

Non-streamed responses: :func:`complete_json` (async; follow-ups through the caller's async
sender). Streamed responses: :class:`StreamLoop`, a callable for mitmproxy's
``flow.response.stream`` that passes SSE events through as they arrive and holds back only from
the moment a call to a proxy tool starts; at the end of the stream it sends the follow-up
request (synchronously, through the caller's sender) and streams its events on as the
continuation of the same response. Rounds are bounded by ``max_rounds``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from types import ModuleType
from typing import Any, Awaitable, Callable, Iterable, Iterator

from headroom_core.wire.blocks import ToolCall, Usage
from headroom_core.wire.sse import SSEEvent, SSEParser

log = logging.getLogger("headroom")

Answer = Callable[[ToolCall], str]
AsyncSend = Callable[[dict[str, Any]], Awaitable[tuple[int, bytes]]]
StreamSend = Callable[[dict[str, Any]], Iterator[bytes]]


async def complete_json(
    mod: ModuleType, request: dict[str, Any], response: dict[str, Any], hidden: frozenset[str], answer: Answer, send: AsyncSend, max_rounds: int
) -> tuple[dict[str, Any], int]:
    """Answer the proxy's own tool calls in a non-streamed ``response`` until the model stops
    calling them (at most ``max_rounds`` follow-ups). Returns ``(response for the client, rounds)``.

    When the model calls the proxy's tools together with client tools, the proxy's calls are
    removed and the rest goes to the client (the client could not answer them). A follow-up that
    fails (non-200, not JSON) ends the loop with the last good response, proxy calls removed.
    """
    merged, last, req, rounds = response, response, request, 0
    while rounds < max_rounds:
        calls = mod.response_tool_calls(last)
        mine = [c for c in calls if c.name in hidden]
        if not mine:
            break
        if len(mine) != len(calls):
            # the client must answer its own calls: the proxy's are carried out (a memory_save
            # is kept) but their results cannot reach the model in this turn; the calls are removed
            for c in mine:
                await asyncio.to_thread(answer, c)
            log.warning("headroom: model called proxy tools together with client tools; proxy calls carried out and removed")
            break
        results = [(c, await asyncio.to_thread(answer, c)) for c in mine]
        req = mod.followup_body(req, last, results)
        status, raw = await send(req)
        try:
            nxt = json.loads(raw) if status == 200 else None
        except ValueError:
            nxt = None
        if not isinstance(nxt, dict):
            log.warning("headroom: follow-up request failed with status %s", status)
            break
        rounds += 1
        merged, last = mod.merge_responses(merged, nxt, set(hidden)), nxt
    if _has_hidden(mod, merged, hidden):
        merged = mod.strip_calls(merged, set(hidden))
    return merged, rounds


def _has_hidden(mod: ModuleType, resp: dict[str, Any], hidden: frozenset[str]) -> bool:
    return any(c.name in hidden for c in mod.response_tool_calls(resp))


class StreamLoop:
    """``flow.response.stream`` callable for an SSE response (see the module docstring).

    ``usage`` holds the provider's usage figures once the stream ended; ``rounds`` the number of
    follow-ups made. With no hidden tools it is a pure tap: chunks pass through unchanged.
    """

    def __init__(self, mod: ModuleType, request: dict[str, Any] | None, hidden: frozenset[str], answer: Answer, send: StreamSend, max_rounds: int) -> None:
        self.mod = mod
        self.request = request
        self.hidden = hidden
        self.answer = answer
        self.send = send
        self.max_rounds = max_rounds
        self.rounds = 0
        self.usage = Usage()
        self.called: list[str] = []
        self._parser = SSEParser()
        self._asm = mod.StreamAssembler(set(hidden))
        self._held: list[SSEEvent] = []
        self._shift = 0  # index shift of the stream being relayed (follow-ups continue the first)
        self._usage_events: list[dict[str, Any]] = []

    def __call__(self, chunk: bytes) -> bytes | Iterable[bytes]:
        if not self.hidden:
            for ev in self._parser.feed(chunk):
                self._asm.accept(ev)
            if not chunk:
                self._finish_usage(self._asm.message())
                return []
            return chunk
        # Never hand mitmproxy an empty chunk: on a chunked HTTP/1.1 response it would be sent as
        # the terminating zero-length chunk and end the client's stream early.
        if chunk:
            out = self._pass(self._parser.feed(chunk))
            return [out] if out else []
        tail = self._pass(self._parser.feed(b""))
        return self._final_chunks(tail)

    def _final_chunks(self, tail: bytes) -> Iterator[bytes]:
        """The held tail, then the follow-up's events as they arrive (lazily: mitmproxy writes
        each chunk to the client before asking for the next)."""
        if tail:
            yield tail
        for c in self._end_of_stream():
            if c:
                yield c

    def _pass(self, events: list[SSEEvent]) -> bytes:
        out = []
        for ev in events:
            if self._asm.accept(ev) and not self._held:
                out.append(ev.raw)
            else:
                self._held.append(ev)
        return b"".join(out)

    def _end_of_stream(self) -> Iterator[bytes]:
        msg = self._asm.message()
        if not self._held:
            self._finish_usage(msg)
            return
        calls = self.mod.response_tool_calls(msg)
        mine = [c for c in calls if c.name in self.hidden]
        if not mine or len(mine) != len(calls) or self.request is None or self.rounds >= self.max_rounds:
            # the proxy cannot continue alone: its calls are carried out (a memory_save is kept)
            # and removed, and the client gets the rest of what was held back
            for c in mine:
                self.answer(c)
            self._finish_usage(msg)
            yield b"".join(self.mod.drop_hidden(self._held, set(self.hidden), self._shift))
            return
        shift = self._shift + getattr(self._asm, "emitted_blocks", getattr(self._asm, "emitted_items", 0))
        results = [(c, self.answer(c)) for c in mine]
        self.request = self.mod.followup_body(self.request, msg, results)
        self.rounds += 1
        self._usage_events.append(msg)  # earlier rounds count in usage and calls
        # the follow-up's own stream: continue the client's response with it
        self._shift = shift
        self._held = []
        self._asm = self.mod.StreamAssembler(set(self.hidden))
        parser = SSEParser()
        try:
            for raw in self.send(self.request):
                for ev in parser.feed(raw):
                    yield from self._continue(ev, shift)
            for ev in parser.feed(b""):
                yield from self._continue(ev, shift)
        except Exception:  # noqa: BLE001 - the client already has part of the answer
            log.exception("headroom: follow-up stream failed")
            return
        yield from self._end_of_stream()

    def _continue(self, ev: SSEEvent, shift: int) -> Iterator[bytes]:
        if self._asm.accept(ev) and not self._held:
            out = self.mod.continuation_events(ev, shift)
            if out:
                yield out
        else:
            self._held.append(ev)

    def _finish_usage(self, msg: dict[str, Any]) -> None:
        total = Usage()
        self.called = [c.name for m in self._usage_events + [msg] for c in self.mod.response_tool_calls(m)]
        for m in self._usage_events + [msg]:
            u = self.mod.usage(m)
            total = Usage(*[(a or 0) + (b or 0) if (a is not None or b is not None) else None for a, b in zip(
                (total.input_tokens, total.output_tokens, total.cache_read_tokens, total.cache_write_tokens),
                (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens),
            )])
        self.usage = total
