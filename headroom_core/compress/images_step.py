"""The request step for images: find the base64 images of the live zone and plan their edits.

Where images sit, per dialect: :mod:`headroom_core.wire.image_refs` (Anthropic ``image``
blocks with a base64 source; OpenAI ``image_url``/``input_image`` parts with a ``data:`` URL;
Gemini ``inlineData`` parts). The dialect's ``image_sizing`` names the provider's size rule.

Only messages at or after ``live_from`` are looked at (earlier ones are replayed byte for byte).
Each image is decided by :func:`headroom_core.compress.images.shrink`; a changed image is one
:class:`~headroom_core.wire.jsonedit.Replace` of its data string (the media type stays, the
format is kept). An image reduced below what the model would see (the opt-in token target) is
offloaded: its original ``data:`` URL goes to the originals store (kind ``"image"``) under
:func:`~headroom_core.compress.markers.offload_key` of that URL, and a text part with the marker is
appended to the same content list, so the model can ask ``headroom_retrieve`` for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from headroom_core.compress import images
from headroom_core.compress.markers import make_marker, offload_key
from headroom_core.compress.pipeline import excluded
from headroom_core.wire import jsonedit
from headroom_core.wire.detect import Dialect
from headroom_core.wire.image_refs import ImageRef
from headroom_core.wire.request_view import RequestView, view_of

#: ``kind`` of an image original in the originals store.
IMAGE_KIND = "image"


@dataclass(frozen=True)
class ImageSite:
    """One base64 image in a request body.

    ``path`` leads to the JSON string to replace (Anthropic: the base64 data; OpenAI: the whole
    ``data:`` URL); ``container`` to the content list that holds the image (where a marker
    goes); ``message_index`` is its message/item in the conversation; ``media_type`` and
    ``data`` (decoded bytes) as sent; ``detail`` the OpenAI detail value (None if absent);
    ``data_url`` whether ``path`` holds a whole ``data:`` URL; ``tool_name`` the tool whose
    result holds the image ("" in a user message, or when the call is not in the request).
    """

    path: tuple[Any, ...]
    container: tuple[Any, ...]
    message_index: int
    media_type: str
    data: bytes
    detail: str | None = None
    data_url: bool = False
    tool_name: str = ""
    #: the base64 string was URL-safe (``-``, ``_``): the resized image is written the same way
    urlsafe: bool = False


@dataclass(frozen=True)
class Offload:
    """An image original to keep: ``original`` (its ``data:`` URL) under ``key``."""

    key: str
    original: str


@dataclass(frozen=True)
class ImagesOutcome:
    """What the image step plans for one request: ``edits`` to splice, ``offloads`` to store,
    and one :class:`~headroom_core.compress.images.ImageResult` per image looked at."""

    edits: tuple[jsonedit.Replace | jsonedit.Append, ...] = ()
    offloads: tuple[Offload, ...] = ()
    results: tuple[images.ImageResult, ...] = field(default=())

    @property
    def changed(self) -> int:
        """How many images are sent changed."""
        return sum(1 for r in self.results if r.changed)


def image_sites(
    d: Dialect, body: dict[str, Any], live_from: int = 0, view: RequestView | None = None
) -> list[ImageSite]:
    """Every base64 image of the conversation from message ``live_from`` on (where each dialect
    keeps them: :mod:`headroom_core.wire.image_refs`); images given by URL or file id are skipped.
    ``view``: the request's :class:`~headroom_core.wire.request_view.RequestView` of ``body``
    when the caller has one (its tool calls, read over the whole history, are then read once)."""
    v = view if view is not None else view_of(d, body)
    seq, names = v.conversation, v.call_names
    out: list[ImageSite] = []
    for i in range(max(0, live_from), len(seq)):
        for ref in v.dialect.images(seq[i], v.path_of(i), i, names):
            site = _decoded(ref)
            if site is not None:
                out.append(site)
    return out


def _decoded(ref: ImageRef) -> ImageSite | None:
    """The :class:`ImageSite` of ``ref`` with its bytes decoded; None when it holds no inline
    image (a URL that is not ``data:``, bad base64)."""
    if ref.data_url:
        parsed = images.parse_data_url(ref.encoded)
        if parsed is None:
            return None
        return ImageSite(
            ref.path, ref.container, ref.message_index, parsed.media_type, parsed.data, ref.detail, True, ref.tool_name
        )
    raw = images.decode_base64(ref.encoded)
    urlsafe = raw is None and ref.media_type.startswith("image/")
    if urlsafe:  # some clients write bytes URL-safe (google-genai's inlineData)
        raw = images.decode_base64_urlsafe(ref.encoded)
    if raw is None:
        return None
    return ImageSite(
        ref.path, ref.container, ref.message_index, ref.media_type, raw, tool_name=ref.tool_name, urlsafe=urlsafe
    )


def plan_images(
    d: Dialect,
    body: dict[str, Any],
    live_from: int,
    max_tokens: int = 0,
    exclude_tools: tuple[str, ...] = (),
    view: RequestView | None = None,
) -> ImagesOutcome:
    """The edits for every base64 image of the live zone (module docstring). ``max_tokens`` > 0
    turns on the opt-in token target (estimated tokens per image); images in results of tools
    matching ``exclude_tools`` (globs, as for tool outputs) are left alone; ``view`` as for
    :func:`image_sites`. Deterministic: the same body gives the same edits. Never raises for a
    bad image (it is left as it is)."""
    model = str(body.get("model") or "")
    edits: list[jsonedit.Replace | jsonedit.Append] = []
    offloads: list[Offload] = []
    results: list[images.ImageResult] = []
    sizing = view_of(d, {}).dialect.image_sizing
    for site in image_sites(d, body, live_from, view):
        if site.tool_name and excluded(site.tool_name, exclude_tools):
            continue
        if sizing == "gemini":
            limit = images.GEMINI
            tokens = lambda w, h, lim=limit: images.gemini_tokens(w, h, lim)  # noqa: E731
        elif sizing == "anthropic":
            limit = images.anthropic_limit(model)
            tokens = lambda w, h, lim=limit: images.anthropic_tokens(w, h, lim)  # noqa: E731
        else:
            found = images.openai_limit(model, site.detail)
            if found is None:
                continue
            limit = found
            tokens = lambda w, h, lim=limit: images.openai_tokens(w, h, lim)  # noqa: E731
        r = images.shrink(site.data, limit, tokens, site.media_type or None, max_tokens)
        results.append(r)
        if not r.changed:
            continue
        encoded = images.encode_base64(r.data)
        if site.urlsafe:
            encoded = encoded.replace("+", "-").replace("/", "_")
        edits.append(
            jsonedit.Replace(site.path, f"data:{site.media_type};base64,{encoded}" if site.data_url else encoded)
        )
        if r.reduced:
            original = images.DataURL(site.media_type, site.data).text()
            key = offload_key(original)
            offloads.append(Offload(key, original))
            edits.append(jsonedit.Append(site.container, _marker_part(d, r, key)))
    return ImagesOutcome(tuple(edits), tuple(offloads), tuple(results))


def _marker_part(d: Dialect, r: images.ImageResult, key: str) -> dict[str, str]:
    (w0, h0), (w1, h1) = r.before, r.after
    what = f"full-size image {w0}x{h0} px ({r.bytes_before} bytes), sent at {w1}x{h1} px"
    return view_of(d, {}).text_part(make_marker(what, key))
