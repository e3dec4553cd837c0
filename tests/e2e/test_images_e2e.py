"""Images end to end through a real ``mitmdump -s addons/headroom.py``: the real SDK clients
send screenshots, the local upstream records what arrives; the model's headroom_retrieve call
for a reduced image is answered by the proxy with the full-size image."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from headroom_core.ccr import retrieve
from headroom_core.compress import images as I
from headroom_core.compress import markers
from tests.support.clients import anthropic_client, openai_client
from tests.support.proxy import ADDON_SCRIPT
from tests.support.upstream import Reply
from tests.unit.test_images import screenshot

B64 = lambda data: base64.b64encode(data).decode()  # noqa: E731


# generous: resizing a screenshot takes about a second, much longer on a loaded test machine
SLOW_OK = {"headroom_compress_timeout_seconds": 300}


@pytest.fixture(scope="module")
def proxy(module_proxy_factory):
    return module_proxy_factory(ADDON_SCRIPT, options=SLOW_OK)


@pytest.fixture(scope="module")
def target_proxy(module_proxy_factory):
    return module_proxy_factory(ADDON_SCRIPT, options={**SLOW_OK, "headroom_image_max_tokens": 500})


@pytest.fixture(scope="module")
def png() -> bytes:
    return screenshot(3024, 1964, "PNG")


def image_block(data: bytes, media_type: str = "image/png") -> dict:
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": B64(data)}}


def size_of(b64: str) -> tuple[int, int]:
    return Image.open(io.BytesIO(base64.b64decode(b64))).size


def test_anthropic_sdk_screenshot_arrives_at_the_effective_size(upstream, proxy, png):
    client = anthropic_client(upstream, proxy)
    msg = client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=50,
        messages=[{"role": "user", "content": [image_block(png), {"type": "text", "text": "Which test failed?"}]}],
    )
    assert msg.content[0].text.startswith("upstream saw 1 messages")
    got = upstream.requests[0].json["messages"][0]["content"]
    assert got[0]["source"]["media_type"] == "image/png" and size_of(got[0]["source"]["data"]) == (1375, 893)
    assert Image.open(io.BytesIO(base64.b64decode(got[0]["source"]["data"]))).format == "PNG"
    assert got[1] == {"type": "text", "text": "Which test failed?"}
    assert len(upstream.requests[0].body) < len(B64(png))  # the whole body is smaller than the image was


def test_animated_gif_arrives_byte_identical(upstream, proxy):
    from tests.unit.test_images import animated

    gif = animated("GIF")
    client = anthropic_client(upstream, proxy)
    client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=50,
        messages=[{"role": "user", "content": [image_block(gif, "image/gif"), {"type": "text", "text": "?"}]}],
    )
    assert upstream.requests[0].json["messages"][0]["content"][0]["source"]["data"] == B64(gif)


@pytest.mark.parametrize("stream", [False, True])
def test_reduced_screenshot_retrieved_full_size_by_the_proxy(upstream, target_proxy, png, stream):
    original = "data:image/png;base64," + B64(png)
    key = markers.offload_key(original)
    upstream.script(
        Reply.tool_call(retrieve.TOOL_NAME, {"key": key}, text="Let me see it in full."),
        Reply.text("The third test failed."),
    )
    client = anthropic_client(upstream, target_proxy)
    messages = [
        {"role": "user", "content": "Take a screenshot of the test run."},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_s1", "name": "screenshot", "input": {}}]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_s1", "content": [image_block(png)]}],
        },
    ]
    tools = [
        {
            "name": "screenshot",
            "description": "Take a screenshot.",
            "input_schema": {"type": "object", "properties": {}},
        }
    ]
    if stream:
        with client.messages.stream(model="claude-sonnet-4-5", max_tokens=50, tools=tools, messages=messages) as s:
            text = "".join(s.text_stream)
        assert text == "Let me see it in full.The third test failed."
    else:
        msg = client.messages.create(model="claude-sonnet-4-5", max_tokens=50, tools=tools, messages=messages)
        assert [b.text for b in msg.content] == ["Let me see it in full.", "The third test failed."]
    first, follow = upstream.requests
    sent = first.json["messages"][2]["content"][0]["content"]
    assert [b["type"] for b in sent] == ["image", "text"]
    assert I.anthropic_tokens(*size_of(sent[0]["source"]["data"])) <= 500
    assert markers.find_marker_keys(sent[1]["text"]) == [key]
    assert first.json["tools"][-1]["name"] == retrieve.TOOL_NAME
    # the proxy answered the call with the full-size original as an image block
    result = follow.json["messages"][-1]["content"][0]
    assert result["type"] == "tool_result"
    assert result["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": B64(png)},
    }


def test_openai_sdk_chat_image_follows_the_high_detail_scaling(upstream, proxy):
    jpeg = screenshot(3024, 1964, "JPEG")
    client = openai_client(upstream, proxy)
    client.chat.completions.create(
        model="gpt-4o",
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "what failed?"},
                    {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64," + B64(jpeg)}},
                ],
            }
        ],
    )
    url = upstream.requests[0].json["messages"][0]["content"][1]["image_url"]["url"]
    d = I.parse_data_url(url)
    im = Image.open(io.BytesIO(d.data))
    assert d.media_type == "image/jpeg" and im.format == "JPEG" and im.size == (1182, 768)
