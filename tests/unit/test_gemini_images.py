"""Gemini ``inlineData`` images (Gemini API, Vertex AI, Code Assist) resized like the other
dialects' images: found in user contents and in function responses' own parts (not PDFs or
audio), resized to the 3072 px square Google documents (PNG stays PNG, ``mimeType`` kept), the
token target offloads the original behind a ``{"text"}`` marker part, and the next turn replays
the same bytes."""

from __future__ import annotations

import base64
import io
import json
import random

from PIL import Image

from headroom_core.compress import images as I
from headroom_core.compress import markers
from headroom_core.compress.images_step import image_sites, plan_images
from headroom_core.wire import jsonedit
from headroom_core.wire.detect import Dialect
from tests.unit.test_images import screenshot
from tests.unit.test_images_plan import fresh, plan

B64 = lambda data: base64.b64encode(data).decode()  # noqa: E731
PATH = "/v1beta/models/gemini-2.5-pro:generateContent"


def photo(w: int, h: int, seed: int = 7) -> bytes:
    """A real PNG that compresses like a photo (smooth noise; deterministic): a screenshot of flat
    colours compresses so well that a smaller size would not be fewer bytes."""
    r = random.Random(seed)
    small = Image.frombytes("RGB", (w // 16, h // 16), r.randbytes((w // 16) * (h // 16) * 3))
    buf = io.BytesIO()
    small.resize((w, h), Image.BILINEAR).save(buf, "PNG")
    return buf.getvalue()


def size_of(b64: str) -> tuple[int, int]:
    im = Image.open(io.BytesIO(base64.b64decode(b64)))
    assert im.format == "PNG"
    return im.size


def gemini_body(png: bytes) -> dict:
    img = {"inlineData": {"mimeType": "image/png", "data": B64(png)}}
    return {
        "contents": [
            {
                "role": "user",
                "parts": [
                    img,
                    {"text": "What is wrong on this screen?"},
                    {"inlineData": {"mimeType": "application/pdf", "data": B64(b"%PDF-1.4")}},
                ],
            },
            {"role": "model", "parts": [{"functionCall": {"name": "screenshot", "args": {}}}]},
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"name": "screenshot", "response": {"output": "taken"}, "parts": [img]}}
                ],
            },
        ],
        "systemInstruction": {"parts": [{"text": "You look at screens."}]},
    }


def test_gemini_token_formula_matches_the_docs():
    assert I.gemini_tokens(384, 384) == 258 and I.gemini_tokens(300, 100) == 258
    assert I.gemini_tokens(960, 540) == 258 * 2 * 1  # 768 px tiles
    assert I.gemini_tokens(6000, 3000) == I.gemini_tokens(3072, 1536) == 258 * 4 * 2  # downscaled first


def test_sites_are_the_image_parts_of_user_contents_and_function_responses():
    png = screenshot(1000, 600, "PNG")
    sites = image_sites(Dialect.GEMINI, gemini_body(png))
    assert [s.path for s in sites] == [
        ("contents", 0, "parts", 0, "inlineData", "data"),
        ("contents", 2, "parts", 0, "functionResponse", "parts", 0, "inlineData", "data"),
    ]
    assert [s.container for s in sites] == [
        ("contents", 0, "parts"),
        ("contents", 2, "parts", 0, "functionResponse", "parts"),
    ]
    assert [s.tool_name for s in sites] == ["", "screenshot"] and all(
        s.data == png and s.media_type == "image/png" for s in sites
    )


def test_large_images_are_resized_to_3072_px_and_nothing_else_changes():
    png = photo(4000, 2600)
    body = gemini_body(png)
    out = plan_images(Dialect.GEMINI, body, live_from=0)
    assert out.changed == 2 and not out.offloads
    new = json.loads(jsonedit.apply(json.dumps(body), out.edits))
    a = new["contents"][0]["parts"][0]["inlineData"]
    b = new["contents"][2]["parts"][0]["functionResponse"]["parts"][0]["inlineData"]
    assert size_of(a["data"]) == size_of(b["data"]) == (3072, 1996) and a["mimeType"] == b["mimeType"] == "image/png"
    a["data"] = b["data"] = B64(png)
    assert new == body
    assert plan_images(Dialect.GEMINI, gemini_body(photo(3008, 1008)), 0).changed == 0  # within the square


def test_token_target_offloads_the_original_behind_a_text_part():
    png = screenshot(2000, 1300, "PNG")
    body = gemini_body(png)
    out = plan_images(Dialect.GEMINI, body, live_from=2, max_tokens=600)
    (off,) = out.offloads
    new = json.loads(jsonedit.apply(json.dumps(body), out.edits))
    assert new["contents"][0] == body["contents"][0]  # before live_from: untouched
    parts = new["contents"][2]["parts"][0]["functionResponse"]["parts"]
    assert list(parts[0]) == ["inlineData"] and list(parts[1]) == ["text"]
    assert (
        markers.find_marker_keys(parts[1]["text"]) == [off.key]
        and I.gemini_tokens(*size_of(parts[0]["inlineData"]["data"])) <= 600
    )


def test_request_plan_resizes_gemini_and_code_assist_and_replays_the_same_bytes(tmp_path, counter):
    rt = fresh(tmp_path, counter)
    body = gemini_body(photo(4000, 2600))
    p = plan(rt, body, PATH)
    assert p.action == "rewrite" and "2 images resized" in p.reason and p.bytes_after < p.bytes_before
    sent = json.loads(p.body)
    assert size_of(sent["contents"][0]["parts"][0]["inlineData"]["data"]) == (3072, 1996)
    nxt = dict(
        body,
        contents=body["contents"]
        + [{"role": "model", "parts": [{"text": "A red error."}]}, {"role": "user", "parts": [{"text": "And now?"}]}],
    )
    p2 = plan(rt, nxt, PATH)
    a, b = (
        jsonedit.element_spans(p.body.decode(), ("contents",)),
        jsonedit.element_spans(p2.body.decode(), ("contents",)),
    )
    assert [p.body.decode()[x:y] for x, y in a] == [p2.body.decode()[x:y] for x, y in b[:3]]
    ca = {"model": "gemini-2.5-pro", "project": "p-1", "user_prompt_id": "u1", "request": body}
    pc = plan(fresh(tmp_path, counter, "ca"), ca, "/v1internal:generateContent")
    got = json.loads(pc.body)
    assert size_of(got["request"]["contents"][0]["parts"][0]["inlineData"]["data"]) == (3072, 1996)
    assert {k: got[k] for k in ("model", "project", "user_prompt_id")} == {
        "model": "gemini-2.5-pro",
        "project": "p-1",
        "user_prompt_id": "u1",
    }
