"""A scripted model upstream: real agents play a fixed task against it (tests/e2e/agents/).

Layered on :class:`tests.support.upstream.Upstream` (the real local HTTPS server) through its
``responder`` hook: every request is answered from the conversation it carries, after the
strict validation the provider does (an invalid request gets the provider's 400 and is listed in
:attr:`ScriptedModel.invalid`).

Interface::

    task = make_workspace(tmp_path / "ws")        # play.py: the scratch workspace
    with Upstream() as up:
        model = ScriptedModel(task).install(up)   # answers /v1/messages, /v1/responses, ...
        ...                                       # run the agent, through the proxy, at up.url
        assert model.invalid == []
        model.moves                               # [(request index, play.Move)], in order

Pieces:

- :mod:`.play`: the dialect-neutral task. :func:`.play.next_move` takes a
  :class:`.play.Conversation` (first user text, offered tool names, the calls with their ids and
  the outputs) and the dialect's shell tool names, and returns a :class:`.play.Move`
  (``Shell``/``Read``/``Retrieve``/``Final``/``Side``). Call ids come from
  :func:`.play.call_id` (progress is read back from them with :func:`.play.step_of`).
- A dialect adapter: a module of this package with
  ``answer(model: ScriptedModel, rec: RecordedRequest) -> Reply | RawReply``: validate like the
  provider (refuse with :meth:`ScriptedModel.refuse` in the provider's error shape), parse the
  body into a ``Conversation``, call ``next_move``, :meth:`ScriptedModel.note` the move, and map
  it to the dialect's tool names/argument shapes. :data:`ADAPTERS` maps a request path to its
  module: ``anthropic`` (Messages API and count_tokens), ``responses`` (Responses API over HTTP
  and WebSocket, method ``"WS"``; Codex's ``exec_command``), ``chat`` (Chat Completions); ``gemini`` (any path under
  ``/models/`` ending in a Gemini method: the model is in the path). An adapter keeps state
  across requests (the Responses API's WebSocket histories) with :meth:`ScriptedModel.state`.
- :mod:`.aider_play`: the play of an agent without tool calls (Aider), its own responder: an
  edit, a failing test, the fixing edit.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from tests.support.scripted import hosted_claude
from tests.support.scripted.play import Move, Task, make_workspace
from tests.support.upstream import GEMINI_METHODS, RawReply, RecordedRequest, Reply

if TYPE_CHECKING:
    from tests.support.upstream import Upstream

__all__ = ["ADAPTERS", "ScriptedModel", "Task", "make_workspace"]

T = TypeVar("T")

#: request path -> adapter module of this package (``answer(model, rec)``)
ADAPTERS = {
    "/v1/messages": "anthropic",
    "/v1/messages/count_tokens": "anthropic",
    "/v1/responses": "responses",
    "/v1/chat/completions": "chat",
}


class ScriptedModel:
    """The scripted model for one task: answers an :class:`Upstream`'s requests.

    ``invalid``: ``(request index, message)`` of every request refused as invalid;
    ``moves``: ``(request index, move)`` of every answered model request (side requests too).
    """

    def __init__(self, task: Task) -> None:
        self.task = task
        self._lock = threading.Lock()
        self.invalid: list[tuple[int, str]] = []
        self.moves: list[tuple[int, Move]] = []
        self._states: dict[str, object] = {}

    def install(self, up: "Upstream") -> "ScriptedModel":
        """Make this model ``up``'s responder; returns self."""
        up.responder = self.answer
        return self

    def answer(self, rec: RecordedRequest) -> Reply | RawReply | None:
        """The reply to ``rec`` (the ``Upstream.responder`` hook); None (the upstream's own
        404) for a path no adapter serves."""
        name = ADAPTERS.get(rec.path_only)
        if name is None and "/models/" in rec.path_only and rec.path_only.endswith(GEMINI_METHODS):
            name = "gemini"  # the model is in the path: …/models/{m}:generateContent
        if name is None and hosted_claude.serves(rec.path_only):
            name = "hosted_claude"  # Claude on Vertex AI or Bedrock InvokeModel
        if name is None:
            return None
        try:
            mod = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError:
            return None
        reply: Reply | RawReply = mod.answer(self, rec)
        return reply

    def state(self, name: str, factory: Callable[[], T]) -> T:
        """The adapter state ``name`` of this model (made by ``factory()`` on first use), e.g.
        the Responses endpoint's WebSocket histories: one per model, shared by its threads."""
        with self._lock:
            if name not in self._states:
                self._states[name] = factory()
            return self._states[name]  # type: ignore[return-value]

    def note(self, rec: RecordedRequest, move: Move) -> None:
        """Record that ``move`` answered ``rec``."""
        with self._lock:
            self.moves.append((rec.index, move))

    def refuse(self, rec: RecordedRequest, message: str, reply: RawReply) -> RawReply:
        """Record ``rec`` as invalid (``message``) and return the provider's error ``reply``."""
        with self._lock:
            self.invalid.append((rec.index, message))
        return reply
