"""Compress an HTML tool output: reduce it to its readable text, then compress that like prose.

1. **Readable text** (:func:`readable_text`): the page is parsed with BeautifulSoup
   (``html.parser``); scripts, styles, ``<noscript>``, ``<template>``, ``<svg>``, ``<iframe>``,
   ``<canvas>``, ``<nav>``, forms' controls and comments are removed; when the page marks its
   main content (``<main>``, ``role="main"``, or a single ``<article>``) only that is kept,
   under the page's ``<title>``. The rest becomes Markdown with ``markdownify`` (ATX headings,
   ``-`` bullets, fenced code for ``<pre>``, tables as Markdown tables; layout tables that hold
   other tables are unwrapped; link targets and images are dropped, their text kept).
   Underscores and asterisks are not escaped, so identifiers stay as written.
2. **Long text**: when the readable text is at least ``min_tokens`` tokens, it is compressed
   extractively, query-aware (:func:`headroom_core.compress.text.extract`).

The output starts with one marker ``[headroom omitted html markup of a 52 KB page;
headroom_retrieve key=…]`` and every marker in it carries one key,
:func:`~headroom_core.compress.markers.offload_key` of the whole HTML; the result holds one
:class:`~headroom_core.compress.result.Offload` with the HTML byte for byte.

Unchanged results: ``"not html"`` (no element, or no readable text),
``"small"`` (under ``min_tokens`` tokens), ``"model loading"`` (the text step needs the
embedding model, see :mod:`headroom_core.compress.text`), ``"no gain"``. Deterministic.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

from bs4 import BeautifulSoup, Comment, Doctype, MarkupResemblesLocatorWarning, NavigableString
from markdownify import MarkdownConverter

from headroom_core.compress.markers import make_marker, offload_key
from headroom_core.compress.result import CompressResult, Offload
from headroom_core.compress.text import extract
from headroom_core.compress.tokens import TokenCounter

KIND = "html"

_DROP_TAGS = (
    "script",
    "style",
    "noscript",
    "template",
    "svg",
    "iframe",
    "canvas",
    "object",
    "embed",
    "nav",
    "button",
    "input",
    "select",
    "textarea",
    "link",
    "meta",
    "base",
)
_LOOKS_HTML = re.compile(r"<(?:!doctype\s+html|html|head|body|div|p|span|a|table|ul|ol|li|h[1-6]|pre|br)\b", re.I)


_BLOCKS = ("table", "dl", "p", "div", "pre", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote")


# The class as its methods are called here: markdownify's stub (__init__.pyi) lists none of the
# convert_* methods the class has.
_BASE: Any = MarkdownConverter


class _Converter(MarkdownConverter):
    """markdownify with identifiers left alone and layout tables unwrapped.

    A table is for layout (its cells become plain blocks) when it holds another table, or when
    it has no header cell and a cell holds block content (paragraphs, lists, ``<pre>``…).
    """

    def __init__(self, **options) -> None:
        super().__init__(**options)
        self._layout: dict[int, bool] = {}

    def _is_layout(self, table) -> bool:
        k = id(table)
        if k not in self._layout:
            self._layout[k] = table.find("table") is not None or (
                table.find("th") is None and any(td.find(_BLOCKS) is not None for td in table.find_all("td"))
            )
        return self._layout[k]

    def _in_layout(self, el) -> bool:
        table = el.find_parent("table")
        return table is not None and self._is_layout(table)

    def convert_table(self, el, text, parent_tags):
        if self._is_layout(el):
            return "\n\n" + text.strip("\n") + "\n\n"
        return _BASE.convert_table(self, el, text, parent_tags)

    def convert_tr(self, el, text, parent_tags):
        if self._in_layout(el):
            return "\n\n" + text.strip() + "\n\n" if text.strip() else ""
        return _BASE.convert_tr(self, el, text, parent_tags)

    def convert_td(self, el, text, parent_tags):
        if self._in_layout(el):
            return "\n\n" + text.strip() + "\n\n" if text.strip() else ""
        return _BASE.convert_td(self, el, text, parent_tags)

    convert_th = convert_td

    def convert_br(self, el, text, parent_tags):
        return "\n"  # a plain line break: the reader is a model, not a Markdown renderer


def _converter() -> _Converter:
    return _Converter(
        heading_style="ATX",
        bullets="-",
        escape_underscores=False,
        escape_asterisks=False,
        escape_misc=False,
        strip=["a", "img"],
        autolinks=False,
    )


def readable_text(html: str) -> str:
    """The readable text of the HTML page ``html`` as Markdown (see the module docstring);
    "" when it holds none."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MarkupResemblesLocatorWarning)
        soup = BeautifulSoup(html, "html.parser")
    for node in soup.find_all(string=lambda s: isinstance(s, (Comment, Doctype))):
        node.extract()
    for tag in soup.find_all(_DROP_TAGS):
        tag.decompose()
    for br in soup.find_all("br"):  # the source's own newline after <br> is not a second break
        nxt = br.next_sibling
        if isinstance(nxt, NavigableString) and not isinstance(nxt, Comment) and nxt.startswith(("\n", "\r\n")):
            nxt.replace_with(nxt.lstrip("\r\n"))
    title_tag = soup.find("title")
    title = " ".join(title_tag.get_text(" ").split()) if title_tag else ""
    if soup.head is not None:
        soup.head.decompose()
    main = soup.find("main") or soup.find(None, {"role": "main"})
    if main is None:
        articles = soup.find_all("article")
        main = articles[0] if len(articles) == 1 else None
    root = main if main is not None else (soup.body or soup)
    md = _converter().convert_soup(root)
    md = md.replace("\xa0", " ")
    md = re.sub(r"[ \t]+\n", "\n", md)
    md = re.sub(r"\n{3,}", "\n\n", md).strip()
    if title and title not in md[: len(title) + 200]:
        md = f"# {title}\n\n{md}" if md else f"# {title}"
    return md


def _size(n_bytes: int) -> str:
    return f"{n_bytes / 1024:.0f} KB" if n_bytes >= 1024 else f"{n_bytes} bytes"


def compress_html(
    text: str,
    query: str,
    counter: TokenCounter,
    *,
    min_tokens: int = 250,
    min_saving_ratio: float = 0.10,
    wait_for_model: bool = False,
) -> CompressResult:
    """Compress the HTML tool output ``text`` for the latest user query ``query``.

    Returns a marker naming the page followed by its readable text (strategy ``"readable"``),
    extractively compressed when long (strategy ``"readable+extract"``), with one offload
    holding ``text`` byte for byte; or the unchanged text with the reason (module docstring).
    Never raises on bad input.
    """
    if not isinstance(text, str) or not _LOOKS_HTML.search(text):
        return CompressResult.unchanged(text, KIND, "not html")
    size = len(text.encode("utf-8", "surrogatepass"))
    original = counter.count(text)
    if original < min_tokens:
        return CompressResult.unchanged(text, KIND, "small")
    try:
        md = readable_text(text)
    except (RecursionError, ValueError, AssertionError):  # pathological markup: leave it alone
        return CompressResult.unchanged(text, KIND, "not html")
    if not md:
        return CompressResult.unchanged(text, KIND, "not html")
    key = offload_key(text)
    strategy, detail = "readable", "readable text"
    if counter.count(md) >= min_tokens:
        got = extract(md, query or "", counter, key, wait_for_model=wait_for_model)
        if got is None:
            return CompressResult.unchanged(text, KIND, "model loading")
        if got.text != md:
            md, strategy, detail = got.text, "readable+extract", got.reason
    marker = make_marker(f"html markup of a {_size(size)} page", key)
    out = f"{marker}\n{md}"
    tokens = counter.count(out)
    if tokens > original * (1.0 - min_saving_ratio):
        return CompressResult.unchanged(text, KIND, "no gain")
    return CompressResult(
        text=out,
        changed=True,
        kind=KIND,
        strategy=strategy,
        reason=f"{detail} ({original}->{tokens} tokens)",
        offloads=(Offload(key=key, original=text, what=f"html markup of a {_size(size)} page"),),
    )
