"""Requests answered while the database cannot be opened reach the ledger (issue 36, item 6).

A proxy started before its PostgreSQL server: before, the answered requests of that time never
reached the ledger (3 of 6 recorded) because the ledger's journal was skipped exactly when it
was needed. Now the ledger writer opens the database itself: every answer is journaled, and its
row is written once the server is up."""

from __future__ import annotations

import os
import re
import subprocess
import time

import pytest

from tests.support.clients import anthropic_client
from tests.support.pg_cluster import PG_SCRIPT, PgCluster
from tests.support.proxy import ADDON_SCRIPT
from tests.support.upstream import Reply


def _server(cluster: PgCluster, action: str) -> None:
    env = {**os.environ, "HEADROOM_PG_DIR": str(cluster.folder), "HEADROOM_PG_PORT": str(cluster.port)}
    out = subprocess.run(["bash", str(PG_SCRIPT), action], capture_output=True, text=True, timeout=180, env=env)
    assert out.returncode == 0, out.stderr[-2000:]


def _models(cluster: PgCluster, database: str) -> list[str]:
    """Each ledger row's model and outcome, as ``model:outcome``."""
    try:
        return sorted(f"{m}:{o}" for m, o in cluster.query("SELECT model, outcome FROM request_outcomes", database))
    except Exception:  # noqa: BLE001 - the server or the table not there yet
        return []


def test_requests_answered_before_postgresql_is_up_reach_the_ledger(upstream, proxy_factory):
    cluster, why = PgCluster.start_or_skip_reason()
    if cluster is None:
        pytest.skip(why)
    try:
        url = cluster.create_database("headroom_late")
        _server(cluster, "stop")
        px = proxy_factory(ADDON_SCRIPT, options={"headroom_db_url": url})
        px.wait_for_log(r"headroom: warm-up failed", timeout=120)
        upstream.responder = lambda rec: Reply.text("ok")
        client = anthropic_client(upstream, px, timeout=120)
        for model in [f"early-{i}" for i in range(6)]:  # answered (uncompressed) while the database cannot be opened
            assert (
                client.messages.create(
                    model=model, max_tokens=20, messages=[{"role": "user", "content": f"hello {model}"}]
                )
                .content[0]
                .text
                == "ok"
            )
        # the writer gave up its first tries: the rows wait in the journal, tried again later
        px.wait_for_log(r"ledger entries could not be written", timeout=60)
        _server(cluster, "start")
        early = [f"early-{i}:db_unavailable" for i in range(6)]  # planned without a database: counted as such
        deadline = time.monotonic() + 120
        while _models(cluster, "headroom_late") != early and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _models(cluster, "headroom_late") == early  # every answer of that time, each once
        for model in ("late-0", "late-1"):
            assert (
                client.messages.create(
                    model=model, max_tokens=20, messages=[{"role": "user", "content": f"hello {model}"}]
                )
                .content[0]
                .text
                == "ok"
            )
        deadline = time.monotonic() + 60
        while len(_models(cluster, "headroom_late")) < 8 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _models(cluster, "headroom_late") == sorted(early + ["late-0:unchanged", "late-1:unchanged"])
        (n,) = cluster.query("SELECT count(DISTINCT entry_id) FROM request_outcomes", "headroom_late")[0]
        assert n == 8
        assert re.search(r"headroom: \d+ ledger entries written on a later try", px.log_text())
    finally:
        cluster.destroy()
