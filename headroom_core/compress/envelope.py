"""An agent's envelope around a tool output: split it off the payload, and put it back.

Agents wrap what a tool printed in text of their own. Seen shapes (each recognised by its
structure, never by one release's wording):

* a **header block** of short ``Label: value`` and status lines ending in a payload introducer,
  a line that is only a label and a colon — Codex's exec envelope (``Chunk ID: …``, ``Wall
  time: …``, ``Process exited with code 0``, ``Original token count: …``, ``Output:``);
  Claude Code's persisted preview (``Output too large (…). Full output saved to: PATH``, a
  blank line, ``Preview (first 2KB):``);
* a **header of** ``Label: value`` **lines ended by a blank line**, inside another envelope's
  payload (Codex's ``Warning: truncated output (original token count: N)`` / ``Total output
  lines: M``), or anywhere when what follows is not prose (the router decides: :attr:`Envelope.weak`);
* a **wrapping tag**: the whole text is ``<name>`` … ``</name>`` on their own lines with a
  lowercase name of several words joined by hyphens or underscores (``<persisted-output>``,
  Gemini CLI's ``<untrusted_context>``);
* a **labelled payload**: ``Label: value`` lines whose last one's value runs on over several
  lines (the payload), then a trailer of ``Label: value`` lines at the end (Gemini CLI's shell
  output: ``Output: <stdout…>`` then ``Exit Code: 1`` / ``Process Group PGID: 42``);
* **trailing tag blocks**: ``<name>…</name>`` blocks with a hyphenated lowercase name at the end
  of the text, each starting a line (Claude Code's ``<system-reminder>``);
* a **JSON object envelope**: a small JSON object (at most :data:`MAX_JSON_MEMBERS` members) one
  string member of which holds most of the text (``{"output": "…", "metadata": {…}}``, as older
  Codex shell calls and Gemini CLI's ``functionResponse`` carry output);
* a **truncation line** (``...`` or ``…`` alone) closing a preview.

Inside the payload, :func:`find_cuts` finds the agent's own truncation markers: a number and a
truncation word between ellipses or brackets (Codex: ``…1234 tokens truncated…`` cut into the
middle of a line; ``[... 40 lines omitted ...]``; ``<truncated 12 lines>``).

The envelope (``head`` and ``tail`` of each layer, the whitespace around the payload included)
goes upstream byte for byte: ``Envelope.join(envelope.payload) == text`` always. All functions
are pure; nothing here compresses.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from json.decoder import JSONDecodeError

from headroom_core.compress.markers import MARKER_RE

#: At most this many lines in a header block (blank lines included).
MAX_HEADER_LINES = 12
#: A header line longer than this many characters ends the search: it is content, not a header.
MAX_HEADER_LINE = 300
#: A status line (a header line without ``Label: value``) is at most this long.
MAX_STATUS_LINE = 100
#: A JSON object envelope has at most this many members.
MAX_JSON_MEMBERS = 12
#: ... and its payload member holds at least this share of the text's characters.
JSON_PAYLOAD_SHARE = 0.5
#: Envelopes inside envelopes are followed this deep.
MAX_DEPTH = 4

# ``Label: value``: a capitalised label of up to 60 label characters (words, digits, spaces,
# parentheses, dots, slashes, dashes), a colon, a space, a value.
_KV_RX = re.compile(r"[A-Z][A-Za-z0-9 ()./_,'-]{0,60}: \S.*")
# a payload introducer: a label and a colon alone on its line
_INTRO_RX = re.compile(r"[A-Z][A-Za-z0-9 ()./_,'-]{0,60}:[ \t]*")
_TAG_NAME = r"[a-z][a-z0-9]*(?:[-_][a-z0-9]+)+"
_CLOSE_AT_END_RX = re.compile(r"</(%s)>[ \t\r\n]*\Z" % _TAG_NAME)
_OPEN_LINE_RX = re.compile(r"\A[ \t\r\n]*<(%s)>[ \t]*\r?\n" % _TAG_NAME)
_ELLIPSIS_LINE_RX = re.compile(r"(\r?\n)[ \t]*(?:\.\.\.|…|\[\.\.\.\])[ \t]*\Z")
_WORDS = r"truncated|omitted|elided|removed|skipped|hidden|dropped"
#: An agent's truncation marker inside a payload (module docstring).
CUT_RX = re.compile(
    r"(?:…|\.\.\.)\s*\d[\d,]*\s+(?:[A-Za-z]+\s+){0,2}(?:%(w)s)\s*(?:…|\.\.\.)"
    r"|\[\s*(?:…|\.\.\.)?\s*(?:\d[\d,]*\s+(?:[A-Za-z]+\s+){0,2}(?:%(w)s)|(?:%(w)s)\s+\d[\d,]*(?:\s+[A-Za-z]+){0,2})\s*(?:…|\.\.\.)?\s*\]"
    r"|<\s*(?:%(w)s)\s+\d[\d,]*(?:\s+[A-Za-z]+){0,2}\s*>" % {"w": _WORDS}
)


@dataclass(frozen=True)
class Layer:
    """One wrapping around the payload: ``head`` before it, ``tail`` after it, and how the inner
    text is written in between: ``"text"`` as it is, ``"json"`` as a JSON string literal (the
    member of a JSON object envelope; ``head`` ends at its opening quote's position)."""

    head: str
    tail: str
    encoding: str = "text"
    shape: str = ""


@dataclass(frozen=True)
class Cut:
    """An agent's truncation marker at ``payload[start:end]``."""

    start: int
    end: int


@dataclass(frozen=True)
class Envelope:
    """A tool output split into its envelope and its ``payload``.

    ``layers`` outermost first; ``cuts`` the agent's truncation markers in ``payload`` (in
    order); ``weak`` when the only structure found is a blank-line-ended ``Label: value`` header
    (the caller uses it only when the payload is not prose). ``shape`` names the parts found
    (``"header"``, ``"wrap:persisted-output"``, ``"trailing:system-reminder"``, ``"json:output"``,
    ``"ellipsis"``, joined by ``+``), for the stats."""

    layers: tuple[Layer, ...]
    payload: str
    cuts: tuple[Cut, ...] = ()
    weak: bool = False

    @property
    def shape(self) -> str:
        return "+".join(layer.shape for layer in self.layers if layer.shape)

    def join(self, payload: str) -> str:
        """``payload`` put back into the envelope: every layer's bytes as they were. For a JSON
        layer the inner text is written as a compact JSON string (non-ASCII kept, as agents
        write it); with the original payload the original bytes come back."""
        s = payload
        for layer in reversed(self.layers):
            if layer.encoding == "json":
                s = layer.head + json.dumps(s, ensure_ascii=False) + layer.tail
            else:
                s = layer.head + s + layer.tail
        return s


def _strip_edges(text: str) -> tuple[str, str, str]:
    """``(leading whitespace, body, trailing whitespace)``."""
    body = text.strip()
    if not body:
        return text, "", ""
    start = text.index(body[0])
    return text[:start], body, text[start + len(body) :]


def _trailing_blocks(text: str) -> tuple[str, str, list[str]]:
    """``(rest, tail, names)``: trailing tag blocks peeled off the end of ``text``; ``rest``
    keeps every byte before the first of them (its own trailing whitespace is the caller's)."""
    names: list[str] = []
    end = len(text)
    while True:
        m = _CLOSE_AT_END_RX.search(text, 0, end)
        if m is None:
            break
        name = m.group(1)
        opening = f"<{name}>"
        pos = text.rfind(opening, 0, m.start())
        while pos > 0 and text[pos - 1] != "\n":
            pos = text.rfind(opening, 0, pos)
        if pos <= 0 or not text[:pos].strip():
            break
        names.append(name)
        end = pos
    return text[:end], text[end:], names


def _wrapping(text: str) -> tuple[str, str, str, str] | None:
    """``(head, inner, tail, name)`` when ``text`` is one hyphenated tag around the rest."""
    m = _OPEN_LINE_RX.match(text)
    if m is None:
        return None
    name = m.group(1)
    close = _CLOSE_AT_END_RX.search(text)
    if close is None or close.group(1) != name or close.start() < m.end():
        return None
    inner = text[m.end() : close.start()]
    if f"<{name}>" in inner or f"</{name}>" in inner:
        return None  # nested or repeated blocks: not one wrapper
    if inner and not inner.endswith("\n"):
        return None
    return text[: m.end()], inner, text[close.start() :], name


def _is_header_line(line: str) -> tuple[bool, bool]:
    """``(usable, key_value)`` for one header line (without its line end)."""
    if len(line) > MAX_HEADER_LINE:
        return False, False
    if _KV_RX.fullmatch(line):
        return True, True
    s = line.strip()
    ok = (
        bool(s)
        and len(s) <= MAX_STATUS_LINE
        and s[0].isalpha()
        and s[-1] not in ".:;!?"
        and not s.startswith(("<", "{", "["))
    )
    return ok, False


def _header(text: str) -> tuple[str, str, bool] | None:
    """``(head, rest, weak)``: a header block at the start of ``text`` (module docstring) and
    the text after it; ``weak`` when it ends with a blank line instead of an introducer (every
    line before that blank line then a ``Label: value`` line)."""
    lines = text.split("\n", MAX_HEADER_LINES)
    kv = other = 0
    pos = 0
    at_blank: tuple[str, str, bool] | None = None
    for i in range(min(len(lines) - 1, MAX_HEADER_LINES)):
        raw = lines[i]
        line = raw.rstrip("\r")
        nxt = pos + len(raw) + 1
        if i > 0 and kv >= 1 and kv >= other and _INTRO_RX.fullmatch(line):
            return (text[:nxt], text[nxt:], False) if text[nxt:].strip() else None
        if not line.strip():
            if i == 0:
                return None
            if at_blank is None and other == 0:
                at_blank = (text[:nxt], text[nxt:], True)
            pos = nxt
            continue
        usable, is_kv = _is_header_line(line)
        if not usable:
            break
        kv += is_kv
        other += not is_kv
        pos = nxt
    return at_blank if at_blank is not None and at_blank[1].strip() else None


#: A labelled payload's trailer has at most this many lines, and its payload at least
#: :data:`MIN_LABELLED_LINES` lines.
MAX_TRAILER_LINES = 6
MIN_LABELLED_LINES = 3


def _labelled(text: str) -> tuple[str, str, str] | None:
    """``(head, payload, tail)`` of a labelled payload (module docstring): ``head`` ends after
    the label (and the space) of the line whose value starts the payload, ``tail`` starts at
    the line end before the trailer."""
    lines = text.split("\n")
    if len(lines) < MIN_LABELLED_LINES + 1:
        return None
    # the trailer: Label: value lines at the end, at least one
    n_tail = 0
    while (
        n_tail < min(MAX_TRAILER_LINES, len(lines) - 1)
        and _KV_RX.fullmatch(lines[-1 - n_tail].rstrip("\r"))
        and len(lines[-1 - n_tail]) <= MAX_STATUS_LINE
    ):
        n_tail += 1
    if n_tail == 0:
        return None
    pos = 0
    for i in range(min(MAX_HEADER_LINES, len(lines) - n_tail)):
        line = lines[i].rstrip("\r")
        if not _KV_RX.fullmatch(line) or len(line) > MAX_HEADER_LINE:
            return None
        nxt = lines[i + 1].rstrip("\r")
        if _KV_RX.fullmatch(nxt) and len(nxt) <= MAX_STATUS_LINE and i + 1 < len(lines) - n_tail:
            pos += len(lines[i]) + 1
            continue  # another header line
        if len(lines) - n_tail - i < MIN_LABELLED_LINES:
            return None
        start = pos + line.index(": ") + 2
        end = len(text) - sum(len(x) + 1 for x in lines[len(lines) - n_tail :])  # the line end before the trailer
        return (text[:start], text[start:end], text[end:]) if text[start:end].strip() else None
    return None


def _json_members(text: str) -> list[tuple[str, int, int, object]] | None:
    """The top-level members of the JSON object ``text`` as ``(name, value start, value end,
    value)``, or None when ``text`` is not one JSON object (or has too many members)."""
    dec = json.JSONDecoder()
    ws = " \t\r\n"
    i = 0
    n = len(text)
    while i < n and text[i] in ws:
        i += 1
    if i >= n or text[i] != "{":
        return None
    i += 1
    out: list[tuple[str, int, int, object]] = []
    try:
        while True:
            while i < n and text[i] in ws:
                i += 1
            if i < n and text[i] == "}" and not out:
                i += 1
                break
            if i >= n or text[i] != '"':
                return None
            name, i = dec.raw_decode(text, i)
            if not isinstance(name, str):
                return None
            while i < n and text[i] in ws:
                i += 1
            if i >= n or text[i] != ":":
                return None
            i += 1
            while i < n and text[i] in ws:
                i += 1
            value, end = dec.raw_decode(text, i)
            out.append((name, i, end, value))
            if len(out) > MAX_JSON_MEMBERS:
                return None
            i = end
            while i < n and text[i] in ws:
                i += 1
            if i < n and text[i] == ",":
                i += 1
                continue
            if i < n and text[i] == "}":
                i += 1
                break
            return None
    except (JSONDecodeError, RecursionError, ValueError):
        return None
    if text[i:].strip():
        return None
    if len({m[0] for m in out}) != len(out):
        return None  # duplicate names: which one a reader takes is not ours to guess
    return out


def _json_envelope(text: str) -> tuple[Layer, str] | None:
    """A JSON object envelope (module docstring): its layer and the payload string."""
    s = text.lstrip()
    if not s.startswith("{") or '"' not in s[:200]:
        return None
    members = _json_members(text)
    if not members:
        return None
    strings = [m for m in members if isinstance(m[3], str)]
    if not strings:
        return None
    name, start, end, value = max(strings, key=lambda m: m[2] - m[1])
    if end - start < JSON_PAYLOAD_SHARE * len(text):
        return None
    assert isinstance(value, str)
    if json.dumps(value, ensure_ascii=False) != text[start:end]:
        return None  # escapes written differently: the payload could not be put back byte for byte
    return Layer(text[:start], text[end:], "json", f"json:{name}"), value


def find_cuts(payload: str) -> tuple[Cut, ...]:
    """The agent's truncation markers in ``payload`` (:data:`CUT_RX`), never a headroom marker."""
    own = [(m.start(), m.end()) for m in MARKER_RE.finditer(payload)]
    return tuple(
        Cut(m.start(), m.end()) for m in CUT_RX.finditer(payload) if not any(a <= m.start() < b for a, b in own)
    )


def _layer(text: str, nested: bool) -> tuple[Layer, str, bool] | None:
    """The outermost layer of ``text`` and the text inside it, and whether it is weak."""
    rest, trailing, names = _trailing_blocks(text)
    lead, body, trail = _strip_edges(rest)
    if not body:
        return None
    shape_tail = "".join(f"+trailing:{n}" for n in reversed(names))
    wrap = _wrapping(body)
    if wrap is not None:
        head, inner, tail, name = wrap
        return Layer(lead + head, tail + trail + trailing, shape=f"wrap:{name}{shape_tail}"), inner, False
    hdr = _header(body)
    if hdr is not None and (not hdr[2] or nested):
        head, inner, weak = hdr
        return Layer(lead + head, trail + trailing, shape=f"header{shape_tail}"), inner, False
    js = _json_envelope(body)
    if js is not None:
        layer, inner = js
        return Layer(lead + layer.head, layer.tail + trail + trailing, "json", layer.shape + shape_tail), inner, False
    lab = _labelled(body)
    if lab is not None:
        head, inner, tail = lab
        return Layer(lead + head, tail + trail + trailing, shape=f"labelled{shape_tail}"), inner, False
    if hdr is not None:  # a blank-line-ended header at the top: only if the payload is not prose
        head, inner, _ = hdr
        return Layer(lead + head, trail + trailing, shape=f"header{shape_tail}"), inner, True
    ell = _ELLIPSIS_LINE_RX.search(body)
    if ell is not None and nested:
        return (
            Layer(lead, body[ell.start() :] + trail + trailing, shape=f"ellipsis{shape_tail}"),
            body[: ell.start()],
            False,
        )
    if names:
        return Layer(lead, trail + trailing, shape=shape_tail.lstrip("+")), body, False
    return None


def split_envelope(text: str) -> Envelope | None:
    """``text`` as an :class:`Envelope`, or None when no envelope structure is found.

    A text whose only envelope part is trailing tag blocks is an envelope too (``shape``
    ``"trailing:NAME"``); callers that already keep such blocks as sections may skip it
    (:func:`has_frame`). Never raises; ``split_envelope(t).join(split_envelope(t).payload) == t``.
    """
    if not isinstance(text, str) or not text.strip():
        return None
    layers: list[Layer] = []
    inner = text
    weak = False
    for depth in range(MAX_DEPTH):
        got = _layer(inner, nested=depth > 0)
        if got is None:
            break
        layer, inner, is_weak = got
        if depth == 0:
            weak = is_weak
        layers.append(layer)
        if layer.encoding == "text" and not inner.strip():
            break
    if not layers:
        return None
    # the payload's own edges are envelope too: compressors may trim whitespace
    lead, body, trail = _strip_edges(inner)
    if body and (lead or trail):
        layers.append(Layer(lead, trail))
        inner = body
    return Envelope(tuple(layers), inner, find_cuts(inner), weak)


def has_frame(env: Envelope) -> bool:
    """True when ``env`` has more than trailing tag blocks and whitespace: a header, a wrapping
    tag, a JSON member, a closing ellipsis line, or a truncation marker in the payload."""
    return bool(env.cuts) or any(layer.shape and not layer.shape.startswith("trailing:") for layer in env.layers)
