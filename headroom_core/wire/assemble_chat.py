"""Rebuild an OpenAI Chat Completions response (``chat.completion``) from its SSE chunks
(``chat.completion.chunk`` objects, then ``data: [DONE]``), as the API returns it unstreamed.

One generic rule, the one the official SDK applies to every delta
(``openai.lib.streaming._deltas.accumulate_delta``): a member seen for the first time is taken
as it is; strings are appended (``content``, ``refusal``, ``reasoning_content``, a tool call's
``function.arguments``, ``audio.transcript`` …); objects are merged member by member; arrays of
objects that carry an ``index`` (``tool_calls``) are merged entry by entry on that index, other
arrays are extended; ``index``, ``type`` and any other value replace. Per choice,
``finish_reason`` is the last one sent and ``logprobs.content``/``refusal`` lists are extended.
Top-level members come from the first chunk (``object`` becomes ``chat.completion``), ``usage``
from the last chunk that carried one. In the result, tool calls lose their stream-only
``index``.
"""

from __future__ import annotations

import copy
from typing import Any

from headroom_core.wire.rawjson import dumps

_REPLACE = {"index", "type"}


def accumulate(acc: dict[str, Any], delta: dict[str, Any]) -> dict[str, Any]:
    """Merge one ``delta`` object into ``acc`` (changed in place and returned) by the rule in
    the module docstring."""
    for key, value in delta.items():
        if key not in acc or acc[key] is None:
            acc[key] = copy.deepcopy(value)
            continue
        if value is None:
            continue
        have = acc[key]
        if key in _REPLACE:
            acc[key] = value
        elif isinstance(have, str) and isinstance(value, str):
            acc[key] = have + value
        elif isinstance(have, dict) and isinstance(value, dict):
            accumulate(have, value)
        elif isinstance(have, list) and isinstance(value, list):
            _accumulate_list(have, value)
        else:
            acc[key] = copy.deepcopy(value)
    return acc


def _accumulate_list(have: list[Any], more: list[Any]) -> None:
    for entry in more:
        if isinstance(entry, dict) and isinstance(entry.get("index"), int):
            for old in have:
                if isinstance(old, dict) and old.get("index") == entry["index"]:
                    accumulate(old, entry)
                    break
            else:
                have.append(copy.deepcopy(entry))
        else:
            have.append(copy.deepcopy(entry))


class CompletionAssembler:
    """Feed it the events of one Chat Completions SSE stream (:meth:`accept`); :meth:`message`
    is the ``chat.completion`` object, :meth:`text` its JSON text.

    ``finished``: a ``finish_reason`` was sent; ``done``: ``[DONE]`` arrived; ``error``: an
    ``error`` object the stream carried instead of a chunk.
    """

    def __init__(self) -> None:
        self.base: dict[str, Any] = {}
        self.choices: dict[int, dict[str, Any]] = {}
        self.usage: Any = None
        self.finished = False
        self.done = False
        self.error: Any = None

    def accept(self, data: Any, text: str) -> None:
        """One event: ``data`` its parsed JSON (None for ``[DONE]``), ``text`` its data text."""
        if data is None and text.strip() == "[DONE]":
            self.done = True
            return
        if not isinstance(data, dict):
            return
        if "error" in data and "choices" not in data:
            self.error = data["error"]
            return
        if not self.base:
            self.base = {k: copy.deepcopy(v) for k, v in data.items() if k not in ("choices", "usage")}
            self.base["object"] = "chat.completion"
        if data.get("usage") is not None:
            self.usage = copy.deepcopy(data["usage"])
        for ch in data.get("choices") or []:
            if not isinstance(ch, dict):
                continue
            i = ch.get("index", 0)
            c = self.choices.setdefault(i, {"index": i, "message": {}, "logprobs": None, "finish_reason": None})
            if isinstance(ch.get("delta"), dict):
                accumulate(c["message"], ch["delta"])
            if ch.get("finish_reason") is not None:
                c["finish_reason"] = ch["finish_reason"]
                self.finished = True
            lp = ch.get("logprobs")
            if isinstance(lp, dict):
                if not isinstance(c["logprobs"], dict):
                    c["logprobs"] = {}
                accumulate(c["logprobs"], lp)
            for k, v in ch.items():
                if k not in ("index", "delta", "finish_reason", "logprobs"):
                    c[k] = copy.deepcopy(v)

    def message(self) -> dict[str, Any]:
        """The ``chat.completion`` object."""
        choices = []
        for i in sorted(self.choices):
            c = copy.deepcopy(self.choices[i])
            msg = c["message"]
            msg.setdefault("role", "assistant")
            for tc in msg.get("tool_calls") or []:
                if isinstance(tc, dict):
                    tc.pop("index", None)
            choices.append(c)
        out = {**self.base, "choices": choices}
        if self.usage is not None:
            out["usage"] = self.usage
        return out

    def text(self) -> str:
        """:meth:`message` as JSON text."""
        return dumps(self.message())
