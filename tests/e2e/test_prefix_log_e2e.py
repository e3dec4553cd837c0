"""The prefix log (which system prompt and tools each session sent, and what changed) is a
diagnostic: a real ``mitmdump -s addons/headroom.py`` answers without waiting for it, records it
afterwards, and records a client's turns in order."""

from __future__ import annotations

from pathlib import Path

from headroom_core.cache.prefix_log import prefix_events
from headroom_core.db.engine import open_database
from tests.e2e.test_learn_live_e2e import settled
from tests.support.clients import anthropic_client
from tests.support.proxy import ADDON_SCRIPT

#: Loaded before the addon: the diagnostics wait until the test creates the gate file (at most
#: 120 s, so a failing test cannot hang the proxy for ever).
HELD_DIAGNOSTICS = """
import os, time
import headroom_core.request_plan as request_plan

_real = request_plan.run_diagnostics
GATE = {gate!r}


def _held(rt, plan):
    deadline = time.monotonic() + 120
    while not os.path.exists(GATE) and time.monotonic() < deadline:
        time.sleep(0.02)
    _real(rt, plan)


request_plan.run_diagnostics = _held
"""


def test_answers_do_not_wait_for_the_prefix_log_which_records_the_turns_in_order_afterwards(
    upstream, proxy_factory, tmp_path
):
    gate = tmp_path / "gate"
    held = tmp_path / "held_diagnostics.py"
    held.write_text(HELD_DIAGNOSTICS.format(gate=str(gate)))
    proxy = proxy_factory([held, ADDON_SCRIPT])
    proxy.wait_for_log(r"headroom: ready", timeout=120)
    client = anthropic_client(upstream, proxy, max_retries=0, timeout=60)
    system = "You are a coding agent.\nWorking directory: /work/projects/prefix\nToday's date: 2025-08-06"
    messages = [{"role": "user", "content": "list the files"}]
    answers = []
    for s in (system, system.replace("08-06", "08-07")):
        answers.append(client.messages.create(model="claude-sonnet-4-5", max_tokens=64, system=s, messages=messages))
    sessions = open_database(f"sqlite:///{Path(proxy.home) / 'headroom.db'}")
    # both answers arrived while neither turn's prefix was recorded
    assert [a.type for a in answers] == ["message", "message"]
    assert prefix_events(sessions, project="/work/projects/prefix") == []
    gate.touch()
    events = settled(
        lambda: [tuple(c.kind for c in e.changes) for e in prefix_events(sessions, project="/work/projects/prefix")],
        [(), ("date",)],
    )
    assert events == [(), ("date",)]


#: Loaded before the addon: every request's observers raise (a bug, a database gone).
RAISING_OBSERVERS = """
import headroom_core.request_plan as request_plan


def _broken(rt, plan):
    raise RuntimeError("observers broken")


request_plan.run_observers = _broken
"""


def test_observers_that_raise_stop_neither_the_client_nor_the_prefix_log(upstream, proxy_factory, tmp_path):
    broken = tmp_path / "raising_observers.py"
    broken.write_text(RAISING_OBSERVERS)
    proxy = proxy_factory([broken, ADDON_SCRIPT])
    proxy.wait_for_log(r"headroom: ready", timeout=120)
    client = anthropic_client(upstream, proxy, max_retries=0, timeout=60)
    system = "You are a coding agent.\nWorking directory: /work/projects/broken\nToday's date: 2025-08-06"
    messages = [{"role": "user", "content": "list the files"}]
    for s in (system, system.replace("08-06", "08-07"), system.replace("08-06", "08-08")):
        assert (
            client.messages.create(model="claude-sonnet-4-5", max_tokens=64, system=s, messages=messages).type
            == "message"
        )
    sessions = open_database(f"sqlite:///{Path(proxy.home) / 'headroom.db'}")
    events = settled(
        lambda: [tuple(c.kind for c in e.changes) for e in prefix_events(sessions, project="/work/projects/broken")],
        [(), ("date",), ("date",)],
    )
    assert events == [(), ("date",), ("date",)]
    assert "observers broken" in proxy.log_text()
