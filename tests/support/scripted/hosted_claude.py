"""The scripted model's adapter for Claude on Vertex AI (``…/publishers/anthropic/models/{m}:rawPredict``,
``:streamRawPredict``, ``count-tokens:rawPredict``) and on Bedrock InvokeModel
(``/model/{id}/invoke``, ``/invoke-with-response-stream``): the Messages API adapter
(:mod:`tests.support.scripted.anthropic`) on the body with ``anthropic_version`` (required
here) and Bedrock's ``anthropic_beta`` taken off and the model from the path. The upstream
renders the reply in the route's framing (SSE, or Bedrock's event-stream)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from tests.support.scripted import anthropic, play
from tests.support.upstream import VERTEX_ANTHROPIC, RawReply, RecordedRequest, Reply

if TYPE_CHECKING:
    from tests.support.scripted import ScriptedModel


def serves(path: str) -> bool:
    """Whether ``path`` is a Claude generation or token count on Vertex AI or Bedrock InvokeModel."""
    if VERTEX_ANTHROPIC in path:
        return path.endswith((":rawPredict", ":streamRawPredict"))
    return "/model/" in path and path.endswith(("/invoke", "/invoke-with-response-stream"))


def _model(path: str) -> str:
    if VERTEX_ANTHROPIC in path:
        return path.rsplit("/models/", 1)[1].split(":", 1)[0]
    return unquote(path.rsplit("/model/", 1)[1].rsplit("/", 1)[0])


def answer(model: "ScriptedModel", rec: RecordedRequest) -> Reply | RawReply:
    """The reply to one hosted-Claude request (see the module docstring)."""
    body: Any = rec.json
    path = rec.path_only
    if not isinstance(body, dict) or not isinstance(body.get("anthropic_version"), str):
        return model.refuse(
            rec, "anthropic_version: Field required", anthropic.error("anthropic_version: Field required")
        )
    count = path.endswith("/count-tokens:rawPredict")
    betas = {b.strip() for b in (rec.header("anthropic-beta") or "").split(",") if b.strip()}
    betas |= {str(b) for b in body.get("anthropic_beta") or []}
    inner = {k: v for k, v in body.items() if k not in ("anthropic_version", "anthropic_beta")}
    if not count:
        if "model" in inner:
            return model.refuse(
                rec, "model: the model is in the path", anthropic.error("model: Extra inputs are not permitted")
            )
        inner["model"] = _model(path)
    try:
        anthropic.validate(inner, count=count, betas=frozenset(betas))
    except anthropic.Invalid as e:
        return model.refuse(rec, str(e), anthropic.error(str(e)))
    if count:
        return Reply.text_reply("")
    conv = anthropic.conversation(inner)
    move = play.next_move(conv, anthropic.SHELL_TOOLS)
    if isinstance(move, play.Read) and anthropic.READ_TOOL not in conv.tools:
        move = play.Shell(move.step, f"cat {move.rel}")
    model.note(rec, move)
    return anthropic.reply_for(move, model.task)
