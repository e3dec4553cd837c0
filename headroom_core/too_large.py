"""The words of a refusal for size: one text for a request over a size limit, whatever refused
it and however it came (HTTP 413 error bodies in the dialect's shape, the Responses WebSocket's
``error`` event with code ``context_length_exceeded``), so an agent shows its user the same
sentence either way. Pure; imports nothing.

The WebSocket close frame that follows the event carries a reason of at most 123 bytes
(RFC 6455 §5.5): :func:`headroom_core.wire.responses_ws.too_large_reason`, the same facts
in short.
"""

from __future__ import annotations

#: What to do, after the facts: the request was not sent; compacting is the way on.
ADVICE = (
    "so it was not sent to the model. Compact the conversation (for example /compact) or drop "
    "large tool outputs, then retry; resending the same request will be refused again."
)


def too_large_message(
    size: int, limit: int, setting: str = "max_body_bytes", *, declared: bool = False, passed: str = ""
) -> str:
    """The refusal of a request of ``size`` bytes over ``limit`` bytes (the Headroom ``setting``
    that sets it: ``max_body_bytes``, ``ws_max_frame_bytes``). ``declared``: ``size`` is the
    body's Content-Length (the body not read); ``passed``: the body was not held whole, and
    ``size`` bytes had been ``"read"`` (or ``"decoded"``) when the limit was passed. E.g.
    ``headroom proxy: the request body is 40000000 bytes, over the limit of 33554432 bytes
    (headroom max_body_bytes), so it was not sent to the model. Compact the conversation …``"""
    if passed:
        facts = f"passed the limit of {limit} bytes (headroom {setting}) after {size} bytes were {passed}"
    else:
        facts = f"is {size} bytes{' (its Content-Length)' if declared else ''}, over the limit of {limit} bytes (headroom {setting})"
    return f"headroom proxy: the request body {facts}, {ADVICE}"
