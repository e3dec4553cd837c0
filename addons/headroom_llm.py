"""The LLM-traffic addon: request → core plan; response → usage, retrieval loop, ledger."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

import httpx
from mitmproxy import ctx, http

from headroom_core import ledger
from headroom_core.ccr.loop import StreamLoop, complete_json
from headroom_core.extensions import answer_call
from headroom_core.request_plan import RequestPlan, plan_request_async
from headroom_core.wire.blocks import Usage
from headroom_core.wire.detect import dialect_for_path
from headroom_core.surrogates import escape_in_json
from headroom_core.wire.dialects import module_for

from headroom_options import State

log = logging.getLogger("headroom")
# httpx logs every request's full URL at INFO, query included (it may carry an API key)
logging.getLogger("httpx").setLevel(logging.WARNING)

# Hop-by-hop and length headers are not copied into the proxy's own follow-up requests.
_SKIP_HEADERS = {"host", "content-length", "transfer-encoding", "connection", "proxy-connection", "keep-alive", "accept-encoding"}


@dataclass
class FlowState:
    """What the request hook decided, kept in ``flow.metadata`` for the response hooks."""

    plan: RequestPlan
    started: float
    stream: StreamLoop | None = None
    rounds: int = 0
    usage: Usage = field(default_factory=Usage)
    called: list[str] = field(default_factory=list)


def where(flow: http.HTTPFlow) -> str:
    """Scheme, host and path of a flow for log lines: never the query (it may carry an API key)."""
    r = flow.request
    return f"{r.scheme}://{r.pretty_host}:{r.port}{r.path.split('?', 1)[0]}"


def _followup_target(flow: http.HTTPFlow) -> tuple[str, dict[str, str], Any]:
    headers = {k: v for k, v in flow.request.headers.items() if k.lower() not in _SKIP_HEADERS}
    headers["accept-encoding"] = "identity"
    opts = ctx.options
    verify: Any = True
    if opts.ssl_insecure:
        verify = False
    elif opts.ssl_verify_upstream_trusted_ca:
        verify = opts.ssl_verify_upstream_trusted_ca
    return flow.request.url, headers, verify


class LLMTraffic:
    """Compresses LLM API requests and answers the proxy's own tool calls.

    Hooks: ``request`` (plan: passthrough, rewrite or 413), ``responseheaders`` (SSE is streamed
    through :class:`StreamLoop`), ``response`` (non-streamed retrieval loop, usage, ledger).
    """

    def __init__(self, state: State) -> None:
        self.state = state

    async def request(self, flow: http.HTTPFlow) -> None:
        rt = self.state.runtime
        if rt is None or flow.response is not None:
            return
        req = flow.request
        headers = {k.lower(): v for k, v in req.headers.items()}
        for k in [k for k in req.headers.keys() if k.lower().startswith("x-headroom-")]:
            del req.headers[k]
        if dialect_for_path(req.method, req.path) is None:
            return
        try:
            # decoded per content-encoding (gzip, deflate, br, zstd); an unknown encoding or a
            # body that does not decode is left exactly as it is
            body = req.get_content(strict=True) or b""
        except ValueError:
            log.info("headroom: %s: body not decodable (content-encoding %r); forwarded unchanged", where(flow), req.headers.get("content-encoding", ""))
            return
        plan = await plan_request_async(rt, req.method, req.path, headers, body, rt.settings.compress_timeout_seconds)
        st = FlowState(plan, time.monotonic())
        flow.metadata["headroom"] = st
        if plan.action == "reject":
            flow.response = http.Response.make(plan.status, plan.error_body or b"", {"content-type": "application/json"})
            log.warning("headroom: %s %s refused: %s (%d bytes)", req.method, where(flow), plan.reason, plan.bytes_before)
            return
        if plan.action == "rewrite" and plan.body is not None:
            req.content = plan.body
            log.info("headroom: %s: %s, %d -> %d bytes", where(flow), plan.reason, plan.bytes_before, plan.bytes_after)
        if plan.hidden_tools:
            req.headers["accept-encoding"] = "identity"

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        st: FlowState | None = flow.metadata.get("headroom")
        if st is None or st.plan.dialect is None or flow.response is None:
            return
        if "text/event-stream" not in flow.response.headers.get("content-type", ""):
            return
        rt = self.state.runtime
        assert rt is not None
        mod = module_for(st.plan.dialect)
        url, headers, verify = _followup_target(flow)

        def send(body: dict[str, Any]) -> Iterator[bytes]:
            # Runs inside mitmproxy's event loop: blocking, but only once the model has called a
            # proxy tool (rare), and the follow-up's events are forwarded as they arrive.
            with httpx.Client(verify=verify, timeout=httpx.Timeout(600.0, connect=30.0)) as client:
                with client.stream("POST", url, headers=headers, content=json.dumps(body).encode()) as r:
                    if r.status_code != 200:
                        raise RuntimeError(f"follow-up answered {r.status_code}")
                    yield from r.iter_raw()

        st.stream = StreamLoop(
            mod,
            st.plan.forwarded if st.plan.hidden_tools else None,
            st.plan.hidden_tools,
            lambda call: answer_call(rt, st.plan.context, call),
            send,
            rt.settings.retrieve_max_rounds,
        )
        flow.response.stream = st.stream
        if st.plan.hidden_tools:
            # the proxy may replace the tail of this stream: its length is no longer known
            flow.response.headers.pop("content-length", None)
            if flow.request.http_version.startswith("HTTP/1"):
                flow.response.headers["transfer-encoding"] = "chunked"

    async def response(self, flow: http.HTTPFlow) -> None:
        st: FlowState | None = flow.metadata.get("headroom")
        rt = self.state.runtime
        if st is None or rt is None or flow.response is None:
            return
        if st.stream is not None:
            st.usage, st.rounds, st.called = st.stream.usage, st.stream.rounds, st.stream.called
        elif st.plan.dialect is not None and st.plan.action != "reject":
            await self._complete_json(flow, st)
        # queued for the ledger's own writer thread: the client does not wait for the database,
        # and the row is committed within moments (not behind the compression work)
        self._record(flow, st)
        # the plan holds the parsed request (megabytes of objects for a large body) and the stream
        # loop's callback refers back to it: free it with the flow, not at a later cyclic collection
        del flow.metadata["headroom"]
        st.stream = None

    async def _complete_json(self, flow: http.HTTPFlow, st: FlowState) -> None:
        assert flow.response is not None and st.plan.dialect is not None
        rt = self.state.runtime
        assert rt is not None
        mod = module_for(st.plan.dialect)
        try:
            resp = json.loads(flow.response.get_content(strict=False) or b"")
        except ValueError:
            return
        if not isinstance(resp, dict):
            return
        st.called = [c.name for c in mod.response_tool_calls(resp)]
        if st.plan.hidden_tools and flow.response.status_code == 200 and st.plan.forwarded is not None:
            url, headers, verify = _followup_target(flow)

            async def send(body: dict[str, Any]) -> tuple[int, bytes]:
                async with httpx.AsyncClient(verify=verify, timeout=httpx.Timeout(600.0, connect=30.0)) as client:
                    r = await client.post(url, headers=headers, content=json.dumps(body).encode())
                    return r.status_code, r.content

            ctx = st.plan.context
            final, rounds = await complete_json(
                mod,
                st.plan.forwarded,
                resp,
                st.plan.hidden_tools,
                lambda c: answer_call(rt, ctx, c),
                send,
                rt.settings.retrieve_max_rounds,
            )
            if final is not resp:
                flow.response.content = escape_in_json(json.dumps(final, ensure_ascii=False)).encode()
                resp = final
            st.rounds = rounds
        st.usage = mod.usage(resp)

    def _record(self, flow: http.HTTPFlow, st: FlowState) -> None:
        rt = self.state.runtime
        assert rt is not None
        fwd = st.plan.forwarded or {}
        model = str(fwd.get("model", ""))
        offered = [n for n in module_for(st.plan.dialect).tool_names(fwd) if n not in st.plan.hidden_tools] if st.plan.dialect else []
        try:
            ledger.record(
                rt.sessions,
                st.plan,
                user_agent=flow.request.headers.get("user-agent", ""),
                model=model,
                status_code=flow.response.status_code if flow.response else None,
                usage=st.usage,
                rounds=st.rounds,
                offered=offered,
                called=st.called,
                writer=rt.ledger,
            )
        except Exception:  # noqa: BLE001 - the ledger never breaks traffic
            log.exception("headroom: could not record the request outcome")

    def done(self) -> None:
        """On shutdown: commit the ledger rows still queued (up to 10 s)."""
        rt = self.state.runtime
        if rt is not None and "ledger" in rt.__dict__:
            rt.ledger.close(10.0)
