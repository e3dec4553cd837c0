"""What the client gets from a Gemini ``generateContent`` turn in which the proxy answered its own
functions, and the request that continues such a turn (the Gemini counterpart of
:mod:`headroom_core.wire.reply_anthropic`).

A streamed turn (``:streamGenerateContent?alt=sse``: each SSE event's data one
``GenerateContentResponse`` chunk; the chunk with the candidate's ``finishReason`` ends the
turn, ``usageMetadata`` cumulative) reaches the client as one stream: every chunk as it comes
except the proxy's ``functionCall`` parts (removed; a chunk left with no part and nothing else
is dropped); each round's finishing chunk waits for the round's end: the last round's goes to
the client (with usage summed over the rounds, a notice as a text part when there is one), an
earlier round's visible parts go out before the next round's first chunk. A round without the
proxy's calls ends with its own finishing chunk byte for byte.

Parts keep their bytes: ``thought`` parts and ``thoughtSignature`` values go back as sent, in the
follow-up's ``model`` content and to the client.

A follow-up the provider failed ends the stream with an error chunk (``{"error": {code, message,
status}}``, Google's error object, what the API sends when it fails a stream), after the parts
still carried: :meth:`StreamView.failure`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from headroom_core.wire import gemini
from headroom_core.wire.blocks import ErrorAnswer, ImageAnswer, ToolCall, Usage
from headroom_core.wire.provider_error import ProviderError, with_message
from headroom_core.wire.rawjson import Raw, RawObject, append_to_array, dumps
from headroom_core.wire.sse import SSE, SSEEvent

#: Streamed responses are SSE.
framing = SSE

#: The ``usageMetadata`` counts summed over rounds.
USAGE_KEYS = (
    "promptTokenCount",
    "candidatesTokenCount",
    "totalTokenCount",
    "cachedContentTokenCount",
    "thoughtsTokenCount",
    "toolUsePromptTokenCount",
)


#: Google's error ``status`` for a failure of each kind (google.rpc.Code: RESOURCE_EXHAUSTED for a
#: quota or rate limit, UNAVAILABLE, DEADLINE_EXCEEDED; anything else INTERNAL)
ERROR_STATUS = {"rate_limited": "RESOURCE_EXHAUSTED", "overloaded": "UNAVAILABLE", "timed_out": "DEADLINE_EXCEEDED"}


def error_chunk(err: ProviderError) -> SSEEvent:
    """The error chunk for ``err``: the provider's ``{"error": {…}}`` body when it is one (its
    message carrying the wait), else Google's error object made from the status."""
    parsed = err.parsed
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
        try:
            return SSEEvent.make(with_message(err.body.decode("utf-8"), ("error", "message"), err.hinted))
        except ValueError:
            pass
    return SSEEvent.make(
        dumps({"error": {"code": err.status, "message": err.hinted, "status": ERROR_STATUS.get(err.kind, "INTERNAL")}})
    )


def tool_calls(resp: dict[str, Any]) -> list[ToolCall]:
    """The ``functionCall`` parts of a response's first candidate."""
    return gemini.response_tool_calls(resp)


def usage(resp: dict[str, Any]) -> Usage:
    """Usage of a response (:func:`headroom_core.wire.gemini.usage`)."""
    return gemini.usage(resp)


def completed(resp: dict[str, Any]) -> bool:
    """Whether a non-streamed body is a response with candidates."""
    return isinstance(resp.get("candidates"), list) and bool(resp["candidates"])


def truncated(resp: dict[str, Any]) -> bool:
    """Whether a response's first candidate stopped at the token limit (``finishReason``
    ``MAX_TOKENS``): a ``functionCall`` part in it may be incomplete."""
    cands = resp.get("candidates")
    first = cands[0] if isinstance(cands, list) and cands else None
    return isinstance(first, dict) and first.get("finishReason") == "MAX_TOKENS"


def _hidden_call(p: Any, hidden: frozenset[str]) -> bool:
    fc = p.get("functionCall") if isinstance(p, dict) else None
    return isinstance(fc, dict) and fc.get("name") in hidden


def _finished(d: dict[str, Any]) -> bool:
    return any(isinstance(c, dict) and c.get("finishReason") for c in d.get("candidates") or [])


def usage_totals(responses: list[dict[str, Any]]) -> dict[str, int]:
    """:data:`USAGE_KEYS` of ``usageMetadata`` summed over the responses (keys none reported
    left out)."""
    out: dict[str, int] = {}
    for r in responses:
        u = r.get("usageMetadata")
        for k in USAGE_KEYS:
            v = u.get(k) if isinstance(u, dict) else None
            if isinstance(v, int) and not isinstance(v, bool):
                out[k] = out.get(k, 0) + v
    return out


class Assembler:
    """The chunks of one streamed round → the response the API would have sent unstreamed: the
    first candidate's parts in order (adjacent plain text parts joined, every other part as
    sent), the last ``finishReason``, the last ``usageMetadata``, the first chunk's other
    members."""

    def __init__(self) -> None:
        self.base: dict[str, Any] = {}
        self.parts: list[Any] = []
        self.candidate: dict[str, Any] = {}
        self.usage: Any = None
        self.finished = False
        self.error: Any = None

    def accept(self, d: Any) -> None:
        """One chunk, parsed."""
        if not isinstance(d, dict):
            return
        if "error" in d and "candidates" not in d:
            self.error = d["error"]
            return
        for k, v in d.items():
            if k not in ("candidates", "usageMetadata"):
                self.base.setdefault(k, copy.deepcopy(v))
        if d.get("usageMetadata") is not None:
            self.usage = copy.deepcopy(d["usageMetadata"])
        cands = d.get("candidates")
        c = cands[0] if isinstance(cands, list) and cands and isinstance(cands[0], dict) else None
        if c is None:
            return
        for k, v in c.items():
            if k != "content":
                self.candidate[k] = copy.deepcopy(v)
        content = c.get("content")
        for p in content.get("parts") or [] if isinstance(content, dict) else []:
            last = self.parts[-1] if self.parts else None
            if isinstance(p, dict) and set(p) == {"text"} and isinstance(last, dict) and set(last) == {"text"}:
                last["text"] += p["text"]
            else:
                self.parts.append(copy.deepcopy(p))
        if c.get("finishReason"):
            self.finished = True

    def message(self) -> dict[str, Any]:
        """The assembled response object."""
        cand = {"content": {"role": "model", "parts": self.parts}, **self.candidate}
        out = {"candidates": [cand], **self.base}
        if self.usage is not None:
            out["usageMetadata"] = self.usage
        return out


@dataclass
class ViewState:
    """What the client has been sent so far, shared by every round of one response: visible
    parts of an earlier round's finishing chunk still to send."""

    carry: list[Any] = field(default_factory=list)
    #: the visible parts of the latest round's finishing chunk (carried if a follow-up comes)
    ending: list[Any] = field(default_factory=list)
    base: dict[str, Any] = field(default_factory=dict)


class StreamView:
    """One round's chunks → the client's chunks (see the module docstring)."""

    def __init__(self, hidden: frozenset[str], state: ViewState, round_no: int) -> None:
        self.hidden = hidden
        self.state = state
        self.round_no = round_no
        self.asm = Assembler()
        self._held: SSEEvent | None = None
        self.failed: str | None = None
        self._error: SSEEvent | None = None
        if round_no > 0:  # a follow-up: the previous round's finishing parts go out first
            state.carry, state.ending = state.carry + state.ending, []

    @property
    def complete(self) -> bool:
        """Whether the round's finishing chunk arrived."""
        return self.asm.finished

    def message_text(self) -> str:
        """The round's response object, as JSON text."""
        return dumps(self.asm.message())

    def feed(self, ev: SSEEvent) -> list[SSEEvent]:
        """The chunks the client gets now for the upstream event ``ev``."""
        d = ev.parsed
        self.asm.accept(d)
        if not isinstance(d, dict):
            return [ev]
        if "error" in d and "candidates" not in d and self.round_no > 0:
            err = d.get("error")
            self.failed = str(err.get("message") if isinstance(err, dict) else err)[:200]
            self._error = ev
            return []
        if not self.state.base:
            self.state.base = {k: d[k] for k in ("modelVersion", "responseId") if k in d}
        out = self._carried()
        if _finished(d):
            self._held = ev
            self.state.ending = [
                p
                for c in (d.get("candidates") or [])[:1]
                if isinstance(c, dict)
                for p in _parts_of(c)
                if not _hidden_call(p, self.hidden)
            ]
            return out
        edited = self._without_hidden(ev, d)
        return out + ([edited] if edited is not None else [])

    def _carried(self) -> list[SSEEvent]:
        """An earlier round's visible finishing parts, once, before this round's first chunk."""
        if not self.state.carry:
            return []
        parts, self.state.carry = self.state.carry, []
        return [
            SSEEvent.make(
                dumps({"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}], **self.state.base})
            )
        ]

    def failure(self, err: ProviderError | None, texts: list[str]) -> list[SSEEvent]:
        """The client's last chunks when the provider failed the response: an earlier round's
        visible finishing parts not sent yet (the text so far), then this round's own error
        chunk (``err`` None) or :func:`error_chunk` of ``err``."""
        out = self._carried()
        if err is None and self._error is not None:
            return out + [self._error]
        return out + [error_chunk(err or ProviderError(500, why=self.failed or "the provider failed the stream"))]

    def _without_hidden(self, ev: SSEEvent, d: dict[str, Any]) -> SSEEvent | None:
        """``ev`` without the proxy's ``functionCall`` parts (unchanged when it has none; None
        when nothing is left)."""
        cands = d.get("candidates")
        if not isinstance(cands, list) or not any(
            _hidden_call(p, self.hidden) for c in cands if isinstance(c, dict) for p in _parts_of(c)
        ):
            return ev
        new = []
        for c in cands:
            if isinstance(c, dict) and isinstance(c.get("content"), dict):
                kept = [p for p in _parts_of(c) if not _hidden_call(p, self.hidden)]
                if not kept and not c.get("finishReason"):
                    continue
                c = {**c, "content": {**c["content"], "parts": kept}}
            new.append(c)
        if not new and d.get("usageMetadata") is None:
            return None
        obj = RawObject.parse(ev.data)
        obj["candidates"] = new
        return ev.with_data(obj.text())

    def close(self, notice: str | None, texts: list[str]) -> list[SSEEvent]:
        """The client's last chunk: this round's finishing chunk (made up when the upstream sent
        none) without the proxy's calls, with the parts still carried and ``notice`` as text
        parts, ``finishReason`` ``STOP`` when a notice ends the turn, usage summed over the
        rounds' objects in ``texts`` when there are several."""
        carry, self.state.carry, self.state.ending = self.state.carry, [], []
        held = self._held
        if (
            held is not None
            and not carry
            and not notice
            and len(texts) <= 1
            and not any(
                _hidden_call(p, self.hidden)
                for c in held.parsed.get("candidates") or []
                if isinstance(c, dict)
                for p in _parts_of(c)
            )
        ):
            return [held]
        d = (
            held.parsed
            if held is not None
            else {
                "candidates": [{"content": {"role": "model", "parts": []}, "finishReason": "STOP", "index": 0}],
                **self.state.base,
            }
        )
        obj = RawObject.parse(held.data) if held is not None else RawObject(d)
        cands = [c for c in d.get("candidates") or [] if isinstance(c, dict)] or [{"index": 0}]
        first = dict(cands[0])
        content = dict(first.get("content") or {"role": "model"})
        parts = carry + [p for p in _parts_of(first) if not _hidden_call(p, self.hidden)]
        if notice:
            parts.append({"text": "\n\n" + notice})
            first["finishReason"] = "STOP"
        content["parts"] = parts or [{"text": ""}]
        first["content"] = content
        obj["candidates"] = [first, *cands[1:]]
        if len(texts) > 1:
            totals = usage_totals([m for m in (_value(t) for t in texts) if isinstance(m, dict)])
            if totals:
                um = d.get("usageMetadata")
                obj["usageMetadata"] = {**(um if isinstance(um, dict) else {}), **totals}
        return [SSEEvent.make(obj.text())]


def _parts_of(c: dict[str, Any]) -> list[Any]:
    content = c.get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    return parts if isinstance(parts, list) else []


def _value(text: str) -> Any:
    try:
        return Raw(text).value
    except ValueError:
        return None


def merge(texts: list[str], hidden: frozenset[str], notice: str | None) -> str:
    """One response for the client from every round's (``texts``, JSON text, in order): the last
    round's object whose first candidate's parts are every round's visible parts (the proxy's
    ``functionCall`` parts left out), then ``notice``; ``finishReason`` ``STOP`` with a notice;
    usage summed over several rounds. Raises ``ValueError`` when a text is not a response."""
    last = RawObject.parse(texts[-1])
    cands = last.get("candidates")
    if not isinstance(cands, list) or not cands or not isinstance(cands[0], dict):
        raise ValueError("no candidates")
    parts: list[Any] = []
    for t in texts:
        v = _value(t)
        c0 = (v.get("candidates") or [{}])[0] if isinstance(v, dict) else {}
        parts += [p for p in _parts_of(c0 if isinstance(c0, dict) else {}) if not _hidden_call(p, hidden)]
    first = dict(cands[0])
    if notice:
        parts.append({"text": ("\n\n" if parts else "") + notice})
        first["finishReason"] = "STOP"
    changed = len(texts) > 1 or notice or any(_hidden_call(p, hidden) for p in _parts_of(cands[0]))
    if not changed:
        return texts[-1]
    first["content"] = {**(first.get("content") or {"role": "model"}), "parts": parts or [{"text": ""}]}
    last["candidates"] = [first, *cands[1:]]
    if len(texts) > 1:
        totals = usage_totals([m for m in (_value(t) for t in texts) if isinstance(m, dict)])
        um = last.get("usageMetadata")
        if totals:
            last["usageMetadata"] = {**(um if isinstance(um, dict) else {}), **totals}
    return last.text()


def _answer_part(call: ToolCall, text: str) -> dict[str, Any]:
    key = "error" if isinstance(text, ErrorAnswer) else "output"
    fr: dict[str, Any] = {"name": call.name, "response": {key: str(text)}}
    if call.call_id and not call.call_id.startswith("#"):
        fr["id"] = call.call_id
    return {"functionResponse": fr}


def followup(request: str, message: str, results: list[tuple[ToolCall, str]]) -> str:
    """The next request's JSON text: ``request`` (as sent; its bytes before the end of
    ``contents`` kept) plus the round's ``model`` content (its parts as the provider sent them,
    thought signatures included) and one ``user`` content with a ``functionResponse`` part per
    ``(call, answer text)`` (``{"output": …}``, ``{"error": …}`` for a failed call; an image
    answer follows as an ``inlineData`` part). Raises ``ValueError`` when ``request`` has no
    ``contents`` array or ``message`` no candidate."""
    resp = Raw(message).value
    cands = resp.get("candidates") if isinstance(resp, dict) else None
    if not isinstance(cands, list) or not cands or not isinstance(cands[0], dict):
        raise ValueError("no candidates")
    model = {"role": "model", "parts": _parts_of(cands[0])}
    answers: list[Any] = [_answer_part(c, t) for c, t in results]
    answers += [
        {"inlineData": {"mimeType": t.media_type, "data": t.data}} for _, t in results if isinstance(t, ImageAnswer)
    ]
    return append_to_array(request, gemini.CONVERSATION, [model, {"role": "user", "parts": answers}])


def notice_message(notice: str, model: str = "") -> str:
    """A whole response holding only ``notice``."""
    return dumps(
        {
            "candidates": [
                {"content": {"role": "model", "parts": [{"text": notice}]}, "finishReason": "STOP", "index": 0}
            ],
            "modelVersion": model,
        }
    )
