"""What the client gets from an OpenAI Chat Completions turn in which the proxy answered its own
tools, and the request that continues such a turn (the Chat Completions counterpart of
:mod:`headroom_core.wire.reply_anthropic`).

A streamed turn reaches the client as one stream: every chunk except the proxy's tool calls
(removed from ``delta.tool_calls``, the client's calls renumbered from 0 per choice across
rounds; a chunk left with nothing is dropped), a follow-up's ``role`` not repeated, and only the
last round's finish chunk, usage chunk and ``[DONE]``. A follow-up the provider failed ends the
stream with an error chunk (``data: {"error": {…}}``, what the API sends when it fails a stream;
the OpenAI SDKs raise ``APIError`` on it): :meth:`StreamView.failure`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from headroom_core.wire import openai_chat as _dialect
from headroom_core.wire.assemble_chat import CompletionAssembler
from headroom_core.wire.blocks import ImageAnswer, ToolCall, sum_usage
from headroom_core.wire.provider_error import ProviderError, with_message
from headroom_core.wire.rawjson import Raw, RawObject, append_to_array, dumps, elements, with_member
from headroom_core.wire.sse import SSE, SSEEvent

#: Streamed responses are SSE.
framing = SSE

#: A response object's usage figures (:class:`~headroom_core.wire.blocks.Usage`).
usage = _dialect.usage

USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")
#: ``type`` and ``code`` of an error object the proxy makes, per kind of failure (the API's own:
#: a rate limit is ``rate_limit_exceeded``, anything else on its side ``server_error``)
ERROR_CODES = {"rate_limited": "rate_limit_exceeded"}


def error_chunk(err: ProviderError) -> SSEEvent:
    """The error chunk for ``err``: the provider's ``{"error": {…}}`` body when it is one (its
    message carrying the wait), else one made from the kind of failure."""
    parsed = err.parsed
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
        try:
            return SSEEvent.make(with_message(err.body.decode("utf-8"), ("error", "message"), err.hinted))
        except ValueError:
            pass
    code = ERROR_CODES.get(err.kind, "server_error")
    return SSEEvent.make(dumps({"error": {"message": err.hinted, "type": code, "param": None, "code": code}}))


#: The members of an assistant message a Chat Completions request accepts back.
REQUEST_MESSAGE_KEYS = ("role", "content", "refusal", "name", "tool_calls", "function_call", "audio")


def _name(tc: Any) -> Any:
    fn = tc.get("function") if isinstance(tc, dict) else None
    return fn.get("name") if isinstance(fn, dict) else None


@dataclass
class ViewState:
    """What the client has been sent so far, shared by every round of one response."""

    next_call: dict[int, int] = field(default_factory=dict)  # per choice: next client tool call index
    client_calls: set[int] = field(default_factory=set)  # choices with a client tool call
    base: dict[str, Any] = field(default_factory=dict)  # id/object/created/model of the first chunk


class StreamView:
    """One round's chunks → the client's chunks (see the module docstring)."""

    def __init__(self, hidden: frozenset[str], state: ViewState, round_no: int) -> None:
        self.hidden = hidden
        self.state = state
        self.round_no = round_no
        self.asm = CompletionAssembler()
        self._map: dict[tuple[int, int], int | None] = {}
        self._held: list[SSEEvent] = []
        self.failed: str | None = None
        self._error: SSEEvent | None = None

    @property
    def complete(self) -> bool:
        """Whether the round's stream reached its end (a finish reason, or ``[DONE]``)."""
        return self.asm.finished or self.asm.done

    def message_text(self) -> str:
        """The round's ``chat.completion`` object, as JSON text."""
        return self.asm.text()

    def feed(self, ev: SSEEvent) -> list[SSEEvent]:
        """The chunks the client gets now for the upstream event ``ev``."""
        d = ev.parsed
        self.asm.accept(d, ev.data)
        if d is None and ev.data.strip() == "[DONE]":
            self._held.append(ev)
            return []
        if not isinstance(d, dict):
            return [ev]
        if "error" in d and "choices" not in d and self.round_no > 0:
            err = d.get("error")
            self.failed = str(err.get("message") if isinstance(err, dict) else err)[:200]
            self._error = ev
            return []
        if not self.state.base:
            self.state.base = {k: d[k] for k in ("id", "object", "created", "model") if k in d}
        choices = d.get("choices")
        if not isinstance(choices, list):
            return [ev]
        if not choices or any(isinstance(c, dict) and c.get("finish_reason") is not None for c in choices):
            self._held.append(ev)  # the finish chunk and the usage chunk end the client's stream
            return []
        out = self._edit(ev.data, d, choices)
        if out is None:
            return [ev]
        return [ev.with_data(out)] if out else []

    def _edit(self, text: str, d: dict[str, Any], choices: list[Any]) -> str | None:
        """The chunk's new text; None: unchanged; "": nothing left to send."""
        changed = False
        new_choices: list[Any] = []
        meaningful = False
        for ch in choices:
            if not isinstance(ch, dict) or not isinstance(ch.get("delta"), dict):
                new_choices.append(ch)
                meaningful = True
                continue
            ci = ch.get("index", 0)
            delta = dict(ch["delta"])
            if self.round_no > 0 and "role" in delta:
                del delta["role"]
                changed = True
            calls = delta.get("tool_calls")
            if isinstance(calls, list):
                kept = []
                for tc in calls:
                    if not isinstance(tc, dict) or not isinstance(tc.get("index"), int):
                        kept.append(tc)
                        continue
                    key = (ci, tc["index"])
                    if key not in self._map:
                        if _name(tc) in self.hidden:
                            self._map[key] = None
                        else:
                            n = self.state.next_call.get(ci, 0)
                            self._map[key] = n
                            self.state.next_call[ci] = n + 1
                            self.state.client_calls.add(ci)
                    new = self._map[key]
                    if new is None:
                        changed = True
                        continue
                    if new != tc["index"]:
                        tc = {**tc, "index": new}
                        changed = True
                    kept.append(tc)
                if kept:
                    delta["tool_calls"] = kept
                else:
                    del delta["tool_calls"]
            if (
                any(v is not None and v != "" for k, v in delta.items())
                or set(ch) - {"index", "delta", "finish_reason", "logprobs"}
                or ch.get("logprobs")
            ):
                meaningful = True
            new_choices.append({**ch, "delta": delta})
        if not changed:
            return None
        if not meaningful and d.get("usage") is None:
            return ""
        return with_member(text, "choices", new_choices)

    def close(self, notice: str | None, texts: list[str]) -> list[SSEEvent]:
        """The client's last chunks: a content chunk with ``notice`` (if given), the finish
        chunk (``tool_calls`` becomes ``stop`` when no call is left for the client or a notice
        ends the turn), the usage chunk (after follow-ups: summed over the rounds' objects in
        ``texts``) and ``[DONE]``; those the upstream never sent are made up."""
        totals = usage_totals([Raw(t).value for t in texts]) if len(texts) > 1 else None
        out: list[SSEEvent] = []
        base = {**self.state.base, "object": "chat.completion.chunk"}
        if notice:
            out.append(
                SSEEvent.make(
                    dumps(
                        {
                            **base,
                            "choices": [{"index": 0, "delta": {"content": "\n\n" + notice}, "finish_reason": None}],
                        }
                    )
                )
            )
        held = list(self._held)
        if not any(_is_finish(e) for e in held):
            held.insert(
                0, SSEEvent.make(dumps({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
            )
        if not any(e.data.strip() == "[DONE]" for e in held):
            held.append(SSEEvent.make("[DONE]"))
        for e in held:
            out.append(self._edit_final(e, notice, totals))
        return out

    def failure(self, err: ProviderError | None, texts: list[str]) -> list[SSEEvent]:
        """The client's last chunk when the provider failed the response: this round's own
        error chunk (``err`` None), else :func:`error_chunk` of ``err``. No finish chunk and no
        ``[DONE]`` follow, as when the API fails a stream."""
        if err is None and self._error is not None:
            return [self._error]
        return [error_chunk(err or ProviderError(500, why=self.failed or "the provider failed the stream"))]

    def _edit_final(self, ev: SSEEvent, notice: str | None, totals: dict[str, int] | None) -> SSEEvent:
        d = ev.parsed
        if not isinstance(d, dict):
            return ev
        obj = RawObject.parse(ev.data)
        changed = False
        if _is_finish(ev):
            choices = []
            for ch in d.get("choices") or []:
                if isinstance(ch, dict):
                    fr = ch.get("finish_reason")
                    if (fr == "tool_calls" and ch.get("index", 0) not in self.state.client_calls) or (
                        notice and fr in (None, "tool_calls")
                    ):
                        ch = {**ch, "finish_reason": "stop"}
                        changed = True
                choices.append(ch)
            obj["choices"] = choices
        if totals and isinstance(d.get("usage"), dict):
            text = obj.raw("usage").text  # type: ignore[union-attr]
            for k, v in totals.items():
                text = with_member(text, k, v)
            obj["usage"] = Raw(text)
            changed = True
        return ev.with_data(obj.text()) if changed else ev


def _is_finish(ev: SSEEvent) -> bool:
    d = ev.parsed
    return isinstance(d, dict) and any(
        isinstance(c, dict) and c.get("finish_reason") is not None for c in d.get("choices") or []
    )


def _message(resp: dict[str, Any]) -> dict[str, Any]:
    choices = resp.get("choices") or [{}]
    m = (choices[0] or {}).get("message") if isinstance(choices[0], dict) else None
    return m if isinstance(m, dict) else {}


def tool_calls(resp: dict[str, Any]) -> list[ToolCall]:
    """The tool calls of the first choice of a ``chat.completion``."""
    from headroom_core.wire.openai_chat import response_tool_calls

    return response_tool_calls(resp)


def usage_totals(messages: list[dict[str, Any]]) -> dict[str, int]:
    """:data:`USAGE_KEYS` summed over the responses (keys none reported are left out)."""
    return sum_usage(messages, USAGE_KEYS)


def completed(resp: dict[str, Any]) -> bool:
    """Whether a non-streamed body is a ``chat.completion`` with choices."""
    return isinstance(resp.get("choices"), list) and bool(resp["choices"])


def truncated(resp: dict[str, Any]) -> bool:
    """Whether a ``chat.completion``'s first choice stopped at the token limit (``finish_reason``
    ``length``): its tool calls' arguments may be incomplete."""
    choices = resp.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    return isinstance(first, dict) and first.get("finish_reason") == "length"


def merge(texts: list[str], hidden: frozenset[str], notice: str | None) -> str:
    """One ``chat.completion`` for the client from every round's (``texts``, JSON text, in
    order): the last round's object whose first choice's ``content`` is every round's content
    joined (then ``notice``), without calls to ``hidden`` tools; ``finish_reason``
    ``tool_calls`` becomes ``stop`` when no call is left; usage summed over several rounds.
    Raises ``ValueError`` when a text is not a ``chat.completion``."""
    last = RawObject.parse(texts[-1])
    choices = [RawObject.parse(r.text) for r in elements(last.raw("choices").text)]  # type: ignore[union-attr]
    if not choices:
        raise ValueError("no choices")
    first = choices[0]
    msg = first.object("message")
    content = "".join(_message(Raw(t).value).get("content") or "" for t in texts)
    if notice:
        content = (content + "\n\n" if content else "") + notice
    if content or len(texts) > 1:
        msg["content"] = content if content else msg.get("content")
    calls = msg.raw("tool_calls")
    kept = (
        [r for r in elements(calls.text) if _name(r.value) not in hidden]
        if calls is not None and calls.text != "null"
        else None
    )
    if kept is not None:
        if kept:
            msg["tool_calls"] = kept
        else:
            msg.pop("tool_calls")
    first["message"] = msg
    fr = first.get("finish_reason")
    if (fr == "tool_calls" and not kept) or (notice and fr in (None, "tool_calls")):
        first["finish_reason"] = "stop"
    last["choices"] = [first, *choices[1:]]
    if len(texts) > 1 and isinstance(last.get("usage"), dict):
        text = last.raw("usage").text  # type: ignore[union-attr]
        for k, v in usage_totals([Raw(t).value for t in texts]).items():
            text = with_member(text, k, v)
        last["usage"] = Raw(text)
    return last.text()


def followup(request: str, message: str, results: list[tuple[ToolCall, str]]) -> str:
    """The next request's JSON text: ``request`` (as sent) plus the assistant message of
    ``message`` (its request-valid members, values as the provider sent them) and one ``tool``
    message per ``(call, answer text)``. Raises ``ValueError`` when ``request`` has no
    ``messages`` array or ``message`` is not a ``chat.completion``."""
    resp = RawObject.parse(message)
    choices = elements(resp.raw("choices").text)  # type: ignore[union-attr]
    msg = RawObject.parse(choices[0].text).object("message")
    turn = RawObject({k: msg.raw(k) for k in REQUEST_MESSAGE_KEYS if k in msg})
    if "role" not in turn:
        turn["role"] = "assistant"
    audio = msg.get("audio")
    if isinstance(audio, dict) and "id" in audio:
        turn["audio"] = {"id": audio["id"]}
    elif "audio" in turn:
        turn.pop("audio")
    tools: list[Any] = [{"role": "tool", "tool_call_id": c.call_id, "content": str(text)} for c, text in results]
    # a tool message holds text only: images answered by the proxy follow as one user message
    pictures = [
        {"type": "image_url", "image_url": {"url": text.data_url}}
        for _, text in results
        if isinstance(text, ImageAnswer)
    ]
    if pictures:
        tools.append(
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "The images the headroom_retrieve calls above returned:"},
                    *pictures,
                ],
            }
        )
    return append_to_array(request, "messages", [turn, *tools])


def notice_message(notice: str, model: str = "") -> str:
    """A whole ``chat.completion`` holding only ``notice``."""
    return dumps(
        {
            "id": "chatcmpl-headroom-notice",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": notice}, "finish_reason": "stop"}],
        }
    )
