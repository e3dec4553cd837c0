"""A long latest user text (pasted logs: over 9,000 distinct words) does not stop a large log tool
output from being compressed through a real mitmdump: the compressors' query matching grows with
the text, not with words × lines (it took over a minute on a 2,000-line log, past the
compression timeout, and the request went on with nothing new compressed)."""

from __future__ import annotations

from headroom_core.compress import markers
from headroom_core.compress.json_select import query_words
from tests.conftest import corpus_dir
from tests.support.clients import http_client
from tests.support.proxy import ADDON_SCRIPT
from tests.support.upstream import Reply
from tests.unit.test_request_plan import anthropic_request


def test_a_pasted_log_as_the_question_still_compresses_a_large_log_output(upstream, proxy_factory):
    # the timeout generous for a loaded machine (a log this size compresses in well under a
    # second here), far below what matching every pasted word on every line took
    px = proxy_factory(ADDON_SCRIPT, options={"headroom_compress_timeout_seconds": "30"})
    pasted = "\n".join((corpus_dir("logs") / f"{name}_2k.log").read_text() for name in ("HDFS", "Hadoop", "OpenStack"))
    question = "Here are the cluster's logs, why do these writes fail?\n" + pasted
    assert len(query_words(question)) > 9000
    tool_text = (corpus_dir("logs") / "Apache_2k.log").read_text()
    body = anthropic_request(tool_text, question)
    upstream.script(Reply.text("The datanode ran out of space."))
    with http_client(px, timeout=300) as c:
        r = c.post(upstream.url + "/v1/messages", json=body)
    assert r.status_code == 200, r.text
    (first,) = upstream.requests
    sent = first.json["messages"][2]["content"][0]["content"]
    assert first.json["messages"][0]["content"] == question  # the user's text as written
    assert len(sent) < len(tool_text) / 2
    assert set(markers.find_marker_keys(sent)) == {markers.offload_key(tool_text)}
    assert "timed out" not in px.log_text()
