"""The WebSocket size policy: which ``response.create`` frames are refused, and the close reason.

A WebSocket has no per-message error status, so a refusal closes the connection with code 1009
(RFC 6455 §7.4.1, :data:`~headroom_core.wire.responses_ws.CLOSE_MESSAGE_TOO_BIG`) and a reason
that tells the agent what to do. The addon (``addons/headroom_ws.py``) only carries the verdict
out; the decision is made here, by the plan's :class:`~headroom_core.request_plan.Code`.

Before the close, the client gets one in-band ``error`` event (:func:`error_event`) in the shape
the Responses WebSocket uses for a refused request (``status`` 400, ``error.code``
``context_length_exceeded``). Measured with Codex CLI 0.171 (tests/e2e/agents/test_codex.py):

- a bare close 1009 makes Codex switch to HTTP for the rest of its session and send the same
  request again, whole, as a ``POST``; over the proxy's limit there too, it gets 413, which it
  retries five times (about 6 s of back-off) before the turn fails;
- ``context_length_exceeded`` (as an ``error`` event, a ``response.failed`` or an HTTP 400) ends
  the turn at once ("ran out of room in the model's context window") and marks its context
  window full, so its next turn (the user's next message, ``codex exec resume``) compacts the
  conversation first and then goes on: the one signal that makes the agent shrink the request
  instead of resending it. A 413 status or any other code is not read that way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from headroom_core.request_plan import Action, Code, RequestPlan
from headroom_core.settings import Settings
from headroom_core.too_large import too_large_message
from headroom_core.wire import responses_ws as rws


@dataclass(frozen=True)
class Refusal:
    """A frame to refuse: the ``plan`` the ledger records, the close ``code`` and ``reason``
    (at most 123 bytes of UTF-8), and the in-band ``event`` the client gets before the close
    (:func:`error_event` of ``message``: for a frame over a size limit the text an HTTP 413 gives,
    :func:`headroom_core.too_large.too_large_message`; else the reason)."""

    plan: RequestPlan
    reason: str
    code: int = rws.CLOSE_MESSAGE_TOO_BIG
    message: str = ""

    @property
    def event(self) -> bytes:
        """The ``error`` event frame sent to the client before the close (see the module)."""
        return error_event(self.message or self.reason)


#: The ``error.code`` that makes a Responses client compact its conversation before it retries
#: (OpenAI's code for a request over the model's context window; Codex reads it by this code).
CONTEXT_CODE = "context_length_exceeded"


def error_event(message: str) -> bytes:
    """A Responses WebSocket ``error`` event that refuses the request for its size: ``{"type":
    "error", "status": 400, "error": {"type": "invalid_request_error", "code":
    "context_length_exceeded", "message": message, "param": "input"}}`` as compact UTF-8 JSON.

    The shape is the one the Responses WebSocket sends for a failed request (``status`` beside
    ``error``, as Codex's client reads it); why this code, see the module docstring."""
    err = {"type": "invalid_request_error", "code": CONTEXT_CODE, "message": message, "param": "input"}
    return json.dumps({"type": "error", "status": 400, "error": err}, ensure_ascii=False, separators=(",", ":")).encode(
        "utf-8"
    )


def frame_refusal(settings: Settings, size: int) -> Refusal | None:
    """The refusal of a client frame of ``size`` bytes before it is parsed: over
    ``ws_max_frame_bytes``. None when it may be parsed."""
    if size <= settings.ws_max_frame_bytes:
        return None
    plan = RequestPlan(
        Action.REJECT, "frame over ws_max_frame_bytes", rws.DIALECT, status=413, bytes_before=size, code=Code.TOO_LARGE
    )
    return Refusal(
        plan,
        rws.too_large_reason(size, settings.ws_max_frame_bytes),
        message=too_large_message(size, settings.ws_max_frame_bytes, "ws_max_frame_bytes"),
    )


def plan_refusal(settings: Settings, plan: RequestPlan) -> Refusal | None:
    """The refusal of a frame whose body was planned, by the plan's code: a body over
    ``max_body_bytes`` (:attr:`Code.TOO_LARGE`), or one that could not be compressed and is over
    ``fail_open_max_bytes`` (:attr:`Code.NOT_COMPRESSED_TOO_LARGE`, and any other rejection).
    None when the plan is not a rejection."""
    if plan.action is not Action.REJECT:
        return None
    if plan.code is Code.TOO_LARGE:
        return Refusal(
            plan,
            rws.too_large_reason(plan.bytes_before, settings.max_body_bytes),
            message=too_large_message(plan.bytes_before, settings.max_body_bytes),
        )
    return Refusal(plan, rws.not_compressed_reason(plan.bytes_before, settings.fail_open_max_bytes))
