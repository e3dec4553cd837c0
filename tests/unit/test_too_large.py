"""One text for a request over a size limit (headroom_core/too_large.py), whatever refused it:
the plan of a body held whole, the request's head (its Content-Length), a body read or decoded
past the limit. Each refusal's message is the function's text, in the dialect's error shape."""

from __future__ import annotations

import json

from headroom_core.body_limit import body_limit
from headroom_core.runtime import Runtime
from headroom_core.settings import load_settings
from headroom_core.too_large import too_large_message
from tests.unit.test_request_plan import anthropic_request, plan


def test_the_wording_is_the_functions_in_every_http_refusal(tmp_path, counter):
    rt = Runtime(load_settings({"home": str(tmp_path), "max_body_bytes": 1000}, env={}))
    raw = json.dumps(anthropic_request("x" * 2000)).encode()
    whole = plan(rt, raw)
    assert json.loads(whole.error_body or b"")["error"]["message"] == too_large_message(len(raw), 1000) == (
        f"headroom proxy: the request body is {len(raw)} bytes, over the limit of 1000 bytes (headroom max_body_bytes), so it was not sent "
        "to the model. Compact the conversation (for example /compact) or drop large tool outputs, then retry; resending the same "
        "request will be refused again."
    )  # fmt: skip
    limit = body_limit("POST", "/v1/chat/completions", {"content-length": "5000"}, 1000)
    assert limit is not None
    head, read = limit.refusal(5000, declared=True), limit.refusal(1500, declared=False)
    assert json.loads(head.error_body or b"")["error"]["message"] == too_large_message(5000, 1000, declared=True)
    assert json.loads(read.error_body or b"")["error"]["message"] == too_large_message(1500, 1000, passed="read")
    assert too_large_message(5000, 1000, declared=True).startswith(
        "headroom proxy: the request body is 5000 bytes (its Content-Length), over the limit of 1000 bytes"
    )
    assert too_large_message(1500, 1000, passed="decoded").startswith(
        "headroom proxy: the request body passed the limit of 1000 bytes (headroom max_body_bytes) after 1500 bytes were decoded, so it was not sent"
    )
