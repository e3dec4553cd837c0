"""Real SDK and httpx clients routed through a :class:`~proxy.MitmProxy` to an
:class:`~upstream.Upstream`, plus an SSE reader that timestamps each event's arrival.

All builders accept either objects with ``.url`` / ``.ca_path`` or plain strings/paths.
SDK clients are built with ``max_retries=0`` by default so an error reply from the
upstream is not silently re-sent (override with ``max_retries=``).
"""

from __future__ import annotations

import json
import os
import ssl
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx

__all__ = [
    "ssl_context",
    "http_client",
    "async_http_client",
    "anthropic_client",
    "async_anthropic_client",
    "openai_client",
    "async_openai_client",
    "direct_http_client",
    "SSEEvent",
    "iter_sse",
    "read_sse",
    "post_stream",
    "ws_connect",
]

DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=10.0)


def _url(x: Any) -> str:
    return x if isinstance(x, str) else x.url


def _ca(x: Any) -> str:
    if isinstance(x, (str, os.PathLike)):
        return os.fspath(x)
    return os.fspath(x.ca_path)


def ssl_context(ca_path: str | os.PathLike[str]) -> ssl.SSLContext:
    """An SSL context that trusts exactly ``ca_path`` (e.g. mitmproxy's CA)."""
    return ssl.create_default_context(cafile=os.fspath(ca_path))


def http_client(proxy: Any, **kw: Any) -> httpx.Client:
    """A plain ``httpx.Client`` through ``proxy`` (a MitmProxy or its URL), trusting its CA.

    When ``proxy`` is a URL string, pass ``ca_path=`` too. ``trust_env`` is off so
    environment proxies never interfere. Extra keyword arguments go to ``httpx.Client``.
    """
    ca = kw.pop("ca_path", None) or _ca(proxy)
    kw.setdefault("timeout", DEFAULT_TIMEOUT)
    kw.setdefault("trust_env", False)
    return httpx.Client(proxy=_url(proxy), verify=ssl_context(ca), **kw)


def async_http_client(proxy: Any, **kw: Any) -> httpx.AsyncClient:
    """Async variant of :func:`http_client`."""
    ca = kw.pop("ca_path", None) or _ca(proxy)
    kw.setdefault("timeout", DEFAULT_TIMEOUT)
    kw.setdefault("trust_env", False)
    return httpx.AsyncClient(proxy=_url(proxy), verify=ssl_context(ca), **kw)


def direct_http_client(upstream: Any, **kw: Any) -> httpx.Client:
    """An ``httpx.Client`` straight to the upstream (no proxy), trusting its self-signed cert."""
    kw.setdefault("timeout", DEFAULT_TIMEOUT)
    kw.setdefault("trust_env", False)
    return httpx.Client(verify=ssl_context(upstream.cert_path), **kw)


def anthropic_client(upstream: Any, proxy: Any, *, api_key: str = "test-key", **kw: Any) -> Any:
    """A real ``anthropic.Anthropic`` with ``base_url=upstream.url``, going through ``proxy``.

    Extra keyword arguments go to ``anthropic.Anthropic`` (e.g. ``default_headers``,
    ``max_retries``); ``http_kw`` (a dict) goes to the underlying ``httpx.Client``.
    """
    import anthropic

    http_kw = kw.pop("http_kw", {})
    kw.setdefault("max_retries", 0)
    return anthropic.Anthropic(
        base_url=_url(upstream), api_key=api_key, http_client=http_client(proxy, **http_kw), **kw
    )


def async_anthropic_client(upstream: Any, proxy: Any, *, api_key: str = "test-key", **kw: Any) -> Any:
    """A real ``anthropic.AsyncAnthropic`` through ``proxy`` (see :func:`anthropic_client`)."""
    import anthropic

    http_kw = kw.pop("http_kw", {})
    kw.setdefault("max_retries", 0)
    return anthropic.AsyncAnthropic(
        base_url=_url(upstream), api_key=api_key, http_client=async_http_client(proxy, **http_kw), **kw
    )


def openai_client(upstream: Any, proxy: Any, *, api_key: str = "test-key", **kw: Any) -> Any:
    """A real ``openai.OpenAI`` with ``base_url=upstream.url + "/v1"``, going through ``proxy``.

    Extra keyword arguments go to ``openai.OpenAI``; ``http_kw`` to ``httpx.Client``.
    """
    import openai

    http_kw = kw.pop("http_kw", {})
    kw.setdefault("max_retries", 0)
    return openai.OpenAI(
        base_url=_url(upstream) + "/v1", api_key=api_key, http_client=http_client(proxy, **http_kw), **kw
    )


def async_openai_client(upstream: Any, proxy: Any, *, api_key: str = "test-key", **kw: Any) -> Any:
    """A real ``openai.AsyncOpenAI`` through ``proxy`` (see :func:`openai_client`)."""
    import openai

    http_kw = kw.pop("http_kw", {})
    kw.setdefault("max_retries", 0)
    return openai.AsyncOpenAI(
        base_url=_url(upstream) + "/v1", api_key=api_key, http_client=async_http_client(proxy, **http_kw), **kw
    )


# --------------------------------------------------------------------------------------
# SSE
# --------------------------------------------------------------------------------------


@dataclass
class SSEEvent:
    """One server-sent event as the client received it.

    ``event`` is the ``event:`` field (``None`` if absent), ``data`` the joined ``data:``
    lines, ``json`` the parsed data (``None`` for ``[DONE]`` or non-JSON) and
    ``arrived`` the ``time.monotonic()`` when its terminating blank line was read.
    """

    event: str | None
    data: str
    arrived: float

    @property
    def json(self) -> Any:
        """The parsed ``data`` (``None`` if it is not JSON)."""
        try:
            return json.loads(self.data)
        except ValueError:
            return None

    @property
    def type(self) -> str | None:
        """``event:`` or else the ``type`` field of the JSON data."""
        if self.event:
            return self.event
        j = self.json
        return j.get("type") if isinstance(j, dict) else None


def iter_sse(response: httpx.Response) -> Iterator[SSEEvent]:
    """Parse an httpx streaming response into :class:`SSEEvent` objects as bytes arrive."""
    event: str | None = None
    data: list[str] = []
    buf = ""
    for chunk in response.iter_text():
        buf += chunk
        while True:
            nl = buf.find("\n")
            if nl < 0:
                break
            line, buf = buf[:nl].rstrip("\r"), buf[nl + 1 :]
            if line == "":
                if data or event:
                    yield SSEEvent(event, "\n".join(data), time.monotonic())
                event, data = None, []
            elif line.startswith(":"):
                continue
            else:
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "event":
                    event = value
                elif name == "data":
                    data.append(value)
    if data or event:
        yield SSEEvent(event, "\n".join(data), time.monotonic())


def read_sse(response: httpx.Response) -> list[SSEEvent]:
    """All events of a streaming response (see :func:`iter_sse`)."""
    return list(iter_sse(response))


def post_stream(client: httpx.Client, url: str, payload: Any, **kw: Any) -> tuple[httpx.Response, list[SSEEvent]]:
    """POST ``payload`` (dict -> JSON, or bytes as-is) and read the reply as SSE.

    Returns the (closed) response and its events with arrival times.
    """
    if isinstance(payload, (bytes, bytearray)):
        kw.setdefault("content", bytes(payload))
        headers = {"content-type": "application/json", **kw.pop("headers", {})}
    else:
        kw.setdefault("json", payload)
        headers = kw.pop("headers", {})
    with client.stream("POST", url, headers=headers, **kw) as r:
        events = read_sse(r) if r.status_code < 400 else []
        if r.status_code >= 400:
            r.read()
    return r, events


def ws_connect(upstream: Any, proxy: Any, path: str = "/v1/responses", **kw: Any) -> Any:
    """A ``websockets.sync.client`` connection to ``wss://<upstream><path>`` through ``proxy``.

    Extra keyword arguments go to ``websockets.sync.client.connect`` (e.g.
    ``additional_headers``, ``max_size``). Use as a context manager.
    """
    from websockets.sync.client import connect

    base = _url(upstream).replace("https://", "wss://", 1)
    kw.setdefault("open_timeout", 15)
    return connect(base + path, proxy=_url(proxy), ssl=ssl_context(_ca(proxy)), **kw)
