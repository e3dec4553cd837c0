"""A real local HTTPS server that impersonates the LLM providers' APIs.

It speaks three dialects, JSON or SSE depending on the request's ``"stream"`` flag:

- Anthropic Messages: ``POST /v1/messages`` and ``POST /v1/messages/count_tokens``
- OpenAI Chat Completions: ``POST /v1/chat/completions``
- OpenAI Responses: ``POST /v1/responses`` (and the WebSocket form of it, a ``GET``
  upgrade on the same path, ``response.create`` frames in, event frames out)

Every request is recorded with its exact body bytes. Replies are scripted with
:meth:`Upstream.script` (dialect-neutral :class:`Reply` objects rendered in whatever
dialect and streaming mode the incoming request uses) or :meth:`Upstream.raw` (any
status / headers / body). With nothing scripted it answers with a text that echoes a
digest of the request (see :func:`digest_text`).

Usage::

    with Upstream() as up:
        up.script(Reply.text("hello"), Reply.tool_call("headroom_retrieve", {"key": "ab12"}))
        ...  # point a client (through the proxy) at up.url
        assert up.requests[0].json["model"] == "claude-x"
"""

from __future__ import annotations

import base64
import datetime as _dt
import gzip
import hashlib
import http.server
import ipaddress
import json
import re
import select
import shutil
import socket
import ssl
import struct
import tempfile
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "Upstream",
    "Reply",
    "RawReply",
    "ToolCall",
    "RecordedRequest",
    "digest_text",
    "make_self_signed_cert",
]

ANTHROPIC_MESSAGES = "/v1/messages"
ANTHROPIC_COUNT_TOKENS = "/v1/messages/count_tokens"
OPENAI_CHAT = "/v1/chat/completions"
OPENAI_RESPONSES = "/v1/responses"
LLM_PATHS = (ANTHROPIC_MESSAGES, OPENAI_CHAT, OPENAI_RESPONSES)
#: Gemini ``generateContent`` methods (Gemini API ``/v1beta/models/{m}:…``, Vertex
#: ``…/publishers/google/models/{m}:…``): any path under ``/models/`` ending in one of these
GEMINI_METHODS = (":generateContent", ":streamGenerateContent", ":countTokens")


def _is_gemini(path: str) -> bool:
    """Whether ``path`` is a Gemini generation (not a token count: it takes no scripted reply)."""
    return "/models/" in path and path.endswith(GEMINI_METHODS[:2])


#: Claude on Vertex AI (``…/publishers/anthropic/models/{m}:rawPredict|:streamRawPredict``, token
#: counts at ``…/models/count-tokens:rawPredict``) and on Bedrock InvokeModel
#: (``/model/{id}/invoke|/invoke-with-response-stream``): the Messages body and responses, the
#: Bedrock stream in AWS event-stream ``chunk`` frames
VERTEX_ANTHROPIC = "/publishers/anthropic/models/"
BEDROCK_INVOKE = ("/invoke", "/invoke-with-response-stream")


#: Bedrock's Converse API (``/model/{id}/converse|/converse-stream``): its own body and responses,
#: the stream in AWS event-stream frames of Converse events
BEDROCK_CONVERSE = ("/converse", "/converse-stream")
#: Converse's top-level request members (Amazon Bedrock API reference, "Converse")
CONVERSE_MEMBERS = frozenset({"messages", "system", "inferenceConfig", "toolConfig", "guardrailConfig", "additionalModelRequestFields",
                              "promptVariables", "additionalModelResponseFieldPaths", "requestMetadata", "performanceConfig"})  # fmt: skip


#: Ollama's chat route (NDJSON streams)
OLLAMA_CHAT = "/api/chat"


def _is_hosted_claude(path: str) -> bool:
    """Whether ``path`` is a Claude generation on Vertex AI or Bedrock (not a token count)."""
    if VERTEX_ANTHROPIC in path:
        return path.endswith((":rawPredict", ":streamRawPredict")) and not path.endswith("/count-tokens:rawPredict")
    return "/model/" in path and path.endswith(BEDROCK_INVOKE)


def _is_converse(path: str) -> bool:
    """Whether ``path`` is a Bedrock Converse generation."""
    return "/model/" in path and path.endswith(BEDROCK_CONVERSE)


def aws_frame(headers: list[tuple[str, str]], payload: bytes) -> bytes:
    """One AWS event-stream frame (prelude with its CRC-32, string headers, payload, CRC-32),
    written from the format's description, independent of the proxy's encoder."""
    import zlib

    hb = b"".join(bytes([len(k)]) + k.encode() + b"\x07" + len(v).to_bytes(2, "big") + v.encode() for k, v in headers)
    prelude = (16 + len(hb) + len(payload)).to_bytes(4, "big") + len(hb).to_bytes(4, "big")
    msg = prelude + zlib.crc32(prelude).to_bytes(4, "big") + hb + payload
    return msg + zlib.crc32(msg).to_bytes(4, "big")


_WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


# --------------------------------------------------------------------------------------
# certificates
# --------------------------------------------------------------------------------------


def make_self_signed_cert(directory: Path) -> tuple[Path, Path]:
    """Write a test CA and a server certificate it signs, for ``127.0.0.1`` / ``localhost``,
    into ``directory``: ``upstream-ca.pem`` (the CA alone), ``upstream-cert.pem`` (the server
    certificate followed by the CA: the chain a server presents) and ``upstream-key.pem``.

    Returns ``(cert_path, key_path)`` (PEM): serve them with ``load_cert_chain``; a client talking
    to the server directly trusts either ``cert_path`` (it holds the CA) or ``upstream-ca.pem``.
    Two certificates, not one self-signed CA:TRUE leaf, because strict TLS stacks (rustls/webpki
    in Codex CLI, Python 3.13's ``VERIFY_X509_STRICT``) refuse a CA certificate as a server's
    end-entity certificate: the server certificate is CA:FALSE with ``serverAuth``, the CA has
    ``keyCertSign``, and both carry key identifiers (RFC 5280, 4.2.1.1-4.2.1.3, 4.2.1.9, 4.2.1.12).
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = _dt.datetime.now(_dt.timezone.utc)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "headroom-test-upstream CA")])
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "headroom-test-upstream")])
    ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    no_usage = dict.fromkeys(
        (
            "content_commitment",
            "key_encipherment",
            "data_encipherment",
            "key_agreement",
            "encipher_only",
            "decipher_only",
        ),
        False,
    )
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _dt.timedelta(hours=1))
        .not_valid_after(now + _dt.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, **no_usage), critical=True
        )
        .add_extension(ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _dt.timedelta(hours=1))
        .not_valid_after(now + _dt.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("localhost"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                ]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(digital_signature=True, key_cert_sign=False, crl_sign=False, **no_usage), critical=True
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    ca_pem = ca.public_bytes(serialization.Encoding.PEM)
    cert_path = directory / "upstream-cert.pem"
    key_path = directory / "upstream-key.pem"
    (directory / "upstream-ca.pem").write_bytes(ca_pem)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM) + ca_pem)
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


# --------------------------------------------------------------------------------------
# recorded requests
# --------------------------------------------------------------------------------------


@dataclass
class RecordedRequest:
    """One request as the upstream received it.

    ``body`` is the exact entity body received (after removing chunked transfer coding,
    before any content-encoding is undone). ``json`` is the parsed body (content-encoding
    undone) or ``None``. For WebSocket frames ``method`` is ``"WS"`` and ``body`` is the
    frame's payload.
    """

    method: str
    path: str
    header_items: list[tuple[str, str]]
    body: bytes
    json: Any
    received_at: float
    index: int = 0
    #: with :attr:`Upstream.aws_secrets` set, a SigV4-signed request's check
    #: (:func:`tests.support.sigv4_check.check`): ``""`` valid, else why not (answered 403)
    signature: str | None = None

    @property
    def headers(self) -> dict[str, str]:
        """Headers with lower-cased names (the last value wins for repeated names)."""
        return {k.lower(): v for k, v in self.header_items}

    def header(self, name: str, default: str | None = None) -> str | None:
        """Case-insensitive header lookup."""
        name = name.lower()
        for k, v in reversed(self.header_items):
            if k.lower() == name:
                return v
        return default

    @property
    def sha256(self) -> str:
        """Hex SHA-256 of the exact body bytes."""
        return hashlib.sha256(self.body).hexdigest()

    @property
    def text(self) -> str:
        """The body decoded as UTF-8 (with replacement)."""
        return self.body.decode("utf-8", "replace")

    @property
    def path_only(self) -> str:
        """The path without the query string."""
        return self.path.split("?", 1)[0]

    @property
    def is_stream(self) -> bool:
        """Whether the body asked for a streamed (SSE) response."""
        return isinstance(self.json, dict) and bool(self.json.get("stream"))

    def __repr__(self) -> str:  # keep pytest output short
        return f"RecordedRequest({self.method} {self.path}, {len(self.body)} bytes, sha256={self.sha256[:12]})"


# --------------------------------------------------------------------------------------
# scripted replies
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolCall:
    """A tool call the scripted model makes."""

    name: str
    arguments: dict[str, Any]
    call_id: str | None = None

    def id_for(self, dialect: str) -> str:
        """The call id to use in ``dialect`` (scripted id, or a fresh one in the dialect's style)."""
        if self.call_id:
            return self.call_id
        prefix = "toolu_" if dialect == "anthropic" else "call_"
        return prefix + uuid.uuid4().hex[:24]


@dataclass(frozen=True)
class Reply:
    """A dialect-neutral scripted model reply.

    Rendered by the upstream in the dialect (Anthropic Messages, Chat Completions,
    Responses) and mode (JSON or SSE) of the request that consumes it.

    - ``text``: assistant text (``None`` for a bare tool call).
    - ``tool_calls``: tool calls after the text.
    - ``deltas``: how to split ``text`` into streamed deltas (default: word by word).
    - ``delay``: seconds to sleep between SSE events (to test incremental delivery).
    - ``input_tokens`` / ``output_tokens``: usage override (default: ``len(body)//4`` and
      ``len(text)//4``-ish). ``cache_read`` / ``cache_creation``: Anthropic
      ``cache_read_input_tokens`` / ``cache_creation_input_tokens``; ``cache_read`` is also
      OpenAI's ``cached_tokens``.
    - ``stop_reason``: override (Anthropic ``stop_reason``; mapped to OpenAI
      ``finish_reason`` as given).
    - ``headers``: extra response headers.
    - ``abort_after_events``: in SSE mode, close the connection abruptly after this many
      events (to test truncated upstream streams).
    """

    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    deltas: tuple[str, ...] | None = None
    delay: float = 0.0
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read: int = 0
    cache_creation: int = 0
    stop_reason: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    abort_after_events: int | None = None
    #: the Responses API ``id`` of the response (default: a fresh ``resp_…``), for a scripted
    #: upstream that resolves a later ``previous_response_id`` against it
    response_id: str | None = None

    @classmethod
    def text_reply(cls, text: str, **kw: Any) -> "Reply":
        """Alias of :meth:`Reply.text` usable where ``text`` is shadowed."""
        return cls(text=text, **_norm_kw(kw))

    @classmethod
    def tool_call(
        cls,
        name: str,
        arguments: dict[str, Any] | None = None,
        call_id: str | None = None,
        *,
        text: str | None = None,
        **kw: Any,
    ) -> "Reply":
        """A reply that calls tool ``name`` with ``arguments``, optionally after ``text``."""
        return cls(
            text=text,
            tool_calls=(ToolCall(name, dict(arguments or {}), call_id),),
            **_norm_kw(kw),
        )

    @classmethod
    def tool_calls_reply(cls, calls: Iterable[ToolCall], *, text: str | None = None, **kw: Any) -> "Reply":
        """A reply with several (parallel) tool calls."""
        return cls(text=text, tool_calls=tuple(calls), **_norm_kw(kw))

    def text_deltas(self) -> list[str]:
        """The pieces ``text`` is streamed in."""
        if not self.text:
            return []
        if self.deltas is not None:
            assert "".join(self.deltas) == self.text, "deltas must join to text"
            return list(self.deltas)
        return re.findall(r"\s*\S+|\s+$", self.text) or [self.text]


def _norm_kw(kw: dict[str, Any]) -> dict[str, Any]:
    if "deltas" in kw and kw["deltas"] is not None:
        kw["deltas"] = tuple(kw["deltas"])
    if "headers" in kw:
        h = kw["headers"]
        kw["headers"] = tuple(h.items()) if isinstance(h, dict) else tuple(h)
    return kw


# ``Reply.text`` must be both a dataclass field and a constructor; install the
# classmethod under a different attribute and dispatch via a descriptor.
class _TextCtor:
    def __get__(self, obj: Reply | None, owner: type[Reply]) -> Any:
        if obj is not None:
            return obj.__dict__.get("text")

        def text(text: str, **kw: Any) -> Reply:
            """A plain text reply (see :class:`Reply` for keyword options)."""
            return owner(text=text, **_norm_kw(kw))

        return text


@dataclass(frozen=True)
class RawReply:
    """Any raw HTTP response: ``status``, ``headers`` and ``body``.

    ``body`` may be bytes, str, or a JSON-able object (serialised, with a JSON content
    type unless given). With ``chunks`` the body is sent chunked, piece by piece, with
    ``delay`` seconds between pieces. ``wait``: seconds before the status line (a model's
    time to first byte). ``close`` drops the connection after the reply (``abort=True`` drops
    it before sending anything). ``hang``: after the chunks, seconds the body stays open before
    it ends (a model that stalls mid-stream). While waiting and hanging the server watches the
    connection: a peer that closes it ends the reply at once, noted by :meth:`Upstream.closed_at`.
    Over the WebSocket each of ``chunks`` (else ``body``) is one text frame; after them ``hang``
    is watched, then ``abort`` sends a close frame with ``status`` as its code and ``close`` cuts
    the connection without one.
    """

    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    chunks: tuple[bytes, ...] | None = None
    delay: float = 0.0
    close: bool = False
    abort: bool = False
    wait: float = 0.0
    hang: float = 0.0


@dataclass
class _Scripted:
    item: Reply | RawReply
    path: str | None


# --------------------------------------------------------------------------------------
# the server
# --------------------------------------------------------------------------------------


class _Abort(Exception):
    pass


class _TLSServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, upstream: "Upstream", ctx: ssl.SSLContext) -> None:
        self.upstream = upstream
        self.ctx = ctx
        super().__init__(("127.0.0.1", 0), _Handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, addr = self.socket.accept()
        # handshake in the handler's thread, so one slow client cannot stall accept()
        return self.ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

    def handle_error(self, request: Any, client_address: Any) -> None:  # quiet
        self.upstream._errors.append(f"{client_address}: {_exc_summary()}")


def _exc_summary() -> str:
    import sys
    import traceback

    return "".join(traceback.format_exception(*sys.exc_info())[-3:])


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "headroom-test-upstream"
    sys_version = ""
    timeout = 60
    # TCP_NODELAY: the status line and headers go out in one write and the body in the next; with
    # Nagle's algorithm the body would wait for the peer's delayed ACK (~40 ms on Linux), a stall
    # of this test server, not of the proxy in front of it.
    disable_nagle_algorithm = True
    server: _TLSServer

    def setup(self) -> None:
        super().setup()
        try:
            self.request.do_handshake()
            self._tls_ok = True
        except (ssl.SSLError, OSError):
            self._tls_ok = False

    def handle(self) -> None:
        if not self._tls_ok:
            return
        try:
            super().handle()
        except _Abort:
            pass
        except (ConnectionError, ssl.SSLError, socket.timeout, TimeoutError):
            pass

    def log_message(self, format: str, *args: Any) -> None:  # silence stderr
        pass

    # every method goes through one place
    def do_POST(self) -> None:
        self._dispatch()

    do_GET = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD = do_POST

    def _read_body(self) -> bytes:
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            out = bytearray()
            while True:
                line = self.rfile.readline(65537)
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    # trailers
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                out += self.rfile.read(size)
                self.rfile.readline(65537)
            return bytes(out)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _dispatch(self) -> None:
        up = self.server.upstream
        if (self.headers.get("Upgrade") or "").lower() == "websocket":
            self._websocket()
            return
        body = self._read_body()
        rec = up._record(self.command, self.path, list(self.headers.items()), body)
        if up.aws_secrets and rec.header("authorization", "").startswith("AWS4-"):
            from tests.support.sigv4_check import check

            rec.signature = check(self.command, self.path, rec.headers, body, up.aws_secrets)
            if rec.signature:  # as AWS answers it
                self._send_json(
                    403,
                    {"message": rec.signature},
                    (
                        (
                            "x-amzn-ErrorType",
                            "InvalidSignatureException:http://internal.amazon.com/coral/com.amazon.coral.service/",
                        ),
                    ),
                )
                return
        item = up._take(rec)
        try:
            if isinstance(item, RawReply):
                self._send_raw(item)
            else:
                self._send_reply(rec, item)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            self.close_connection = True

    # -- writing ------------------------------------------------------------------------

    def _send_raw(self, raw: RawReply) -> None:
        if raw.abort:
            self._hard_close()
            return
        if raw.wait:
            self._watch(raw.wait)
        self.send_response_only(raw.status)
        names = {k.lower() for k, _ in raw.headers}
        for k, v in raw.headers:
            self.send_header(k, v)
        if "date" not in names:
            self.send_header("Date", self.date_time_string())
        if raw.chunks is not None:
            self.send_header("Transfer-Encoding", "chunked")
            if raw.close:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.flush()
            for i, chunk in enumerate(raw.chunks):
                if i and raw.delay:
                    time.sleep(raw.delay)
                self._write_chunk(chunk)
            if raw.hang:
                self._watch(raw.hang)
            self._end_chunks()
        else:
            if "content-length" not in names:
                self.send_header("Content-Length", str(len(raw.body)))
            if raw.close:
                self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(raw.body)
            self.wfile.flush()
        if raw.close:
            self.close_connection = True

    def _send_json(self, status: int, obj: Any, extra: Iterable[tuple[str, str]] = ()) -> None:
        data = json.dumps(obj).encode()
        self._send_raw(
            RawReply(
                status=status,
                headers=(("Content-Type", "application/json"), *extra),
                body=data,
            )
        )

    def _watch(self, seconds: float) -> None:
        """Wait ``seconds`` while watching the connection: when the peer closes it (the request
        was read whole, so anything readable is its end), note it for the request being answered
        (:meth:`Upstream.closed_at`) and end this reply."""
        up = self.server.upstream
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            if not select.select([self.request], [], [], min(left, 0.2))[0]:
                continue
            try:
                got = self.request.recv(1)
            except (ssl.SSLError, OSError):
                got = b""
            if not got:
                up._note_closed()
                self._hard_close()

    def _write_chunk(self, data: bytes) -> None:
        if not data:
            return
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _hard_close(self) -> None:
        self.close_connection = True
        try:
            self.wfile.flush()
        except OSError:
            pass
        try:
            self.request.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        raise _Abort

    def _send_reply(self, rec: RecordedRequest, reply: Reply) -> None:
        path = rec.path_only
        body = rec.json if isinstance(rec.json, dict) else None
        if self.command == "POST" and "/models/" in path and path.endswith(GEMINI_METHODS):
            self._send_gemini(rec, body, reply)
            return
        if self.command == "POST" and path == OLLAMA_CHAT:
            self._send_ollama(rec, body, reply)
            return
        if self.command == "POST" and _is_converse(path):
            self._send_converse(rec, body, reply)
            return
        if self.command == "POST" and (_is_hosted_claude(path) or path.endswith("/count-tokens:rawPredict")):
            self._send_hosted_claude(rec, body, reply)
            return
        if self.command != "POST" or path not in (*LLM_PATHS, ANTHROPIC_COUNT_TOKENS):
            self._send_json(
                404,
                {"type": "error", "error": {"type": "not_found_error", "message": f"Not found: {self.command} {path}"}},
            )
            return
        if body is None:
            if path in (ANTHROPIC_MESSAGES, ANTHROPIC_COUNT_TOKENS):
                err = {
                    "type": "error",
                    "error": {"type": "invalid_request_error", "message": "body is not a JSON object"},
                }
            else:
                err = {
                    "error": {
                        "message": "body is not a JSON object",
                        "type": "invalid_request_error",
                        "param": None,
                        "code": None,
                    }
                }
            self._send_json(400, err)
            return
        if path == ANTHROPIC_COUNT_TOKENS:
            self._send_json(200, {"input_tokens": _input_tokens(rec, reply)})
            return
        dialect = {ANTHROPIC_MESSAGES: "anthropic", OPENAI_CHAT: "chat", OPENAI_RESPONSES: "responses"}[path]
        render = _RENDERERS[dialect]
        extra = (("request-id", "req_" + uuid.uuid4().hex[:24]), *reply.headers)
        if body.get("stream"):
            events = render.stream(rec, body, reply)
            self._send_sse(events, reply, extra)
        else:
            self._send_json(200, render.json(rec, body, reply), extra)

    def _send_ollama(self, rec: RecordedRequest, body: dict[str, Any] | None, reply: Reply) -> None:
        """Ollama's ``/api/chat``: NDJSON lines unless ``"stream": false``, errors as ``{"error"}``."""
        if body is None or not isinstance(body.get("messages"), list):
            self._send_json(400, {"error": "invalid request body"})
            return
        base = {"model": body.get("model", ""), "created_at": "2026-05-04T10:00:00.000000Z"}
        calls = [{"function": {"name": c.name, "arguments": c.arguments}} for c in reply.tool_calls]
        counts = {
            "done_reason": "stop",
            "total_duration": 1000,
            "prompt_eval_count": _input_tokens(rec, reply),
            "eval_count": _output_tokens(reply),
        }
        if body.get("stream", True) is False:
            msg: dict[str, Any] = {"role": "assistant", "content": reply.text or ""}
            if calls:
                msg["tool_calls"] = calls
            self._send_json(200, {**base, "message": msg, "done": True, **counts})
            return
        lines = [
            {**base, "message": {"role": "assistant", "content": d}, "done": False}
            for d in (reply.text_deltas() if reply.text else [])
        ]
        if calls:
            lines.append({**base, "message": {"role": "assistant", "content": "", "tool_calls": calls}, "done": False})
        lines.append({**base, "message": {"role": "assistant", "content": ""}, "done": True, **counts})
        self.send_response_only(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for line in lines:
            self._write_chunk(json.dumps(line).encode() + b"\n")
        self._end_chunks()

    def _send_hosted_claude(self, rec: RecordedRequest, body: dict[str, Any] | None, reply: Reply) -> None:
        """Claude on Vertex AI or Bedrock: the Messages responses; Bedrock's errors as
        ``{"message"}``, its stream as event-stream ``chunk`` frames of the Messages events."""
        path = rec.path_only
        bedrock = VERTEX_ANTHROPIC not in path
        if (
            body is None
            or not isinstance(body.get("messages"), list)
            or not isinstance(body.get("anthropic_version"), str)
        ):
            err: Any = (
                {"message": "Malformed input request"}
                if bedrock
                else {"type": "error", "error": {"type": "invalid_request_error", "message": "bad body"}}
            )
            self._send_json(400, err)
            return
        if path.endswith("/count-tokens:rawPredict"):
            self._send_json(200, {"input_tokens": _input_tokens(rec, reply)})
            return
        if path.endswith(":streamRawPredict"):
            self._send_sse(_AnthropicRenderer.stream(rec, body, reply), reply, ())
        elif path.endswith("/invoke-with-response-stream"):
            frames = []
            for ev in _AnthropicRenderer.stream(rec, body, reply):
                data = ev.decode().split("data: ", 1)[1].rstrip("\n")
                payload = json.dumps(
                    {"bytes": __import__("base64").b64encode(data.encode()).decode(), "p": "abcdefgh"}
                ).encode()
                frames.append(
                    aws_frame(
                        [(":event-type", "chunk"), (":content-type", "application/json"), (":message-type", "event")],
                        payload,
                    )
                )
            self.send_response_only(200)
            self.send_header("Content-Type", "application/vnd.amazon.eventstream")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
            self.end_headers()
            for f in frames:
                self._write_chunk(f)
            self._end_chunks()
        else:
            self._send_json(200, _AnthropicRenderer.json(rec, body, reply))

    def _send_converse(self, rec: RecordedRequest, body: dict[str, Any] | None, reply: Reply) -> None:
        """Bedrock Converse: the body validated as Bedrock does (known members, content block
        lists, toolConfig defined when the conversation holds toolUse/toolResult blocks, every
        toolUse answered in the next user message), ``{"message"}`` errors with
        ``x-amzn-ErrorType``, ``/converse-stream`` as event-stream frames."""
        why = _converse_invalid(body)
        if why:
            self._send_json(
                400,
                {"message": why},
                (("x-amzn-ErrorType", "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/"),),
            )
            return
        assert body is not None
        if rec.path_only.endswith("/converse"):
            self._send_json(200, _ConverseRenderer.json(rec, body, reply), (("x-amzn-RequestId", str(uuid.uuid4())),))
            return
        self.send_response_only(200)
        self.send_header("Content-Type", "application/vnd.amazon.eventstream")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
        self.end_headers()
        for kind, payload in _ConverseRenderer.events(rec, body, reply):
            data = json.dumps({**payload, "p": "abcdefghij"}).encode()
            self._write_chunk(
                aws_frame(
                    [(":event-type", kind), (":content-type", "application/json"), (":message-type", "event")], data
                )
            )
        self._end_chunks()

    def _send_gemini(self, rec: RecordedRequest, body: dict[str, Any] | None, reply: Reply) -> None:
        """Gemini's wire format: errors as ``{"error": {code, message, status}}``, a token count
        as ``{"totalTokens"}``, ``:streamGenerateContent?alt=sse`` as SSE chunks, else JSON."""
        if body is None or not isinstance(body.get("contents"), list):
            self._send_json(
                400,
                {
                    "error": {
                        "code": 400,
                        "message": "Invalid JSON payload: contents required",
                        "status": "INVALID_ARGUMENT",
                    }
                },
            )
            return
        path = rec.path_only
        if path.endswith(":countTokens"):
            self._send_json(200, {"totalTokens": _input_tokens(rec, reply)})
            return
        if path.endswith(":streamGenerateContent") and "alt=sse" in rec.path:
            self._send_sse(_GeminiRenderer.stream(rec, body, reply), reply, ())
        elif path.endswith(":streamGenerateContent"):  # without alt=sse: one JSON array of the chunks
            self._send_json(200, _GeminiRenderer.chunks(rec, body, reply))
        else:
            self._send_json(200, _GeminiRenderer.json(rec, body, reply))

    def _send_sse(self, events: list[bytes], reply: Reply, extra: Iterable[tuple[str, str]]) -> None:
        self.send_response_only(200)
        self.send_header("Date", self.date_time_string())
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.flush()
        for i, ev in enumerate(events):
            if reply.abort_after_events is not None and i >= reply.abort_after_events:
                self._hard_close()
            if i and reply.delay:
                time.sleep(reply.delay)
            self._write_chunk(ev)
        self._end_chunks()

    # -- websocket (Responses API over WebSocket, as Codex uses it) ---------------------

    def _websocket(self) -> None:
        up = self.server.upstream
        key = self.headers.get("Sec-WebSocket-Key", "")
        up._record(self.command, self.path, list(self.headers.items()), b"")  # the upgrade GET
        if self.path.split("?", 1)[0] != OPENAI_RESPONSES or not key:
            self._send_json(404, {"error": {"message": "no websocket here", "type": "not_found"}})
            return
        accept = base64.b64encode(hashlib.sha1((key + _WS_GUID).encode()).digest()).decode()
        self.send_response_only(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        ws = _WS(self.rfile, self.wfile)
        epoch = up._epoch
        while True:
            frame = ws.recv()
            if frame is None:
                return
            opcode, payload = frame
            if opcode == 0x8:  # close
                up._note_ws_close(epoch, _parse_close(payload))
                ws.send(0x8, payload[:2] if len(payload) >= 2 else b"")
                return
            if opcode == 0x9:
                ws.send(0xA, payload)
                continue
            if opcode != 0x1:
                continue
            wrec = up._record("WS", self.path, list(self.headers.items()), payload)
            item = up._take(wrec)
            if isinstance(item, RawReply):
                # raw in WS mode: each chunk (else the body) one text frame, ``delay`` apart; then
                # ``hang`` (watched), a close frame with code ``status`` (``abort``) or a cut (``close``)
                for i, f in enumerate(item.chunks if item.chunks is not None else () if item.abort else (item.body,)):
                    if i and item.delay:
                        time.sleep(item.delay)
                    ws.send(0x1, f)
                if item.hang:
                    self._watch(item.hang)
                if item.abort:
                    ws.send(0x8, struct.pack("!H", item.status) + (item.body[:120] if item.chunks is None else b""))
                    return
                if item.close:
                    self._hard_close()
                continue
            body = wrec.json if isinstance(wrec.json, dict) else {}
            events = _ResponsesRenderer.events(wrec, body, item)
            for i, ev in enumerate(events):
                if item.abort_after_events is not None and i >= item.abort_after_events:
                    self._hard_close()
                if i and item.delay:
                    time.sleep(item.delay)
                ws.send(0x1, json.dumps(ev).encode())


def _parse_close(payload: bytes) -> tuple[int | None, str]:
    if len(payload) >= 2:
        return struct.unpack("!H", payload[:2])[0], payload[2:].decode("utf-8", "replace")
    return None, ""


class _WS:
    """Minimal RFC 6455 server-side framing (no extensions)."""

    def __init__(self, rfile: Any, wfile: Any) -> None:
        self.rfile, self.wfile = rfile, wfile

    def _read(self, n: int) -> bytes | None:
        data = self.rfile.read(n) if n else b""
        if len(data) < n:
            return None
        return data

    def recv(self) -> tuple[int, bytes] | None:
        message = bytearray()
        first_opcode = None
        while True:
            hdr = self._read(2)
            if hdr is None:
                return None
            fin, opcode = hdr[0] & 0x80, hdr[0] & 0x0F
            masked, length = hdr[1] & 0x80, hdr[1] & 0x7F
            if length == 126:
                ext = self._read(2)
                if ext is None:
                    return None
                length = struct.unpack("!H", ext)[0]
            elif length == 127:
                ext = self._read(8)
                if ext is None:
                    return None
                length = struct.unpack("!Q", ext)[0]
            mask = self._read(4) if masked else b"\0\0\0\0"
            if mask is None:
                return None
            payload = self._read(length)
            if payload is None:
                return None
            if masked:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            if opcode >= 0x8:  # control frames are never fragmented
                return opcode, payload
            if first_opcode is None:
                first_opcode = opcode
            message += payload
            if fin:
                return first_opcode, bytes(message)

    def send(self, opcode: int, payload: bytes) -> None:
        n = len(payload)
        if n < 126:
            hdr = struct.pack("!BB", 0x80 | opcode, n)
        elif n < 1 << 16:
            hdr = struct.pack("!BBH", 0x80 | opcode, 126, n)
        else:
            hdr = struct.pack("!BBQ", 0x80 | opcode, 127, n)
        self.wfile.write(hdr + payload)
        self.wfile.flush()


# --------------------------------------------------------------------------------------
# dialect renderers
# --------------------------------------------------------------------------------------


def _count_messages(body: dict[str, Any]) -> int:
    for key in ("messages", "input"):
        v = body.get(key)
        if isinstance(v, list):
            return len(v)
        if isinstance(v, str):
            return 1
    return 0


def digest_text(rec: RecordedRequest) -> str:
    """The default reply text: ``"upstream saw <n> messages sha256=<hex of body>"``."""
    body = rec.json if isinstance(rec.json, dict) else {}
    return f"upstream saw {_count_messages(body)} messages sha256={rec.sha256}"


def _input_tokens(rec: RecordedRequest, reply: Reply) -> int:
    if reply.input_tokens is not None:
        return reply.input_tokens
    return max(1, len(rec.body) // 4)


def _output_tokens(reply: Reply) -> int:
    if reply.output_tokens is not None:
        return reply.output_tokens
    n = len(reply.text or "") + sum(len(json.dumps(c.arguments)) + len(c.name) for c in reply.tool_calls)
    return max(1, n // 4)


def _split_args(s: str, parts: int = 3) -> list[str]:
    if len(s) < parts * 2:
        return [s]
    step = -(-len(s) // parts)
    return [s[i : i + step] for i in range(0, len(s), step)]


def _sse(event: str | None, data: Any) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


class _AnthropicRenderer:
    @staticmethod
    def _usage(rec: RecordedRequest, reply: Reply, output: int) -> dict[str, Any]:
        return {
            "input_tokens": _input_tokens(rec, reply),
            "cache_creation_input_tokens": reply.cache_creation,
            "cache_read_input_tokens": reply.cache_read,
            "output_tokens": output,
            "service_tier": "standard",
        }

    @staticmethod
    def _stop(reply: Reply) -> str:
        return reply.stop_reason or ("tool_use" if reply.tool_calls else "end_turn")

    @classmethod
    def json(cls, rec: RecordedRequest, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        for c in reply.tool_calls:
            content.append({"type": "tool_use", "id": c.id_for("anthropic"), "name": c.name, "input": c.arguments})
        return {
            "id": "msg_" + uuid.uuid4().hex[:24],
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "claude-test"),
            "content": content,
            "stop_reason": cls._stop(reply),
            "stop_sequence": None,
            "usage": cls._usage(rec, reply, _output_tokens(reply)),
        }

    @classmethod
    def stream(cls, rec: RecordedRequest, body: dict[str, Any], reply: Reply) -> list[bytes]:
        msg = {
            "id": "msg_" + uuid.uuid4().hex[:24],
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "claude-test"),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": cls._usage(rec, reply, 1),
        }
        out = [_sse("message_start", {"type": "message_start", "message": msg})]
        index = 0
        pinged = False

        def ping() -> None:
            nonlocal pinged
            if not pinged:
                out.append(_sse("ping", {"type": "ping"}))
                pinged = True

        if reply.text:
            out.append(
                _sse(
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
                )
            )
            ping()
            for d in reply.text_deltas():
                out.append(
                    _sse(
                        "content_block_delta",
                        {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": d}},
                    )
                )
            out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
            index += 1
        for c in reply.tool_calls:
            block = {"type": "tool_use", "id": c.id_for("anthropic"), "name": c.name, "input": {}}
            out.append(
                _sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": block})
            )
            ping()
            for piece in ["", *_split_args(json.dumps(c.arguments))]:
                out.append(
                    _sse(
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": piece},
                        },
                    )
                )
            out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
            index += 1
        out.append(
            _sse(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": cls._stop(reply), "stop_sequence": None},
                    "usage": {"output_tokens": _output_tokens(reply)},
                },
            )
        )
        out.append(_sse("message_stop", {"type": "message_stop"}))
        return out


class _ChatRenderer:
    @staticmethod
    def _usage(rec: RecordedRequest, reply: Reply) -> dict[str, Any]:
        inp, outp = _input_tokens(rec, reply), _output_tokens(reply)
        return {
            "prompt_tokens": inp,
            "completion_tokens": outp,
            "total_tokens": inp + outp,
            "prompt_tokens_details": {"cached_tokens": reply.cache_read, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }

    @staticmethod
    def _finish(reply: Reply) -> str:
        return reply.stop_reason or ("tool_calls" if reply.tool_calls else "stop")

    @classmethod
    def json(cls, rec: RecordedRequest, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text, "refusal": None, "annotations": []}
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": c.id_for("openai"),
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                }
                for c in reply.tool_calls
            ]
        return {
            "id": "chatcmpl-" + uuid.uuid4().hex[:24],
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "gpt-test"),
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": cls._finish(reply)}],
            "usage": cls._usage(rec, reply),
            "service_tier": "default",
            "system_fingerprint": "fp_headroom_test",
        }

    @classmethod
    def stream(cls, rec: RecordedRequest, body: dict[str, Any], reply: Reply) -> list[bytes]:
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        base = {
            "id": "chatcmpl-" + uuid.uuid4().hex[:24],
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.get("model", "gpt-test"),
            "service_tier": "default",
            "system_fingerprint": "fp_headroom_test",
        }

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            c = dict(base, choices=[{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}])
            if include_usage:
                c["usage"] = None
            return _sse(None, c)

        out = [chunk({"role": "assistant", "content": "", "refusal": None})]
        for d in reply.text_deltas():
            out.append(chunk({"content": d}))
        for i, c in enumerate(reply.tool_calls):
            out.append(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": i,
                                "id": c.id_for("openai"),
                                "type": "function",
                                "function": {"name": c.name, "arguments": ""},
                            }
                        ]
                    }
                )
            )
            for piece in _split_args(json.dumps(c.arguments)):
                out.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}))
        out.append(chunk({}, cls._finish(reply)))
        if include_usage:
            out.append(_sse(None, dict(base, choices=[], usage=cls._usage(rec, reply))))
        out.append(b"data: [DONE]\n\n")
        return out


class _ResponsesRenderer:
    @staticmethod
    def _usage(rec: RecordedRequest, reply: Reply) -> dict[str, Any]:
        inp, outp = _input_tokens(rec, reply), _output_tokens(reply)
        return {
            "input_tokens": inp,
            "input_tokens_details": {"cached_tokens": reply.cache_read},
            "output_tokens": outp,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": inp + outp,
        }

    @staticmethod
    def _response(body: dict[str, Any], rid: str, status: str, output: list[Any], usage: Any) -> dict[str, Any]:
        return {
            "id": rid,
            "object": "response",
            "created_at": int(time.time()),
            "status": status,
            "background": False,
            "error": None,
            "incomplete_details": None,
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "model": body.get("model", "gpt-test"),
            "output": output,
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "previous_response_id": body.get("previous_response_id"),
            "reasoning": {"effort": None, "summary": None},
            "service_tier": "default",
            "store": body.get("store", True),
            "temperature": body.get("temperature", 1.0),
            "text": {"format": {"type": "text"}, "verbosity": "medium"},
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools", []),
            "top_p": body.get("top_p", 1.0),
            "truncation": "disabled",
            "usage": usage,
            "user": None,
            "metadata": body.get("metadata") or {},
        }

    @classmethod
    def _items(cls, reply: Reply) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        if reply.text:
            items.append(
                {
                    "id": "msg_" + uuid.uuid4().hex[:24],
                    "type": "message",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []}],
                }
            )
        for c in reply.tool_calls:
            items.append(
                {
                    "id": "fc_" + uuid.uuid4().hex[:24],
                    "type": "function_call",
                    "status": "completed",
                    "call_id": c.id_for("openai"),
                    "name": c.name,
                    "arguments": json.dumps(c.arguments),
                }
            )
        return items

    @classmethod
    def json(cls, rec: RecordedRequest, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        return cls._response(
            body,
            reply.response_id or "resp_" + uuid.uuid4().hex[:24],
            "completed",
            cls._items(reply),
            cls._usage(rec, reply),
        )

    @classmethod
    def events(cls, rec: RecordedRequest, body: dict[str, Any], reply: Reply) -> list[dict[str, Any]]:
        """The Responses streaming events as JSON objects (shared by SSE and WebSocket)."""
        rid = reply.response_id or "resp_" + uuid.uuid4().hex[:24]
        items = cls._items(reply)
        evs: list[dict[str, Any]] = []
        evs.append({"type": "response.created", "response": cls._response(body, rid, "in_progress", [], None)})
        evs.append({"type": "response.in_progress", "response": cls._response(body, rid, "in_progress", [], None)})
        for oi, item in enumerate(items):
            if item["type"] == "message":
                text = item["content"][0]["text"]
                evs.append(
                    {
                        "type": "response.output_item.added",
                        "output_index": oi,
                        "item": dict(item, status="in_progress", content=[]),
                    }
                )
                evs.append(
                    {
                        "type": "response.content_part.added",
                        "item_id": item["id"],
                        "output_index": oi,
                        "content_index": 0,
                        "part": {"type": "output_text", "text": "", "annotations": [], "logprobs": []},
                    }
                )
                for d in reply.text_deltas():
                    evs.append(
                        {
                            "type": "response.output_text.delta",
                            "item_id": item["id"],
                            "output_index": oi,
                            "content_index": 0,
                            "delta": d,
                            "logprobs": [],
                        }
                    )
                evs.append(
                    {
                        "type": "response.output_text.done",
                        "item_id": item["id"],
                        "output_index": oi,
                        "content_index": 0,
                        "text": text,
                        "logprobs": [],
                    }
                )
                evs.append(
                    {
                        "type": "response.content_part.done",
                        "item_id": item["id"],
                        "output_index": oi,
                        "content_index": 0,
                        "part": item["content"][0],
                    }
                )
            else:
                evs.append(
                    {
                        "type": "response.output_item.added",
                        "output_index": oi,
                        "item": dict(item, status="in_progress", arguments=""),
                    }
                )
                for piece in _split_args(item["arguments"]):
                    evs.append(
                        {
                            "type": "response.function_call_arguments.delta",
                            "item_id": item["id"],
                            "output_index": oi,
                            "delta": piece,
                        }
                    )
                evs.append(
                    {
                        "type": "response.function_call_arguments.done",
                        "item_id": item["id"],
                        "output_index": oi,
                        "arguments": item["arguments"],
                    }
                )
            evs.append({"type": "response.output_item.done", "output_index": oi, "item": item})
        evs.append(
            {
                "type": "response.completed",
                "response": cls._response(body, rid, "completed", items, cls._usage(rec, reply)),
            }
        )
        for seq, ev in enumerate(evs):
            ev["sequence_number"] = seq
        return evs

    @classmethod
    def stream(cls, rec: RecordedRequest, body: dict[str, Any], reply: Reply) -> list[bytes]:
        return [_sse(ev["type"], ev) for ev in cls.events(rec, body, reply)]


class _GeminiRenderer:
    """``GenerateContentResponse`` objects: the text as ``text`` parts, each tool call a
    ``functionCall`` part (``id`` only when the script gives one: Gemini 2.5 sends none),
    ``finishReason`` ``STOP`` and cumulative ``usageMetadata`` on the last chunk."""

    @staticmethod
    def _usage(rec: RecordedRequest, reply: Reply) -> dict[str, Any]:
        inp, out = _input_tokens(rec, reply), _output_tokens(reply)
        u = {"promptTokenCount": inp, "candidatesTokenCount": out, "totalTokenCount": inp + out}
        if reply.cache_read:
            u["cachedContentTokenCount"] = reply.cache_read
        return u

    @staticmethod
    def _calls(reply: Reply) -> list[dict[str, Any]]:
        out = []
        for c in reply.tool_calls:
            fc: dict[str, Any] = {"name": c.name, "args": c.arguments}
            if c.call_id:
                fc["id"] = c.call_id
            out.append({"functionCall": fc})
        return out

    @classmethod
    def json(cls, rec: RecordedRequest, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        parts = ([{"text": reply.text}] if reply.text else []) + cls._calls(reply)
        return {
            "candidates": [
                {"content": {"role": "model", "parts": parts}, "finishReason": reply.stop_reason or "STOP", "index": 0}
            ],
            "usageMetadata": cls._usage(rec, reply),
            "modelVersion": rec.path_only.rsplit("/models/", 1)[-1].split(":", 1)[0],
            "responseId": "gem_" + uuid.uuid4().hex[:16],
        }

    @classmethod
    def chunks(cls, rec: RecordedRequest, body: dict[str, Any], reply: Reply) -> list[dict[str, Any]]:
        whole = cls.json(rec, body, reply)
        base = {k: whole[k] for k in ("modelVersion", "responseId")}
        deltas = reply.text_deltas()
        out = [
            {"candidates": [{"content": {"role": "model", "parts": [{"text": d}]}, "index": 0}], **base}
            for d in deltas[:-1]
        ]
        last_parts = ([{"text": deltas[-1]}] if deltas else []) + cls._calls(reply)
        out.append(
            {
                "candidates": [
                    {
                        "content": {"role": "model", "parts": last_parts or [{"text": ""}]},
                        "finishReason": reply.stop_reason or "STOP",
                        "index": 0,
                    }
                ],
                "usageMetadata": whole["usageMetadata"],
                **base,
            }
        )
        return out

    @classmethod
    def stream(cls, rec: RecordedRequest, body: dict[str, Any], reply: Reply) -> list[bytes]:
        return [
            b"data: " + json.dumps(c, separators=(",", ":")).encode() + b"\r\n\r\n"
            for c in cls.chunks(rec, body, reply)
        ]


def _converse_invalid(body: Any) -> str:
    """Why Bedrock would refuse a Converse body (``""``: it would not)."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return "Malformed input request: messages is required"
    extra = set(body) - CONVERSE_MEMBERS
    if extra:
        return f"Malformed input request: extraneous key [{sorted(extra)[0]}] is not permitted"
    uses_tools = False
    open_ids: set[str] = set()
    for m in body["messages"]:
        if (
            not isinstance(m, dict)
            or m.get("role") not in ("user", "assistant")
            or not isinstance(m.get("content"), list)
        ):
            return "Malformed input request: a message needs a role and a content list"
        answered = set()
        for b in m["content"]:
            if not isinstance(b, dict) or len(b) != 1:
                return "Malformed input request: a content block holds exactly one member"
            ((k, v),) = b.items()
            uses_tools = uses_tools or k in ("toolUse", "toolResult")
            if k == "toolResult":
                answered.add(v.get("toolUseId"))
        if m["role"] == "user" and open_ids - answered:
            return "The toolUse blocks at the previous turn have no matching toolResult blocks"
        open_ids = (
            {b["toolUse"]["toolUseId"] for b in m["content"] if "toolUse" in b} if m["role"] == "assistant" else set()
        )
    tc = body.get("toolConfig")
    if uses_tools and not (isinstance(tc, dict) and isinstance(tc.get("tools"), list) and tc["tools"]):
        return "The toolConfig field must be defined when using toolUse and toolResult content blocks."
    for t in tc.get("tools", []) if isinstance(tc, dict) else []:
        if not (
            isinstance(t, dict)
            and len(t) == 1
            and ("cachePoint" in t or isinstance((t.get("toolSpec") or {}).get("inputSchema", {}).get("json"), dict))
        ):
            return "Malformed input request: a tool is a toolSpec with inputSchema.json, or a cachePoint"
    return ""


class _ConverseRenderer:
    @staticmethod
    def _usage(rec: RecordedRequest, reply: Reply) -> dict[str, Any]:
        i, o = _input_tokens(rec, reply), _output_tokens(reply)
        return {"inputTokens": i, "outputTokens": o, "totalTokens": i + o + reply.cache_read + reply.cache_creation,
                "cacheReadInputTokens": reply.cache_read, "cacheWriteInputTokens": reply.cache_creation}  # fmt: skip

    @staticmethod
    def _stop(reply: Reply) -> str:
        return reply.stop_reason or ("tool_use" if reply.tool_calls else "end_turn")

    @classmethod
    def json(cls, rec: RecordedRequest, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        content: list[dict[str, Any]] = [{"text": reply.text}] if reply.text else []
        content += [
            {"toolUse": {"toolUseId": c.id_for("anthropic"), "name": c.name, "input": c.arguments}}
            for c in reply.tool_calls
        ]
        return {
            "output": {"message": {"role": "assistant", "content": content}},
            "stopReason": cls._stop(reply),
            "usage": cls._usage(rec, reply),
            "metrics": {"latencyMs": 12},
        }

    @classmethod
    def events(cls, rec: RecordedRequest, body: dict[str, Any], reply: Reply) -> list[tuple[str, dict[str, Any]]]:
        out: list[tuple[str, dict[str, Any]]] = [("messageStart", {"role": "assistant"})]
        i = 0
        if reply.text:
            out += [("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": d}}) for d in reply.text_deltas()]
            out.append(("contentBlockStop", {"contentBlockIndex": 0}))
            i = 1
        for c in reply.tool_calls:
            out.append(
                (
                    "contentBlockStart",
                    {
                        "contentBlockIndex": i,
                        "start": {"toolUse": {"toolUseId": c.id_for("anthropic"), "name": c.name}},
                    },
                )
            )
            out += [
                ("contentBlockDelta", {"contentBlockIndex": i, "delta": {"toolUse": {"input": piece}}})
                for piece in _split_args(json.dumps(c.arguments))
            ]
            out.append(("contentBlockStop", {"contentBlockIndex": i}))
            i += 1
        out += [
            ("messageStop", {"stopReason": cls._stop(reply)}),
            ("metadata", {"usage": cls._usage(rec, reply), "metrics": {"latencyMs": 12}}),
        ]
        return out


_RENDERERS: dict[str, Any] = {
    "anthropic": _AnthropicRenderer,
    "chat": _ChatRenderer,
    "responses": _ResponsesRenderer,
}


# --------------------------------------------------------------------------------------
# public API
# --------------------------------------------------------------------------------------


def _decode_json(headers: list[tuple[str, str]], body: bytes) -> Any:
    if not body:
        return None
    enc = ""
    for k, v in headers:
        if k.lower() == "content-encoding":
            enc = v.lower().strip()
    data = body
    try:
        if enc == "gzip":
            data = gzip.decompress(body)
        elif enc == "deflate":
            data = zlib.decompress(body)
        elif enc == "zstd":  # pragma: no cover - optional
            import zstandard  # type: ignore[import-not-found]

            data = zstandard.ZstdDecompressor().decompress(body)
        elif enc == "br":  # pragma: no cover - optional
            import brotli  # type: ignore[import-not-found]

            data = brotli.decompress(body)
        return json.loads(data)
    except Exception:
        return None


class Upstream:
    """A scripted HTTPS impersonation of the Anthropic and OpenAI APIs, in a background thread.

    Use as a context manager (or call :meth:`start` / :meth:`stop`)::

        with Upstream() as up:
            up.url            # "https://127.0.0.1:PORT"
            up.cert_path      # its certificate chain (PEM: server certificate, then its CA), for direct clients
            up.ca_path        # the CA alone (PEM), for clients that want only a trust anchor
            up.script(Reply.text("hi"))
            up.requests       # list[RecordedRequest], in arrival order

    Replies are taken from the script queue in FIFO order (an entry scripted with
    ``path=`` only matches requests to that path; a :class:`Reply` only matches the three
    LLM endpoints, a :class:`RawReply` matches any request). With the queue empty the
    optional :attr:`responder` is asked, then the default digest reply is used.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._queue: list[_Scripted] = []
        self._requests: list[RecordedRequest] = []
        self._errors: list[str] = []
        self._ws_closes: list[tuple[int | None, str]] = []
        #: request index -> when its peer closed the connection during a watched reply
        self._closed: dict[int, float] = {}
        self._answering = threading.local()
        self._epoch = 0  # reset() count: a socket opened before a reset() reports nothing after it
        self._tmp: Path | None = None
        self._server: _TLSServer | None = None
        self._thread: threading.Thread | None = None
        self.cert_path: Path | None = None
        self.ca_path: Path | None = None
        #: AWS access key id -> secret: SigV4-signed requests are checked with them as AWS does
        #: and answered 403 when the signature does not hold (:attr:`RecordedRequest.signature`)
        self.aws_secrets: dict[str, str] = {}
        #: Optional ``fn(RecordedRequest) -> Reply | RawReply | None`` consulted when the
        #: script queue has nothing for a request.
        self.responder: Callable[[RecordedRequest], Reply | RawReply | None] | None = None

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> "Upstream":
        """Generate a certificate, bind a free port on 127.0.0.1 and start serving."""
        self._tmp = Path(tempfile.mkdtemp(prefix="headroom-upstream-"))
        self.cert_path, key_path = make_self_signed_cert(self._tmp)
        self.ca_path = self._tmp / "upstream-ca.pem"
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.cert_path, key_path)
        ctx.set_alpn_protocols(["http/1.1"])
        self._server = _TLSServer(self, ctx)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and remove the temporary certificate directory."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> "Upstream":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The TCP port the server listens on."""
        assert self._server is not None, "Upstream not started"
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        """Base URL, ``https://127.0.0.1:PORT`` (no trailing slash, no ``/v1``)."""
        return f"https://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        """WebSocket URL of the Responses endpoint, ``wss://127.0.0.1:PORT/v1/responses``."""
        return f"wss://127.0.0.1:{self.port}{OPENAI_RESPONSES}"

    # -- scripting ----------------------------------------------------------------------

    def script(self, *replies: Reply | RawReply | str, path: str | None = None) -> None:
        """Queue replies (FIFO). A ``str`` is shorthand for ``Reply.text(str)``.

        ``path`` restricts the entries to requests with that path (e.g. ``"/v1/messages"``).
        """
        with self._lock:
            for r in replies:
                item = Reply(text=r) if isinstance(r, str) else r
                self._queue.append(_Scripted(item, path))

    def raw(
        self,
        status: int = 200,
        body: bytes | str | Any = b"",
        headers: dict[str, str] | Iterable[tuple[str, str]] | None = None,
        *,
        chunks: Iterable[bytes | str] | None = None,
        delay: float = 0.0,
        close: bool = False,
        abort: bool = False,
        path: str | None = None,
        wait: float = 0.0,
        hang: float = 0.0,
    ) -> RawReply:
        """Queue a raw reply for the next request (to any path, or only ``path``).

        ``body`` may be bytes, str, or a JSON-able object (then ``Content-Type:
        application/json`` is added unless given). ``chunks`` sends a chunked body piece by
        piece with ``delay`` seconds between pieces; ``wait`` seconds pass before the status
        line, ``hang`` seconds after the chunks before the body ends (both watched:
        :meth:`closed_at`). ``close`` closes the connection after the reply; ``abort`` drops it without any
        response. Returns the queued reply.
        """
        hdrs = list(headers.items()) if isinstance(headers, dict) else list(headers or [])
        if isinstance(body, str):
            data = body.encode()
        elif isinstance(body, (bytes, bytearray)):
            data = bytes(body)
        else:
            data = json.dumps(body).encode()
            if not any(k.lower() == "content-type" for k, _ in hdrs):
                hdrs.append(("Content-Type", "application/json"))
        ch = None
        if chunks is not None:
            ch = tuple(c.encode() if isinstance(c, str) else bytes(c) for c in chunks)
        item = RawReply(
            status=status,
            headers=tuple(hdrs),
            body=data,
            chunks=ch,
            delay=delay,
            close=close,
            abort=abort,
            wait=wait,
            hang=hang,
        )
        with self._lock:
            self._queue.append(_Scripted(item, path))
        return item

    def reset(self) -> None:
        """Forget recorded requests, pending scripted replies, the responder, errors and
        WebSocket closes (a socket opened before the reset records no close after it)."""
        with self._lock:
            self._queue.clear()
            self._requests.clear()
            self._errors.clear()
            self._ws_closes.clear()
            self._closed.clear()
            self._epoch += 1
            self.responder = None
            self.aws_secrets = {}

    @property
    def pending(self) -> int:
        """How many scripted replies have not been consumed yet."""
        with self._lock:
            return len(self._queue)

    # -- observation --------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    def requests_to(self, path: str) -> list[RecordedRequest]:
        """Recorded requests whose path (without query) equals ``path``."""
        return [r for r in self.requests if r.path_only == path]

    @property
    def last(self) -> RecordedRequest:
        """The most recent recorded request (AssertionError if none)."""
        reqs = self.requests
        assert reqs, "the upstream has received no request"
        return reqs[-1]

    @property
    def errors(self) -> list[str]:
        """Server-side exceptions caught while handling connections (for debugging)."""
        with self._lock:
            return list(self._errors)

    @property
    def ws_closes(self) -> list[tuple[int | None, str]]:
        """``(code, reason)`` of every WebSocket close frame received from a client."""
        with self._lock:
            return list(self._ws_closes)

    def closed_at(self, index: int, timeout: float = 0.0) -> float | None:
        """When (``time.monotonic()``) the peer closed the connection of request ``index`` while
        its :class:`RawReply` waited or hung (None: it did not), waiting up to ``timeout``
        seconds for it."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while index not in self._closed and (left := deadline - time.monotonic()) > 0:
                self._cond.wait(left)
            return self._closed.get(index)

    def wait_for_requests(self, n: int, timeout: float = 10.0) -> list[RecordedRequest]:
        """Block until at least ``n`` requests were recorded; return them."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self._requests) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"upstream got {len(self._requests)} requests, expected {n}")
                self._cond.wait(left)
            return list(self._requests)

    # -- internals ----------------------------------------------------------------------

    def _note_ws_close(self, epoch: int, close: tuple[int | None, str]) -> None:
        """Record the close a WebSocket opened at reset count ``epoch`` received, unless a
        :meth:`reset` came since (the late close of an earlier test's socket is not this one's)."""
        with self._lock:
            if epoch == self._epoch:
                self._ws_closes.append(close)

    def _record(self, method: str, path: str, headers: list[tuple[str, str]], body: bytes) -> RecordedRequest:
        rec = RecordedRequest(
            method=method,
            path=path,
            header_items=headers,
            body=body,
            json=_decode_json(headers, body),
            received_at=time.monotonic(),
        )
        with self._cond:
            rec.index = len(self._requests)
            self._requests.append(rec)
            self._cond.notify_all()
        return rec

    def _note_closed(self) -> None:
        """The peer closed the connection of the request this thread answers."""
        rec = getattr(self._answering, "rec", None)
        with self._cond:
            if rec is not None and rec in self._requests:
                self._closed.setdefault(rec.index, time.monotonic())
                self._cond.notify_all()

    def _take(self, rec: RecordedRequest) -> Reply | RawReply:
        self._answering.rec = rec  # the request this handler thread answers now
        is_llm = (
            rec.path_only in (*LLM_PATHS, OLLAMA_CHAT)
            or _is_gemini(rec.path_only)
            or _is_hosted_claude(rec.path_only)
            or _is_converse(rec.path_only)
        ) and rec.method in ("POST", "WS")
        with self._lock:
            for i, s in enumerate(self._queue):
                if s.path is not None and s.path != rec.path_only:
                    continue
                if isinstance(s.item, Reply) and not is_llm:
                    continue
                del self._queue[i]
                return s.item
            responder = self.responder
        if responder is not None:
            got = responder(rec)
            if got is not None:
                return got
        return Reply(text=digest_text(rec))


# Give ``Reply.text`` its double life (field on instances, constructor on the class).
Reply.text = _TextCtor()  # type: ignore[assignment,misc]
