"""An LLM request whose upstream cannot be reached gets an answer in its API's own error shape,
and a ledger row (issue 34, item 6).

mitmproxy answers a failed upstream connection itself: an HTML ``502 Bad Gateway`` page, or,
with its default ``connection_strategy=eager``, a refused ``CONNECT`` (proxy port) or a closed
connection (reverse-mode base-URL port) before the request is even read. This addon:

- sets ``connection_strategy=lazy`` at start unless it was set (the request is read first, so
  there is a request to answer; the upstream is contacted when the request goes out);
- in the ``error`` hook, for a request of an LLM API with no response and its client still
  connected, builds the answer (:mod:`headroom_core.upstream_failure`: 502, or 504 for a timeout,
  the dialect's error body saying the proxy could not reach the host and why) and writes the
  request's ledger row (``outcome`` and ``action`` ``unreachable``, the status, the reason);
- replaces mitmproxy's error page by that answer. mitmproxy has no public call for it: after
  the ``error`` hook its ``HttpStream.handle_protocol_error`` sends the error to the client
  (``SendHttp(ResponseProtocolError)``); :func:`_handle_protocol_error` wraps it and sends the
  answer's headers, body and end instead, for flows that carry one. Private internals of
  mitmproxy 11.0.2, pinned as in ``headroom_stream_relay``.

Covered end to end by ``tests/e2e/test_unreachable_e2e.py`` (the ``anthropic`` and ``openai``
SDKs through a real ``mitmdump``, proxy port and base-URL port, to a closed port).
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from typing import Any

import mitmproxy.version
from headroom_options import State
from mitmproxy import ctx, http
from mitmproxy import flow as mflow
from mitmproxy.proxy.layers import http as http_layers

from headroom_core.plan_codes import Action, Code
from headroom_core.request_plan import RequestPlan
from headroom_core.turn import Turn
from headroom_core.upstream_failure import Failure, classify, error_answer
from headroom_core.wire.blocks import Usage
from headroom_core.wire.dialects import route

log = logging.getLogger("headroom")

PINNED_VERSION = "11.0.2"

if mitmproxy.version.VERSION != PINNED_VERSION:  # pragma: no cover - fails loudly on purpose
    raise ImportError(
        f"addons/headroom_unreachable.py relies on private internals of mitmproxy {PINNED_VERSION} "
        f"(HttpStream.handle_protocol_error), but mitmproxy {mitmproxy.version.VERSION} is installed: "
        "install mitmproxy==11.0.2 or re-check the mechanism."
    )

#: ``flow.metadata`` key of the answer the ``error`` hook built (an :class:`http.Response`).
ANSWER = "headroom_unreachable"


# The unwrapped method survives a reload of this module (mitmproxy reloads changed scripts).
_original = getattr(
    http_layers.HttpStream, "_headroom_original_protocol_error", http_layers.HttpStream.handle_protocol_error
)


def _handle_protocol_error(self: http_layers.HttpStream, event: Any) -> Generator[Any, Any, None]:
    """mitmproxy's own handling, except that the error it would send the client is replaced by
    the answer the ``error`` hook left in the flow's metadata."""
    gen = _original(self, event)
    result: Any = None
    while True:
        try:
            cmd = gen.send(result)
        except StopIteration:
            return
        answer = self.flow.metadata.get(ANSWER) if getattr(self, "flow", None) is not None else None
        if (
            isinstance(answer, http.Response)
            and isinstance(cmd, http_layers.SendHttp)
            and isinstance(cmd.event, http_layers.ResponseProtocolError)
            and cmd.connection is self.context.client
        ):
            self.flow.response = answer
            yield http_layers.SendHttp(http_layers.ResponseHeaders(self.stream_id, answer, False), self.context.client)
            yield http_layers.SendHttp(
                http_layers.ResponseData(self.stream_id, answer.raw_content or b""), self.context.client
            )
            yield http_layers.SendHttp(http_layers.ResponseEndOfMessage(self.stream_id), self.context.client)
            result = None
            continue
        result = yield cmd


http_layers.HttpStream._headroom_original_protocol_error = _original  # type: ignore[attr-defined]
http_layers.HttpStream.handle_protocol_error = _handle_protocol_error  # type: ignore[method-assign]


def _host(flow: http.HTTPFlow) -> str:
    r = flow.request
    return f"{r.pretty_host}:{r.port}"


class Unreachable:
    """The ``running`` and ``error`` hooks described in the module docstring."""

    def __init__(self, state: State) -> None:
        self.state = state

    def running(self) -> None:
        opt = ctx.options._options.get("connection_strategy")
        if opt is not None and not opt.has_changed():  # the user's own choice stays
            ctx.options.update(connection_strategy="lazy")

    async def error(self, flow: http.HTTPFlow) -> None:
        err = flow.error
        if (
            err is None
            or flow.response is not None
            or err.msg == mflow.Error.KILLED_MESSAGE
            or not flow.client_conn.connected
        ):
            return
        req = flow.request
        r = route(req.method, req.path)
        if r.dialect is None:
            return  # not an LLM call: mitmproxy's own answer
        failure = classify(err.msg)
        status, body = error_answer(r.wire, _host(flow), failure)
        flow.metadata[ANSWER] = http.Response.make(
            status, body, {"content-type": "application/json", "x-headroom-error": "upstream-unreachable"}
        )
        log.warning(
            "headroom: %s %s: upstream %s unreachable (%s: %s); answered %d",
            req.method,
            req.path.split("?", 1)[0],
            _host(flow),
            failure.kind,
            failure.detail,
            status,
        )
        if not r.counting:
            self._record(flow, failure, status)

    def _record(self, flow: http.HTTPFlow, failure: Failure, status: int) -> None:
        """The request's ledger row: what it was planned as, marked unreachable, nothing saved
        (it reached no model). Errors are logged: the ledger never breaks traffic."""
        rt = self.state.runtime
        if rt is None:
            return
        st = flow.metadata.pop("headroom", None)  # the LLM addon's FlowState: recorded here, not there
        turn: Turn | None = st.turn if st is not None else None
        try:
            if turn is None:
                raw = flow.request.raw_content or b""
                r = route(flow.request.method, flow.request.path)
                plan = RequestPlan(
                    Action.PASSTHROUGH,
                    "not planned",
                    r.dialect,
                    bytes_before=len(raw),
                    bytes_after=len(raw),
                    code=Code.NOT_COMPRESSED,
                )
                turn = Turn(rt, plan, user_agent=flow.request.headers.get("user-agent", ""))
            turn.record(
                status_code=status,
                usage=Usage(),
                called=[],
                unreachable=f"upstream {_host(flow)} unreachable: {failure.why} ({failure.detail})",
            )
        except Exception:  # noqa: BLE001 - the ledger never breaks traffic
            log.exception("headroom: could not record the unreachable upstream in the ledger")


def make(state: State) -> Unreachable:
    """The addon instance ``addons/headroom.py`` appends to its ``addons`` list."""
    return Unreachable(state)
