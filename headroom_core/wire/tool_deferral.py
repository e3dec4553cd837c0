"""Which of a request's tools the client defers itself (client-side tool search).

Some clients keep most of their tool definitions out of the model's context and let the model
search for them:

* Anthropic Messages ("Tool search tool", platform.claude.com/docs/en/agents-and-tools/tool-use/
  tool-search-tool): a tool definition with ``"defer_loading": true`` is withheld until a
  search returns it; the search is a server tool (``{"type": "tool_search_tool_regex_<date>"}``
  or ``tool_search_tool_bm25_<date>``) or the client's own tool answering with
  ``tool_reference`` blocks; an ``mcp_toolset`` may defer its tools with
  ``default_config``/``configs`` ``{"defer_loading": true}``.
* OpenAI Responses (Codex, ``codex-rs/tools``): function tools with ``"defer_loading": true``,
  on their own or inside a ``{"type": "namespace", "name", "description", "tools": [...]}``
  group, and a ``{"type": "tool_search", "execution", "description", "parameters"}`` tool.
* Chat Completions gateways put ``"defer_loading": true`` beside ``"function"``.

Such a client already decides what the model sees of its tools; the proxy's tools on demand
stands down for it and its deferred tools go upstream as the client wrote them. Detection is by
structure: a ``defer_loading`` member that is ``true`` wherever a tool (or a group's default)
can carry it, and a tool whose ``type`` names a tool search (``tool_search`` followed by
nothing or by ``_`` and a variant), whatever the date or variant suffix. All functions are pure.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from typing import Any

#: A tool ``type`` that is a tool search: Codex's ``tool_search``, Anthropic's
#: ``tool_search_tool_regex_20251119`` / ``tool_search_tool_bm25_20251119`` and later variants.
_SEARCH_TYPE = re.compile(r"^tool_search(?:_[a-z0-9_]+)?$")
_GROUP_MEMBERS = ("tools",)  # a namespace's member tools
_CONFIG_MEMBERS = ("default_config",)  # an mcp_toolset's default for its tools


def _flag(obj: Any) -> bool:
    return isinstance(obj, dict) and obj.get("defer_loading") is True


def is_deferred(tool: Any) -> bool:
    """Whether a ``tools`` entry is a definition the client defers: ``defer_loading`` is
    ``true`` on the entry or on its Chat Completions ``function`` object."""
    return _flag(tool) or (isinstance(tool, dict) and _flag(tool.get("function")))


def is_tool_search(tool: Any) -> bool:
    """Whether a ``tools`` entry is a tool-search tool (its ``type`` is ``tool_search`` or
    ``tool_search_<variant>``), the server's or the client's."""
    kind = tool.get("type") if isinstance(tool, dict) else None
    return isinstance(kind, str) and _SEARCH_TYPE.match(kind) is not None


def defers_inside(tool: Any) -> bool:
    """Whether a group entry defers tools it holds: a namespace with a deferred member tool,
    an MCP toolset whose default or per-tool config sets ``defer_loading``."""
    if not isinstance(tool, dict):
        return False
    for key in _GROUP_MEMBERS:
        members = tool.get(key)
        if isinstance(members, list) and any(is_deferred(m) for m in members):
            return True
    if any(_flag(tool.get(k)) for k in _CONFIG_MEMBERS):
        return True
    configs = tool.get("configs")
    return isinstance(configs, dict) and any(_flag(c) for c in configs.values())


#: The last few ``tools`` arrays answered, by identity: a request whose ``tools`` text did not
#: change reuses the previous request's parsed array (:mod:`headroom_core.wire.view`), and
#: parsed bodies are never changed in place (a Claude Code list of 229 tools: ~1 ms a request).
_MEMO: "OrderedDict[int, tuple[list[Any], bool]]" = OrderedDict()
_MEMO_SIZE = 64
_memo_lock = threading.Lock()


def client_defers(tools: Any) -> bool:
    """Whether the client of a request whose ``tools`` value this is manages its own tool
    context: any entry deferred (:func:`is_deferred`), deferring what it holds
    (:func:`defers_inside`) or a tool search (:func:`is_tool_search`). False for a value that
    is not a list. The same list object is looked at once."""
    if not isinstance(tools, list):
        return False
    with _memo_lock:
        hit = _MEMO.get(id(tools))
        if hit is not None and hit[0] is tools:
            _MEMO.move_to_end(id(tools))
            return hit[1]
    found = any(is_deferred(t) or is_tool_search(t) or defers_inside(t) for t in tools)
    with _memo_lock:
        _MEMO[id(tools)] = (tools, found)  # held: the id stays this list's while it is kept
        while len(_MEMO) > _MEMO_SIZE:
            _MEMO.popitem(last=False)
    return found
