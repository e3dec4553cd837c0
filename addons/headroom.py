"""Headroom for mitmproxy: ``mitmdump -s addons/headroom.py``.

Compresses what coding agents send to LLM APIs (any host; recognised by path and body shape),
keeps every dropped piece retrievable through the ``headroom_retrieve`` tool, and fails closed
on oversized requests. The work is done by ``headroom_core``; these addons translate flows.
"""

import importlib

from headroom_llm import LLMTraffic
from headroom_options import HeadroomOptions, State

_state = State()
addons = [HeadroomOptions(_state), LLMTraffic(_state)]

# Addons of further features, each a sibling module with ``make(state) -> addon``.
for _name in ("headroom_ws", "headroom_ws_release", "headroom_direct", "headroom_page"):
    try:
        _mod = importlib.import_module(_name)
    except ModuleNotFoundError as _e:
        if _e.name != _name:
            raise
        continue
    addons.append(_mod.make(_state))
