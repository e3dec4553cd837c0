"""Images inside requests: where each dialect keeps them, the edits the request plan makes (live
zone only, bytes outside the image untouched), the original of a reduced image retrievable as
an image, and the real Claude Code screenshot of the corpus."""

from __future__ import annotations

import base64
import io
import json

from PIL import Image

from headroom_core.ccr import retrieve
from headroom_core.compress import images as I
from headroom_core.compress import markers
from headroom_core.compress.images_step import IMAGE_KIND, image_sites, plan_images
from headroom_core.request_plan import plan_request
from headroom_core.runtime import Runtime
from headroom_core.settings import load_settings
from headroom_core.wire import jsonedit
from headroom_core.wire import reply_anthropic as wa
from headroom_core.wire import reply_chat as wc
from headroom_core.wire import reply_responses as wr
from headroom_core.wire.blocks import ImageAnswer, ToolCall
from headroom_core.wire.detect import Dialect
from tests.conftest import flow_files, load_flow
from tests.unit.test_images import screenshot

B64 = lambda data: base64.b64encode(data).decode()  # noqa: E731


def size_of(b64: str) -> tuple[int, int]:
    return Image.open(io.BytesIO(base64.b64decode(b64))).size


def anthropic_body(png: bytes, model: str = "claude-sonnet-4-5") -> dict:
    img = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": B64(png)}}
    return {
        "model": model,
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": [img, {"type": "text", "text": "What is wrong on this screen?"}]},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "screenshot", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": [{"type": "text", "text": "taken"}, img],
                    }
                ],
            },
        ],
    }


def plan(rt: Runtime, body: dict, path: str = "/v1/messages", raw: bytes | None = None):
    return plan_request(rt, "POST", path, {}, raw if raw is not None else json.dumps(body).encode())


def fresh(tmp_path, counter, name: str = "rt", **settings) -> Runtime:
    rt = Runtime(load_settings({"home": str(tmp_path / name), **settings}, env={}))
    rt.__dict__["counter"] = counter
    return rt


def test_image_sites_per_dialect():
    png = screenshot(2000, 1200, "PNG")
    url = "data:image/png;base64," + B64(png)
    a = image_sites(Dialect.ANTHROPIC_MESSAGES, anthropic_body(png))
    assert [s.path for s in a] == [
        ("messages", 0, "content", 0, "source", "data"),
        ("messages", 2, "content", 0, "content", 1, "source", "data"),
    ]
    assert [s.container for s in a] == [("messages", 0, "content"), ("messages", 2, "content", 0, "content")]
    assert image_sites(Dialect.ANTHROPIC_MESSAGES, anthropic_body(png), live_from=1)[0].message_index == 2
    chat = {
        "model": "gpt-4o",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "hi"},
                    {"type": "image_url", "image_url": {"url": url, "detail": "low"}},
                ],
            }
        ],
    }
    (c,) = image_sites(Dialect.OPENAI_CHAT, chat)
    assert c.path == ("messages", 0, "content", 1, "image_url", "url") and c.detail == "low" and c.data == png
    resp = {
        "model": "gpt-5",
        "input": [
            {"role": "user", "content": [{"type": "input_image", "image_url": url, "detail": "auto"}]},
            {"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_image", "image_url": url}]},
            {
                "role": "user",
                "content": [{"type": "input_image", "image_url": "https://example.com/a.png"}],
            },  # by URL: not ours
        ],
    }
    assert [s.path for s in image_sites(Dialect.OPENAI_RESPONSES, resp)] == [
        ("input", 0, "content", 0, "image_url"),
        ("input", 1, "output", 0, "image_url"),
    ]


def test_edits_touch_only_the_image_data():
    png = screenshot(3024, 1964, "PNG")
    body = anthropic_body(png)
    text = json.dumps(body, indent=1)
    out = plan_images(Dialect.ANTHROPIC_MESSAGES, body, live_from=0)
    assert out.changed == 2 and not out.offloads
    new = json.loads(jsonedit.apply(text, out.edits))
    for m, blk in ((0, new["messages"][0]["content"][0]), (2, new["messages"][2]["content"][0]["content"][1])):
        assert blk["source"]["media_type"] == "image/png" and size_of(blk["source"]["data"]) == (1375, 893), m
    # everything else is as it was
    for blk in (new["messages"][0]["content"][0], new["messages"][2]["content"][0]["content"][1]):
        blk["source"]["data"] = B64(png)
    assert new == body


def test_token_target_offloads_the_original_and_appends_a_marker():
    png = screenshot(3024, 1964, "PNG")
    body = anthropic_body(png)
    out = plan_images(Dialect.ANTHROPIC_MESSAGES, body, live_from=2, max_tokens=600)
    (off,) = out.offloads
    assert off.original == "data:image/png;base64," + B64(png) and off.key == markers.offload_key(off.original)
    new = json.loads(jsonedit.apply(json.dumps(body), out.edits))
    assert new["messages"][0] == body["messages"][0]  # before live_from: untouched
    content = new["messages"][2]["content"][0]["content"]
    assert [b["type"] for b in content] == ["text", "image", "text"]
    assert markers.find_marker_keys(content[2]["text"]) == [off.key]
    assert "3024x1964" in content[2]["text"] and I.anthropic_tokens(*size_of(content[1]["source"]["data"])) <= 600


def test_request_plan_resizes_and_replays_the_same_bytes_next_turn(tmp_path, counter):
    rt = fresh(tmp_path, counter)
    body = anthropic_body(screenshot(3024, 1964, "PNG"))
    p = plan(rt, body)
    assert p.action == "rewrite" and "2 images resized" in p.reason and p.images.changed == 2
    assert p.bytes_after < p.bytes_before
    sent = json.loads(p.body)
    assert size_of(sent["messages"][0]["content"][0]["source"]["data"]) == (1375, 893)
    # nothing offloaded: no marker; retrieve is offered all the same, decided at the session's first
    # request from its size (the tools bytes then stay the same all session long: the prompt cache)
    assert markers.find_marker_keys(p.body.decode()) == []
    assert [t["name"] for t in sent["tools"]] == [retrieve.TOOL_NAME]
    # next turn: the client resends its full-size images; the earlier messages go out as sent before
    nxt = dict(
        body,
        messages=body["messages"]
        + [{"role": "assistant", "content": "A red error."}, {"role": "user", "content": "And now?"}],
    )
    p2 = plan(rt, nxt)
    a, b = (
        jsonedit.element_spans(p.body.decode(), ("messages",)),
        jsonedit.element_spans(p2.body.decode(), ("messages",)),
    )
    assert [p.body.decode()[x:y] for x, y in a] == [p2.body.decode()[x:y] for x, y in b[:3]]
    # a fresh proxy (no memory of the session) computes the same bytes
    assert plan(fresh(tmp_path, counter, "other"), body).body == p.body


def test_images_setting_off_leaves_images_alone(tmp_path, counter):
    body = anthropic_body(screenshot(3024, 1964, "PNG"))
    p = plan(fresh(tmp_path, counter, images=False), body)
    sent = json.loads(p.body)
    assert "images resized" not in p.reason and markers.find_marker_keys(p.body.decode()) == []
    assert sent["messages"] == body["messages"]  # every image as the client sent it


def test_reduced_image_is_retrievable_as_an_image(tmp_path, counter):
    rt = fresh(tmp_path, counter, image_max_tokens=500)
    png = screenshot(3024, 1964, "PNG")
    p = plan(rt, anthropic_body(png))
    sent = json.loads(p.body)
    assert sent["tools"][-1]["name"] == retrieve.TOOL_NAME  # offered once something was offloaded
    key = markers.find_marker_keys(sent["messages"][2]["content"][0]["content"][-1]["text"])[0]
    stored = rt.store.get(key, p.context.scope)
    assert stored.kind == IMAGE_KIND and stored.text == "data:image/png;base64," + B64(png)
    ans = retrieve.answer(ToolCall("t1", retrieve.TOOL_NAME, {"key": key}), rt.store, p.context.scope)
    assert isinstance(ans, ImageAnswer) and base64.b64decode(ans.data) == png
    # Anthropic: the follow-up's tool_result carries the image block
    follow = json.loads(
        wa.followup(
            json.dumps(sent),
            json.dumps(
                {"content": [{"type": "tool_use", "id": "t1", "name": retrieve.TOOL_NAME, "input": {"key": key}}]}
            ),
            [(ToolCall("t1", retrieve.TOOL_NAME, {}), ans)],
        )
    )
    tr = follow["messages"][-1]["content"][0]["content"]
    assert tr[0]["type"] == "text" and tr[1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": B64(png)},
    }
    # Responses: an input_image in the function_call_output; Chat: a user message after the tool message
    r = json.loads(wr.followup('{"input": []}', '{"output": []}', [(ToolCall("c1", retrieve.TOOL_NAME, {}), ans)]))
    assert r["input"][-1]["output"][1] == {"type": "input_image", "image_url": "data:image/png;base64," + B64(png)}
    c = json.loads(
        wc.followup(
            '{"messages": []}',
            '{"choices": [{"message": {"role": "assistant"}}]}',
            [(ToolCall("c1", retrieve.TOOL_NAME, {}), ans)],
        )
    )
    assert c["messages"][-2]["role"] == "tool" and isinstance(c["messages"][-2]["content"], str)
    assert c["messages"][-1]["role"] == "user" and c["messages"][-1]["content"][1]["image_url"]["url"].endswith(
        B64(png)
    )


def test_openai_dialects_in_the_request_plan(tmp_path, counter):
    rt = fresh(tmp_path, counter)
    url = "data:image/jpeg;base64," + B64(screenshot(3024, 1964, "JPEG"))
    chat = {
        "model": "gpt-4o",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "what is this?"},
                    {"type": "image_url", "image_url": {"url": url}},
                ],
            }
        ],
    }
    sent = json.loads(plan(rt, chat, "/v1/chat/completions").body)
    d = I.parse_data_url(sent["messages"][0]["content"][1]["image_url"]["url"])
    assert d.media_type == "image/jpeg" and Image.open(io.BytesIO(d.data)).size == (1182, 768)
    resp = {
        "model": "gpt-5",
        "input": [{"role": "user", "content": [{"type": "input_image", "image_url": url, "detail": "low"}]}],
    }
    sent = json.loads(plan(rt, resp, "/v1/responses").body)
    assert Image.open(io.BytesIO(I.parse_data_url(sent["input"][0]["content"][0]["image_url"]).data)).size == (512, 332)


def screenshot_flows():
    """The corpus requests that carry the real Claude Code screenshot (the last six of session-a)."""
    out = []
    for f in flow_files():
        body = load_flow(f)["request"]["body"]
        if image_sites(Dialect.ANTHROPIC_MESSAGES, body):
            out.append((f.name, body))
    return out


def test_real_screenshot_in_the_corpus(tmp_path, counter):
    flows = screenshot_flows()
    assert len(flows) == 6
    (site,) = image_sites(Dialect.ANTHROPIC_MESSAGES, flows[0][1])
    assert Image.open(io.BytesIO(site.data)).size == (1269, 299)
    # default: 1269x299 is within Claude's effective size, so the image goes on byte for byte
    rt = fresh(tmp_path, counter)
    for name, body in flows:
        p = plan(rt, body)
        sent = json.loads(p.body) if p.body else body
        assert sent["messages"][2]["content"][2] == body["messages"][2]["content"][2], name
    # opt-in target of 300 tokens: reduced once, the same bytes in every later request of the session
    rt = fresh(tmp_path, counter, "target", image_max_tokens=300)
    seen = set()
    for name, body in flows:
        sent = json.loads(plan(rt, body).body)
        blk = sent["messages"][2]["content"][2]
        seen.add(blk["source"]["data"])
        assert I.anthropic_tokens(*size_of(blk["source"]["data"])) <= 300 < I.anthropic_tokens(1269, 299), name
        assert markers.find_marker_keys(sent["messages"][2]["content"][-1]["text"]), name
    assert len(seen) == 1
    (data,) = seen
    assert size_of(data) == (978, 230) and len(base64.b64decode(data)) < len(site.data)


def test_images_of_excluded_tools_are_left_alone(tmp_path, counter):
    body = anthropic_body(screenshot(3024, 1964, "PNG"))
    (user_image, tool_image) = image_sites(Dialect.ANTHROPIC_MESSAGES, body)
    assert (user_image.tool_name, tool_image.tool_name) == ("", "screenshot")
    out = plan_images(Dialect.ANTHROPIC_MESSAGES, body, 0, exclude_tools=("screen*",))
    assert [e.path for e in out.edits] == [user_image.path]  # the user's own image is still resized
    sent = json.loads(plan(fresh(tmp_path, counter, exclude_tools="screenshot"), body).body)
    assert sent["messages"][2] == body["messages"][2]
