"""Headroom for mitmproxy: ``mitmdump -s addons/headroom.py``.

Compresses what coding agents send to LLM APIs (any host; recognised by path and body shape),
keeps every dropped piece retrievable through the ``headroom_retrieve`` tool, and fails closed
on oversized requests. The work is done by ``headroom_core``; these addons translate flows.
"""

from headroom_llm import LLMTraffic
from headroom_options import HeadroomOptions, State

_state = State()
addons = [HeadroomOptions(_state), LLMTraffic(_state)]
