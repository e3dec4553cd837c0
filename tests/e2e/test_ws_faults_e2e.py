"""Faults around the proxy's follow-ups over the Responses WebSocket (issue 36: the HTTP cases are
tests/e2e/test_followup_faults_e2e.py), each through a real ``mitmdump -s addons/headroom.py`` with
a real ``websockets`` client and the test upstream's WebSocket:

- the provider fails a follow-up (an ``error`` event with ``status`` 429 and
  ``rate_limit_exceeded``, a ``response.failed``): the client's response ends with a
  ``response.failed`` carrying the provider's error and the model's text so far, the form Codex
  CLI 0.171 retries (after the delay a rate limit's message states); the socket stays usable;
- a ``headroom_retrieve`` call in a response cut by ``max_output_tokens`` (``response.incomplete``)
  is never carried out, first round or follow-up: no further frame upstream, the client gets the
  incomplete response without the proxy's call;
- the client leaves during a follow-up (a close handshake, or its connection dropped): the
  upstream socket is closed at once and no frame reaches the upstream after the client left; the
  ledger row says 499;
- the upstream socket is cut (or closed with 1011) during a follow-up: the client's socket is
  closed at once, never left waiting, and no made-up ``response.completed`` reaches it.
"""

from __future__ import annotations

import json
import socket
import time

import pytest
from websockets.exceptions import ConnectionClosed

from headroom_core.ccr import retrieve
from headroom_core.compress import markers
from tests.e2e.test_ws_e2e import create_frame, items, read_turn, ws_frames
from tests.support.clients import ws_connect
from tests.support.dialect_e2e import ledger_rows
from tests.support.proxy import ADDON_SCRIPT
from tests.support.sse_forms import responses_events, responses_response
from tests.support.upstream import Reply
from tests.unit.test_request_plan import github_scenario

R = retrieve.TOOL_NAME
#: how long the scripted model takes over a follow-up that nobody should wait for (seconds)
SLOW = 120.0
RATE_LIMIT = {
    "type": "requests",
    "code": "rate_limit_exceeded",
    "message": "Rate limit reached for gpt-5 in organization org-test on tokens per min (TPM): Limit 30000, Used 29800, Requested 900. Please try again in 1.4s.",
    "param": None,
}


@pytest.fixture(scope="module")
def proxy(module_proxy_factory):
    return module_proxy_factory(
        ADDON_SCRIPT, options={"headroom_compress_timeout_seconds": 300}
    )  # loaded machine: plans finish


@pytest.fixture(scope="module")
def big_output() -> str:
    return github_scenario("paginate-issues.json")


def decoded(frames: list[str]) -> list[dict]:
    return [json.loads(f) for f in frames]


def text_of(events: list[dict]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")


def shows_proxy_call(events: list[dict]) -> bool:
    """Whether an event shows a call to the proxy's tool (response objects echo the tools offered
    upstream, the proxy's too: that echo is left out)."""
    return any(
        R in json.dumps({k: v for k, v in e.items() if k != "response"})
        or R in json.dumps((e.get("response") or {}).get("output"))
        for e in events
    )


def message(text: str, status: str = "completed", mid: str = "msg_f1") -> dict:
    return {
        "type": "message",
        "id": mid,
        "status": status,
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def partial_follow_up(text: str) -> list[str]:
    """The first events of a follow-up's response: opened, one message item begun with ``text``
    (its deltas, not its end)."""
    evs = responses_events(responses_response([message(text)]))
    return [
        json.dumps(e)
        for e in evs
        if e["type"]
        in (
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
        )
    ]


def rows_after(proxy, before: int, n: int = 1) -> list:
    return ledger_rows(proxy, before + n)[before:]


# -- the provider fails a follow-up ------------------------------------------------------------


@pytest.mark.parametrize("ending", ["error-429", "response-failed"])
def test_a_provider_error_on_a_follow_up_reaches_the_client_as_a_failed_response_it_can_retry(
    upstream, proxy, big_output, ending
):
    key = markers.offload_key(big_output)
    before = len(ledger_rows(proxy, 0, timeout=0))
    upstream.script(Reply.tool_call(R, {"key": key}, text="Let me look.", input_tokens=500, output_tokens=4))
    partial = partial_follow_up("Issues 1 and")
    if ending == "error-429":
        last, error = {"type": "error", "status": 429, "error": RATE_LIMIT}, RATE_LIMIT
    else:
        error = {"code": "server_error", "message": "The server had an error while processing your request."}
        failed = responses_response(
            [message("Issues 1 and", status="incomplete")], status="failed", error=error, usage=None
        )
        last = {"type": "response.failed", "sequence_number": 9, "response": failed}
    upstream.raw(200, b"", chunks=[*partial, json.dumps(last)])
    upstream.script(Reply.text("Issues 1 and 2 are open."))  # the client's retry
    with ws_connect(upstream, proxy) as ws:
        ws.send(create_frame(items(big_output)))
        events = decoded(read_turn(ws))
        ws.send(create_frame(items(big_output)))  # the client retries on the same socket
        retried = decoded(read_turn(ws))
    assert [e["type"] for e in events].count("response.created") == 1 and events[-1]["type"] == "response.failed"
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert not shows_proxy_call(events)
    failed_resp = events[-1]["response"]
    assert (
        failed_resp["status"] == "failed" and failed_resp["error"] == error
    )  # the provider's code and message, as it sent them
    # the model's text so far: the first round's and the follow-up's partial message
    assert text_of(events) == "Let me look." + "Issues 1 and"
    assert [[c["text"] for c in it["content"]] for it in failed_resp["output"]] == [["Let me look."], ["Issues 1 and"]]
    assert len(ws_frames(upstream)) == 3  # the frame, one follow-up, the retry: nothing else
    assert retried[-1]["type"] == "response.completed" and text_of(retried) == "Issues 1 and 2 are open."
    row = rows_after(proxy, before, 2)[0]
    assert (row.status_code, row.retrieve_rounds) == (429 if ending == "error-429" else 200, 1)
    assert "Traceback" not in proxy.log_text()


# -- a proxy call cut at the token limit --------------------------------------------------------


def cut_retrieve(key: str, text: str) -> list[str]:
    """A response cut by ``max_output_tokens`` in the middle of a ``headroom_retrieve`` call."""
    fc = {
        "type": "function_call",
        "id": "fc_cut",
        "call_id": "call_cut",
        "name": R,
        "arguments": json.dumps({"key": key})[:12],
        "status": "incomplete",
    }
    resp = responses_response(
        [message(text), fc], status="incomplete", incomplete_details={"reason": "max_output_tokens"}
    )
    evs = responses_events(resp)
    evs[-1] = {**evs[-1], "type": "response.incomplete"}
    return [json.dumps(e) for e in evs]


@pytest.mark.parametrize("where", ["first-round", "follow-up"])
def test_a_retrieve_call_cut_by_max_output_tokens_is_never_carried_out(upstream, proxy, big_output, where):
    key = markers.offload_key(big_output)
    before = len(ledger_rows(proxy, 0, timeout=0))
    if where == "follow-up":
        upstream.script(Reply.tool_call(R, {"key": key}, text="Let me look."))
    upstream.raw(200, b"", chunks=cut_retrieve(key, "Checking again."))
    upstream.script(Reply.text("must never be asked for"))
    with ws_connect(upstream, proxy) as ws:
        ws.send(create_frame(items(big_output)))
        events = decoded(read_turn(ws))
    last = events[-1]
    assert last["type"] == "response.incomplete" and last["response"]["incomplete_details"] == {
        "reason": "max_output_tokens"
    }
    assert last["response"]["status"] == "incomplete"
    want = (["Let me look."] if where == "follow-up" else []) + ["Checking again."]
    assert [it["type"] for it in last["response"]["output"]] == ["message"] * len(want)
    assert [it["content"][0]["text"].strip() for it in last["response"]["output"]] == want
    assert not shows_proxy_call(events)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    time.sleep(1.0)  # a follow-up would have gone by now
    assert len(ws_frames(upstream)) == (2 if where == "follow-up" else 1)
    (row,) = rows_after(proxy, before)
    assert (row.status_code, row.retrieve_rounds) == (200, 1 if where == "follow-up" else 0)


# -- the client leaves during a follow-up --------------------------------------------------------


@pytest.mark.parametrize("how", ["close-handshake", "connection-dropped"])
def test_a_client_that_leaves_during_a_follow_up_stops_it(upstream, proxy, big_output, how):
    key = markers.offload_key(big_output)
    before = len(ledger_rows(proxy, 0, timeout=0))
    upstream.script(Reply.tool_call(R, {"key": key}, text="Checking."))
    upstream.raw(200, b"", chunks=partial_follow_up("Issues")[:2], hang=SLOW)  # the follow-up starts, the model stalls
    upstream.script(Reply.tool_call(R, {"key": key}), Reply.text("round 3"))  # rounds nobody may start
    with ws_connect(upstream, proxy, close_timeout=2) as ws:
        ws.send(create_frame(items(big_output)))
        while not text_of([json.loads(ws.recv(timeout=60))]) == "Checking.":
            pass
        deadline = time.monotonic() + 180
        while len(ws_frames(upstream)) < 2 and time.monotonic() < deadline:  # the follow-up waits for the model
            time.sleep(0.05)
        assert len(ws_frames(upstream)) == 2
        left = time.monotonic()
        if how == "close-handshake":
            ws.close()
        else:
            ws.socket.shutdown(socket.SHUT_RDWR)  # the process died: no close frame
            ws.socket.close()
    follow = ws_frames(upstream)[1]
    assert upstream.closed_at(follow.index, timeout=60) is not None, (
        "the follow-up's socket stayed open after the client left"
    )
    time.sleep(1.0)  # a next round would start now, had the loop gone on
    assert [r.received_at < left for r in ws_frames(upstream)] == [True, True]
    (row,) = rows_after(proxy, before)
    assert (row.status_code, row.retrieve_rounds) == (499, 1)


# -- the upstream socket is cut during a follow-up -----------------------------------------------


@pytest.mark.parametrize("cut", ["connection-cut", "close-1011"])
def test_an_upstream_socket_cut_during_a_follow_up_closes_the_clients_at_once(upstream, proxy, big_output, cut):
    key = markers.offload_key(big_output)
    before = len(ledger_rows(proxy, 0, timeout=0))
    upstream.script(Reply.tool_call(R, {"key": key}, text="Checking."))
    partial = partial_follow_up("Issues 1")
    if cut == "connection-cut":
        upstream.raw(200, b"", chunks=partial, close=True)
    else:
        upstream.raw(1011, b"", chunks=partial, abort=True)
    got: list[dict] = []
    with ws_connect(upstream, proxy) as ws:
        ws.send(create_frame(items(big_output)))
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                got.append(json.loads(ws.recv(timeout=60)))  # a silent hang fails here (TimeoutError)
    assert text_of(got) == "Checking." + "Issues 1"
    assert not any(e["type"] in ("response.completed", "response.incomplete") for e in got)  # no made-up success
    if cut == "close-1011":
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1011
    assert len(ws_frames(upstream)) == 2
    (row,) = rows_after(proxy, before)
    assert (row.status_code, row.retrieve_rounds) == (None, 1)
