"""What the client gets from an Ollama ``/api/chat`` turn in which the proxy answered its own
tools, and the request that continues such a turn (:class:`~headroom_core.wire.protocol.ReplySide`).

The stream (``stream`` is on unless the request says ``false``) is NDJSON
(:mod:`headroom_core.wire.ndjson`): ``{"model", "created_at", "message": {"role": "assistant",
"content", "thinking"?, "tool_calls"?}, "done": false}`` lines, then one ``"done": true`` line with
``done_reason`` and the counts (``prompt_eval_count``, ``eval_count``, durations). A non-streamed
answer is that last line with the whole ``message``.

- :class:`StreamView`: every line passes as it came, except the proxy's calls (a line holding
  only those is dropped, one holding the client's calls too keeps those) and the ``done`` line,
  held to the end of the response (the last round's, counts summed over rounds).
- :func:`merge`: one answer from every round's (contents joined, the client's calls kept).
- :func:`followup`: the request with the model's ``message`` as sent and one ``role: "tool"``
  message per answered call (``tool_name`` naming it).
- :meth:`StreamView.failure`: a follow-up the provider failed ends the stream with an
  ``{"error": "<message>"}`` line, as Ollama ends a stream it fails (the ollama clients raise
  ``ResponseError`` on it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from headroom_core.wire import ollama as _dialect
from headroom_core.wire.blocks import ToolCall
from headroom_core.wire.ndjson import NDJSON
from headroom_core.wire.provider_error import ProviderError
from headroom_core.wire.rawjson import Raw, RawObject, append_to_array, dumps
from headroom_core.wire.sse import SSEEvent

#: Streamed responses are NDJSON lines.
framing = NDJSON

usage = _dialect.usage
tool_calls = _dialect.response_tool_calls
#: Counts summed over rounds.
USAGE_KEYS = ("prompt_eval_count", "eval_count", "total_duration", "eval_duration", "prompt_eval_duration")


@dataclass
class ViewState:
    """What the client has been sent so far, shared by every round of one response."""

    client_calls: bool = False


def _sums(objs: list[Any]) -> dict[str, int]:
    """:data:`USAGE_KEYS` summed over answer objects (top-level counts; keys none reported left out)."""
    out: dict[str, int] = {}
    for o in objs:
        for k in USAGE_KEYS:
            v = o.get(k) if isinstance(o, dict) else None
            if isinstance(v, int) and not isinstance(v, bool):
                out[k] = out.get(k, 0) + v
    return out


def _line(obj: dict[str, Any]) -> SSEEvent:
    data = dumps(obj)
    return SSEEvent((data + "\n").encode("utf-8"), None, data)


class StreamView:
    """One round's lines → the client's lines (see the module docstring)."""

    def __init__(self, hidden: frozenset[str], state: ViewState, round_no: int) -> None:
        self.hidden = hidden
        self.state = state
        self.round_no = round_no
        self.failed: str | None = None
        self._error: SSEEvent | None = None
        self._done: SSEEvent | None = None
        self._content: list[str] = []
        self._thinking: list[str] = []
        self._calls: list[Any] = []
        self._role = "assistant"

    @property
    def complete(self) -> bool:
        return self._done is not None

    def message_text(self) -> str:
        last = (
            dict(self._done.parsed)
            if self._done is not None and isinstance(self._done.parsed, dict)
            else {"done": False}
        )
        msg: dict[str, Any] = {"role": self._role, "content": "".join(self._content)}
        if self._thinking:
            msg["thinking"] = "".join(self._thinking)
        if self._calls:
            msg["tool_calls"] = self._calls
        last["message"] = msg
        return dumps(last)

    def feed(self, ev: SSEEvent) -> list[SSEEvent]:
        d = ev.parsed
        if not isinstance(d, dict):
            return [ev]
        if "error" in d and "message" not in d:
            if self.round_no > 0:
                self.failed = str(d.get("error"))[:200]
                self._error = ev
                return []
            return [ev]
        msg: dict[str, Any] = d["message"] if isinstance(d.get("message"), dict) else {}
        self._role = str(msg.get("role") or self._role)
        if isinstance(msg.get("content"), str):
            self._content.append(msg["content"])
        if isinstance(msg.get("thinking"), str):
            self._thinking.append(msg["thinking"])
        calls = [tc for tc in msg.get("tool_calls") or [] if isinstance(tc, dict)]
        self._calls += calls
        if d.get("done") is True:
            self._done = ev
            if calls or msg.get("content"):  # the last line carries part of the answer: sent without its end
                return self._visible(ev, d, msg, calls, done=False)
            return []
        return self._visible(ev, d, msg, calls, done=None)

    def _visible(
        self, ev: SSEEvent, d: dict[str, Any], msg: dict[str, Any], calls: list[Any], done: bool | None
    ) -> list[SSEEvent]:
        mine = [tc for tc in calls if (tc.get("function") or {}).get("name") in self.hidden]
        theirs = [tc for tc in calls if tc not in mine]
        self.state.client_calls = self.state.client_calls or bool(theirs)
        if not mine and done is None:
            return [ev]
        if mine and not theirs and not msg.get("content") and not msg.get("thinking"):
            return []
        out = dict(d)
        m = dict(msg)
        if calls:
            m["tool_calls"] = theirs
            if not theirs:
                del m["tool_calls"]
        out["message"] = m
        if done is False:
            out["done"] = False
            for k in list(out):
                if k not in ("model", "created_at", "message", "done"):
                    del out[k]
        return [_line(out)]

    def failure(self, err: ProviderError | None, texts: list[str]) -> list[SSEEvent]:
        """The client's last line when the provider failed the response: this round's own error
        line (``err`` None) or ``{"error": <the provider's message, with the wait>}``."""
        if err is None and self._error is not None:
            return [self._error]
        return [
            _line({"error": (err or ProviderError(500, why=self.failed or "the provider failed the stream")).hinted})
        ]

    def close(self, notice: str | None, texts: list[str]) -> list[SSEEvent]:
        """A line with ``notice`` (if given), then the ``done`` line (made up when the upstream
        never sent one; counts summed over every round's answer in ``texts``)."""
        out: list[SSEEvent] = []
        base: dict[str, Any] = {"model": "", "created_at": "", "done": True, "done_reason": "stop"}
        if self._done is not None and isinstance(self._done.parsed, dict):
            base = self._done.parsed
        if notice:
            out.append(
                _line(
                    {
                        "model": base.get("model", ""),
                        "created_at": base.get("created_at", ""),
                        "message": {"role": "assistant", "content": notice},
                        "done": False,
                    }
                )
            )
        m: dict[str, Any] = base["message"] if isinstance(base.get("message"), dict) else {}
        if self._done is not None and len(texts) <= 1 and not m.get("content") and not m.get("tool_calls"):
            out.append(self._done)  # unchanged: its own bytes
            return out
        done = {**base, "message": {"role": "assistant", "content": ""}, "done": True}
        if len(texts) > 1:
            done.update(_sums([Raw(t).value for t in texts]))
        out.append(_line(done))
        return out


def completed(resp: dict[str, Any]) -> bool:
    """Whether a non-streamed body is a whole answer (a ``message`` and ``done`` not false)."""
    return isinstance(resp.get("message"), dict) and resp.get("done", True) is not False


def truncated(resp: dict[str, Any]) -> bool:
    """Whether an answer stopped at the token limit (``done_reason`` ``length``, Ollama's
    ``num_predict`` reached)."""
    return resp.get("done_reason") == "length"


def merge(texts: list[str], hidden: frozenset[str], notice: str | None) -> str:
    """One answer from every round's (``texts``, JSON, in order): the last round's object, its
    ``message`` with every round's content joined (``notice`` appended) and the client's calls;
    counts summed over rounds. Raises ``ValueError`` when a text is not an answer object."""
    objs = [json.loads(t) for t in texts]
    if not all(isinstance(o, dict) for o in objs):
        raise ValueError("not an answer object")
    content = "".join(str((o.get("message") or {}).get("content") or "") for o in objs) + (
        ("\n\n" + notice) if notice else ""
    )
    calls = [
        tc
        for o in objs
        for tc in (o.get("message") or {}).get("tool_calls") or []
        if isinstance(tc, dict) and (tc.get("function") or {}).get("name") not in hidden
    ]
    last = RawObject.parse(texts[-1])
    msg = dict(objs[-1].get("message") or {"role": "assistant"})
    msg["content"] = content
    if calls:
        msg["tool_calls"] = calls
    else:
        msg.pop("tool_calls", None)
    last["message"] = msg
    if len(texts) > 1:
        for k, v in _sums(objs).items():
            last[k] = v
    return last.text()


def followup(request: str, message: str, results: list[tuple[ToolCall, str]]) -> str:
    """The next request's JSON text: ``request`` (as sent) with the model's ``message`` exactly as
    the provider sent it and a ``role: "tool"`` message per ``(call, answer text)``. Raises
    ``ValueError`` when ``request`` has no ``messages`` array or ``message`` is not an answer."""
    turn = RawObject.parse(message).raw("message")
    if turn is None:
        raise ValueError("the answer has no message")
    answers = [{"role": "tool", "content": str(text), "tool_name": c.name} for c, text in results]
    return append_to_array(request, _dialect.CONVERSATION, [turn, *answers])


def notice_message(notice: str, model: str = "") -> str:
    """A whole answer holding only ``notice``."""
    return dumps(
        {
            "model": model,
            "created_at": "",
            "message": {"role": "assistant", "content": notice},
            "done": True,
            "done_reason": "stop",
        }
    )
