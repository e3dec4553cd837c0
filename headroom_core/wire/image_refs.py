"""Where each dialect keeps images in a request (the providers' request references):

- Anthropic Messages: ``image`` content blocks with a ``base64`` source, in user messages and
  inside ``tool_result`` content lists (``source.data``, ``source.media_type``).
- OpenAI Chat Completions: ``image_url`` content parts whose ``image_url.url`` is a ``data:``
  URL (``image_url.detail``), in user messages.
- OpenAI Responses: ``input_image`` parts (``image_url`` a ``data:`` URL, ``detail``) in user
  message items and in ``function_call_output`` output lists.

- Gemini (API, Vertex AI, Code Assist): ``inlineData`` parts ``{mimeType: "image/…", data:
  <base64>}`` in user contents and in a ``functionResponse``'s own ``parts`` (Gemini 3's
  multimodal function responses); other media types (PDF, audio, video) are not images.

Only places are found here (no decoding): :mod:`headroom_core.compress.images_step` decodes and
decides. Images given by URL or file id are skipped by the decoder (they are not ``data:`` URLs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

Path = tuple[Any, ...]


@dataclass(frozen=True)
class ImageRef:
    """One inline image: ``path`` to the JSON string holding it (a base64 string when
    ``data_url`` is False, else a ``data:`` URL), ``container`` the content list holding the
    image (where a text part may be appended), ``message_index`` its conversation element,
    ``encoded`` the string itself, ``media_type`` as the body states it beside a base64 string
    (``""`` for a URL), ``detail`` the OpenAI detail value, ``tool_name`` the tool whose result
    holds it (``""`` in a user message)."""

    path: Path
    container: Path
    message_index: int
    encoded: str
    media_type: str = ""
    detail: str | None = None
    data_url: bool = False
    tool_name: str = ""


def _anthropic_image(b: Any, path: Path, container: Path, i: int, tool_name: str = "") -> ImageRef | None:
    if not isinstance(b, dict) or b.get("type") != "image":
        return None
    src = b.get("source")
    if not isinstance(src, dict) or src.get("type") != "base64" or not isinstance(src.get("data"), str):
        return None
    return ImageRef(
        path + ("source", "data"), container, i, src["data"], str(src.get("media_type") or ""), tool_name=tool_name
    )


def anthropic_images(item: Any, at: Path, i: int, names: dict[str, str]) -> Iterator[ImageRef]:
    """The base64 images of Anthropic message ``item`` at path ``at`` (user messages only)."""
    if not isinstance(item, dict):
        return
    content = item.get("content")
    if item.get("role") != "user" or not isinstance(content, list):
        return
    container = at + ("content",)
    for j, b in enumerate(content):
        ref = _anthropic_image(b, container + (j,), container, i)
        if ref is not None:
            yield ref
        elif isinstance(b, dict) and b.get("type") == "tool_result" and isinstance(b.get("content"), list):
            inner = container + (j, "content")
            name = names.get(str(b.get("tool_use_id", "")), "")
            for k, sub in enumerate(b["content"]):
                ref = _anthropic_image(sub, inner + (k,), inner, i, name)
                if ref is not None:
                    yield ref


def _openai_parts(parts: Any, container: Path, i: int, part_type: str, tool_name: str = "") -> Iterator[ImageRef]:
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
        if isinstance(url, str):
            yield ImageRef(path, container, i, url, "", detail if isinstance(detail, str) else None, True, tool_name)


def chat_images(item: Any, at: Path, i: int, names: dict[str, str]) -> Iterator[ImageRef]:
    """The ``image_url`` parts of Chat Completions message ``item`` (user messages only)."""
    if isinstance(item, dict) and item.get("role") == "user":
        yield from _openai_parts(item.get("content"), at + ("content",), i, "image_url")


def responses_images(item: Any, at: Path, i: int, names: dict[str, str]) -> Iterator[ImageRef]:
    """The ``input_image`` parts of Responses item ``item`` (tool outputs and user messages)."""
    if not isinstance(item, dict):
        return
    if item.get("type") in ("function_call_output", "custom_tool_call_output"):
        yield from _openai_parts(
            item.get("output"), at + ("output",), i, "input_image", names.get(str(item.get("call_id", "")), "")
        )
    elif item.get("role") == "user":
        yield from _openai_parts(item.get("content"), at + ("content",), i, "input_image")


def _gemini_parts(parts: Any, container: Path, i: int, tool_name: str = "") -> Iterator[ImageRef]:
    if not isinstance(parts, list):
        return
    for j, p in enumerate(parts):
        blob = p.get("inlineData") if isinstance(p, dict) else None
        if not isinstance(blob, dict) or not isinstance(blob.get("data"), str):
            continue
        mime = str(blob.get("mimeType") or "")
        if mime.lower().startswith("image/"):
            yield ImageRef(container + (j, "inlineData", "data"), container, i, blob["data"], mime, tool_name=tool_name)


def gemini_images(item: Any, at: Path, i: int, names: dict[str, str]) -> Iterator[ImageRef]:
    """The ``inlineData`` images of Gemini content ``item`` (user contents: its parts and the
    parts inside its function responses)."""
    if not isinstance(item, dict) or item.get("role", "user") != "user":
        return
    container = at + ("parts",)
    yield from _gemini_parts(item.get("parts"), container, i)
    for j, p in enumerate(item.get("parts") or []):
        fr = p.get("functionResponse") if isinstance(p, dict) else None
        if isinstance(fr, dict):
            yield from _gemini_parts(
                fr.get("parts"), container + (j, "functionResponse", "parts"), i, str(fr.get("name", ""))
            )
