"""The content router: which kind of content a tool output is, and which compressor gets it.

Kinds (:class:`Kind` ``name``): ``json``, ``code`` (with its ``language``), ``log``, ``test``
(test and build output), ``search`` (``path:line:`` hits and path lists), ``diff`` (unified
diff), ``html``, ``text``. :func:`classify` decides from the text itself, helped by a
:class:`Hint` (the tool name, the file a read showed, the shell command that printed it, or a
kind forced by the user). Mixed outputs are split by :func:`~headroom_core.compress.sections.split_sections`
and each section is routed on its own.

Wrong guesses are harmless: every compressor returns its input unchanged when it cannot handle
it, and the router keeps the original unless the result is at least ``min_saving_ratio``
smaller. Everything dropped is retrievable: a result holds one
:class:`~headroom_core.compress.result.Offload` with the whole original under
``offload_key(original)``, and every marker in the result names that key. Decisions are
deterministic (same text and hint, same bytes); the pipeline caches them by content hash.

Every kind is one entry of :data:`COMPRESSORS`: its name, its compressor, where repeated lines
are folded, and the detection rules that name it with their place in the detection order. Adding
a kind is one module and one entry (docs/extending.md: "A content kind").
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Callable, Literal

from headroom_core.compress.code import compress_code, guess_language, language_for_path, parses
from headroom_core.compress.diff import compress_diff, looks_like_diff
from headroom_core.compress.envelope import Envelope, has_frame, split_envelope
from headroom_core.compress.enveloped import compress_enveloped
from headroom_core.compress.gain import finish
from headroom_core.compress.json_crush import compress_json
from headroom_core.compress.json_cut import head_records
from headroom_core.compress.logshape import log_share
from headroom_core.compress.markers import offload_key
from headroom_core.compress.numbered import split_numbered
from headroom_core.compress.repeats import fold_text
from headroom_core.compress.result import CompressResult
from headroom_core.compress.search import compress_search, looks_like_hits, looks_like_paths
from headroom_core.compress.sections import Section, split_sections
from headroom_core.compress.testout import build_step_share, compress_test_output, test_signs
from headroom_core.compress.tokens import TokenCounter

# A section of a mixed output smaller than this is left as it is.
SECTION_MIN_TOKENS = 100
SAMPLE_LINES = 400


@dataclass(frozen=True)
class Kind:
    """A content kind: ``name`` one of :data:`KINDS` (or a kind a hint forces); ``language``
    for code (``"python"``, …); ``numbered`` when every line carries a line-number prefix (a
    file read)."""

    name: str
    language: str = ""
    numbered: bool = False

    def __str__(self) -> str:
        return f"{self.name}({self.language})" if self.language else self.name


@dataclass(frozen=True)
class Hint:
    """What is known about a tool output besides its text: the ``tool_name``, the file ``path`` it
    shows (a read's ``file_path``), the shell ``command`` that printed it, and a ``kind`` to use
    without guessing (``headroom compress --kind``)."""

    tool_name: str = ""
    path: str = ""
    command: str = ""
    kind: str = ""


_SEARCH_TOOLS = frozenset(
    {"Grep", "Glob", "grep", "search", "search_files", "find_file", "search_dir", "search_file", "glob", "LS"}
)
_CMD_KINDS = (
    (re.compile(r"^\s*(git\s+(diff|show|log\s+-p|format-patch|stash\s+show\s+-p)|diff\s+-\w*u|svn\s+diff|hg\s+diff)\b"), "diff"),
    (re.compile(r"^\s*(rg|grep|egrep|ag|ack|git\s+grep|find|fd|locate)\b"), "search"),
    (re.compile(r"(^|\s|/)(pytest|py\.test|tox|nox|jest|vitest|mocha|go\s+(test|build|vet)|cargo\s+(test|build|check|clippy)|"
                r"mvn|gradle|gradlew|npm\s+(test|run|install|ci|i|exec|create)\b|pnpm\s+(test|install|run|i|add|dlx)\b|yarn\b|npx\b|pip3?\s+install|"
                r"make\b|ctest|python3?\s+-m\s+(pytest|unittest))"), "test"),
)  # fmt: skip
_PATH_IN_TEXT = re.compile(r"(?:^\[File: |^The file )(\S+\.\w+)", re.M)

_TAG_RX = re.compile(r"</?[a-zA-Z][\w-]*(\s[^<>]*)?/?>")


def hint_for(tool_name: str = "", hint: "Hint | str | None" = None) -> Hint:
    """A :class:`Hint` from the router's arguments: ``hint`` may be a Hint, a kind name, or None."""
    if isinstance(hint, Hint):
        return hint if hint.tool_name or not tool_name else Hint(tool_name, hint.path, hint.command, hint.kind)
    if isinstance(hint, str) and hint in KINDS:
        return Hint(tool_name=tool_name, kind=hint)
    return Hint(tool_name=tool_name)


def _preferred(h: Hint) -> str:
    if h.tool_name in _SEARCH_TOOLS:
        return "search"
    for rx, kind in _CMD_KINDS:
        if h.command and rx.search(h.command):
            return kind
    return ""


def _sample(text: str) -> list[str]:
    return text.split("\n", SAMPLE_LINES)[:SAMPLE_LINES]


def _is_json(text: str) -> bool:
    s = text.strip()
    if s[:1] not in ("{", "[") or s[-1:] not in ("}", "]"):
        return False
    try:
        json.loads(s)
    except (ValueError, RecursionError):
        return False
    return True


def _log_share(lines: list[str]) -> float:
    """The share of ``lines`` that are lines of one log, judged by their structure
    (:func:`~headroom_core.compress.logshape.log_share`: a dominant header shape)."""
    return log_share(lines)


def _html_strict(text: str) -> bool:
    head = text.lstrip()[:300].lower()
    return (
        head.startswith("<!doctype html")
        or head.startswith("<html")
        or ("<html" in head and "<head" in text[:3000].lower())
    )


def _html_loose(lines: list[str]) -> bool:
    sample = [ln.strip() for ln in lines if ln.strip()]
    if len(sample) < 5:
        return False
    tagged = sum(1 for ln in sample if _TAG_RX.search(ln))
    return tagged >= 0.6 * len(sample) and any("</" in ln for ln in sample)


class Sample:
    """What the detection rules look at: the ``text``, its first :data:`SAMPLE_LINES` ``lines``,
    the :class:`Hint` and what follows from them, each computed once, when a rule first asks."""

    def __init__(self, text: str, hint: Hint, lang_from_path: str | None) -> None:
        self.text = text
        self.hint = hint
        self.lang_from_path = lang_from_path
        self.lines = _sample(text)

    @cached_property
    def preferred(self) -> str:
        """The kind the tool name or shell command suggests ("" for none)."""
        return _preferred(self.hint)

    @cached_property
    def log_share(self) -> float:
        return _log_share(self.lines)

    @cached_property
    def test_signs(self) -> int:
        return test_signs(self.lines)

    @cached_property
    def build_steps(self) -> float:
        return build_step_share(self.lines)

    @cached_property
    def hits_or_paths(self) -> bool:
        return looks_like_hits(self.lines) or looks_like_paths(self.lines)


#: A detection rule: the kind it finds in a sample (a :class:`Kind` of its entry's name), or None.
Detect = Callable[[Sample], "Kind | None"]
#: A compressor: ``(text, query, counter, *, min_tokens, min_saving_ratio)`` -> result (code also
#: takes ``language``); returns the text unchanged when it cannot handle it.
Compress = Callable[..., CompressResult]


@dataclass(frozen=True)
class Compressor:
    """One content kind in the router: ``name`` (the kind), ``compress`` its compressor,
    ``fold`` where runs of repeated lines are folded (:mod:`~headroom_core.compress.repeats`):
    ``"before"`` the compressor (its ranker then sees each repeated passage once), ``"after"``
    it (on its output, or the text when it keeps it; logs fold inside their compressor), or
    ``"never"`` (JSON: folding lines would break the JSON the model reads); ``detect``:
    ``(place, rule)`` pairs, each rule tried at its place in the detection order (lower first,
    across all kinds; see :func:`classify`)."""

    name: str
    compress: Compress
    fold: Literal["before", "after", "never"]
    detect: tuple[tuple[int, Detect], ...]


# The log, prose and HTML compressors are imported on first use: together they take about 0.7 s
# to import (BeautifulSoup with soupsieve, drain3, …), which every `headroom` command would
# otherwise pay at start.
def compress_logs(text: str, query: str, counter: TokenCounter, **kw) -> CompressResult:
    """:func:`headroom_core.compress.logs.compress_logs`."""
    from headroom_core.compress import logs

    return logs.compress_logs(text, query, counter, **kw)


def compress_prose(text: str, query: str, counter: TokenCounter, **kw) -> CompressResult:
    """:func:`headroom_core.compress.text.compress_prose`."""
    from headroom_core.compress import text as prose

    return prose.compress_prose(text, query, counter, **kw)


def compress_html(text: str, query: str, counter: TokenCounter, **kw) -> CompressResult:
    """:func:`headroom_core.compress.html.compress_html`."""
    from headroom_core.compress import html

    return html.compress_html(text, query, counter, **kw)


def _is(name: str, found: object) -> Kind | None:
    return Kind(name) if found else None


def _code_by_path(s: Sample) -> Kind | None:
    lang = s.lang_from_path
    return Kind("code", lang) if lang and parses(s.text, lang) else None


def _code_by_look(s: Sample) -> Kind | None:
    lang = guess_language(s.text)
    return Kind("code", lang) if lang else None


#: Every content kind. Detection (after a forced kind, empty text and line-numbered file text):
#: the rule with the lowest place that finds a kind wins; none: ``text``.
COMPRESSORS: tuple[Compressor, ...] = (
    Compressor("json", compress_json, "never", ((10, lambda s: _is("json", _is_json(s.text))),)),
    Compressor("code", compress_code, "after", ((40, _code_by_path), (110, _code_by_look))),
    Compressor("log", compress_logs, "after", ((70, lambda s: _is("log", s.log_share >= 0.6)),
                                                (100, lambda s: _is("log", s.log_share >= 0.4)))),
    Compressor("test", compress_test_output, "after", ((60, lambda s: _is("test", s.preferred == "test" and s.test_signs >= 1)),
                                                       (75, lambda s: _is("test", s.build_steps >= 0.5)),
                                                       (80, lambda s: _is("test", s.test_signs >= 2)))),
    Compressor("search", compress_search, "after", ((50, lambda s: _is("search", s.preferred == "search" and s.hits_or_paths)),
                                                    (90, lambda s: _is("search", s.hits_or_paths)))),
    Compressor("diff", compress_diff, "after", ((20, lambda s: _is("diff", looks_like_diff(s.lines))),)),
    Compressor("html", compress_html, "after", ((30, lambda s: _is("html", _html_strict(s.text))),
                                                (120, lambda s: _is("html", _html_loose(s.lines))))),
    Compressor("text", compress_prose, "before", ()),
)  # fmt: skip

#: The kind names, in registry order.
KINDS = tuple(c.name for c in COMPRESSORS)
_BY_NAME = {c.name: c for c in COMPRESSORS}
#: Every detection rule in detection order.
_RULES: tuple[Detect, ...] = tuple(
    rule for _, rule in sorted(((place, rule) for c in COMPRESSORS for place, rule in c.detect), key=lambda pr: pr[0])
)


def classify(text: str, hint: Hint | None = None, *, envelope: bool = True) -> Kind:
    """The content kind of ``text`` (see module docstring), helped by ``hint``.

    Order: a forced ``hint.kind``; line-numbered file text (code when its language is known
    from ``hint.path`` or recognised, else text); then the detection rules of
    :data:`COMPRESSORS` by place: JSON (10); unified diff (20); an HTML document (30); code in
    the language ``hint.path`` names (40); search hits or path lists (50) or test/build output
    (60, one sign) when the tool or command suggests them; log lines (70: most lines start
    with a timestamp or level); build output (75: at least half the lines are build steps, e.g.
    ``[ 12/400] CC src/x.c -o x.o``); test/build output (80: two or more signs); search hits or path
    lists (90); log lines (100: at least 40 %); code in a recognised language (110); HTML
    fragments (120); else text. A tool output inside an agent's envelope (:func:`enveloped`)
    has the kind of its payload (cut JSON: ``json``); ``envelope=False`` classifies the text
    as it is.
    """
    h = hint or Hint()
    path = h.path or _path_in(text)
    lang_from_path = language_for_path(path) if path else None
    if h.kind:
        if h.kind == "code":
            num = split_numbered(text)
            return Kind("code", lang_from_path or guess_language(num.code if num else text) or "", num is not None)
        return Kind(h.kind)
    if not text.strip():
        return Kind("text")
    env = enveloped(text, h) if envelope else None
    if env is not None:
        return _payload_kind(env, h)
    num = split_numbered(text)
    if num is not None:
        code = num.code
        lang = lang_from_path or guess_language(code)
        return Kind("code", lang, True) if lang else Kind("text", numbered=True)
    sample = Sample(text, h, lang_from_path)
    for rule in _RULES:
        kind = rule(sample)
        if kind is not None:
            return kind
    return Kind("text")


def enveloped(text: str, hint: Hint | None = None) -> Envelope | None:
    """The agent's envelope around ``text`` when the router compresses its payload instead of the
    whole (:mod:`~headroom_core.compress.envelope`): a header, a wrapping tag, a JSON member or
    a truncation marker (trailing tag blocks alone are sections: :func:`split_sections`); a
    blank-line-ended header at the top only when the payload is not prose. None otherwise."""
    env = split_envelope(text)
    if env is None or not has_frame(env):
        return None
    if env.weak and classify(env.payload, hint, envelope=False).name == "text":
        return None
    return env


def _payload_kind(env: Envelope, hint: Hint) -> Kind:
    first = env.payload[: env.cuts[0].start] if env.cuts else env.payload
    if head_records(first) is not None:
        return Kind("json")
    return classify(first, hint, envelope=False)


def _path_in(text: str) -> str:
    m = _PATH_IN_TEXT.search(text[:2000])
    return m.group(1) if m else ""


def compressor_for(kind: str) -> Compress | None:
    """The compressor function of ``kind`` (see :class:`Compressor`), or None for a name that
    is no kind of :data:`COMPRESSORS`."""
    entry = _BY_NAME.get(kind)
    return entry.compress if entry is not None else None


def _fold(kind: str) -> str:
    entry = _BY_NAME.get(kind)
    return entry.fold if entry is not None else "never"


def _route(
    text: str, kind: Kind, query: str, counter: TokenCounter, min_tokens: int, min_saving_ratio: float
) -> CompressResult:
    """Compress ``text`` as ``kind``, with runs of repeated lines folded where the kind allows
    (:attr:`Compressor.fold`): one offload holds ``text``, every marker names its key."""
    fold = _fold(kind.name)
    if fold == "before" and not kind.numbered:
        return _fold_then_route(text, kind, query, counter, min_tokens, min_saving_ratio)
    res = _route_kind(text, kind, query, counter, min_tokens, min_saving_ratio)
    if fold != "after" or (kind.name == "log" and res.changed):
        return res
    key = offload_key(text)
    folded = fold_text(res.text, key)
    if folded is None:
        return res
    why = f"{folded.lines_folded} repeated lines folded" + (f"; {res.reason}" if res.changed else "")
    strategy = f"{res.strategy}+fold" if res.changed else "fold"
    out = finish(text, folded.text, counter, kind=res.kind, strategy=strategy, reason=why[:300],
                 what=f"{folded.lines_folded} repeated lines", min_saving_ratio=min_saving_ratio)  # fmt: skip
    return out if out.changed else res


def _fold_then_route(
    text: str, kind: Kind, query: str, counter: TokenCounter, min_tokens: int, min_saving_ratio: float
) -> CompressResult:
    key = offload_key(text)
    folded = fold_text(text, key)
    if folded is None:
        return _route_kind(text, kind, query, counter, min_tokens, min_saving_ratio)
    res = _route_kind(folded.text, kind, query, counter, min_tokens, min_saving_ratio)
    if not res.changed and res.reason == "model loading":
        return CompressResult.unchanged(text, kind.name, res.reason)  # no decision yet: same answer later
    why = f"{folded.lines_folded} repeated lines folded"
    if res.changed:
        body = res.text.replace(f"key={offload_key(folded.text)}]", f"key={key}]")
        why, strategy = f"{why}; {res.reason}", f"fold+{res.strategy}"
    else:
        body, strategy = folded.text, "fold"
    return finish(text, body, counter, kind=res.kind, strategy=strategy, reason=why[:300],
                  what=f"{folded.lines_folded} repeated lines and more", min_saving_ratio=min_saving_ratio)  # fmt: skip


def _route_kind(
    text: str, kind: Kind, query: str, counter: TokenCounter, min_tokens: int, min_saving_ratio: float
) -> CompressResult:
    if kind.numbered and kind.name != "code":
        return CompressResult.unchanged(text, kind.name, "numbered file text that is not code: kept as read")
    fn = compressor_for(kind.name)
    if fn is None:
        return CompressResult.unchanged(text, kind.name, f"no compressor for {kind.name} yet")
    if kind.name == "code":
        if not kind.language:
            return CompressResult.unchanged(text, "code", "language not recognised")
        return fn(
            text, query, counter, min_tokens=min_tokens, min_saving_ratio=min_saving_ratio, language=kind.language
        )
    try:
        return fn(text, query, counter, min_tokens=min_tokens, min_saving_ratio=min_saving_ratio)
    except Exception as e:  # noqa: BLE001 - a compressor's bug must not lose the output
        return CompressResult.unchanged(text, kind.name, f"{kind.name} compressor failed: {type(e).__name__}")


def with_text_path(text: str, hint: Hint) -> Hint:
    """``hint`` with ``path`` taken from the text itself when it has none: the file a SWE-agent
    window (``[File: PATH (N lines total)]``) or a Claude Code edit result (``The file PATH has
    been updated``) shows."""
    if hint.path:
        return hint
    found = _path_in(text)
    return Hint(hint.tool_name, found, hint.command, hint.kind) if found else hint


def route_sections(text: str, hint: Hint | None = None) -> list[tuple[Section, Kind | None]]:
    """How :func:`compress_text` sees ``text``: its sections, each with the kind it is routed
    as (None for verbatim sections: wrapper tags, reminders, blank lines)."""
    h = with_text_path(text, hint or Hint())
    return [(s, None if s.verbatim else classify(s.text, h)) for s in split_sections(text)]


def compress_text(
    text: str,
    query: str,
    counter: TokenCounter,
    *,
    min_tokens: int,
    min_saving_ratio: float,
    tool_name: str = "",
    hint: Hint | str | None = None,
    lossless: bool = False,
) -> CompressResult:
    """Route ``text`` to the compressor of its kind; ``query`` is the latest user message.

    ``lossless``: only transforms that drop nothing (JSON re-encoding) apply; everything else is
    left as it is (used when the model cannot call ``headroom_retrieve``).

    ``tool_name`` and ``hint`` (a :class:`Hint` or a kind name) help :func:`classify`. A mixed
    output is split into sections, each routed on its own (sections under
    :data:`SECTION_MIN_TOKENS` tokens, wrapper tags and reminders stay); then the markers of
    every section name the whole text's key and the result holds one offload with ``text``.
    Never raises on bad input: an unexpected failure leaves the text unchanged with the reason.
    """
    h = with_text_path(text, hint_for(tool_name, hint))
    env = enveloped(text, h) if not h.kind else None
    if env is not None:
        return compress_enveloped(
            text,
            env,
            lambda t, mt: _compress_plain(t, h, query, counter, mt, min_saving_ratio),
            query,
            counter,
            min_tokens=min(min_tokens, SECTION_MIN_TOKENS),
            min_saving_ratio=min_saving_ratio,
            lossless=lossless,
        )
    if lossless:
        kind = classify(text, h)
        if kind.name != "json":
            return CompressResult.unchanged(text, kind.name, "lossless only: the model cannot call headroom_retrieve")
        return compress_json(
            text, query, counter, min_tokens=min_tokens, min_saving_ratio=min_saving_ratio, lossless=True
        )
    return _compress_plain(text, h, query, counter, min_tokens, min_saving_ratio)


def _compress_plain(
    text: str, h: Hint, query: str, counter: TokenCounter, min_tokens: int, min_saving_ratio: float
) -> CompressResult:
    """:func:`compress_text` of a text without an envelope: sections, or the text as one kind."""
    try:
        sections = split_sections(text) if not h.kind else []
        if len(sections) <= 1:
            return _route(text, classify(text, h, envelope=False), query, counter, min_tokens, min_saving_ratio)
        return _sections(text, sections, h, query, counter, min_tokens, min_saving_ratio)
    except (RecursionError, ValueError, UnicodeError) as e:
        return CompressResult.unchanged(text, "text", f"router failed: {type(e).__name__}")


def _keep_edges(original: str, new: str) -> str:
    """``new`` with ``original``'s leading and trailing whitespace: a compressor may trim it, and
    it separates a section from the next (the blank line before a ``<system-reminder>``)."""
    body = original.strip()
    if not body:
        return new
    lead = original[: original.index(body[0])]
    trail = original[len(lead) + len(body) :]
    if not new.startswith(lead):
        new = lead + new.lstrip()
    if not new.endswith(trail):
        new = new.rstrip() + trail
    return new


def _sections(text, sections, h: Hint, query, counter, min_tokens, min_saving_ratio) -> CompressResult:
    whole = offload_key(text)
    parts: list[str] = []
    notes: list[str] = []
    sizes: dict[str, int] = {}
    biggest = (0, "", "text")  # size, "kind: reason" and kind of the largest routed section
    for s in sections:
        if s.verbatim or len(s.text) < SECTION_MIN_TOKENS:
            parts.append(s.text)
            continue
        kind = classify(s.text, h)
        r = _route(s.text, kind, query, counter, min(min_tokens, SECTION_MIN_TOKENS), min_saving_ratio)
        if len(s.text) > biggest[0]:
            biggest = (len(s.text), f"{kind}: {r.reason}", r.kind)
        if r.changed:
            t = _keep_edges(s.text, r.text.replace(f"key={offload_key(s.text)}]", f"key={whole}]"))
            parts.append(t)
            notes.append(f"{kind}: {r.reason}")
            sizes[r.kind] = sizes.get(r.kind, 0) + len(s.text)
        else:
            parts.append(s.text)
    if not sizes:
        return CompressResult.unchanged(
            text, biggest[2], f"{len(sections)} sections, none compressed; {biggest[1]}"[:300]
        )
    main = max(sizes, key=lambda k: sizes[k])
    reason = f"{len(sections)} sections; " + "; ".join(notes)
    return finish(text, "".join(parts), counter, kind=main, strategy="sections", reason=reason[:300],
                  what=f"parts of {len(sections)} sections", min_saving_ratio=min_saving_ratio)  # fmt: skip
