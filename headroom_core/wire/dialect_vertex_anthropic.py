"""Claude on Vertex AI (:class:`VertexAnthropic`): the Messages API body (with ``anthropic_version``
``vertex-2023-10-16`` and no ``model``) at ``…/publishers/anthropic/models/{m}:rawPredict``
(JSON) and ``:streamRawPredict`` (SSE, the Messages stream), token counts at
``…/publishers/anthropic/models/count-tokens:rawPredict`` (the model in the body). Sources: the
Vertex AI "Use Anthropic's Claude models" guide; Anthropic's ``AnthropicVertex`` client, which
moves the model from the body to the path and picks the method by ``stream``.

Everything but the route and where the model is named is the Messages dialect's: the request
side :mod:`headroom_core.wire.anthropic`, the response side :mod:`headroom_core.wire.reply_anthropic`,
the prompt cache (``cache_control`` breakpoints, 5 minutes or ``ttl: 1h``).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from headroom_core.wire import anthropic, reply_anthropic
from headroom_core.wire.detect import Dialect, path_only
from headroom_core.wire.dialect_anthropic import AnthropicMessages
from headroom_core.wire.protocol import DialectBase

#: The path segment before the model, and the methods of a generation and of a token count.
UNDER = "/publishers/anthropic/models/"
GENERATE = (":rawPredict", ":streamRawPredict")
COUNT = "count-tokens:rawPredict"


class VertexAnthropic(AnthropicMessages):
    """Claude on Vertex AI (``…/v1/projects/{p}/locations/{l}/publishers/anthropic/models/{m}:rawPredict``)."""

    def __init__(self) -> None:
        DialectBase.__init__(
            self, Dialect.VERTEX_ANTHROPIC, anthropic, reply_anthropic, "messages", "text", True, False, "anthropic"
        )

    def serves(self, path: str) -> bool:
        p = path_only(path)
        return UNDER in p and p.endswith(GENERATE) and not self.counts(p)

    def counts(self, path: str) -> bool:
        p = path_only(path)
        return p.endswith(UNDER + COUNT)

    def model_of(self, body: dict[str, Any], path: str) -> str:
        """The model of the path (``…/models/{m}:rawPredict``); a token count's body names it."""
        p = path_only(path)
        if UNDER in p and not p.endswith(UNDER + COUNT):
            return unquote(p.rsplit(UNDER, 1)[1].split(":", 1)[0])
        return str(body.get("model", ""))
