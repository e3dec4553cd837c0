"""WebSocket messages are released once handled (issue 17, case 6): mitmproxy keeps every message
of a flow unless told otherwise; with the Headroom addons a flow holds only the message being
handled, so memory stays flat over long and many sessions. A probe addon loaded after
``addons/headroom.py`` reports the most messages any flow held when a hook saw it. (Resident
memory over several sessions: ``bench/bench_transport.py --ws-sessions``.)"""

from __future__ import annotations

import re

import pytest

from tests.e2e.test_ws_e2e import create_frame, items, read_turn, wait_until
from tests.support.clients import ws_connect
from tests.support.proxy import ADDON_SCRIPT
from tests.support.upstream import Reply

PROBE = """
import logging

class Probe:
    def websocket_message(self, flow):
        m = flow.metadata.setdefault("probe", [0, 0])
        m[0] += 1
        m[1] = max(m[1], len(flow.websocket.messages))

    def websocket_end(self, flow):
        seen, most = flow.metadata.get("probe", [0, 0])
        logging.warning(f"ws-probe messages={seen} most-held={most} left={len(flow.websocket.messages)}")

addons = [Probe()]
"""

TURNS = 4


def run_session(upstream, proxy) -> None:
    with ws_connect(upstream, proxy) as ws:
        for i in range(TURNS):
            upstream.script(Reply.text(f"answer {i} " + "word " * 20))
            ws.send(create_frame(items(f"output {i}")))
            read_turn(ws)


def probe_lines(proxy) -> list[tuple[int, int, int]]:
    return [
        tuple(map(int, m)) for m in re.findall(r"ws-probe messages=(\d+) most-held=(\d+) left=(\d+)", proxy.log_text())
    ]


@pytest.fixture
def probe(tmp_path):
    p = tmp_path / "probe.py"
    p.write_text(PROBE)
    return p


def test_messages_are_released_once_handled(upstream, proxy_factory, probe):
    proxy = proxy_factory([ADDON_SCRIPT, probe])
    for _ in range(2):
        run_session(upstream, proxy)
    lines = wait_until(lambda: (got := probe_lines(proxy)) and len(got) == 2 and got)
    assert lines, proxy.log_text()[-3000:]
    for seen, most, left in lines:
        assert seen > TURNS * 10  # every event frame of every turn went through the hooks
        assert most == 1 and left == 0


def test_messages_are_kept_when_flows_are_recorded(upstream, proxy_factory, probe, tmp_path):
    """With ``-w`` (``save_stream_file``) the user asked for the messages: they stay."""
    proxy = proxy_factory([ADDON_SCRIPT, probe], options={"save_stream_file": str(tmp_path / "flows.mitm")})
    run_session(upstream, proxy)
    lines = wait_until(lambda: probe_lines(proxy))
    assert lines, proxy.log_text()[-3000:]
    ((seen, most, left),) = lines
    assert most == seen == left
