"""The LLM-traffic addon: request → core plan; response → usage, retrieval loop, ledger.

What happens to a planned request after it went out (the session's state, the observers in the
client's order, the ledger row, the proxy's tool answers, diagnostics) is the core's
:class:`~headroom_core.turn.Turn`; this addon translates the flow into calls on it and moves
the bytes (the body, the stream, the follow-up requests).

Nothing here blocks mitmproxy's event loop: planning, answering the proxy's tools, decoding
large bodies and the ledger run in worker threads; follow-up requests are async (httpx), and a
streamed follow-up reaches the client through :mod:`headroom_stream_relay` from the async
``response`` hook while every other flow goes on.

A client that leaves while the proxy's follow-up runs (its connection closed, its HTTP/2 stream
reset: :func:`headroom_stream_relay.on_client_gone`) abandons the turn
(:meth:`~headroom_core.turn.Turn.abandon`): the follow-up stops where it waits, its upstream
connection closes, no further round starts; the ledger row says 499 (client closed request).

A follow-up the provider fails (a 429, a 5xx, a connection cut) reaches the client as an error
it retries (:mod:`headroom_core.ccr.followup_error`): non-streamed, the provider's status,
headers and error body replace the answer; streamed, the dialect's error event ends the stream.
The ledger row has the provider's status.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import headroom_stream_relay
import httpx
from headroom_headers import header_dict
from headroom_options import State
from mitmproxy import ctx, http

from headroom_core.ccr.followup_error import FollowUpLost, json_answer
from headroom_core.ccr.loop import StreamLoop, StreamTap, complete_json, sum_usage
from headroom_core.request_plan import Action, Code, RequestPlan, plan_request_async
from headroom_core.too_large import too_large_message
from headroom_core.turn import Turn, Turns, client_key
from headroom_core.wire import sigv4
from headroom_core.wire.blocks import Usage
from headroom_core.wire.decode import TooLarge, decode_limited, decoder_for
from headroom_core.wire.detect import Dialect
from headroom_core.wire.dialects import Route, dialect, route
from headroom_core.wire.protocol import framing_of
from headroom_core.wire.rawjson import Raw
from headroom_core.wire.signed import Signature, body_signature

log = logging.getLogger("headroom")
# httpx logs every request's full URL at INFO, query included (it may carry an API key)
logging.getLogger("httpx").setLevel(logging.WARNING)

# Hop-by-hop and length headers are not copied into the proxy's own follow-up requests.
_SKIP_HEADERS = {
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "proxy-connection",
    "keep-alive",
    "accept-encoding",
    "content-encoding",
}
_FOLLOWUP_TIMEOUT = httpx.Timeout(600.0, connect=30.0)


@dataclass
class FlowState:
    """What the request hook decided, kept in ``flow.metadata`` for the response hooks: the
    request's :class:`~headroom_core.turn.Turn` (its plan), ``sent``: the request body as it went
    upstream (content-decoded), for follow-ups; ``resign``: how follow-ups are signed (a
    re-signed SigV4 request, :mod:`headroom_core.wire.sigv4`); what the response said, for the
    ledger."""

    turn: Turn
    sent: bytes = b""
    resign: sigv4.Resign | None = None
    stream: StreamLoop | None = None
    rounds: int = 0
    usage: Usage = field(default_factory=Usage)
    called: list[str] = field(default_factory=list)

    @property
    def plan(self) -> RequestPlan:
        return self.turn.plan


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


async def _followup_headers(st: FlowState, url: str, headers: dict[str, str], body: bytes) -> dict[str, str]:
    """``headers`` for a follow-up POST of ``body`` to ``url``: as they are, or signed again
    as the request was (:func:`~headroom_core.wire.sigv4.sign`, off the event loop: it hashes
    the body), the signed ones replacing theirs whatever their case."""
    if st.resign is None:
        return headers
    new = await asyncio.to_thread(sigv4.sign, st.resign, "POST", url, headers, body)
    return {**{k: v for k, v in headers.items() if k.lower() not in new}, **new}


def _too_large(r: Route, size: int, limit: int) -> RequestPlan:
    msg = too_large_message(size, limit, passed="decoded")
    body = json.dumps(r.wire.error_body(msg, too_large=True)).encode()
    return RequestPlan(
        Action.REJECT,
        "body over max_body_bytes",
        r.dialect,
        status=413,
        error_body=body,
        bytes_before=size,
        code=Code.TOO_LARGE,
    )


class LLMTraffic:
    """Compresses LLM API requests and answers the proxy's own tool calls.

    Hooks: ``request`` (plan: passthrough, rewrite or 413), ``responseheaders`` (a stream in the
    dialect's framing, SSE or another, goes through :class:`StreamTap`), ``response`` (the retrieval loop, streamed or not, usage,
    ledger).
    """

    def __init__(self, state: State) -> None:
        self.state = state
        #: the turns after forwarding, ordered per client
        self.turns = Turns()
        #: the user's AWS credentials (botocore's chain), read when bedrock_resign first needs them
        self.aws_keys = sigv4.KeySource()
        #: the line naming bedrock_resign was logged (once per process)
        self._resign_hinted = False

    async def request(self, flow: http.HTTPFlow) -> None:
        rt = self.state.runtime
        if rt is None or flow.response is not None:
            return
        req = flow.request
        headers = header_dict(req.headers)
        sig = body_signature(headers, req.path)
        for k in [k for k in headers if k.startswith("x-headroom-")]:
            if sig is None or k not in sig.signed_headers:
                del req.headers[k]
        r = route(req.method, req.path)  # the dialect, detected once for the whole request
        d = r.dialect
        if d is None:
            return
        raw = req.raw_content or b""
        ua = req.headers.get("user-agent", "")
        resign: sigv4.Resign | None = None
        sent_headers = headers
        if sig is not None:
            decision = await self._resign_decision(flow, sig, headers, raw)
            if decision.resign is None:
                # a changed body (or signed header) fails the signature: byte-identical, not planned
                self._signed_passthrough(flow, d, sig, decision.why, len(raw))
                return
            resign = decision.resign
            original = req.headers.copy()  # the client's, should signing again fail
            # a SigV4 header changes every request: the client is told apart by its verified key
            headers = {**headers, "authorization": sigv4.identity(resign)}
        encoding = req.headers.get("content-encoding", "")
        body = raw
        if encoding.strip():
            try:
                # decoded in slices and stopped at the limit (a 1 MB gzip body may hold 1 GiB)
                body = await asyncio.to_thread(decode_limited, raw, encoding, rt.settings.max_body_bytes)
            except TooLarge as e:
                plan = _too_large(r, e.size, e.limit)
                flow.metadata["headroom"] = FlowState(Turn(rt, plan, user_agent=ua))
                flow.response = http.Response.make(413, plan.error_body or b"", {"content-type": "application/json"})
                log.warning(
                    "headroom: %s %s refused: decoded body over %d bytes (%d bytes encoded)",
                    req.method,
                    where(flow),
                    e.limit,
                    len(raw),
                )
                return
            except ValueError as e:
                log.info(
                    "headroom: %s: body not decodable (content-encoding %r: %s); forwarded unchanged",
                    where(flow),
                    encoding,
                    e,
                )
                return
        client = client_key(headers, req.path)
        # the same client's previous request may still be storing its session state or being
        # learned from: this turn must see both (bounded: a stuck store never stops traffic)
        await self.turns.wait_previous(client)
        plan = await plan_request_async(
            rt, req.method, req.path, headers, body, rt.settings.compress_timeout_seconds, defer=True, route_=r
        )
        if plan.action == "reject":
            flow.metadata["headroom"] = FlowState(Turn(rt, plan, user_agent=ua), sent=body)
            flow.response = http.Response.make(
                plan.status, plan.error_body or b"", {"content-type": "application/json"}
            )
            log.warning(
                "headroom: %s %s refused: %s (%d bytes)", req.method, where(flow), plan.reason, plan.bytes_before
            )
            return
        announce = None
        if plan.action == "rewrite" and plan.body is not None:
            req.content = body = plan.body

            def announce() -> None:  # logged after forwarding, from the worker thread
                log.info(
                    "headroom: %s: %s, %d -> %d bytes", where(flow), plan.reason, plan.bytes_before, plan.bytes_after
                )

        if plan.hidden_tools and not plan.dry_run:
            req.headers["accept-encoding"] = "identity"
        if resign is not None and sig is not None:
            signed = await self._resign(flow, plan, resign, sent_headers, raw)
            if signed is None:  # could not sign: the client's bytes, as if never planned
                req.headers, req.raw_content = original, raw
                self._signed_passthrough(flow, d, sig, "signing it again failed", len(raw))
                return
            plan = signed
        if plan.dry_run:  # a token count: planned like the request it measures, nothing else
            if announce is not None:
                announce()
            return
        # what the session must remember (originals, the bytes sent), then learning and memory
        # capture, then the prefix log, run once the request is on its way, off the event loop
        turn = self.turns.begin(rt, plan, key=client, user_agent=ua, announce=announce)
        flow.metadata["headroom"] = FlowState(turn, sent=body, resign=resign)

    async def _resign_decision(
        self, flow: http.HTTPFlow, sig: Signature, headers: dict[str, str], raw: bytes
    ) -> sigv4.Decision:
        """Whether a signed request may be compressed and signed again
        (:func:`~headroom_core.wire.sigv4.decide`); the credentials are read (off the event loop)
        only when ``bedrock_resign`` is on."""
        rt = self.state.runtime
        assert rt is not None
        req = flow.request
        hdrs = headers if "host" in headers else {**headers, "host": req.host_header or ""}
        if not rt.settings.bedrock_resign:
            return sigv4.decide(False, sig, req.method, req.url, hdrs, raw, None, time.time())

        def decide() -> sigv4.Decision:
            keys = self.aws_keys.current() if sig.scheme == sigv4.SIGV4 else None
            return sigv4.decide(True, sig, req.method, req.url, hdrs, raw, keys, time.time())

        return await asyncio.to_thread(decide)

    def _signed_passthrough(self, flow: http.HTTPFlow, d: Dialect, sig: Signature, why: str, size: int) -> None:
        """Forward a signed request of dialect ``d`` byte-identical, its ledger row saying ``why``
        (outcome signed)."""
        rt = self.state.runtime
        assert rt is not None
        plan = RequestPlan(
            Action.PASSTHROUGH,
            f"body signed ({sig.scheme}): forwarded byte-identical ({why})",
            d,
            bytes_before=size,
            bytes_after=size,
            code=Code.SIGNED,
        )
        flow.metadata["headroom"] = FlowState(Turn(rt, plan, user_agent=flow.request.headers.get("user-agent", "")))
        log.info("headroom: %s: body signed (%s), forwarded byte-identical: %s", where(flow), sig.scheme, why)
        if why == sigv4.OFF and sig.scheme == sigv4.SIGV4 and not self._resign_hinted:
            self._resign_hinted = True
            log.info(
                "headroom: AWS SigV4-signed requests go upstream uncompressed; --set headroom_bedrock_resign=true re-signs them with your own AWS credentials (docs/configuration.md)"
            )

    async def _resign(
        self, flow: http.HTTPFlow, plan: RequestPlan, resign: sigv4.Resign, sent: dict[str, str], raw: bytes
    ) -> RequestPlan | None:
        """Sign the request again if the proxy changed its body or a header the client signed
        (:func:`~headroom_core.wire.sigv4.sign`): ``plan`` (its reason saying so), or ``plan``
        as it was when nothing changed; None when signing failed (the request is left as it is)."""
        req = flow.request
        now = header_dict(req.headers)
        body = req.raw_content or b""
        if body == raw and all(now.get(n) == sent.get(n) for n in resign.auth.signed_headers):
            return plan  # the client's signature still holds
        try:
            new = await asyncio.to_thread(sigv4.sign, resign, req.method, req.url, now, body)
        except Exception as e:  # noqa: BLE001 - fail open: the client's request, byte-identical
            log.warning(
                "headroom: %s: could not sign the request again (%s); forwarded as sent", where(flow), type(e).__name__
            )
            return None
        for k, v in new.items():
            req.headers[k] = v
        return dataclasses.replace(
            plan, reason=f"{plan.reason}; re-signed with the user's AWS credentials (bedrock_resign)"
        )

    async def responseheaders(self, flow: http.HTTPFlow) -> None:
        st: FlowState | None = flow.metadata.get("headroom")
        if st is not None and st.plan.hidden_tools:
            # a follow-up may run: it stops at once when the client leaves
            headroom_stream_relay.on_client_gone(flow, _abandon(flow, st.turn))
        if st is not None:
            # the session's state is stored before the client sees its answer: the client's next
            # turn may reach another proxy of a team (one database), which must find it
            await st.turn.until_stored()
        if st is None or st.plan.dialect is None or flow.response is None:
            return
        resp = flow.response
        reply = dialect(st.plan.dialect).reply_for(flow.request.path)  # its framing may depend on the path
        if not framing_of(reply).streams(resp.headers.get("content-type", "")):
            return
        rt = self.state.runtime
        assert rt is not None
        hidden = st.plan.hidden_tools
        encoding = resp.headers.get("content-encoding", "")
        try:
            decoder = decoder_for(encoding)
        except ValueError:
            log.warning(
                "headroom: %s: a stream with unknown content-encoding %r passes unread%s",
                where(flow),
                encoding,
                "; the proxy cannot answer its tools" if hidden else "",
            )
            resp.stream = True
            return
        # the request's text is needed only for a follow-up: decoded then
        st.stream = StreamLoop(reply, st.sent if hidden else None, hidden, rt.settings.retrieve_max_rounds)
        resp.stream = StreamTap(st.stream, decoder)
        if hidden:
            # the proxy may replace the tail of this stream: its length is no longer known, and
            # it reaches the client decoded (the upstream may compress despite accept-encoding)
            resp.headers.pop("content-length", None)
            if decoder is not None:
                resp.headers.pop("content-encoding", None)
            if flow.request.http_version.startswith("HTTP/1"):
                resp.headers["transfer-encoding"] = "chunked"

    async def response(self, flow: http.HTTPFlow) -> None:
        st: FlowState | None = flow.metadata.get("headroom")
        rt = self.state.runtime
        if st is None or rt is None or flow.response is None:
            return
        left = False
        try:
            if st.stream is not None:
                if st.stream.pending is not None:
                    await st.turn.follow_up(self._continue_stream(flow, st, st.stream))
            elif st.plan.dialect is not None and st.plan.action != "reject":
                await self._complete_json(flow, st)
        except asyncio.CancelledError:
            if st.turn.abandoned is None or _cancelling():
                raise  # the proxy is stopping, not this client leaving
            left = True  # the turn was abandoned: the hook ends normally, the flow with it
        headroom_stream_relay.forget_client_gone(flow)
        if st.stream is not None:
            st.usage, st.rounds, st.called = st.stream.usage, st.stream.rounds, st.stream.called
        # journaled (one write to a file) and queued for the ledger's own writer thread (not
        # behind the compression work): a proxy killed at any moment has every answered request
        # on disk. Without a journal, or with the tools still being counted, the answer waits
        # for the row's commit (at most LEDGER_WAIT seconds).
        failed = st.stream.provider_error if st.stream is not None else None
        status = CLIENT_CLOSED_REQUEST if left else failed.status if failed is not None else flow.response.status_code
        committed = st.turn.record(status_code=status, usage=st.usage, rounds=st.rounds, called=st.called)
        # the plan holds the parsed request (megabytes of objects for a large body) and the stream
        # loop's callback refers back to it: free it with the flow, not at a later cyclic collection
        del flow.metadata["headroom"]
        st.stream = None
        # and what the request taught is written: the client's next turn may reach another
        # proxy of a team, which must find it (one proxy's next request waits for it anyway)
        wait = st.turn.durable(committed, lambda: where(flow))
        if wait is not None:
            await wait

    async def _continue_stream(self, flow: http.HTTPFlow, st: FlowState, loop: StreamLoop) -> None:
        """The model called the proxy's tools in a streamed response: answer them (worker
        threads), send follow-ups (async) and relay their events to the client as the rest of the
        same response; the client's stream ends when this returns."""
        url, headers, verify = _followup_target(flow)

        async def relay(data: bytes) -> None:
            await headroom_stream_relay.send(flow, data)

        try:
            async with httpx.AsyncClient(verify=verify, timeout=_FOLLOWUP_TIMEOUT) as client:
                while loop.pending is not None:
                    p = loop.pending
                    try:
                        results = [(c, await st.turn.answer(c)) for c in p.calls]
                        if not p.follow_up:
                            if p.exhausted:
                                log.warning(
                                    "headroom: %s: retrieval rounds exhausted (%d); the response ends with a notice",
                                    where(flow),
                                    loop.rounds,
                                )
                            await relay(loop.finish())
                            break
                        body = loop.next_request(results)
                        log.info(
                            "headroom: %s: answered %d proxy tool call(s), follow-up %d (streamed)",
                            where(flow),
                            len(results),
                            loop.rounds,
                        )
                        await self._stream_followup(
                            client, url, await _followup_headers(st, url, headers, body), body, loop, relay
                        )
                    except headroom_stream_relay.RelayError:
                        raise
                    except httpx.TransportError as e:  # the provider's side failed: an error the client retries
                        log.warning("headroom: %s: streamed follow-up failed: %s: %s", where(flow), type(e).__name__, e)
                        await relay(loop.lost(_why(e), isinstance(e, httpx.TimeoutException)))
                        break
                    except Exception as e:  # noqa: BLE001 - the client still gets a coherent end
                        log.warning("headroom: %s: streamed follow-up failed: %s: %s", where(flow), type(e).__name__, e)
                        await relay(loop.fail(_why(e)))
                        break
        except headroom_stream_relay.RelayError as e:
            log.info("headroom: %s: client gone during a follow-up (%s)", where(flow), e)

    @staticmethod
    async def _stream_followup(
        client: httpx.AsyncClient, url: str, headers: dict[str, str], body: bytes, loop: StreamLoop, relay
    ) -> None:
        async with client.stream("POST", url, headers=headers, content=body) as r:
            if r.status_code != 200:
                await relay(loop.refused(r.status_code, tuple(r.headers.multi_items()), await r.aread()))
                return
            decoder = decoder_for(r.headers.get("content-encoding", ""))
            async for raw in r.aiter_raw():
                out = loop.feed(decoder.feed(raw) if decoder is not None else raw)
                if out:
                    await relay(out)
            tail = loop.feed(decoder.flush()) if decoder is not None else b""
        await relay(tail + loop.end_round())

    async def _complete_json(self, flow: http.HTTPFlow, st: FlowState) -> None:
        assert flow.response is not None and st.plan.dialect is not None
        rt = self.state.runtime
        assert rt is not None
        reply = dialect(st.plan.dialect).reply
        try:
            text = (flow.response.get_content(strict=False) or b"").decode("utf-8")
            resp = Raw(text).value
        except ValueError:
            return
        if not isinstance(resp, dict):
            return
        texts: tuple[str, ...] = (text,)
        if st.plan.hidden_tools and flow.response.status_code == 200:
            url, headers, verify = _followup_target(flow)
            answered: list[str] = []  # the follow-ups' responses so far (for the ledger if the client leaves)

            async def send(body: bytes) -> tuple[int, bytes, tuple[tuple[str, str], ...]]:
                async with httpx.AsyncClient(verify=verify, timeout=_FOLLOWUP_TIMEOUT) as client:
                    try:
                        r = await client.post(
                            url, headers=await _followup_headers(st, url, headers, body), content=body
                        )
                    except httpx.TransportError as e:
                        raise FollowUpLost(_why(e), isinstance(e, httpx.TimeoutException)) from e
                    if r.status_code == 200:
                        answered.append(r.content.decode("utf-8", "replace"))
                    return r.status_code, r.content, tuple(r.headers.multi_items())

            try:
                outcome = await st.turn.follow_up(
                    complete_json(
                        reply,
                        st.sent.decode("utf-8", "replace"),
                        text,
                        st.plan.hidden_tools,
                        st.turn.answer,
                        send,
                        rt.settings.retrieve_max_rounds,
                    )
                )
            except asyncio.CancelledError:
                st.rounds = len(answered)
                _tally(st, reply, (text, *answered))
                raise
            if outcome.error is not None:  # the provider's error, for the client to retry
                status, hdrs, err_body = json_answer(dialect(st.plan.dialect), outcome.error)
                flow.response = http.Response.make(
                    status, err_body, [(k.encode("latin-1"), v.encode("latin-1")) for k, v in hdrs]
                )
            elif outcome.body is not None:
                flow.response.content = outcome.body
            st.rounds, texts = outcome.rounds, outcome.texts
        _tally(st, reply, texts)

    def done(self) -> None:
        """On shutdown: commit the ledger rows still queued (up to 10 s), then checkpoint the
        SQLite databases (:func:`~headroom_core.db.backup.checkpoint_all`); diagnostics not yet
        run are dropped."""
        self.turns.close()
        rt = self.state.runtime
        if rt is not None and "ledger" in rt.__dict__:
            rt.ledger.close(10.0)
        if rt is not None:
            from headroom_core.db.backup import checkpoint_all

            checkpoint_all()  # a stopped proxy's data in headroom.db itself, not in its -wal file


#: The status a ledger row gets when the client left before its answer ended (nginx's 499,
#: "client closed request", the code mitmproxy gives such a request too).
CLIENT_CLOSED_REQUEST = 499


def _abandon(flow: http.HTTPFlow, turn: Turn) -> Callable[[str], None]:
    """The callback that abandons ``turn`` when the client of ``flow`` leaves."""

    def gone(why: str) -> None:
        if turn.abandon(why):
            log.info("headroom: %s: the client left (%s); its follow-up stopped", where(flow), why)

    return gone


def _cancelling() -> bool:
    """Whether the running task itself is being cancelled (not only a task it awaited)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _tally(st: FlowState, reply: Any, texts: tuple[str, ...]) -> None:
    """The calls and summed usage of every round's response (``texts``) into ``st``."""
    msgs = [m for m in (Raw(t).value for t in texts) if isinstance(m, dict)]
    st.called = [c.name for m in msgs for c in reply.tool_calls(m)]
    st.usage = sum_usage([reply.usage(m) for m in msgs])


def _why(e: BaseException) -> str:
    if isinstance(e, httpx.TimeoutException):
        return "the follow-up request timed out"
    if isinstance(e, (httpx.RemoteProtocolError, httpx.ReadError)):
        return "the follow-up response ended early"
    if isinstance(e, httpx.HTTPError):
        return f"the follow-up request failed: {type(e).__name__}"
    if isinstance(e, ValueError):
        return "the follow-up answer could not be read"
    return type(e).__name__
