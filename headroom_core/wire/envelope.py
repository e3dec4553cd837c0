"""Dialects whose request body wraps another dialect's body (a ``root``), and whose responses wrap
another dialect's response objects (a ``response_key``): what the plan and the reply side need to
work inside the envelope, for any such dialect.

Example: Google's Code Assist API (Gemini CLI signed in with Google) sends
``{"model", "project", "user_prompt_id", "request": {<a Gemini generateContent body>}}`` and
answers ``{"response": {<a GenerateContentResponse>}, "traceId"}``: its ``root`` is
``("request",)``, its ``response_key`` ``"response"``.

The plan parses, views and splices the inner body only (:func:`inner_span`): the envelope's own
bytes (before and after the inner object) go upstream as the client sent them. Every dialect
method but ``shape_error`` and ``model_of`` (which see the whole body, as detection does) reads
the inner body. :class:`EnvelopedReply` is the reply side of the wrapped dialect applied inside
the response envelope: an object the inner side leaves unchanged keeps its bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping

from headroom_core.errors import DataProblem
from headroom_core.wire import jsonedit
from headroom_core.wire.blocks import ToolCall, Usage
from headroom_core.wire.protocol import ReplySide, ReplyStream, WrappedStream
from headroom_core.wire.rawjson import Raw, RawObject, dumps
from headroom_core.wire.sse import SSEEvent


class EnvelopeError(ValueError, DataProblem):
    """The text has no JSON object at the dialect's root."""


def inner_span(text: str, root: tuple[str, ...]) -> tuple[int, int]:
    """``(start, end)`` character offsets of the JSON object at ``root`` (keys) in ``text``; the
    whole text's span when ``root`` is ``()``. Raises :class:`EnvelopeError` when there is no
    object there (a missing member, another kind of value, a text that is not JSON)."""
    if not root:
        return 0, len(text)
    try:
        a, b = jsonedit.span(text, root)
    except (jsonedit.JSONPathError, IndexError, ValueError) as e:
        raise EnvelopeError(f"no object at {'.'.join(root)}: {e}") from None
    if text[a : a + 1] != "{":
        raise EnvelopeError(f"{'.'.join(root)} is not an object")
    return a, b


@dataclass(frozen=True)
class Envelope:
    """A request text cut at its dialect's root: ``before`` + ``body`` + ``after`` is the whole
    text; ``root`` the keys of the inner body. :meth:`wrap` puts an edited inner body back,
    :meth:`whole` makes the whole parsed body from the inner one's parse."""

    before: str
    body: str
    after: str
    root: tuple[str, ...]

    def wrap(self, body: str) -> str:
        """The whole text with ``body`` (JSON object text) as the inner body."""
        return self.before + body + self.after

    def whole(self, parsed: dict[str, Any]) -> dict[str, Any]:
        """The whole body parsed, given the inner body's parse ``parsed`` (the envelope's own
        members parsed here: they are small). Raises :class:`EnvelopeError` when the envelope is
        not JSON."""
        try:
            out: dict[str, Any] = json.loads(self.before + "null" + self.after)  # an object: the root is in it
        except (ValueError, RecursionError) as e:
            raise EnvelopeError(f"the envelope is not JSON: {e}") from None
        at = out
        for k in self.root[:-1]:
            at = at[k]
        at[self.root[-1]] = parsed
        return out


def open_envelope(text: str, root: tuple[str, ...]) -> Envelope:
    """``text`` cut at ``root`` (:func:`inner_span`). Raises :class:`EnvelopeError` as it does,
    or when the envelope around the inner object is not JSON."""
    a, b = inner_span(text, root)
    env = Envelope(text[:a], text[a:b], text[b:], root)
    env.whole({})  # the envelope itself must parse (fail open on a broken one)
    return env


def inner(body: Mapping[str, Any], root: tuple[str, ...]) -> dict[str, Any]:
    """The parsed object at ``root`` in ``body`` (``body`` itself for ``()``; ``{}`` when there
    is no object there)."""
    v: Any = body
    for k in root:
        v = v.get(k) if isinstance(v, Mapping) else None
    return v if isinstance(v, dict) else ({} if root else dict(body))


def unwrap(resp: Any, key: str) -> dict[str, Any]:
    """The response object inside an enveloped response ``resp`` (``{}`` when it has none)."""
    v = resp.get(key) if isinstance(resp, dict) else None
    return v if isinstance(v, dict) else {}


def _inner_text(text: str, key: str) -> str | None:
    """The exact text of member ``key`` of the JSON object ``text`` when it is an object."""
    try:
        raw = RawObject.parse(text).raw(key)
    except ValueError:
        return None
    return raw.text if raw is not None and raw.text.lstrip().startswith("{") else None


def _wrapped(outer: str, key: str, inner_text: str) -> str:
    """``outer`` (an enveloped response's text) with member ``key`` replaced by ``inner_text``."""
    obj = RawObject.parse(outer)
    obj[key] = Raw(inner_text)
    return obj.text()


class _Stream(WrappedStream):
    """One round of an enveloped stream: each event's inner object through the wrapped dialect's
    round, the envelope's other members kept from the event that carried it."""

    def __init__(self, inner_view: ReplyStream, key: str) -> None:
        super().__init__(inner_view)
        self.key = key
        self.last_outer = "{}"  # the latest upstream event's envelope (for objects the proxy makes)
        #: id of each inner event fed -> (that event, the upstream event it came from)
        self._sent: dict[int, tuple[SSEEvent, SSEEvent]] = {}

    def _out(self, events: list[SSEEvent]) -> list[SSEEvent]:
        """The client's events: an inner event the wrapped side passed unchanged is the upstream
        event it came from (its bytes); others go into the latest envelope."""
        out = []
        for e in events:
            fed = self._sent.get(id(e))
            out.append(
                fed[1] if fed is not None and fed[0] is e else e.with_data(_wrapped(self.last_outer, self.key, e.data))
            )
        return out

    def feed(self, ev: SSEEvent) -> list[SSEEvent]:
        text = _inner_text(ev.data, self.key)
        if text is None:  # an error or another event outside the envelope: the inner side reads it as is
            return self.inner.feed(ev)
        self.last_outer = ev.data
        sent = SSEEvent.make(text, ev.event)
        self._sent[id(sent)] = (sent, ev)
        return self._out(self.inner.feed(sent))

    def close(self, notice: str | None, texts: list[str]) -> list[SSEEvent]:
        inner_texts = [t for t in (_inner_text(x, self.key) for x in texts) if t is not None]
        return self._out(self.inner.close(notice, inner_texts))

    def failure(self, err: Any, texts: list[str]) -> list[SSEEvent]:
        """The wrapped side's failure events: its parts in the envelope, its error event (the
        last) outside it, as the API sends an error (an ``{"error": …}`` object at top level)."""
        inner_texts = [t for t in (_inner_text(x, self.key) for x in texts) if t is not None]
        got = self.inner.failure(err, inner_texts)
        return self._out(got[:-1]) + got[-1:]

    def message_text(self) -> str:
        return _wrapped(self.last_outer, self.key, self.inner.message_text())


@dataclass(frozen=True)
class EnvelopedReply:
    """A :class:`~headroom_core.wire.protocol.ReplySide`: ``inner`` (the wrapped dialect's reply
    side) applied inside requests at ``root`` and responses under ``key``."""

    inner: ReplySide
    root: tuple[str, ...]
    key: str

    @property
    def framing(self) -> Any:
        """The wrapped side's stream framing (an envelope changes no framing)."""
        return getattr(self.inner, "framing", None)

    def ViewState(self) -> Any:  # noqa: N802 - the protocol's name
        return self.inner.ViewState()

    def StreamView(self, hidden: frozenset[str], state: Any, round_no: int) -> ReplyStream:  # noqa: N802
        return _Stream(self.inner.StreamView(hidden, state, round_no), self.key)

    def merge(self, texts: list[str], hidden: frozenset[str], notice: str | None) -> str:
        """The wrapped side's merge of the inner objects, in the last text's envelope (that text
        as sent when the merge left its object unchanged). Raises ``ValueError`` as it does."""
        inner_texts = [_inner_text(t, self.key) for t in texts]
        if any(t is None for t in inner_texts):
            raise ValueError(f"a response without {self.key!r}")
        got = self.inner.merge([t for t in inner_texts if t is not None], hidden, notice)
        return texts[-1] if got == inner_texts[-1] else _wrapped(texts[-1], self.key, got)

    def followup(self, request: str, message: str, results: list[tuple[ToolCall, str]]) -> str:
        """The next request: the wrapped side's follow-up of the inner body, spliced back (the
        envelope's bytes kept). Raises ``ValueError`` when either text lacks its inner object."""
        a, b = inner_span(request, self.root)
        msg = _inner_text(message, self.key)
        if msg is None:
            raise ValueError(f"a response without {self.key!r}")
        return request[:a] + self.inner.followup(request[a:b], msg, results) + request[b:]

    def tool_calls(self, resp: dict[str, Any]) -> list[ToolCall]:
        return self.inner.tool_calls(unwrap(resp, self.key))

    def usage(self, resp: dict[str, Any]) -> Usage:
        return self.inner.usage(unwrap(resp, self.key))

    def completed(self, resp: dict[str, Any]) -> bool:
        return self.inner.completed(unwrap(resp, self.key))

    def truncated(self, resp: dict[str, Any]) -> bool:
        return self.inner.truncated(unwrap(resp, self.key))

    def notice_message(self, notice: str, model: str = "") -> str:
        return dumps({self.key: Raw(self.inner.notice_message(notice, model))})
