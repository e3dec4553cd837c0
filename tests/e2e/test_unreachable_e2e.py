"""An unreachable upstream (issue 34, item 6), through a real ``mitmdump``: the ``anthropic`` and
``openai`` SDKs get an error in their provider's shape (their own ``InternalServerError``, an
``APIStatusError``) whose message says the proxy could not reach the host and why, streamed or
not, on the proxy port and on a base-URL (reverse-mode) port; the ledger has a row with the
status and the reason; a reachable upstream still answers as before."""

from __future__ import annotations

import time

import anthropic
import httpx
import openai
import pytest
from sqlalchemy import select

from headroom_core.db.engine import open_database
from headroom_core.db.models import RequestOutcome
from tests.support.clients import anthropic_client, http_client, openai_client
from tests.support.proxy import ADDON_SCRIPT, free_port

MESSAGES = [{"role": "user", "content": "hello"}]


@pytest.fixture(scope="module")
def closed_port() -> int:
    """A port nothing listens on (free a moment ago)."""
    return free_port()


@pytest.fixture(scope="module")
def proxy(module_proxy_factory, closed_port):
    """One proxy port plus a base-URL port (reverse mode) whose upstream is the closed port."""
    base = free_port()
    px = module_proxy_factory(
        ADDON_SCRIPT, args=["--mode", "regular", "--mode", f"reverse:https://127.0.0.1:{closed_port}@{base}"]
    )
    px.base_port = base
    for _ in range(600):  # warmed up: the database is migrated (by the proxy, not the test)
        with httpx.Client(proxy=px.url, trust_env=False, timeout=10) as c:
            if c.get("http://headroom.localhost/health").json().get("ready"):
                break
        time.sleep(0.1)
    px.sessions = open_database(f"sqlite:///{px.home / 'headroom.db'}")
    return px


def _rows(px, n: int) -> list[RequestOutcome]:
    for _ in range(200):  # the row is written by the ledger's own thread
        with px.sessions() as s:
            rows = list(s.scalars(select(RequestOutcome).order_by(RequestOutcome.id)))
        if len(rows) >= n:
            return rows
        time.sleep(0.05)
    return rows


def test_anthropic_sdk_gets_its_own_error_and_the_ledger_counts_it(proxy, closed_port):
    before = len(_rows(proxy, 0))
    client = anthropic_client(f"https://127.0.0.1:{closed_port}", proxy)
    with pytest.raises(anthropic.InternalServerError) as e:
        client.messages.create(model="claude-sonnet-4-5", max_tokens=10, messages=MESSAGES)
    err = e.value
    assert err.status_code == 502
    assert err.body["type"] == "error" and err.body["error"]["type"] == "api_error"  # type: ignore[index]
    assert f"could not reach the upstream 127.0.0.1:{closed_port}" in err.message and "refused" in err.message
    # streamed: the SDK reads the status before any event
    with pytest.raises(anthropic.InternalServerError) as e2:
        with client.messages.stream(model="claude-sonnet-4-5", max_tokens=10, messages=MESSAGES) as s:
            s.get_final_message()
    assert e2.value.status_code == 502 and "connection was refused" in e2.value.message
    rows = _rows(proxy, before + 2)[before:]
    assert [(r.status_code, r.action, r.outcome, r.dialect) for r in rows] == [
        (502, "unreachable", "unreachable", "anthropic-messages")
    ] * 2
    assert rows[0].reason.startswith(f"upstream 127.0.0.1:{closed_port} unreachable: the connection was refused")
    assert rows[0].tokens_before == rows[0].tokens_after == 0


def test_openai_sdk_gets_its_own_error(proxy, closed_port):
    before = len(_rows(proxy, 0))
    client = openai_client(f"https://127.0.0.1:{closed_port}/v1", proxy)
    with pytest.raises(openai.InternalServerError) as e:
        client.chat.completions.create(model="gpt-4o", messages=MESSAGES)  # type: ignore[arg-type]
    assert e.value.status_code == 502
    assert e.value.body["type"] == "server_error" and "could not reach the upstream" in e.value.body["message"]  # type: ignore[index]
    rows = _rows(proxy, before + 1)[before:]
    assert [(r.status_code, r.outcome, r.dialect) for r in rows] == [(502, "unreachable", "openai-chat")]


def test_base_url_port_answers_instead_of_an_empty_reply(proxy, closed_port):
    client = anthropic.Anthropic(
        base_url=f"http://127.0.0.1:{proxy.base_port}",
        api_key="k",
        max_retries=0,
        http_client=httpx.Client(trust_env=False, timeout=30),
    )
    with pytest.raises(anthropic.InternalServerError) as e:
        client.messages.create(model="claude-sonnet-4-5", max_tokens=10, messages=MESSAGES)
    assert e.value.status_code == 502 and f"127.0.0.1:{closed_port}" in e.value.message


def test_an_unresolvable_host_says_so(proxy):
    with http_client(proxy) as c:
        r = c.post(
            "https://no-such-host.invalid/v1/messages", json={"model": "m", "max_tokens": 1, "messages": MESSAGES}
        )
    assert r.status_code == 502 and r.json()["type"] == "error"
    assert "no-such-host.invalid" in r.json()["error"]["message"] and "did not resolve" in r.json()["error"]["message"]


def test_a_reachable_upstream_is_unaffected(proxy, upstream):
    from tests.support.upstream import Reply

    upstream.script(Reply.text("fine"))
    msg = anthropic_client(upstream, proxy).messages.create(model="claude-sonnet-4-5", max_tokens=10, messages=MESSAGES)
    assert msg.content[0].text == "fine"  # type: ignore[union-attr]
