"""Tool definitions through a real mitmdump on the real Claude Code session (issue: tool
definitions): structure and words kept, bytes stable across turns, server tools untouched."""

from __future__ import annotations

import hashlib
import json

import pytest

from headroom_core.tools.minify import expand_references
from headroom_core.wire import jsonedit
from tests.conftest import flow_files, load_flow
from tests.support.clients import http_client
from tests.support.proxy import ADDON_SCRIPT
from tests.unit.test_tool_defs import descriptions, params, projection


@pytest.fixture(scope="module")
def replay(module_proxy_factory, upstream_server):
    """Every corpus request with tools, sent in order through the proxy; returns
    ``[(file, client_tools, upstream_body_text)]``."""
    proxy = module_proxy_factory(ADDON_SCRIPT)
    upstream_server.reset()
    out = []
    with http_client(proxy, timeout=60) as c:
        for f in flow_files():
            body = load_flow(f)["request"]["body"]
            if not body.get("tools") or "max_tokens" not in body:
                continue
            body = dict(body, stream=False)
            r = c.post(
                upstream_server.url + "/v1/messages",
                content=json.dumps(body).encode(),
                headers={"content-type": "application/json"},
            )
            assert r.status_code == 200, f.name
            out.append((f.name, body["tools"], upstream_server.requests[-1].text))
    assert len(out) >= 25
    return out


def test_forwarded_tools_keep_names_schema_and_words(replay):
    for name, client_tools, upstream_text in replay:
        forwarded = json.loads(upstream_text)["tools"]
        mine = [t for t in forwarded if t["name"] not in [c["name"] for c in client_tools]]
        assert all(t["name"] == "headroom_retrieve" for t in mine), name  # only the proxy's own tools added
        forwarded = forwarded[: len(client_tools)]
        # the client's tools, in the order the project first sent them (equal sets, one order)
        assert sorted(t["name"] for t in forwarded) == sorted(t["name"] for t in client_tools), name
        expanded = {t["name"]: t for t in expand_references(forwarded)}
        by_name = {t["name"]: t for t in forwarded}
        saved = 0
        for orig in client_tools:
            new, full = by_name[orig["name"]], expanded[orig["name"]]
            assert projection(orig.get("input_schema")) == projection(new.get("input_schema")), (name, orig["name"])
            assert params(orig.get("input_schema")) == params(new.get("input_schema")), (name, orig["name"])
            # every word of every description, in order, once the proxy's references are expanded
            assert (orig.get("description") or "").split() == (full.get("description") or "").split(), (
                name,
                orig["name"],
            )
            d_full = descriptions(full.get("input_schema"))
            for path, d in descriptions(orig.get("input_schema")).items():
                if d.strip():
                    assert d.split() == d_full[path].split(), (name, orig["name"], path)
            saved += len(json.dumps(orig)) - len(json.dumps(new))
        assert saved >= 0, name


def test_forwarded_tools_bytes_identical_when_client_tools_identical(replay):
    pairs = 0
    for (n1, t1, u1), (n2, t2, u2) in zip(replay, replay[1:]):
        if json.dumps(t1) != json.dumps(t2):
            continue
        s1, e1 = jsonedit.span(u1, ("tools",))
        s2, e2 = jsonedit.span(u2, ("tools",))
        # the client's part of the tools array (the proxy's own tools come after it)
        k = len(t1)
        spans1 = jsonedit.element_spans(u1, ("tools",))[:k]
        spans2 = jsonedit.element_spans(u2, ("tools",))[:k]
        a = "".join(u1[a:b] for a, b in spans1)
        b = "".join(u2[a:b] for a, b in spans2)
        assert hashlib.sha256(a.encode()).hexdigest() == hashlib.sha256(b.encode()).hexdigest(), (n1, n2)
        pairs += 1
    assert pairs >= 20


def test_server_tools_pass_byte_identical(upstream, headroom_proxy):
    server_tools = [
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
        {"type": "text_editor_20250124", "name": "str_replace_editor"},
        {"type": "bash_20250124", "name": "bash"},
        {"name": "odd", "input_schema": "not a schema", "description": "  spaced   out  "},
    ]
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 10,
        "tools": server_tools,
        "messages": [{"role": "user", "content": "hi"}],
    }
    raw = json.dumps(body, indent=2).encode()
    with http_client(headroom_proxy) as c:
        c.post(upstream.url + "/v1/messages", content=raw, headers={"content-type": "application/json"})
    got = upstream.requests[0].text
    a, b = jsonedit.span(got, ("tools",))
    s, e = jsonedit.span(raw.decode(), ("tools",))
    assert got[a:b] == raw.decode()[s:e]
