"""What the client gets from an OpenAI Responses turn in which the proxy answered its own tools,
and the request that continues such a turn (the Responses counterpart of
:mod:`headroom_core.wire.reply_anthropic`), over SSE and WebSocket alike.

A streamed turn reaches the client as one response: one ``response.created``/``in_progress``;
every output item except the proxy's ``function_call`` items, ``output_index`` numbered on
across rounds; ``sequence_number`` counting on without gaps; and one terminal event
(``response.completed`` …) whose ``response`` holds the visible items of every round and, over
several rounds, summed usage.

A follow-up round the provider ends with an ``error`` event (a rate limit, an overloaded or
failing server, over SSE or WebSocket) ends the client's response as the Responses API ends a
response that failed after it started: one ``response.failed`` whose ``response`` holds the
visible items of every round so far (the model's text) and, as ``error``, the provider's error
object as it came (its ``code`` and ``message``: ``rate_limit_exceeded`` with "try again in …",
``server_error``, …), so the client handles it as it would the provider's own failure. Codex CLI
0.171 retries such a ``response.failed`` (after the delay a rate limit's message states) unless
its code says the context, quota or plan is the problem; a mid-response ``error`` event with
``status`` 429 it takes as final ("exceeded retry limit"), one without ``status`` it ignores
until its idle timeout (``bench/bench_codex_ws_endings.py`` prints what it does with each ending;
``tests/e2e/agents/test_codex_ws_faults.py`` has it retry a rate-limited follow-up of the proxy's).
A ``response.failed`` or ``response.incomplete`` of a follow-up round reaches the client as the
provider sent it, its ``response`` holding every round's visible items. A follow-up the provider
refused (a 429, a 5xx) or whose connection failed ends the same way, the ``error`` being the
provider's error object from its body, else ``{code, message}`` made from the status
(``rate_limit_exceeded``, else ``server_error``; the message saying when to try again):
:meth:`StreamView.failure`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from headroom_core.wire import openai_responses as _dialect
from headroom_core.wire.assemble_responses import TERMINAL, ResponseAssembler
from headroom_core.wire.blocks import ImageAnswer, ToolCall, sum_usage
from headroom_core.wire.provider_error import ProviderError, with_message
from headroom_core.wire.rawjson import Raw, RawObject, append_to_array, dumps, elements, with_member
from headroom_core.wire.sse import SSE, SSEEvent

#: Streamed responses are SSE.
framing = SSE

#: A response object's usage figures (:class:`~headroom_core.wire.blocks.Usage`).
usage = _dialect.usage

USAGE_KEYS = ("input_tokens", "output_tokens", "total_tokens")
_OPENING = ("response.created", "response.in_progress", "response.queued")
NOTICE_ITEM_ID = "msg_headroom_notice"
#: ``error.code`` of a failed response the proxy makes, per kind of failure (Responses API,
#: "ResponseError": ``rate_limit_exceeded``, else ``server_error``)
ERROR_CODES = {"rate_limited": "rate_limit_exceeded"}


def error_object(err: ProviderError) -> Raw:
    """The ``error`` of a ``response.failed`` for ``err``: the provider's error object from its
    body (``{"error": {…}}``; its message carrying the wait), else ``{code, message}``."""
    parsed = err.parsed
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
        try:
            inner = RawObject.parse(err.body.decode("utf-8")).raw("error")
            if inner is not None:
                return Raw(with_message(inner.text, ("message",), err.hinted))
        except ValueError:
            pass
    return Raw(dumps({"code": ERROR_CODES.get(err.kind, "server_error"), "message": err.hinted}))


def _hidden_call(item: Any, hidden: frozenset[str]) -> bool:
    return isinstance(item, dict) and item.get("type") == "function_call" and item.get("name") in hidden


@dataclass
class ViewState:
    """What the client has been sent so far, shared by every round of one response."""

    next_index: int = 0
    seq: int | None = None  # the next sequence_number the client expects (None: the stream has none)


class StreamView:
    """One round's events → the client's events (see the module docstring)."""

    def __init__(self, hidden: frozenset[str], state: ViewState, round_no: int) -> None:
        self.hidden = hidden
        self.state = state
        self.round_no = round_no
        self.asm = ResponseAssembler()
        self._map: dict[int, int | None] = {}
        self._held: list[SSEEvent] = []
        self.failed: str | None = None
        #: a follow-up round's ``error`` event: the provider's error object (exact JSON text)
        self.error: Raw | None = None

    @property
    def complete(self) -> bool:
        """Whether the round's terminal event arrived."""
        return self.asm.terminal is not None

    def message_text(self) -> str:
        """The round's response object, as JSON text."""
        return self.asm.text()

    def feed(self, ev: SSEEvent) -> list[SSEEvent]:
        """The events the client gets now for the upstream event ``ev``."""
        d = ev.parsed
        if not isinstance(d, dict):
            return [ev]
        self.asm.accept(d, ev.data)
        t = d.get("type")
        if t in _OPENING and self.round_no > 0:
            return []
        if t == "error" and self.round_no > 0:
            err = got if isinstance(got := d.get("error"), dict) else d
            self.failed = str(err.get("message") or "an error event")[:200]
            raw = RawObject.parse(ev.data).raw("error") if isinstance(d.get("error"), dict) else None
            self.error = raw if raw is not None else Raw(dumps({"message": self.failed}))
            return []
        if t in TERMINAL:
            self._held.append(ev)
            return []
        changes: dict[str, Any] = {}
        idx = d.get("output_index")
        if isinstance(idx, int) and not isinstance(idx, bool):
            if idx not in self._map:
                if _hidden_call(d.get("item"), self.hidden):
                    self._map[idx] = None
                else:
                    self._map[idx] = self.state.next_index
                    self.state.next_index += 1
            ci = self._map[idx]
            if ci is None:
                return []
            if ci != idx:
                changes["output_index"] = ci
        return [self._renumber(ev, d, changes)]

    def _renumber(self, ev: SSEEvent, d: dict[str, Any], changes: dict[str, Any]) -> SSEEvent:
        seq = d.get("sequence_number")
        if isinstance(seq, int) and not isinstance(seq, bool):
            new = seq if self.state.seq is None else self.state.seq
            self.state.seq = new + 1
            if new != seq:
                changes["sequence_number"] = new
        if not changes:
            return ev
        text = ev.data
        for k, v in changes.items():
            text = with_member(text, k, v)
        return ev.with_data(text)

    def close(self, notice: str | None, texts: list[str]) -> list[SSEEvent]:
        """The client's last events: the items of a message with ``notice`` (if given), then
        the terminal event (made up as ``response.completed`` when the upstream sent none) whose
        ``response`` is :func:`merge` of every round's response object (``texts``). After a
        follow-up round's ``error`` event: only a ``response.failed`` carrying the provider's
        error (the module docstring), no notice."""
        if self.error is not None:
            return [self._failed(texts)]
        out: list[SSEEvent] = []
        if notice:
            out += [
                self._renumber(e, e.parsed, {})
                for e in _notice_events(notice, self.state.next_index, self.state.seq is not None)
            ]
            self.state.next_index += 1
        held = [e for e in self._held if isinstance(e.parsed, dict)]
        if held:
            term = held[-1]
        else:
            resp = RawObject.parse(texts[-1])
            if resp.get("status") in (None, "in_progress", "queued"):
                resp["status"] = "completed"
            texts = [*texts[:-1], resp.text()]
            term = SSEEvent.make(
                dumps({"type": "response.completed", "response": Raw(resp.text())}), "response.completed"
            )
        if len(texts) > 1 or notice or not held or None in self._map.values():
            merged = merge(texts, self.hidden, notice)
            term = term.with_data(with_member(term.data, "response", Raw(merged)))
        out.append(self._renumber(term, term.parsed, {}))
        return out

    def failure(self, err: ProviderError | None, texts: list[str]) -> list[SSEEvent]:
        """The client's last event when the provider failed the response: a ``response.failed``
        (:meth:`_failed`) carrying this round's own error (``err`` None) or :func:`error_object`
        of ``err``; ``texts``: every round's response so far, the failed round's last."""
        if err is not None:
            self.error = error_object(err)
        elif self.error is None:
            self.error = Raw(
                dumps({"code": "server_error", "message": self.failed or "the provider failed the response"})
            )
        return [self._failed(texts)]

    def _failed(self, texts: list[str]) -> SSEEvent:
        """The ``response.failed`` event ending a response whose follow-up round failed with the
        provider's :attr:`error`: :func:`merge` of ``texts`` with ``status`` ``failed``."""
        assert self.error is not None
        resp = RawObject.parse(merge(texts, self.hidden, None))
        resp["status"] = "failed"
        resp["error"] = self.error
        event: dict[str, Any] = {"type": "response.failed", "response": Raw(resp.text())}
        if self.state.seq is not None:
            event["sequence_number"] = 0  # renumbered on the way out
        term = SSEEvent.make(dumps(event), "response.failed")
        return self._renumber(term, term.parsed, {})


def _notice_item(text: str, status: str = "completed") -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": []}] if status == "completed" else []
    return {"id": NOTICE_ITEM_ID, "type": "message", "status": status, "role": "assistant", "content": content}


def _notice_events(text: str, index: int, numbered: bool) -> list[SSEEvent]:
    part = {"type": "output_text", "text": "", "annotations": []}
    where = {"item_id": NOTICE_ITEM_ID, "output_index": index, "content_index": 0}
    evs: list[dict[str, Any]] = [
        {"type": "response.output_item.added", "output_index": index, "item": _notice_item(text, "in_progress")},
        {"type": "response.content_part.added", **where, "part": part},
        {"type": "response.output_text.delta", **where, "delta": text},
        {"type": "response.output_text.done", **where, "text": text},
        {"type": "response.content_part.done", **where, "part": {**part, "text": text}},
        {"type": "response.output_item.done", "output_index": index, "item": _notice_item(text)},
    ]
    if numbered:
        evs = [{**e, "sequence_number": 0} for e in evs]  # renumbered on the way out
    return [SSEEvent.make(dumps(e), e["type"]) for e in evs]


def tool_calls(resp: dict[str, Any]) -> list[ToolCall]:
    """The ``function_call`` items of a response object."""
    from headroom_core.wire.openai_responses import response_tool_calls

    return response_tool_calls(resp)


def usage_totals(messages: list[dict[str, Any]]) -> dict[str, int]:
    """:data:`USAGE_KEYS` summed over the responses (keys none reported are left out)."""
    return sum_usage(messages, USAGE_KEYS)


def completed(resp: dict[str, Any]) -> bool:
    """Whether a non-streamed body is a response object."""
    return isinstance(resp.get("output"), list)


def truncated(resp: dict[str, Any]) -> bool:
    """Whether a response object is ``incomplete`` (``incomplete_details.reason``
    ``max_output_tokens``, or ``content_filter``: the output was cut either way), so a
    ``function_call`` item in it may be incomplete."""
    return resp.get("status") == "incomplete"


def merge(texts: list[str], hidden: frozenset[str], notice: str | None) -> str:
    """One response object for the client from every round's (``texts``, JSON text, in order):
    the last one with ``output`` = the visible items of every round (calls to ``hidden`` tools
    removed), then a message with ``notice`` (if given); usage summed over several rounds.
    Raises ``ValueError`` when a text is not a response object."""
    last = RawObject.parse(texts[-1])
    items: list[Raw] = []
    for t in texts:
        out = RawObject.parse(t).raw("output")
        for raw in elements(out.text) if out is not None and out.text != "null" else []:
            if not _hidden_call(raw.value, hidden):
                items.append(raw)
    if notice:
        items.append(Raw(dumps(_notice_item(notice))))
    last["output"] = items
    if notice and last.get("status") in (None, "in_progress", "queued"):
        last["status"] = "completed"
    if len(texts) > 1 and isinstance(last.get("usage"), dict):
        text = last.raw("usage").text  # type: ignore[union-attr]
        for k, v in usage_totals([Raw(t).value for t in texts]).items():
            text = with_member(text, k, v)
        last["usage"] = Raw(text)
    return last.text()


def followup(request: str, message: str, results: list[tuple[ToolCall, str]]) -> str:
    """The next request's JSON text: ``request`` (as sent; a string ``input`` becomes one user
    item) plus every output item of ``message`` as the provider sent it, and one
    ``function_call_output`` per ``(call, answer text)``. Reasoning items without
    ``encrypted_content`` are left out when the request has ``"store": false`` (the API could not
    resolve them). Raises ``ValueError`` when ``request`` has no ``input`` or ``message`` is not
    a response object."""
    req = RawObject.parse(request)
    if "input" not in req:
        raise ValueError("the request has no input")
    store = req.get("store")
    out = RawObject.parse(message).raw("output")
    produced = []
    for raw in elements(out.text) if out is not None and out.text != "null" else []:
        it = raw.value
        if (
            store is False
            and isinstance(it, dict)
            and it.get("type") == "reasoning"
            and not it.get("encrypted_content")
        ):
            continue
        produced.append(raw)
    new = produced + [
        {"type": "function_call_output", "call_id": c.call_id, "output": _output(text)} for c, text in results
    ]
    inp = req.raw("input")
    if inp is not None and inp.text.lstrip().startswith("["):
        return append_to_array(request, "input", new)
    req["input"] = [{"role": "user", "content": inp}, *new]
    return req.text()


def _output(text: str) -> Any:
    """A ``function_call_output``'s output: the text, or for an :class:`~headroom_core.wire.blocks.ImageAnswer`
    an ``input_text`` and an ``input_image`` part (the output "can be a string or a list of
    input_text, input_image, input_file": Responses API reference)."""
    if isinstance(text, ImageAnswer):
        return [{"type": "input_text", "text": str(text)}, {"type": "input_image", "image_url": text.data_url}]
    return str(text)


def notice_message(notice: str, model: str = "") -> str:
    """A whole response object holding only ``notice``."""
    return dumps(
        {
            "id": "resp_headroom_notice",
            "object": "response",
            "status": "completed",
            "model": model,
            "output": [_notice_item(notice)],
        }
    )
