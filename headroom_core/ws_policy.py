"""The WebSocket size policy: which ``response.create`` frames are refused, and the close reason.

A WebSocket has no per-message error status, so a refusal closes the connection with code 1009
(RFC 6455 §7.4.1, :data:`~headroom_core.wire.responses_ws.CLOSE_MESSAGE_TOO_BIG`) and a reason
that tells the agent what to do. The addon (``addons/headroom_ws.py``) only carries the verdict
out; the decision is made here, by the plan's :class:`~headroom_core.request_plan.Code`.
"""

from __future__ import annotations

from dataclasses import dataclass

from headroom_core.request_plan import Action, Code, RequestPlan
from headroom_core.settings import Settings
from headroom_core.wire import responses_ws as rws


@dataclass(frozen=True)
class Refusal:
    """A frame to refuse: the ``plan`` the ledger records, the close ``code`` and ``reason``
    (at most 123 bytes of UTF-8)."""

    plan: RequestPlan
    reason: str
    code: int = rws.CLOSE_MESSAGE_TOO_BIG


def frame_refusal(settings: Settings, size: int) -> Refusal | None:
    """The refusal of a client frame of ``size`` bytes before it is parsed: over
    ``ws_max_frame_bytes``. None when it may be parsed."""
    if size <= settings.ws_max_frame_bytes:
        return None
    plan = RequestPlan(Action.REJECT, "frame over ws_max_frame_bytes", rws.DIALECT, status=413, bytes_before=size, code=Code.TOO_LARGE)
    return Refusal(plan, rws.too_large_reason(size, settings.ws_max_frame_bytes))


def plan_refusal(settings: Settings, plan: RequestPlan) -> Refusal | None:
    """The refusal of a frame whose body was planned, by the plan's code: a body over
    ``max_body_bytes`` (:attr:`Code.TOO_LARGE`), or one that could not be compressed and is over
    ``fail_open_max_bytes`` (:attr:`Code.NOT_COMPRESSED_TOO_LARGE`, and any other rejection).
    None when the plan is not a rejection."""
    if plan.action is not Action.REJECT:
        return None
    if plan.code is Code.TOO_LARGE:
        return Refusal(plan, rws.too_large_reason(plan.bytes_before, settings.max_body_bytes))
    return Refusal(plan, rws.not_compressed_reason(plan.bytes_before, settings.fail_open_max_bytes))
