"""Claude on Amazon Bedrock through InvokeModel (:class:`BedrockInvoke`): the Messages API body
(with ``anthropic_version`` ``bedrock-2023-05-31`` and neither ``model`` nor ``stream``) at
``/model/{modelId}/invoke`` (a Messages response object) and
``/model/{modelId}/invoke-with-response-stream`` (the Messages stream events in AWS event-stream
``chunk`` frames: :mod:`headroom_core.wire.reply_bedrock`). The model id is URL-encoded in the
path (``us.anthropic.claude-…-v1:0``, or an inference profile's ARN with ``/`` as ``%2F``).
Sources: Amazon Bedrock API reference (InvokeModel, InvokeModelWithResponseStream), "Anthropic
Claude Messages API" in the Bedrock user guide; Anthropic's ``AnthropicBedrock`` client.

Auth: SigV4 signs the body (such requests pass byte-identical, :mod:`headroom_core.wire.signed`,
unless ``bedrock_resign`` signs them again with the user's own key: :mod:`headroom_core.wire.sigv4`);
a Bedrock API key (``Authorization: Bearer …``) signs nothing, so its requests are compressed.
Bodies of other model families (no ``anthropic_version`` and ``messages``) are not this dialect's.
Errors: ``{"message": …}`` (the REST API's error body, its type in ``x-amzn-ErrorType``).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from headroom_core.wire import anthropic, reply_bedrock
from headroom_core.wire.detect import Dialect, path_only
from headroom_core.wire.dialect_anthropic import AnthropicMessages
from headroom_core.wire.protocol import DialectBase

#: The path segment before the model id, and the operations after it.
UNDER = "/model/"
INVOKE = ("/invoke", "/invoke-with-response-stream")


def model_in_path(path: str) -> str:
    """The model id of a ``…/model/{modelId}/{operation}`` path, URL-decoded (``""`` if none)."""
    p = path_only(path)
    if UNDER not in p:
        return ""
    return unquote(p.rsplit(UNDER, 1)[1].rsplit("/", 1)[0])


def error_body(message: str, too_large: bool = False) -> dict[str, Any]:
    """Bedrock's error body (``{"message"}``; the type, e.g. ``ValidationException``, is a header)."""
    return {"message": message}


class BedrockInvoke(AnthropicMessages):
    """Claude through Bedrock's InvokeModel (``POST /model/{modelId}/invoke``)."""

    def __init__(self) -> None:
        DialectBase.__init__(
            self, Dialect.BEDROCK_INVOKE, anthropic, reply_bedrock, "messages", "text", True, False, "anthropic"
        )

    def serves(self, path: str) -> bool:
        p = path_only(path)
        return UNDER in p and p.endswith(INVOKE)

    def counts(self, path: str) -> bool:
        return False  # Bedrock's CountTokens wraps the body in another envelope: left as sent

    def shape_error(self, body: dict[str, Any]) -> str:
        if not isinstance(body.get("messages"), list):
            return "no messages list"
        if not isinstance(body.get("anthropic_version"), str):
            return "no anthropic_version (not an Anthropic Messages body)"
        return ""

    def model_of(self, body: dict[str, Any], path: str) -> str:
        return model_in_path(path)

    def error_body(self, message: str, too_large: bool = False) -> dict[str, Any]:
        return error_body(message, too_large)
