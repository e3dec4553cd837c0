"""Images: shrink what the provider's vision encoder would shrink anyway, deterministically.

Pure functions from image bytes to a decision (:class:`ImageResult`), with Pillow doing all the
image work. Two steps, both keeping the aspect ratio and the format (PNG stays PNG, …):

1. **Effective size** (on by default): an image larger than the provider's documented
   effective size is resized to it. The provider would downscale it anyway before the model
   sees it, so the model sees the same picture; the request gets smaller and faster.
2. **Token target** (opt-in, ``max_tokens``): an image whose estimated tokens exceed the
   target is reduced further until it fits (never below :data:`MIN_SHORT_EDGE`). This one
   drops detail, so the request step keeps the original retrievable.

Provider rules (all estimates, the providers' own counts are in their ``usage``):

- Anthropic, "Images and vision" (docs.anthropic.com/en/docs/build-with-claude/vision,
  "Evaluate image size"): "If your image's long edge is more than 1568 pixels, or your image
  is more than ~1,600 tokens, it will first be scaled down, preserving aspect ratio"; the
  table of the largest sizes that are *not* resized tops out at 784x1568 px (1.23 MP, the
  ~1.15 MP that is often quoted is the same budget), and ``tokens = (width px * height px)/750``.
  Claude Opus 4.7 raised the native resolution to a 2576 px long edge (about 3.75 MP; same
  page, "maximal native image resolution"), so that model and any model this module does not
  know get the larger limit: the proxy must never shrink below what the model would see.
- OpenAI, "Images and vision", "Calculating costs" (platform.openai.com/docs/guides/
  images-vision): ``detail: "high"`` images "are first scaled to fit within a 2048 x 2048
  square, maintaining their aspect ratio. Then, they are scaled such that the shortest side of
  the image is 768px long", then cost 85 + 170 tokens per 512 px tile (GPT-4o, GPT-4.1, o1,
  o3, …); ``detail: "low"``: "The model receives a low-resolution 512px x 512px version" (85
  tokens). The 32 px patch models (gpt-4.1-mini/-nano, o4-mini) cap an image at 1536 patches.
  Models not listed only get the 2048 px square.
- Google Gemini, "Understand and count tokens" (ai.google.dev/gemini-api/docs/tokens) for
  Gemini 2.x: an image with both edges at most 384 px costs 258 tokens, a larger one is cut into
  768x768 px tiles of 258 tokens each; "Image understanding" (Gemini API, the 1.5 generation's
  rule, the only pixel bound Google documents): larger images "are scaled down to a maximum
  resolution of 3072x3072" keeping their aspect ratio. Gemini 3 bills a fixed budget per
  ``media_resolution`` whatever the size, with no documented pixel bound: the 3072 px square is
  kept for every Gemini model (the proxy never shrinks below what a model may see).
- Anthropic also notes that images "under 200 pixels on any given edge may degrade
  performance": the token target never goes below that (:data:`MIN_SHORT_EDGE`).

Deterministic: the same input bytes and limits give the same output bytes (LANCZOS resampling,
fixed encoder settings, no timestamps), so a resized image does not break the prompt cache.
Animated images, images Pillow cannot read, formats other than PNG/JPEG/WebP/GIF, a media type
that does not match the bytes, and results that are not smaller are passed untouched.
"""

from __future__ import annotations

import base64
import binascii
import io
import math
import re
from dataclasses import dataclass
from typing import Callable

from PIL import Image, JpegImagePlugin

#: Formats the proxy re-encodes (Pillow format names) and their media types.
MEDIA_TYPES = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif"}
#: Larger images are not decoded (Anthropic's own per-image maximum is 8000x8000 px).
MAX_SOURCE_PIXELS = 8000 * 8000
#: The token target never makes the short edge smaller than this (Anthropic vision docs: images
#: "under 200 pixels on any given edge may degrade performance").
MIN_SHORT_EDGE = 200
#: Anthropic: "tokens = (width px * height px)/750".
ANTHROPIC_PIXELS_PER_TOKEN = 750
#: JPEG and lossy WebP re-encoding quality (Pillow's 0-100 scale): high, so text stays sharp.
LOSSY_QUALITY = 90


@dataclass(frozen=True)
class SizeLimit:
    """The largest image a provider's vision encoder takes without downscaling.

    ``long_edge`` and ``short_edge`` in pixels, ``max_pixels`` in pixels (width x height); 0
    means no such bound. ``source`` names the documented rule.
    """

    long_edge: int = 0
    max_pixels: int = 0
    short_edge: int = 0
    source: str = ""


#: Claude models up to 4.6: 1568 px long edge, the 784x1568 budget of the docs' table.
ANTHROPIC_STANDARD = SizeLimit(
    1568, 784 * 1568, 0, "Anthropic vision docs: long edge 1568 px, ~1,600 tokens (784x1568 largest unresized)"
)
#: Claude Opus 4.7 and models this module does not know: 2576 px long edge, ~3.75 MP.
ANTHROPIC_HIGH_RES = SizeLimit(
    2576, 3_750_000, 0, "Anthropic vision docs: Opus 4.7 native resolution, long edge 2576 px (~3.75 MP)"
)
#: OpenAI detail "high" on the 512 px tile models: 2048 px square, then short side 768 px.
OPENAI_TILES = SizeLimit(2048, 0, 768, "OpenAI vision guide: fit 2048x2048, then shortest side 768 px")
#: OpenAI detail "low": a 512x512 version.
OPENAI_LOW = SizeLimit(512, 0, 0, "OpenAI vision guide: detail low, 512x512 px")
#: OpenAI 32 px patch models: at most 1536 patches.
OPENAI_PATCHES = SizeLimit(0, 1536 * 32 * 32, 0, "OpenAI vision guide: 32 px patches, at most 1536")
#: OpenAI models not listed: only the documented 2048 px square.
OPENAI_OTHER = SizeLimit(2048, 0, 0, "OpenAI vision guide: fit 2048x2048")

#: Gemini: the 3072 px square its image pipeline scales larger images into.
GEMINI = SizeLimit(3072, 0, 0, "Gemini API image understanding: scaled down to fit 3072x3072")
#: Gemini's image tiles (px) and the tokens of one tile (or of a small image).
GEMINI_TILE = 768
GEMINI_SMALL = 384
GEMINI_TILE_TOKENS = 258

_CLAUDE_VERSION = re.compile(
    r"claude-(?:(?:opus|sonnet|haiku)-(\d+)(?:-(\d{1,2}))?(?!\d)|(\d+)(?:-(\d))?-(?:opus|sonnet|haiku|instant))"
)
_OPENAI_PATCH_MODELS = re.compile(r"(?:^|[/:.])(?:gpt-4\.1-(?:mini|nano)|o4-mini)(?:$|[-@:])")
_OPENAI_TILE_MODELS = re.compile(
    r"(?:^|[/:.])(?:gpt-4o|gpt-4\.1|gpt-4\.5|gpt-4-turbo|o1|o3|computer-use-preview)(?:$|[-@:])"
)


def claude_version(model: str) -> tuple[int, int] | None:
    """``(major, minor)`` of a Claude model id in either naming scheme (``claude-sonnet-4-5``,
    ``claude-3-7-sonnet-latest``, ``anthropic.claude-opus-4-1-20250805-v1:0``), or None."""
    m = _CLAUDE_VERSION.search(model or "")
    if not m:
        return None
    if m.group(1) is not None:
        return int(m.group(1)), int(m.group(2) or 0)
    return int(m.group(3)), int(m.group(4) or 0)


def anthropic_limit(model: str) -> SizeLimit:
    """The effective image size for a Claude ``model`` (see the module docstring)."""
    v = claude_version(model)
    return ANTHROPIC_STANDARD if v is not None and v < (4, 7) else ANTHROPIC_HIGH_RES


def openai_limit(model: str, detail: str | None) -> SizeLimit | None:
    """The effective image size for an OpenAI ``model`` and an image's ``detail`` (``None``,
    ``"auto"`` and ``"high"`` count as high; ``"low"``); None for a detail value this module
    does not know (the image is then left alone)."""
    if detail == "low":
        return OPENAI_LOW
    if detail not in (None, "auto", "high"):
        return None
    m = model or ""
    if _OPENAI_PATCH_MODELS.search(m):
        return OPENAI_PATCHES
    if _OPENAI_TILE_MODELS.search(m):
        return OPENAI_TILES
    return OPENAI_OTHER


def fit(width: int, height: int, limit: SizeLimit) -> tuple[int, int]:
    """The largest ``(width, height)`` with the same aspect ratio within ``limit`` (pixels);
    never larger than the input. Edges are rounded down, at least 1."""
    s = 1.0
    long_, short = max(width, height), min(width, height)
    if limit.long_edge and long_ > limit.long_edge:
        s = min(s, limit.long_edge / long_)
    if limit.short_edge and short > limit.short_edge:
        s = min(s, limit.short_edge / short)
    if limit.max_pixels and width * height > limit.max_pixels:
        s = min(s, math.sqrt(limit.max_pixels / (width * height)))
    if s >= 1.0:
        return width, height
    w, h = max(1, int(width * s)), max(1, int(height * s))
    while limit.max_pixels and w * h > limit.max_pixels:  # float error must not leave it a pixel over
        w, h = max(1, w - 1), max(1, int((w - 1) * height / width))
    return w, h


def anthropic_tokens(width: int, height: int, limit: SizeLimit = ANTHROPIC_STANDARD) -> int:
    """Estimated tokens of an image Claude sees at ``limit``: ``ceil(w * h / 750)`` after the
    provider's own downscale (Anthropic vision docs)."""
    w, h = fit(width, height, limit)
    return math.ceil(w * h / ANTHROPIC_PIXELS_PER_TOKEN)


def openai_tokens(width: int, height: int, limit: SizeLimit = OPENAI_TILES) -> int:
    """Estimated tokens of an image an OpenAI model sees at ``limit``: 85 for ``detail: low``;
    one per 32 px patch on the patch models; else 85 + 170 per 512 px tile after the
    high-detail scaling (OpenAI vision guide, "Calculating costs")."""
    if limit is OPENAI_LOW:
        return 85
    w, h = fit(width, height, limit)
    if limit is OPENAI_PATCHES:
        return math.ceil(w / 32) * math.ceil(h / 32)
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)


def gemini_tokens(width: int, height: int, limit: SizeLimit = GEMINI) -> int:
    """Estimated tokens of an image Gemini sees at ``limit``: 258 when both edges are at most
    384 px, else 258 per 768x768 px tile after the provider's own downscale (Gemini API
    "Understand and count tokens", Gemini 2.x)."""
    w, h = fit(width, height, limit)
    if w <= GEMINI_SMALL and h <= GEMINI_SMALL:
        return GEMINI_TILE_TOKENS
    return GEMINI_TILE_TOKENS * math.ceil(w / GEMINI_TILE) * math.ceil(h / GEMINI_TILE)


def target_size(width: int, height: int, tokens: Callable[[int, int], int], max_tokens: int) -> tuple[int, int]:
    """The largest size with the same aspect ratio whose ``tokens(w, h)`` is at most
    ``max_tokens``, by binary search over the long edge; never smaller than a
    :data:`MIN_SHORT_EDGE` short edge (nor larger than the input)."""
    long_, short = max(width, height), min(width, height)

    def size(L: int) -> tuple[int, int]:
        s = max(1, round(short * L / long_))
        return (L, s) if width >= height else (s, L)

    if tokens(width, height) <= max_tokens:
        return width, height
    lo = min(long_, math.ceil(MIN_SHORT_EDGE * long_ / short)) if short > MIN_SHORT_EDGE else long_
    if tokens(*size(lo)) > max_tokens:
        return size(lo)
    hi = long_
    while hi - lo > 1:  # tokens(size(lo)) <= max_tokens < tokens(size(hi))
        mid = (lo + hi) // 2
        if tokens(*size(mid)) <= max_tokens:
            lo = mid
        else:
            hi = mid
    return size(lo)


@dataclass(frozen=True)
class ImageResult:
    """The decision for one image.

    ``changed``: whether ``data`` differs from the input. ``data``: the bytes to send (the
    input when unchanged). ``format``: Pillow format name ("" if unreadable). Sizes in pixels
    (``before`` the input, ``after`` what is sent), ``bytes_*`` in bytes, ``tokens_*`` the
    provider's estimated tokens for what its model sees (after its own downscale), so the
    effective-size step alone saves bytes, not tokens. ``reduced``: the token target dropped
    detail the model would have seen (the original must stay retrievable). ``reason`` says why.
    """

    changed: bool
    reason: str
    data: bytes
    format: str = ""
    before: tuple[int, int] = (0, 0)
    after: tuple[int, int] = (0, 0)
    bytes_before: int = 0
    bytes_after: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    reduced: bool = False


def _kept(data: bytes, reason: str, fmt: str = "", size: tuple[int, int] = (0, 0), tokens: int = 0) -> ImageResult:
    return ImageResult(False, reason, data, fmt, size, size, len(data), len(data), tokens, tokens)


def shrink(
    data: bytes,
    limit: SizeLimit,
    tokens: Callable[[int, int], int],
    media_type: str | None = None,
    max_tokens: int = 0,
) -> ImageResult:
    """Resize ``data`` (image file bytes) to ``limit`` and, when ``max_tokens`` > 0, further until
    ``tokens(w, h)`` is at most ``max_tokens``; re-encode in the same format.

    ``tokens(w, h)`` is the provider's estimate for an image of that size (e.g.
    ``lambda w, h: anthropic_tokens(w, h, limit)``). ``media_type``, when given, must match the
    bytes. Never raises for bad input: the result then says ``changed=False`` and why.
    """
    try:
        im = Image.open(io.BytesIO(data))  # reads the header only; decoding happens in _encode
        fmt = im.format or ""
        size = im.size
        if fmt not in MEDIA_TYPES:
            return _kept(data, f"format {fmt or 'unknown'} is not re-encoded", fmt, size)
        if media_type and media_type.lower().replace("/jpg", "/jpeg") != MEDIA_TYPES[fmt]:
            return _kept(data, f"media type {media_type} does not match the {fmt} bytes", fmt, size)
        if getattr(im, "n_frames", 1) > 1 or getattr(im, "is_animated", False):
            return _kept(data, "animated image", fmt, size, tokens(*size))
        if size[0] * size[1] > MAX_SOURCE_PIXELS:
            return _kept(data, f"{size[0]}x{size[1]} is over {MAX_SOURCE_PIXELS} pixels", fmt, size)
        before_tokens = tokens(*size)
        new = fit(*size, limit)
        reduced = False
        if max_tokens > 0 and tokens(*new) > max_tokens:
            new = target_size(*new, tokens, max_tokens)
            reduced = True
        if new == size:
            return _kept(
                data,
                "within the provider's effective size" + (" and the token target" if max_tokens else ""),
                fmt,
                size,
                before_tokens,
            )
    except Exception as e:  # noqa: BLE001 - any decoder error: pass the bytes on untouched
        return _kept(data, f"not an image Pillow can read: {type(e).__name__}: {e}"[:200])
    try:
        out = _encode(im, fmt, new, data)
        if reduced and fmt == "PNG" and len(out) >= len(data):
            # resampling adds in-between colours that PNG stores badly: for the (lossy by choice)
            # token target a 256-colour palette of the small image is the better trade
            out = min(out, _encode(im, fmt, new, data, palette=True), key=len)
    except Exception as e:  # noqa: BLE001 - a truncated file fails only here, when decoded
        return _kept(data, f"not re-encoded: {type(e).__name__}: {e}"[:200], fmt, size, before_tokens)
    after_tokens = tokens(*new)
    # the effective-size step must make the body smaller (the model sees the same either way);
    # the token target must save tokens (a few more bytes are then worth it)
    if len(out) >= len(data) and not (reduced and after_tokens < before_tokens):
        return _kept(data, f"re-encoded {fmt} at {new[0]}x{new[1]} would not be smaller", fmt, size, before_tokens)
    return ImageResult(
        True,
        "reduced to the token target" if reduced else "resized to the provider's effective size",
        out,
        fmt,
        size,
        new,
        len(data),
        len(out),
        before_tokens,
        after_tokens,
        reduced and after_tokens < before_tokens,
    )


def _encode(im: Image.Image, fmt: str, size: tuple[int, int], data: bytes, palette: bool = False) -> bytes:
    """``im`` resized to ``size`` (LANCZOS) and encoded as ``fmt`` with fixed settings;
    ``palette``: a PNG is stored with a 256-colour palette (Pillow's octree quantizer, no dither).

    A palette image (GIF, palette PNG) is resampled in RGB and mapped back onto its own palette,
    so the file stays a palette file of the same colours. Raises ``ValueError`` for a
    transparent GIF (its transparency index is not carried over) and whatever Pillow raises.
    """
    im.load()
    src_mode = im.mode
    icc = im.info.get("icc_profile")
    exif = im.info.get("exif")
    sampling = JpegImagePlugin.get_sampling(im) if fmt == "JPEG" else -1
    transparent = "transparency" in im.info or src_mode in ("RGBA", "LA", "PA")
    if fmt == "GIF" and transparent:
        raise ValueError("a transparent GIF is not re-encoded")
    if src_mode in ("RGB", "RGBA", "L", "LA", "CMYK", "I"):
        work = im
    elif src_mode in ("I;16", "I;16B", "I;16L"):
        work = im.convert("I")
    else:  # P, 1, PA, …
        work = im.convert("RGBA" if transparent else "RGB")
    out = work.resize(size, Image.Resampling.LANCZOS, reducing_gap=3.0)
    if src_mode == "P" and not transparent:
        out = out.quantize(palette=im, dither=Image.Dither.NONE)
    elif src_mode == "P" or (palette and fmt == "PNG" and out.mode in ("RGB", "RGBA")):
        out = out.quantize(256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)
    elif src_mode == "1":
        out = out.convert("1", dither=Image.Dither.NONE)
    buf = io.BytesIO()
    extra: dict[str, object] = {}
    if icc:
        extra["icc_profile"] = icc
    if exif and fmt != "GIF":
        extra["exif"] = exif
    if fmt == "PNG":
        out.save(buf, "PNG", compress_level=6, **extra)
    elif fmt == "JPEG":
        if out.mode not in ("RGB", "L", "CMYK"):
            out = out.convert("RGB")
        out.save(buf, "JPEG", quality=LOSSY_QUALITY, subsampling=sampling if sampling >= 0 else 2, **extra)
    elif fmt == "WEBP":
        if out.mode not in ("RGB", "RGBA"):
            out = out.convert("RGBA" if transparent else "RGB")
        lossless = _webp_lossless(data)
        out.save(
            buf,
            "WEBP",
            lossless=lossless,
            quality=100 if lossless else LOSSY_QUALITY,
            method=4,
            exact=lossless,
            **extra,
        )
    else:  # GIF: one frame on a palette
        if out.mode != "P":
            out = out.convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
        out.save(buf, "GIF")
    return buf.getvalue()


def _webp_lossless(data: bytes) -> bool:
    """Whether a WebP file's image chunk is lossless (``VP8L``), from the RIFF chunk list."""
    i = 12
    while i + 8 <= len(data):
        tag = data[i : i + 4]
        if tag == b"VP8L":
            return True
        if tag == b"VP8 ":
            return False
        n = int.from_bytes(data[i + 4 : i + 8], "little")
        i += 8 + n + (n & 1)
    return False


@dataclass(frozen=True)
class DataURL:
    """A ``data:<media type>;base64,<data>`` URL, split: ``media_type`` and the decoded ``data``."""

    media_type: str
    data: bytes

    def text(self) -> str:
        """The URL again (standard base64, as clients send it)."""
        return f"data:{self.media_type};base64,{base64.b64encode(self.data).decode('ascii')}"


_DATA_URL = re.compile(r"data:([a-zA-Z0-9.+/-]+);base64,(.*)", re.S)


def parse_data_url(url: str) -> DataURL | None:
    """The parts of a base64 ``data:`` URL, or None for any other URL or invalid base64."""
    m = _DATA_URL.fullmatch(url) if isinstance(url, str) else None
    if not m:
        return None
    raw = decode_base64(m.group(2))
    return DataURL(m.group(1).lower(), raw) if raw is not None else None


def decode_base64(text: str) -> bytes | None:
    """Strictly decoded standard base64 (no stray characters), or None."""
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


def decode_base64_urlsafe(text: str) -> bytes | None:
    """Strictly decoded URL-safe base64 (``-`` and ``_``, RFC 4648 section 5: what the protobuf
    JSON mapping accepts for ``bytes`` and the ``google-genai`` SDK sends), or None."""
    try:
        return base64.b64decode(text, altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        return None


def encode_base64(data: bytes) -> str:
    """Standard base64 text of ``data``."""
    return base64.b64encode(data).decode("ascii")
