"""Headroom for mitmproxy: ``mitmdump -s addons/headroom.py``.

Compresses what coding agents send to LLM APIs (any host; recognised by path and body shape),
keeps every dropped piece retrievable through the ``headroom_retrieve`` tool, and fails closed
on oversized requests. The work is done by ``headroom_core``; these addons translate flows.
"""

import headroom_body_limit
import headroom_direct
import headroom_page
import headroom_unreachable
import headroom_ws
import headroom_ws_release
from headroom_llm import LLMTraffic
from headroom_options import HeadroomOptions, State

_state = State()
# The addons of further features are sibling modules, each with ``make(state) -> addon``.
addons = [
    HeadroomOptions(_state),
    LLMTraffic(_state),
    headroom_unreachable.make(_state),
    headroom_ws.make(_state),
    headroom_ws_release.make(_state),
    headroom_direct.make(_state),
    headroom_body_limit.make(_state),  # after headroom_direct: a request to the proxy port gets its advice
    headroom_page.make(_state),
]
