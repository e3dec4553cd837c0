"""The request step for images: find the base64 images of the live zone and plan their edits.

Where images sit, per dialect (the providers' request references):

- Anthropic Messages: ``image`` content blocks with a ``base64`` source, in user messages and
  inside ``tool_result`` content lists (``source.data``, ``source.media_type``).
- OpenAI Chat Completions: ``image_url`` content parts whose ``image_url.url`` is a base64
  ``data:`` URL (``image_url.detail``).
- OpenAI Responses: ``input_image`` parts (``image_url`` a ``data:`` URL, ``detail``) in
  message items and in ``function_call_output`` output lists.

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
from typing import Any, Iterator

from headroom_core.compress.markers import make_marker, offload_key
from headroom_core.compress import images
from headroom_core.compress.pipeline import excluded
from headroom_core.wire import jsonedit
from headroom_core.wire.detect import Dialect

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


def image_sites(d: Dialect, body: dict[str, Any], live_from: int = 0) -> list[ImageSite]:
    """Every base64 image of the conversation from message ``live_from`` on (see the module
    docstring for where each dialect keeps them); images given by URL or file id are skipped."""
    key = "input" if d is Dialect.OPENAI_RESPONSES else "messages"
    seq = body.get(key)
    if not isinstance(seq, list):
        return []
    names = _call_names(d, seq)
    out: list[ImageSite] = []
    for i in range(max(0, live_from), len(seq)):
        m = seq[i]
        if not isinstance(m, dict):
            continue
        if d is Dialect.ANTHROPIC_MESSAGES:
            out += _anthropic(m, (key, i, "content"), i, names)
        elif d is Dialect.OPENAI_CHAT:
            if m.get("role") == "user":
                out += _openai_parts(m.get("content"), (key, i, "content"), i, "image_url")
        else:
            if m.get("type") in ("function_call_output", "custom_tool_call_output"):
                out += _openai_parts(m.get("output"), (key, i, "output"), i, "input_image", names.get(str(m.get("call_id", "")), ""))
            elif m.get("role") == "user":
                out += _openai_parts(m.get("content"), (key, i, "content"), i, "input_image")
    return out


def _call_names(d: Dialect, seq: list[Any]) -> dict[str, str]:
    """Tool call id -> tool name over the whole conversation (Anthropic ``tool_use`` blocks,
    Responses ``function_call`` items)."""
    names: dict[str, str] = {}
    for m in seq:
        if not isinstance(m, dict):
            continue
        if d is Dialect.OPENAI_RESPONSES and m.get("type") in ("function_call", "custom_tool_call"):
            names[str(m.get("call_id", ""))] = str(m.get("name", ""))
        elif d is Dialect.ANTHROPIC_MESSAGES and isinstance(m.get("content"), list):
            for b in m["content"]:
                if isinstance(b, dict) and b.get("type") == "tool_use":
                    names[str(b.get("id", ""))] = str(b.get("name", ""))
    return names


def _anthropic_image(b: Any, path: tuple[Any, ...], container: tuple[Any, ...], i: int, tool_name: str = "") -> ImageSite | None:
    if not isinstance(b, dict) or b.get("type") != "image":
        return None
    src = b.get("source")
    if not isinstance(src, dict) or src.get("type") != "base64" or not isinstance(src.get("data"), str):
        return None
    raw = images.decode_base64(src["data"])
    if raw is None:
        return None
    return ImageSite(path + ("source", "data"), container, i, str(src.get("media_type") or ""), raw, tool_name=tool_name)


def _anthropic(m: dict[str, Any], container: tuple[Any, ...], i: int, names: dict[str, str]) -> Iterator[ImageSite]:
    content = m.get("content")
    if m.get("role") != "user" or not isinstance(content, list):
        return
    for j, b in enumerate(content):
        site = _anthropic_image(b, container + (j,), container, i)
        if site is not None:
            yield site
        elif isinstance(b, dict) and b.get("type") == "tool_result" and isinstance(b.get("content"), list):
            inner = container + (j, "content")
            name = names.get(str(b.get("tool_use_id", "")), "")
            for k, sub in enumerate(b["content"]):
                site = _anthropic_image(sub, inner + (k,), inner, i, name)
                if site is not None:
                    yield site


def _openai_parts(parts: Any, container: tuple[Any, ...], i: int, part_type: str, tool_name: str = "") -> Iterator[ImageSite]:
    if not isinstance(parts, list):
        return
    for j, p in enumerate(parts):
        if not isinstance(p, dict) or p.get("type") != part_type:
            continue
        if part_type == "image_url":  # Chat: {"type": "image_url", "image_url": {"url", "detail"}}
            holder = p.get("image_url")
            if not isinstance(holder, dict):
                continue
            url, detail, path = holder.get("url"), holder.get("detail"), container + (j, "image_url", "url")
        else:  # Responses: {"type": "input_image", "image_url": "data:…", "detail"}
            url, detail, path = p.get("image_url"), p.get("detail"), container + (j, "image_url")
        parsed = images.parse_data_url(url) if isinstance(url, str) else None
        if parsed is None:
            continue
        yield ImageSite(path, container, i, parsed.media_type, parsed.data, detail if isinstance(detail, str) else None, True, tool_name)


def plan_images(d: Dialect, body: dict[str, Any], live_from: int, max_tokens: int = 0, exclude_tools: tuple[str, ...] = ()) -> ImagesOutcome:
    """The edits for every base64 image of the live zone (module docstring). ``max_tokens`` > 0
    turns on the opt-in token target (estimated tokens per image); images in results of tools
    matching ``exclude_tools`` (globs, as for tool outputs) are left alone. Deterministic: the
    same body gives the same edits. Never raises for a bad image (it is left as it is)."""
    model = str(body.get("model") or "")
    edits: list[jsonedit.Replace | jsonedit.Append] = []
    offloads: list[Offload] = []
    results: list[images.ImageResult] = []
    for site in image_sites(d, body, live_from):
        if site.tool_name and excluded(site.tool_name, exclude_tools):
            continue
        if d is Dialect.ANTHROPIC_MESSAGES:
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
        edits.append(jsonedit.Replace(site.path, f"data:{site.media_type};base64,{encoded}" if site.data_url else encoded))
        if r.reduced:
            original = images.DataURL(site.media_type, site.data).text()
            key = offload_key(original)
            offloads.append(Offload(key, original))
            edits.append(jsonedit.Append(site.container, _marker_part(d, r, key)))
    return ImagesOutcome(tuple(edits), tuple(offloads), tuple(results))


def _marker_part(d: Dialect, r: images.ImageResult, key: str) -> dict[str, str]:
    (w0, h0), (w1, h1) = r.before, r.after
    what = f"full-size image {w0}x{h0} px ({r.bytes_before} bytes), sent at {w1}x{h1} px"
    text = make_marker(what, key)
    return {"type": "input_text" if d is Dialect.OPENAI_RESPONSES else "text", "text": text}
