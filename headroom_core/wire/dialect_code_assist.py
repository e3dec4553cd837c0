"""Google's Code Assist API (:class:`CodeAssist`): what Gemini CLI and Antigravity CLI send when
signed in with a Google account (``https://cloudcode-pa.googleapis.com/v1internal:…``), a Gemini
``generateContent`` body inside an envelope (:mod:`headroom_core.wire.envelope`).

Shapes (gemini-cli ``packages/core/src/code_assist/converter.ts`` and ``server.ts``):

- ``POST {base}/{version}:streamGenerateContent?alt=sse`` and ``:generateContent``, body
  ``{"model", "project"?, "user_prompt_id"?, "request": {contents, systemInstruction, tools,
  toolConfig, generationConfig, session_id, …}, "enabled_credit_types"?}``; responses
  ``{"response": {<GenerateContentResponse>}, "traceId"?, …}``, one per SSE event;
- ``POST {base}/{version}:countTokens``, body ``{"request": {"model": "models/{m}", "contents"}}``
  (planned like the request it measures).

The version segment (``v1internal``) is not matched (Gemini CLI lets it be configured): a path
whose last segment is ``<something>:<method>`` with no ``/models/`` resource before it is this
dialect's, and its body must carry the ``request`` object with a ``contents`` list.
"""

from __future__ import annotations

from typing import Any

from headroom_core.wire import gemini, reply_gemini
from headroom_core.wire.blocks import ToolCall, Usage
from headroom_core.wire.detect import Dialect, path_only
from headroom_core.wire.dialect_gemini import COUNT, GENERATE, GeminiAPI
from headroom_core.wire.envelope import EnvelopedReply, unwrap
from headroom_core.wire.protocol import DialectBase

#: Where the Gemini body sits in a request, and the response object in a response.
ROOT = ("request",)
RESPONSE = "response"


class CodeAssist(GeminiAPI):
    """Code Assist (``…/v1internal:streamGenerateContent``): the Gemini body under ``request``."""

    def __init__(self) -> None:
        DialectBase.__init__(
            self, Dialect.GEMINI_CODE_ASSIST, gemini, EnvelopedReply(reply_gemini, ROOT, RESPONSE), gemini.CONVERSATION, "text", False,
            image_sizing="gemini", cache_parts=(), tools_key=gemini.TOOLS, system_keys=(gemini.SYSTEM,), content_key="parts", root=ROOT,
        )  # fmt: skip

    def _mine(self, path: str) -> bool:
        p = path_only(path)
        last = p.rsplit("/", 1)[-1]
        return "/models/" not in p and ":" in last and not last.startswith(":")

    def serves(self, path: str) -> bool:
        return self._mine(path) and path_only(path).endswith(GENERATE)

    def counts(self, path: str) -> bool:
        return self._mine(path) and path_only(path).endswith(COUNT)

    def shape_error(self, body: dict[str, Any]) -> str:
        """Why a whole body is not a Code Assist request (``""`` when it is): it needs the
        ``request`` object holding a Gemini body."""
        req = body.get(ROOT[0])
        if not isinstance(req, dict):
            return "no request object"
        return gemini.shape_error(req)

    def model_of(self, body: dict[str, Any], path: str) -> str:
        """The envelope's ``model``, else the inner body's (``models/`` dropped, as a count names it)."""
        m = body.get("model")
        if not isinstance(m, str) or not m:
            m = self.inner(body).get("model")
        m = m if isinstance(m, str) else ""
        return m[len("models/") :] if m.startswith("models/") else m

    def response_tool_calls(self, resp: dict[str, Any]) -> list[ToolCall]:
        return gemini.response_tool_calls(unwrap(resp, RESPONSE))

    def usage(self, resp: dict[str, Any]) -> Usage:
        return gemini.usage(unwrap(resp, RESPONSE))
