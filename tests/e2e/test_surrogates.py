"""Lone surrogates (valid JSON such as ``"\\ud83d"``, a tool that cut an emoji in half) on every
text path: token counts, compressors, tool definitions, the prefix observer, hashing, database
writes, the request plan over a whole session, and a real mitmdump end to end."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from sqlalchemy import select
from sqlalchemy import text as sql_text

from headroom_core import ledger
from headroom_core.cache.hooks import prefix_log
from headroom_core.cache.models import CachePrefix
from headroom_core.cache.volatile import prefix_of
from headroom_core.ccr import retrieve
from headroom_core.compress import markers
from headroom_core.compress.router import compress_text
from headroom_core.db.models import RequestOutcome, ToolUsage
from headroom_core.db.types import MARK, escape_text, unescape_text
from headroom_core.request_plan import plan_request
from headroom_core.tools.minify import minify_tools
from headroom_core.wire import jsonedit
from tests.support.clients import http_client
from tests.support.upstream import Reply
from tests.unit.test_request_plan import anthropic_request, github_scenario

HALF = "\ud83d"  # the high half of 😀 (U+1F600), alone
LOW = "\ude00"


def with_half_emoji(text: str, every: int = 997) -> str:
    """``text`` with a lone surrogate inserted every ``every`` characters (outside JSON syntax
    when ``text`` is JSON: only inside string values)."""
    out, n = [], 0
    for ch in text:
        out.append(ch)
        n += 1
        if n >= every and ch.isalpha():
            out.append(HALF)
            n = 0
    return "".join(out)


def json_with_half_emoji() -> str:
    data = json.loads(github_scenario("paginate-issues.json"))
    for i, ex in enumerate(data):
        if isinstance(ex.get("response"), list):
            for item in ex["response"]:
                if isinstance(item, dict) and isinstance(item.get("title"), str):
                    item["title"] += HALF
    return json.dumps(data, indent=2, ensure_ascii=False)  # the surrogate itself inside the text


def test_token_counter_takes_lone_surrogates(counter):
    assert counter.count("smile " + HALF) == counter.count("smile \ufffd") > 0
    assert counter.count(LOW * 3) == counter.count("\ufffd" * 3)
    # cached by exact content: a text with the surrogate is not the text with U+FFFD
    assert counter.count("x" + HALF + "y") == counter.count("x\ufffdy")


def test_jsonedit_escapes_lone_surrogates_and_keeps_the_value():
    text = json.dumps({"a": "keep \\u00e9", "b": "old"})
    out = jsonedit.apply(text, [jsonedit.Replace(("b",), "new " + HALF)])
    out.encode("utf-8")  # has a UTF-8 form
    assert '"new \\ud83d"' in out and json.loads(out) == {"a": "keep \\u00e9", "b": "new " + HALF}
    assert jsonedit.dumps(["x" + HALF, LOW]) == '["x\\ud83d","\\ude00"]'


@pytest.mark.parametrize("kind", ["json", "log", "text", "code"])
def test_compressors_compress_text_with_lone_surrogates(kind, counter, runtime):
    from tests.conftest import corpus_dir

    if kind == "json":
        text = json_with_half_emoji()
    elif kind == "log":
        text = with_half_emoji("\n".join((corpus_dir("logs") / "HDFS_2k.log").read_text().splitlines()[:600]))
    elif kind == "code":
        import sqlalchemy.orm.session as mod

        text = with_half_emoji(open(mod.__file__, encoding="utf-8").read()[:60_000])
    else:
        from headroom_core.compress import embeddings

        embeddings.get_model()  # prose compression ranks with the embedding model
        para = "The deployment pipeline {i} copies artefacts, runs migrations and checks health endpoints before traffic moves. "
        text = with_half_emoji("\n\n".join((para * 4).format(i=i) for i in range(60)), every=301)
    assert HALF in text
    hint = None
    if kind == "code":
        from headroom_core.compress.router import Hint

        hint = Hint(tool_name="Read", path="session.py")
    res = compress_text(text, "what failed?", counter, min_tokens=200, min_saving_ratio=0.1, hint=hint)
    assert res.changed, res.reason
    assert counter.count(res.text) < counter.count(text)
    (off,) = res.offloads
    assert off.original == text and off.key == markers.offload_key(text)
    # the original goes to the database and comes back exactly
    runtime.store.put(off.key, off.original, "tool_output")
    assert runtime.store.get(off.key).text == text


def test_any_text_column_round_trips_every_string(runtime):
    values = [
        HALF,
        "a" + LOW + "b",
        "nul\x00byte",
        MARK + "starts with the mark",
        "back\\slash \\ud83d " + HALF,
        "plain é 😀",
    ]
    for v in values:
        assert unescape_text(escape_text(v)) == v
    assert escape_text("plain é 😀") == "plain é 😀"  # ordinary text is stored as it is
    for i, v in enumerate(values):  # originals are sealed bytes (UTF-8 with surrogatepass)
        runtime.store.put(f"{i:024x}", v, "tool_output")
    for i, v in enumerate(values):
        assert runtime.store.get(f"{i:024x}").text == v
    now = datetime(2026, 1, 1)
    with runtime.sessions.begin() as s:  # an AnyText column: the system text of a prefix
        for i, v in enumerate(values):
            s.add(
                CachePrefix(
                    fingerprint=f"{i:064x}",
                    project="p",
                    dialect="d",
                    system_text=v,
                    tools_json="[]",
                    created_at=now,
                    last_seen_at=now,
                )
            )
    with runtime.sessions() as s:
        assert [s.get(CachePrefix, f"{i:064x}").system_text for i in range(len(values))] == values
        raw = s.execute(
            sql_text("SELECT system_text FROM cache_prefixes WHERE fingerprint = :f"), {"f": f"{5:064x}"}
        ).scalar_one()
        assert raw == "plain é 😀"  # ordinary text is stored as it is


def test_tool_definitions_with_lone_surrogates_are_minified():
    tools = [
        {
            "name": "emoji" + HALF,
            "description": "  Sends   an emoji " + HALF + "\n\n\n  fast.  ",
            "input_schema": {
                "type": "object",
                "properties": {"e": {"type": "string", "description": "one " + LOW + "   char", "default": HALF}},
            },
        },
    ]
    res = minify_tools(tools)
    assert res.changed
    t = res.tools[0]
    assert t["name"] == "emoji" + HALF and t["description"] == "Sends an emoji " + HALF + "\n\nfast."
    assert t["input_schema"]["properties"]["e"] == {
        "type": "string",
        "description": "one " + LOW + " char",
        "default": HALF,
    }


def test_prefix_observer_and_ledger_write_lone_surrogates(runtime):
    body = {
        "system": [{"type": "text", "text": "You are helpful " + HALF}],
        "tools": [{"name": "t" + LOW, "description": HALF}],
    }
    log = prefix_log(runtime)
    log.observe("s1", "proj" + HALF, "anthropic-messages", "cli" + LOW, prefix_of(body))
    body2 = {
        "system": [{"type": "text", "text": "You are helpful " + HALF + "\nToday is 2025-08-06"}],
        "tools": body["tools"],
    }
    diff = log.observe("s1", "proj" + HALF, "anthropic-messages", "cli" + LOW, prefix_of(body2))
    assert diff is not None and diff.kinds == ("date",)
    with runtime.sessions() as s:
        texts = sorted(r.system_text for r in s.scalars(select(CachePrefix)))
    assert texts == sorted([prefix_of(body).system, prefix_of(body2).system])  # kept exactly

    p = plan_request(
        runtime,
        "POST",
        "/v1/messages",
        {"x-headroom-project": "p" + HALF},
        json.dumps(anthropic_request("short")).encode(),
    )
    ledger.record(
        runtime.sessions,
        p,
        user_agent="agent" + HALF + "/1.0",
        model="m" + HALF,
        status_code=200,
        usage=__import__("headroom_core.wire.blocks", fromlist=["Usage"]).Usage(),
        rounds=0,
        offered=["tool" + HALF, "tool" + HALF],
        called=["tool" + HALF],
    )
    with runtime.sessions() as s:
        (row,) = s.scalars(select(RequestOutcome)).all()
        (usage,) = s.scalars(select(ToolUsage)).all()
    assert row.model == "m\ufffd" and (usage.tool_name, usage.offered, usage.called) == ("tool\ufffd", 2, 1)


def _session_turns(tool_text: str) -> tuple[dict, dict]:
    first = anthropic_request(tool_text)
    second = json.loads(json.dumps(first))
    second["messages"] += [
        {"role": "assistant", "content": [{"type": "text", "text": "Checked " + HALF}]},
        {"role": "user", "content": "and the closed ones? " + LOW},
    ]
    return first, second


def test_a_session_with_a_lone_surrogate_stays_compressed(runtime):
    tool_text = json_with_half_emoji()
    first, second = _session_turns(tool_text)
    raw1 = json.dumps(first).encode()  # the surrogates as \\ud83d escapes: valid JSON, ASCII bytes
    p1 = plan_request(runtime, "POST", "/v1/messages", {}, raw1)
    assert p1.action == "rewrite" and "tool outputs compressed" in p1.reason, p1.reason
    sent1 = json.loads(p1.body)
    kept = sent1["messages"][2]["content"][0]["content"]
    assert len(kept) < len(tool_text) / 2 and "\\ud83d" in kept  # escaped, as a JSON writer does
    assert HALF in json.dumps(json.loads(kept), ensure_ascii=False)  # the same values
    p2 = plan_request(runtime, "POST", "/v1/messages", {}, json.dumps(second).encode())
    assert p2.action == "rewrite" and "earlier messages replayed" in p2.reason, p2.reason
    sent2 = json.loads(p2.body)
    assert sent2["messages"][:3] == sent1["messages"][:3]
    assert p2.body.startswith(p1.body[: p1.body.index(b'"tools"')])  # the same bytes as before
    key = markers.offload_key(tool_text)
    assert runtime.store.get(key, p1.context.scope).text == tool_text


def test_lone_surrogates_end_to_end_through_mitmdump(upstream, proxy_factory):
    from tests.support.proxy import ADDON_SCRIPT

    px = proxy_factory(ADDON_SCRIPT, options={"headroom_compress_timeout_seconds": "600"})  # a loaded machine
    tool_text = json_with_half_emoji()
    body = anthropic_request(tool_text)
    body["system"][0]["text"] += " " + HALF
    body["tools"][0]["description"] = "  Call   the GitHub REST API " + LOW + ".  "
    key = markers.offload_key(tool_text)
    upstream.script(Reply.tool_call(retrieve.TOOL_NAME, {"key": key}), Reply.text("All " + HALF + " checked."))
    # as a JavaScript agent sends it (JSON.stringify writes a lone surrogate as a \\ud83d escape);
    # the Python SDKs cannot send one at all (they encode with ensure_ascii=False)
    raw = json.dumps(body).encode()
    with http_client(px) as c:
        r = c.post(upstream.url + "/v1/messages", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text
    assert r.json()["content"][-1]["text"] == "All " + HALF + " checked."
    first, follow = upstream.requests
    sent = first.json["messages"][2]["content"][0]["content"]
    assert len(sent) < len(tool_text) / 2 and set(markers.find_marker_keys(sent)) == {key}
    assert first.json["tools"][0]["description"] == "Call the GitHub REST API " + LOW + "."
    assert first.json["system"][0]["text"].endswith(HALF)
    assert follow.json["messages"][-1]["content"][0]["content"] == tool_text  # the exact original back
    assert "Traceback" not in px.log_text() and "internal error" not in px.log_text()
