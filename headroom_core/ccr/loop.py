"""The retrieval loop: the proxy answers calls to its own tools and the client sees one response.

Decisions only; no I/O here. The addons move bytes and run what blocks (answering a proxy tool
reads the database; a follow-up is an HTTP request) off mitmproxy's event loop.

- Streamed responses (over HTTP in the dialect's framing, ``reply.framing``: SSE, NDJSON lines,
  AWS event-stream frames; Responses over WebSocket through
  :mod:`headroom_core.ccr.ws_loop`): :class:`StreamLoop`. Each round's events go through the
  dialect's ``StreamView`` (``headroom_core.wire.reply_*``): everything passes as it arrives
  except calls to the proxy's tools and the events that end the response, which wait for the end
  of the round. Then :meth:`StreamLoop.end_round` says what happens: the response ends, or
  :attr:`StreamLoop.pending` holds the proxy's calls to answer, after which either
  :meth:`StreamLoop.next_request` gives the follow-up request (its events continue the same
  response) or :meth:`StreamLoop.finish` ends the response.
- Non-streamed responses: :func:`complete_json` (async; the caller passes the I/O).

Whatever happens the client gets a coherent response without the proxy's calls:

- the model calls the proxy's tools together with the client's: the proxy's calls are carried
  out (a ``memory_save`` is kept) and removed, the client gets its own calls;
- the model still calls the proxy's tools after ``max_rounds`` follow-ups: the calls are carried
  out and removed, and the response ends with the text so far plus :data:`NOTICE_ROUNDS`, with a
  stop reason every client handles (``end_turn`` / ``stop`` / ``completed``);
- the provider fails a follow-up in a way the client would retry had it met it itself (issue
  36, item 4: refused with 408, 409, 429, 5xx, 529 unless it says ``x-should-retry: false``; an
  error event in the follow-up's stream; a connection that failed, timed out or was cut): the
  client gets an error it retries (:mod:`headroom_core.ccr.followup_error`). Non-streamed: the
  provider's status, ``retry-after`` and error body (:attr:`JsonOutcome.error`); streamed (the
  status went out with the first round): the dialect's error event after the text so far
  (:meth:`StreamLoop.refused`, :meth:`StreamLoop.lost`; Anthropic ``event: error``, Chat
  ``{"error": …}``, Responses ``response.failed`` with the items so far, Gemini ``{"error": …}``,
  Bedrock exception frames);
- anything else fails after the first response (a follow-up refused in a way retrying cannot
  help, such as a 400; an answer that is not a response; a request that cannot be built; an
  exception): the response ends the same way as when the rounds run out, with
  :data:`NOTICE_FAILED`;
- the model's response stopped at its token limit (the reply side's ``truncated``: Anthropic
  ``stop_reason`` ``max_tokens``, Chat ``finish_reason`` ``length``, Responses ``status``
  ``incomplete``, Gemini ``finishReason`` ``MAX_TOKENS``, …): a call to the proxy's tools in it
  may be cut, so it is never carried out; the proxy's calls are removed and the client gets the
  response with its own stop reason (:func:`after_round`).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from headroom_core.ccr import followup_error
from headroom_core.ccr.followup_error import FollowUpLost
from headroom_core.wire.blocks import ToolCall, Usage
from headroom_core.wire.protocol import ReplySide, framing_of
from headroom_core.wire.provider_error import ProviderError
from headroom_core.wire.rawjson import Raw
from headroom_core.wire.sse import SSEEvent

log = logging.getLogger("headroom")

NOTICE_ROUNDS = (
    "[headroom: retrieval stopped. The model asked for shortened content again after {n} "
    "retrieval round(s), the limit (retrieve_max_rounds); this answer may be incomplete.]"
)
NOTICE_FAILED = "[headroom: retrieval failed ({why}); the answer stops here and may be incomplete.]"


def notice_rounds(n: int) -> str:
    """The text that ends a response whose retrieval rounds ran out after ``n`` follow-ups."""
    return NOTICE_ROUNDS.format(n=n)


def notice_failed(why: str) -> str:
    """The text that ends a response whose retrieval failed (``why``: a short reason)."""
    return NOTICE_FAILED.format(why=" ".join(why.split())[:160] or "unknown error")


@dataclass(frozen=True)
class Pending:
    """Calls to the proxy's tools the caller must answer (all of them: side effects count).

    ``follow_up``: then pass the answers to :meth:`StreamLoop.next_request`; else call
    :meth:`StreamLoop.finish` (``exhausted``: the rounds ran out; otherwise the client has
    calls of its own in the same turn)."""

    calls: tuple[ToolCall, ...]
    follow_up: bool
    exhausted: bool = False


def after_round(
    calls: list[ToolCall],
    hidden: frozenset[str],
    *,
    truncated: bool,
    rounds: int,
    max_rounds: int,
    can_follow: bool = True,
) -> Pending | None:
    """What follows a complete round whose response made ``calls`` (pure).

    None: the response ends as the model gave it (no call to the proxy's tools, the ``hidden``
    names; or the response stopped at its token limit, ``truncated``, so a call in it may be cut:
    it is never carried out, and the client sees the truncation in its dialect's own stop
    reason). Else the proxy's calls to carry out: a follow-up when they are the only calls,
    ``rounds`` (follow-ups made) is below ``max_rounds`` and ``can_follow`` (the request is
    known); ``exhausted`` when only the rounds stop it."""
    mine = tuple(c for c in calls if c.name in hidden)
    if not mine or truncated:
        return None
    only_mine = len(mine) == len(calls)
    follow = only_mine and can_follow and rounds < max_rounds
    return Pending(mine, follow, exhausted=only_mine and not follow)


def sum_usage(usages: list[Usage]) -> Usage:
    """Field-wise sum (None where no usage reported the figure)."""
    fields = list(
        zip(*[(u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens) for u in usages])
    ) or [(), (), (), ()]
    return Usage(*[sum(v or 0 for v in vs) if any(v is not None for v in vs) else None for vs in fields])


class StreamLoop:
    """One streamed response (see the module docstring).

    ``reply``: the dialect's response side (:class:`~headroom_core.wire.protocol.ReplySide`); ``request``: the JSON text of
    the request as it went upstream (or its UTF-8 bytes, decoded only if a follow-up is made); ``hidden``: the proxy's tool names offered in it;
    ``max_rounds``: the most follow-ups. With no hidden tools (``tap``) the loop only reads:
    :meth:`feed` returns its input unchanged.

    After the response: :attr:`done`; :attr:`rounds` follow-ups made; :attr:`called` every
    tool call's name over all rounds; :attr:`usage` the summed usage; :attr:`texts` every round's
    response object as the provider would have sent it unstreamed; :attr:`provider_error` the
    provider's failure of a follow-up the client got as an error (None otherwise).
    """

    def __init__(self, reply: ReplySide, request: str | bytes | None, hidden: frozenset[str], max_rounds: int) -> None:
        self.reply = reply
        self.request = request
        self.hidden = hidden
        self.max_rounds = max_rounds
        self.tap = not hidden
        self.rounds = 0
        self.done = False
        self.pending: Pending | None = None
        self.texts: list[str] = []
        self.provider_error: ProviderError | None = None
        self._messages: list[dict[str, Any] | None] = []  # texts parsed, in order (None: not an object)
        self._state = reply.ViewState()
        self._view = reply.StreamView(hidden, self._state, 0)
        self._parser = framing_of(reply).parser()

    # -- per round -------------------------------------------------------------------

    def feed(self, data: bytes) -> bytes:
        """Bytes of the current round's stream (content-decoded; framed as the dialect's
        ``reply.framing`` says: SSE, NDJSON, AWS event-stream) → bytes for the client
        (in ``tap`` mode: ``data`` itself)."""
        evs = self._parser.feed(data) if data else []
        out = self.feed_events(evs)
        return data if self.tap else b"".join(e.raw for e in out)

    def feed_events(self, events: list[SSEEvent]) -> list[SSEEvent]:
        """Events of the current round → events for the client (none once the response is
        over)."""
        out: list[SSEEvent] = []
        for ev in events:
            got = self._view.feed(ev)
            if not self.done:
                out.extend(got)
        return out

    def end_round(self) -> bytes:
        """The current round's stream ended: the client's bytes, then :attr:`pending` or
        :attr:`done` says what comes next."""
        return b"".join(e.raw for e in self.end_round_events())

    def end_round_events(self) -> list[SSEEvent]:
        """:meth:`end_round` as events."""
        tail = self.feed_events(self._parser.feed(b""))
        view = self._view
        text = self._message_text(view)
        self.texts.append(text)
        if self.tap:
            self.done = True
            return tail
        if not view.failed and self.rounds == 0 and not view.complete:
            self.done = True  # the client's own response was cut short: it gets what came, as it came
            return tail
        tail = framing_of(self.reply).terminated(
            tail
        )  # more events follow: a last event cut short must not run into them
        if view.failed:  # the follow-up's own error event ends the response
            return tail + self._failure(None)
        if not view.complete:
            return tail + self._failure(followup_error.lost("the follow-up response ended early"))
        msg = Raw(text).value
        truncated = isinstance(msg, dict) and self.reply.truncated(msg)
        pending = after_round(
            self.reply.tool_calls(msg),
            self.hidden,
            truncated=truncated,
            rounds=self.rounds,
            max_rounds=self.max_rounds,
            can_follow=self.request is not None,
        )
        if pending is None:
            if truncated and any(c.name in self.hidden for c in self.reply.tool_calls(msg)):
                log.info(
                    "headroom: a call to the proxy's tools was cut at the token limit: not carried out; the client sees the truncation"
                )
            return tail + self._close(None)
        self.pending = pending
        return tail

    def next_request(self, results: list[tuple[ToolCall, str]]) -> bytes:
        """After a :class:`Pending` with ``follow_up``: ``results`` pairs each call with the
        proxy's answer; returns the follow-up request's body (UTF-8 JSON). Its stream is the
        next round: :meth:`feed` it, then :meth:`end_round`. Raises ``RuntimeError`` without
        such a pending step, ``ValueError`` when the request cannot be built."""
        p = self.pending
        if p is None or not p.follow_up or self.request is None:
            raise RuntimeError("next_request() needs a pending follow-up")
        request = self.request.decode("utf-8", "replace") if isinstance(self.request, bytes) else self.request
        body = self.reply.followup(request, self.texts[-1], results)
        self.pending = None
        self.request = body
        self.rounds += 1
        self._view = self.reply.StreamView(self.hidden, self._state, self.rounds)
        self._parser = framing_of(self.reply).parser()
        return body.encode("utf-8")

    def finish(self) -> bytes:
        """After a :class:`Pending` without ``follow_up`` (its calls carried out): the client's
        last bytes."""
        return b"".join(e.raw for e in self.finish_events())

    def finish_events(self) -> list[SSEEvent]:
        """:meth:`finish` as events."""
        p, self.pending = self.pending, None
        return self._close(notice_rounds(self.rounds) if p is not None and p.exhausted else None)

    def refused(self, status: int, headers: tuple[tuple[str, str], ...], body: bytes) -> bytes:
        """The provider answered the follow-up with ``status`` (not 200), ``headers`` and
        ``body``: the client's last bytes, the dialect's error event when the client would
        retry (:func:`~headroom_core.ccr.followup_error.refused`), else :meth:`fail`'s notice."""
        err = followup_error.refused(status, headers, body)
        if err is None:
            return self.fail(f"the follow-up request got HTTP {status}")
        return b"".join(e.raw for e in self._failure(err))

    def lost(self, why: str, timed_out: bool = False) -> bytes:
        """The follow-up's connection failed, timed out or was cut (``why``): the client's last
        bytes, the dialect's error event (502, 504 when ``timed_out``)."""
        return b"".join(e.raw for e in self._failure(followup_error.lost(why, timed_out)))

    def fail(self, why: str) -> bytes:
        """Something failed after the first response (``why``, short, for the client): ends
        the response coherently with :data:`NOTICE_FAILED`. Empty once the response is over."""
        return b"".join(e.raw for e in self.fail_events(why))

    def fail_events(self, why: str) -> list[SSEEvent]:
        """:meth:`fail` as events."""
        self.pending = None
        if len(self.texts) <= self.rounds:  # the failed round's partial response counts too
            self.texts.append(self._message_text(self._view))
        return self._close(notice_failed(why))

    def _failure(self, err: ProviderError | None) -> list[SSEEvent]:
        """End the response with the provider's failure (the view's own error event when
        ``err`` is None); empty once the response is over."""
        self.pending = None
        if self.done:
            return []
        if len(self.texts) <= self.rounds:  # the failed round's partial response counts too
            self.texts.append(self._message_text(self._view))
        self.done = True
        self.provider_error = err
        try:
            return self._view.failure(err, self.texts)
        except Exception:  # noqa: BLE001 - never leave the client without an ending
            log.exception("headroom: could not end the response with the provider's error; ending it with a notice")
            return self._view.close(
                notice_failed(err.message if err is not None else "the provider failed"), self.texts[-1:]
            )

    def _close(self, notice: str | None) -> list[SSEEvent]:
        if self.done:
            return []
        self.done = True
        try:
            return self._view.close(notice, self.texts)
        except Exception:  # noqa: BLE001 - never leave the client without an ending
            log.exception("headroom: could not close the response; ending it without usage")
            return self._view.close(notice, self.texts[-1:])

    def _message_text(self, view: Any) -> str:
        try:
            return view.message_text()
        except Exception:  # noqa: BLE001 - a response we cannot rebuild counts as empty
            log.exception("headroom: could not rebuild a streamed response")
            return "{}"

    # -- results ---------------------------------------------------------------------

    @property
    def messages(self) -> list[dict[str, Any]]:
        """Every round's response object, parsed (each text once: usage, calls and the ledger
        all read them)."""
        while len(self._messages) < len(self.texts):
            try:
                v = Raw(self.texts[len(self._messages)]).value
            except ValueError:
                v = None
            self._messages.append(v if isinstance(v, dict) else None)
        return [m for m in self._messages if m is not None]

    @property
    def called(self) -> list[str]:
        """The name of every tool call of every round, in order."""
        return [c.name for m in self.messages for c in self.reply.tool_calls(m)]

    @property
    def usage(self) -> Usage:
        """Usage summed over every round."""
        return sum_usage([self.reply.usage(m) for m in self.messages])


class StreamTap:
    """``flow.response.stream`` for a streamed response: content-decodes what the upstream sends
    (``decoder``, or None for identity) and hands it to ``loop``.

    Returns what the client gets for each chunk: the chunk itself in tap mode (the client keeps
    the upstream's encoding), else the loop's output (decoded: the proxy removed the response's
    ``content-encoding``). The empty chunk (end of the stream) returns the round's tail; what
    follows (answering proxy calls, follow-ups) is the caller's, from :attr:`StreamLoop.pending`.
    A chunk that cannot be decoded ends the response (:meth:`StreamLoop.fail`); a compressed
    stream cut short ends as a plain one cut short does.
    """

    def __init__(self, loop: StreamLoop, decoder: Any = None) -> None:
        self.loop = loop
        self.decoder = decoder
        self.broken = False

    def __call__(self, chunk: bytes) -> bytes | list[bytes]:
        loop = self.loop
        if self.broken:
            return chunk if loop.tap else []
        try:
            data = chunk
            if self.decoder is not None:
                data = self.decoder.feed(chunk) if chunk else self._flush()
        except ValueError as e:
            self.broken = True
            log.warning("headroom: the upstream's %s stream could not be decoded: %s", "compressed", e)
            if loop.tap:
                return chunk
            return [loop.fail("the provider's compressed stream could not be decoded")]
        if chunk:
            out = loop.feed(data)
            if loop.tap:
                return chunk
            # never hand mitmproxy an empty chunk: on chunked HTTP/1.1 it would end the stream
            return [out] if out else []
        tail = loop.feed(data) if data else b""
        end = loop.end_round()
        if loop.tap:
            return []
        out = tail + end
        return [out] if out else []

    def _flush(self) -> bytes:
        """The decoder's last bytes at the end of the stream. A compressed stream cut short (its
        end missing) is a stream cut short, as a plain one: what was decoded goes on and
        :meth:`StreamLoop.end_round` judges the events (a first response goes to the client as
        it came), not a decoding failure with a made-up ending."""
        assert self.decoder is not None
        try:
            return self.decoder.flush()
        except ValueError as e:
            log.info("headroom: the upstream's compressed stream ended early (%s)", e)
            return b""


AsyncAnswer = Callable[[ToolCall], Awaitable[str]]
#: posts a follow-up body; returns ``(status, body, headers)``; raises
#: :class:`~headroom_core.ccr.followup_error.FollowUpLost` when its connection fails
AsyncSend = Callable[[bytes], Awaitable[tuple[int, bytes, tuple[tuple[str, str], ...]]]]


@dataclass(frozen=True)
class JsonOutcome:
    """The result of :func:`complete_json`: ``body`` the client's response bytes (None: send
    the provider's first response unchanged, or ``error``), ``rounds`` follow-ups made,
    ``texts`` every round's response object (JSON text), ``error`` the provider's failure of a
    follow-up the client gets instead of an answer (its status, headers and error body:
    :func:`~headroom_core.ccr.followup_error.json_answer`)."""

    body: bytes | None
    rounds: int
    texts: tuple[str, ...]
    error: ProviderError | None = None


async def complete_json(
    reply: ReplySide,
    request: str,
    first: str,
    hidden: frozenset[str],
    answer: AsyncAnswer,
    send: AsyncSend,
    max_rounds: int,
) -> JsonOutcome:
    """Answer the proxy's own tool calls in a non-streamed response until the model stops
    calling them (at most ``max_rounds`` follow-ups); see the module docstring for the cases.

    ``request``: the JSON text that went upstream; ``first``: the provider's response (JSON
    text, status 200); ``answer``: the proxy's answer to one call; ``send``: posts a follow-up
    body (:data:`AsyncSend`). Never raises (but ``asyncio.CancelledError``); the client's body
    keeps every value the provider sent as it sent it.
    """
    texts = [first]
    notice: str | None = None
    error: ProviderError | None = None
    rounds = 0
    try:
        msg = Raw(first).value
        if not isinstance(msg, dict) or not reply.completed(msg):
            return JsonOutcome(None, 0, tuple(texts))
        while True:
            truncated = reply.truncated(msg)
            p = after_round(reply.tool_calls(msg), hidden, truncated=truncated, rounds=rounds, max_rounds=max_rounds)
            if p is None:
                if truncated and any(c.name in hidden for c in reply.tool_calls(msg)):
                    log.info(
                        "headroom: a call to the proxy's tools was cut at the token limit: not carried out; the client sees the truncation"
                    )
                break
            if not p.follow_up:
                for c in p.calls:
                    await answer(c)
                if p.exhausted:
                    notice = notice_rounds(rounds)
                else:
                    log.warning(
                        "headroom: model called proxy tools together with client tools; proxy calls carried out and removed"
                    )
                break
            results = [(c, await answer(c)) for c in p.calls]
            request = reply.followup(request, texts[-1], results)
            try:
                status, raw, headers = await send(request.encode("utf-8"))
            except FollowUpLost as e:
                error = followup_error.lost(str(e), e.timed_out)
                break
            if status != 200:
                error = followup_error.refused(status, headers, raw)
                if error is None:
                    notice = notice_failed(f"the follow-up request got HTTP {status}")
                break
            text = raw.decode("utf-8")
            msg = json.loads(text)
            if not isinstance(msg, dict) or not reply.completed(msg):
                notice = notice_failed("the follow-up answer was not a response")
                break
            texts.append(text)
            rounds += 1
    except Exception as e:  # noqa: BLE001 - the client still gets a coherent answer
        log.exception("headroom: the retrieval loop failed")
        notice = notice_failed(type(e).__name__)
    if error is not None:
        log.info(
            "headroom: the provider failed a follow-up (HTTP %d): the client gets its error to retry", error.status
        )
        return JsonOutcome(None, rounds, tuple(texts), error)
    try:
        first_msg = Raw(texts[0]).value
        if rounds == 0 and notice is None and not any(c.name in hidden for c in reply.tool_calls(first_msg)):
            return JsonOutcome(None, 0, tuple(texts))
        body = reply.merge(texts, hidden, notice)
    except Exception as e:  # noqa: BLE001
        log.exception("headroom: could not merge the retrieval rounds")
        try:
            body = reply.merge(texts[:1], hidden, notice or notice_failed(type(e).__name__))
        except Exception:  # noqa: BLE001
            body = reply.notice_message(notice or notice_failed(type(e).__name__))
    return JsonOutcome(body.encode("utf-8"), rounds, tuple(texts))
