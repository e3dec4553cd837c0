"""A provider's failure of a request the proxy made (a retrieval follow-up), as a neutral value
each dialect's reply side turns into its own error event (issue 36, item 4).

:class:`ProviderError` holds what the provider answered (status, error body as sent, headers)
or, for a connection that failed or timed out, a gateway status and words. It reads the error's
message from the body by structure (the shapes the dialects answer errors in:
``{"type": "error", "error": {"type", "message"}}`` Anthropic, ``{"error": {"message", "type",
"code"}}`` OpenAI, ``{"error": {"code", "message", "status"}}`` Google, ``{"message"}``
Bedrock, ``{"error": "<text>"}`` Ollama) and when to retry from the headers.

``retry-after`` (RFC 9110, section 10.2.3: seconds or an HTTP date) and ``retry-after-ms``
(milliseconds, sent by Anthropic's and OpenAI's APIs and read first by their SDKs) say when.
A streamed response already sent its headers, so the wait goes into the error's message in the
words OpenAI's rate-limit messages use ("Please try again in 1.5s."), which agents parse (Codex
reads ``try again in <n>s`` from a ``response.failed`` message).
"""

from __future__ import annotations

import email.utils
import json
import time
from dataclasses import dataclass, field
from typing import Any

#: Gateway statuses of a follow-up whose connection failed, and one that timed out.
BAD_GATEWAY = 502
GATEWAY_TIMEOUT = 504


def retry_after_seconds(headers: tuple[tuple[str, str], ...], now: float | None = None) -> float | None:
    """Seconds to wait before retrying, from ``retry-after-ms`` or ``retry-after`` (seconds or
    an HTTP date, counted from ``now``, Unix seconds, default the clock); None when neither is
    there or readable. Never negative."""
    named = {k.lower(): v.strip() for k, v in headers}
    ms = named.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    ra = named.get("retry-after")
    if not ra:
        return None
    try:
        return max(0.0, float(ra))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(ra)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _message_in(parsed: Any) -> str | None:
    """The error message of a parsed error body, by structure (module docstring)."""
    if not isinstance(parsed, dict):
        return None
    err = parsed.get("error")
    if isinstance(err, dict) and isinstance(err.get("message"), str):
        return str(err["message"])
    if isinstance(err, str):
        return err
    if isinstance(parsed.get("message"), str):
        return str(parsed["message"])
    return None


@dataclass(frozen=True)
class ProviderError:
    """What the provider answered a follow-up with, for the client to retry.

    ``status``: the HTTP status the provider answered (or :data:`BAD_GATEWAY` /
    :data:`GATEWAY_TIMEOUT` when the connection failed / timed out); ``body``: its error body as
    sent (``b""`` when there is none); ``headers``: its ``(name, value)`` headers (the ones a
    non-streamed error passes on to the client: ``retry-after``, rate-limit figures, request id);
    ``why``: the proxy's words when there is no body (a connection that failed)."""

    status: int
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    why: str = ""
    _parsed: list[Any] = field(default_factory=list, compare=False, repr=False)  # cache: [value]

    @property
    def parsed(self) -> Any:
        """The body parsed as JSON (None when it is not JSON)."""
        if not self._parsed:
            try:
                self._parsed.append(json.loads(self.body) if self.body else None)
            except ValueError:
                self._parsed.append(None)
        return self._parsed[0]

    @property
    def retry_after(self) -> float | None:
        """Seconds to wait before retrying (:func:`retry_after_seconds`), None when not said."""
        return retry_after_seconds(self.headers)

    @property
    def message(self) -> str:
        """The provider's error message (else the proxy's words, else the status)."""
        return _message_in(self.parsed) or self.why or f"the provider answered HTTP {self.status}"

    @property
    def hinted(self) -> str:
        """:attr:`message`, plus "Please try again in <n>s." when the provider said when and the
        message does not say it already (module docstring)."""
        wait = self.retry_after
        msg = self.message
        if wait is None or "try again" in msg.lower():
            return msg
        msg = msg.rstrip()
        return f"{msg}{'' if msg.endswith(('.', '!', '?')) else '.'} Please try again in {wait:g}s."

    @property
    def rate_limited(self) -> bool:
        """Whether the provider said the request went over a rate limit (status 429)."""
        return self.status == 429

    @property
    def timed_out(self) -> bool:
        """Whether it timed out (408, 504)."""
        return self.status in (408, GATEWAY_TIMEOUT)

    @property
    def overloaded(self) -> bool:
        """Whether the provider said it is overloaded or unavailable (503, 529)."""
        return self.status in (503, 529)

    @property
    def kind(self) -> str:
        """``rate_limited``, ``overloaded``, ``timed_out`` or ``server``: what a dialect names
        the failure after when it makes its own error object."""
        return (
            "rate_limited"
            if self.rate_limited
            else "overloaded"
            if self.overloaded
            else "timed_out"
            if self.timed_out
            else "server"
        )


def with_message(text: str, keys: tuple[str, ...], message: str) -> str:
    """The JSON object ``text`` with the member at ``keys`` (object members, outermost first)
    set to ``message``; every other member keeps its text. ``text`` unchanged when the member
    already says ``message``. Raises ``ValueError`` when an object on the way is missing."""
    from headroom_core.wire.rawjson import RawObject

    obj = RawObject.parse(text)
    if len(keys) == 1:
        if obj.get(keys[0]) == message:
            return text
        obj[keys[0]] = message
        return obj.text()
    inner = obj.raw(keys[0])
    if inner is None:
        raise ValueError(f"no {keys[0]!r} member")
    new = with_message(inner.text, keys[1:], message)
    if new == inner.text:
        return text
    obj[keys[0]] = RawObject.parse(new)
    return obj.text()
