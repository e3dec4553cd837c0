"""Images (issue 19, part 2): real PNG/JPEG/WebP/GIF files made with Pillow, resized to the
provider's documented effective size and, opt-in, to a token target; animated and broken
images pass untouched; the same input always gives the same bytes."""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys

import pytest
from PIL import Image, ImageDraw

from headroom_core.compress import images as I

FORMATS = ("PNG", "JPEG", "WEBP", "GIF")


def screenshot(w: int = 3024, h: int = 1964, fmt: str = "PNG", mode: str = "RGB", **save) -> bytes:
    """A UI-like screenshot (title bar, sidebar, lines of text, a bar chart) as real ``fmt`` bytes."""
    im = Image.new("RGB", (w, h), (245, 245, 245))
    d = ImageDraw.Draw(im)
    d.rectangle((0, 0, w, 60), fill=(40, 60, 120))
    d.rectangle((0, 60, w // 11, h), fill=(225, 228, 235))
    for y in range(90, h - 240, 40):
        d.text(
            (w // 10, y), f"ERROR tests/test_plan.py::test_{y} - AssertionError: expected 3 got 4", fill=(20, 20, 20)
        )
    for i in range(12):
        d.rectangle((w // 10 + i * 90, h - 200, w // 10 + 60 + i * 90, h - 60), fill=(200 - i * 10, 80 + i * 10, 90))
    if mode != "RGB":
        im = im.convert(mode)
    b = io.BytesIO()
    im.save(b, fmt, **save)
    return b.getvalue()


def opened(data: bytes) -> Image.Image:
    im = Image.open(io.BytesIO(data))
    im.load()
    return im


def anthropic(
    data: bytes, model: str = "claude-sonnet-4-5", media_type: str | None = None, max_tokens: int = 0
) -> I.ImageResult:
    lim = I.anthropic_limit(model)
    return I.shrink(data, lim, lambda w, h: I.anthropic_tokens(w, h, lim), media_type, max_tokens)


# --- documented rules ------------------------------------------------------------------------


def test_anthropic_token_formula_matches_the_docs_examples():
    # Anthropic vision docs, cost table: 200x200 ~54, 1000x1000 ~1334, 1092x1092 ~1590 tokens
    assert I.anthropic_tokens(200, 200) == 54
    assert I.anthropic_tokens(1000, 1000) == 1334
    assert I.anthropic_tokens(1092, 1092) == 1590
    # the sizes the docs list as not resized stay as they are
    for w, h in ((1092, 1092), (951, 1268), (896, 1344), (819, 1456), (784, 1568)):
        assert I.fit(w, h, I.ANTHROPIC_STANDARD) == (w, h)
    # long edge over 1568: scaled down to 1568, aspect ratio kept
    assert I.fit(3136, 400, I.ANTHROPIC_STANDARD) == (1568, 200)


def test_openai_token_formula_matches_the_docs_examples():
    # OpenAI vision guide, "Calculating costs": 1024x1024 high -> 765, 2048x4096 high -> 1105, low -> 85
    assert I.openai_tokens(1024, 1024, I.OPENAI_TILES) == 765
    assert I.openai_tokens(2048, 4096, I.OPENAI_TILES) == 1105
    assert I.openai_tokens(4096, 8192, I.OPENAI_LOW) == 85
    assert I.fit(2048, 4096, I.OPENAI_TILES) == (768, 1536)
    assert I.fit(4000, 3000, I.OPENAI_LOW) == (512, 384)


@pytest.mark.parametrize(
    "model, version",
    [
        ("claude-sonnet-4-20250514", (4, 0)),
        ("claude-sonnet-4-5", (4, 5)),
        ("claude-opus-4-1-20250805", (4, 1)),
        ("claude-3-7-sonnet-latest", (3, 7)),
        ("claude-3-opus-20240229", (3, 0)),
        ("anthropic.claude-haiku-4-5-20251001-v1:0", (4, 5)),
        ("claude-opus-4-7", (4, 7)),
        ("gpt-4o", None),
    ],
)
def test_claude_versions_are_read_from_model_ids(model, version):
    assert I.claude_version(model) == version


def test_limits_per_model_and_detail():
    assert I.anthropic_limit("claude-sonnet-4-5-20250929") is I.ANTHROPIC_STANDARD
    # Opus 4.7 sees 2576 px; an unknown model gets the largest documented limit (never shrink below what it sees)
    assert I.anthropic_limit("claude-opus-4-7") is I.ANTHROPIC_HIGH_RES
    assert I.anthropic_limit("some-new-model") is I.ANTHROPIC_HIGH_RES
    assert I.openai_limit("gpt-4o-2024-08-06", None) is I.OPENAI_TILES
    assert I.openai_limit("gpt-4.1-mini", "auto") is I.OPENAI_PATCHES
    assert I.openai_limit("gpt-5", "high") is I.OPENAI_OTHER
    assert I.openai_limit("gpt-5", "low") is I.OPENAI_LOW
    assert I.openai_limit("gpt-4o", "original") is None  # a detail value this module does not know


def test_target_size_is_the_largest_size_within_the_budget():
    tok = lambda w, h: I.anthropic_tokens(w, h)  # noqa: E731
    w, h = I.target_size(1400, 875, tok, 800)
    assert tok(w, h) <= 800 < tok(w + 2, round((w + 2) * 875 / 1400))
    assert abs(w / h - 1400 / 875) < 0.01
    # never below a 200 px short edge (Anthropic: smaller edges degrade performance)
    assert min(I.target_size(1400, 875, tok, 10)) == 200


# --- real files --------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_large_screenshot_is_resized_to_the_effective_size_format_kept(fmt):
    data = screenshot(3024, 1964, fmt)
    r = anthropic(data, media_type=I.MEDIA_TYPES[fmt])
    assert r.changed, r.reason
    # long edge 1568 gives 1568x1018 = 1.6 MP: over the 784x1568 budget, so scaled to fit 1.23 MP
    assert r.after == (1375, 893) and r.after == I.fit(3024, 1964, I.ANTHROPIC_STANDARD)
    im = opened(r.data)
    assert im.format == fmt and im.size == (1375, 893)
    assert r.bytes_after == len(r.data) < r.bytes_before == len(data)
    # the model sees the same picture either way: tokens stay, bytes go
    assert r.tokens_before == r.tokens_after == 1638
    assert not r.reduced


@pytest.mark.parametrize("fmt", FORMATS)
def test_token_target_reduces_further(fmt):
    data = screenshot(3024, 1964, fmt)
    r = anthropic(data, max_tokens=800)
    assert r.changed and r.reduced
    assert r.tokens_before == 1638 and r.tokens_after <= 800
    im = opened(r.data)
    assert im.format == fmt and im.size == r.after and r.after[0] / r.after[1] == pytest.approx(3024 / 1964, rel=0.01)


def test_openai_high_detail_scaling():
    data = screenshot(3024, 1964, "PNG")
    lim = I.openai_limit("gpt-4o", "high")
    r = I.shrink(data, lim, lambda w, h: I.openai_tokens(w, h, lim), "image/png")
    assert r.changed and r.after == (1182, 768)  # fit 2048 -> 2048x1330, short side 768
    assert r.tokens_before == r.tokens_after == 85 + 170 * 3 * 2
    lim = I.openai_limit("gpt-4o", "low")
    r = I.shrink(data, lim, lambda w, h: I.openai_tokens(w, h, lim))
    assert r.after == (512, 332) and r.tokens_after == 85


def test_same_input_same_bytes_also_in_another_process():
    data = screenshot(2400, 1600, "PNG")
    a = anthropic(data, max_tokens=700).data
    assert anthropic(data, max_tokens=700).data == a
    code = (
        "import sys, hashlib; from tests.unit.test_images import screenshot, anthropic; "
        "print(hashlib.sha256(anthropic(screenshot(2400, 1600, 'PNG'), max_tokens=700).data).hexdigest())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.strip() == hashlib.sha256(a).hexdigest()


def test_small_image_is_untouched():
    data = screenshot(1200, 700, "PNG")
    r = anthropic(data)
    assert not r.changed and r.data is data and r.reason.startswith("within")
    assert r.tokens_before == I.anthropic_tokens(1200, 700)


def test_palette_png_and_grey_jpeg_keep_their_modes():
    p = anthropic(screenshot(3000, 2000, "PNG", mode="P"))
    assert p.changed and opened(p.data).mode == "P"
    g = anthropic(screenshot(3000, 2000, "JPEG", mode="L"))
    assert g.changed and opened(g.data).mode == "L"


def test_jpeg_exif_orientation_and_icc_profile_are_kept():
    exif = Image.Exif()
    exif[0x0112] = 6  # orientation: rotate 90 degrees
    icc = b"\0" * 128  # any profile bytes are carried as they are
    data = screenshot(3000, 2000, "JPEG", exif=exif.tobytes(), icc_profile=icc)
    r = anthropic(data)
    im = opened(r.data)
    assert r.changed and im.getexif().get(0x0112) == 6 and im.info.get("icc_profile") == icc


# --- passed untouched ------------------------------------------------------------------------


def animated(fmt: str) -> bytes:
    frames = [Image.new("RGB", (2400, 1600), c) for c in ((255, 0, 0), (0, 0, 255))]
    b = io.BytesIO()
    frames[0].save(b, fmt, save_all=True, append_images=frames[1:], duration=100, loop=0)
    return b.getvalue()


@pytest.mark.parametrize("fmt", ["GIF", "WEBP", "PNG"])  # PNG: an APNG
def test_animated_images_pass_untouched(fmt):
    data = animated(fmt)
    r = anthropic(data)
    assert not r.changed and r.data is data and r.reason == "animated image"


@pytest.mark.parametrize(
    "data, why",
    [
        (b"not an image at all", "not an image Pillow can read"),
        (screenshot(2400, 1600, "PNG")[:5000], "not re-encoded"),  # truncated: the header reads, the pixels do not
        (b"\x89PNG\r\n\x1a\n" + b"\0" * 100, "not an image Pillow can read"),
    ],
)
def test_broken_images_pass_untouched(data, why):
    r = anthropic(data)
    assert not r.changed and r.data is data and r.reason.startswith(why)


def test_media_type_that_does_not_match_the_bytes_is_left_to_the_provider():
    data = screenshot(2400, 1600, "PNG")
    r = anthropic(data, media_type="image/jpeg")
    assert not r.changed and "does not match" in r.reason
    assert anthropic(screenshot(2400, 1600, "JPEG"), media_type="image/jpg").changed  # a common alias


def test_other_formats_and_transparent_gifs_are_untouched():
    b = io.BytesIO()
    Image.new("RGB", (2400, 1600)).save(b, "BMP")
    assert anthropic(b.getvalue()).reason.startswith("format BMP")
    im = Image.new("P", (2400, 1600), 0)
    b = io.BytesIO()
    im.save(b, "GIF", transparency=0)
    r = anthropic(b.getvalue())
    assert not r.changed and "transparent GIF" in r.reason


def test_data_urls():
    d = I.parse_data_url("data:image/PNG;base64,aGVsbG8=")
    assert d == I.DataURL("image/png", b"hello") and d.text() == "data:image/png;base64,aGVsbG8="
    assert I.parse_data_url("https://example.com/x.png") is None
    assert I.parse_data_url("data:image/png;base64,not*base64") is None
