"""Requests sent *to* the proxy port instead of *through* it.

An agent configured with ``ANTHROPIC_BASE_URL=http://127.0.0.1:8080`` (the proxy port) sends
``POST /v1/messages`` to the proxy itself. mitmproxy would forward it to its own address (a
loop it refuses with an HTML error page). Instead the client gets an error in its provider's
JSON shape that says what to do: use the base-URL port (the reverse-mode listeners
``headroom proxy`` opens) or the proxy as ``HTTPS_PROXY``. Such a request is answered in the
``requestheaders`` hook, before its body is read (:func:`headroom_body_limit.answer_at_once`:
the body is dropped as it arrives, never held): nothing is compressed, stored or recorded in the
ledger. The stats page (``GET /``, ``/stats``, ``/metrics``, ``/health``)
stays reachable on the proxy port.
"""

from __future__ import annotations

import json
import logging
from typing import Optional

import headroom_body_limit
from headroom_options import State
from mitmproxy import ctx, http
from mitmproxy.proxy.mode_specs import ProxyMode, RegularMode, ReverseMode, UpstreamMode

from headroom_core.web import PAGE_HOST, PAGE_ROUTES
from headroom_core.wire.anthropic import error_body as anthropic_error
from headroom_core.wire.openai_chat import error_body as openai_error

log = logging.getLogger("headroom")

LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")
#: The status of the answer: 400, so SDKs raise at once (no retry) and show the message.
STATUS = 400


def addressed_to_proxy(flow: http.HTTPFlow) -> bool:
    """Whether ``flow`` is a plain request to the proxy's own listen address on a regular (or
    upstream) proxy port: its host and port are the ones the client connected to, or a loopback
    name with that port. Requests through the proxy (``CONNECT`` tunnels, absolute-form URLs
    of other hosts) and reverse-mode ports never are."""
    conn = flow.client_conn
    if not isinstance(conn.proxy_mode, (RegularMode, UpstreamMode)) or flow.request.method == "CONNECT":
        return False
    sock = conn.sockname or ("", 0)
    req = flow.request
    return bool(req.port == sock[1] and (req.host in LOOPBACK or req.host == sock[0]))


def base_url_providers() -> dict[int, str]:
    """Port -> provider from the ``headroom_base_urls`` option (``anthropic=8081,openai=8082``)."""
    out: dict[int, str] = {}
    for part in (ctx.options.headroom_base_urls or "").split(","):
        name, _, port = part.partition("=")
        if port.strip().isdigit():
            out[int(port)] = name.strip().lower()
    return out


def base_url_listeners() -> list[tuple[str, str]]:
    """``[(base URL, provider or upstream)]`` of the reverse-mode listeners of this proxy (from
    its ``mode`` option), e.g. ``("http://127.0.0.1:8081", "anthropic")``: the provider named
    for that port in ``headroom_base_urls``, else the upstream URL."""
    providers = base_url_providers()
    out = []
    for spec in ctx.options.mode:
        try:
            m = ProxyMode.parse(spec)
        except ValueError:
            continue
        if isinstance(m, ReverseMode):
            host = m.listen_host(ctx.options.listen_host) or "127.0.0.1"
            host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
            port = m.listen_port(ctx.options.listen_port)
            out.append((f"http://{'[' + host + ']' if ':' in host else host}:{port}", providers.get(port or 0, m.data)))
    return out


def advice(anthropic: bool, proxy_url: str, listeners: list[tuple[str, str]]) -> str:
    """The error message: what this port is, and the base URL (or proxy setting) to use."""
    var = "ANTHROPIC_BASE_URL" if anthropic else "OPENAI_BASE_URL"
    host_word = "anthropic" if anthropic else "openai"
    match = [u for u, up in listeners if host_word in up]
    if match:
        use = f"set {var}={match[0]}{'' if anthropic else '/v1'}"
    elif listeners:
        use = "use one of its base-URL ports: " + ", ".join(f"{u} (to {up})" for u, up in listeners)
    else:
        use = "start it with base-URL ports (`headroom proxy` opens them on the next two ports)"
    return (
        f"headroom proxy: {proxy_url} is the Headroom proxy's port, which expects requests through it "
        f"(HTTPS_PROXY={proxy_url}, or `headroom wrap <agent>`), not API calls. For a base URL, {use}. "
        "Nothing was sent to the model."
    )


class NotThroughProxy:
    """Answers API calls addressed to the proxy port itself with a provider-shaped error."""

    name = "headroom_direct"

    def __init__(self, state: State) -> None:
        self.state = state

    def load(self, loader) -> None:
        loader.add_option(
            "headroom_base_urls",
            Optional[str],
            None,
            "Which provider each base-URL (reverse mode) port serves, e.g. anthropic=8081,openai=8082 (headroom proxy sets it); named in the error a request sent to the proxy port gets.",
        )

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        if flow.response is not None or not addressed_to_proxy(flow):
            return
        req = flow.request
        if req.method in ("GET", "HEAD") and req.path.split("?", 1)[0] in PAGE_ROUTES:
            return  # the stats page
        if req.pretty_host == PAGE_HOST:
            return
        anthropic = "anthropic-version" in req.headers or "x-api-key" in req.headers or "/messages" in req.path
        sock = flow.client_conn.sockname or ("127.0.0.1", 0)
        host = req.host if req.host in LOOPBACK else sock[0]
        proxy_url = f"http://{'[' + host + ']' if ':' in host else host}:{sock[1]}"
        message = advice(anthropic, proxy_url, base_url_listeners())
        body = anthropic_error(message) if anthropic else openai_error(message)
        flow.response = http.Response.make(STATUS, json.dumps(body).encode(), {"content-type": "application/json"})
        headroom_body_limit.answer_at_once(flow)  # now, the body dropped as it arrives (never held)
        flow.metadata["headroom_direct"] = True
        log.info(
            "headroom: %s %s sent to the proxy port itself: answered %d (base-URL advice)",
            req.method,
            req.path.split("?", 1)[0],
            STATUS,
        )


def make(state: State) -> NotThroughProxy:
    """The addon instance ``addons/headroom.py`` appends to its ``addons`` list."""
    return NotThroughProxy(state)
