"""Is a text a log? Decided by the structure of its lines, not by a list of known formats.

A log is many lines that start alike: a *header* of fields (a timestamp in any common form,
epoch seconds, a date with ``.``, ``-`` or ``/``, a bracketed time, a pid, a host, a component,
a level word or letter, ``|``-separated fields, a leading bullet or flag) and then a free-text
message. Each line's leading tokens (:data:`WINDOW`; whitespace- and ``|``-separated) are put
into classes (:func:`token_class`):

====  ============================================================================
T     a time: ``12:01:01``, ``16:13:38.819``, ``22:15:29:606``, ``04:30:30,``
DT    a date and time in one token: ``2005-06-03-15.42.50.675872``, ``20171223-22:15:29:606``,
      ``2017-05-16T00:00:00.008Z``, ``10/Oct/2000:13:55:36``
D     a date with a year: ``2005.06.03``, ``2016-09-28``, ``17/06/09``
d     a short date: ``03-17``, ``10.30`` (a field only when a time follows it)
M     a month or weekday name: ``Nov``, ``Sun``
N     a number of 4+ digits (pid, id, ``081109``) or an IPv4 address; epoch seconds or
      milliseconds (``1131566461``) are DT
L     a level: ``INFO``, ``Warning``, ``[error]``, ``level=warn``, ``INFO:root:…``, or one capital
      letter ``V D I W E F`` after the first token
n     a small number (1-3 digits); P punctuation only (``-``, ``|``, ``*``); W a word;
      X anything else (``dn228``, ``sshd[24200]:``, ``R02-M1-N0-C:J12-U11``)
====  ============================================================================

Classes ``T DT D M N L`` (and ``d`` before a time) are *fields*. A line is *headed*
(:func:`header_of`) when, after leading punctuation and at most one flag token, its first token
is a field (or its second, behind a flag such as BGL's alert category or a file name) and the
header is strong: it holds a time or a date-time, or two fields, or a level word first. The
header runs to its last field (small numbers count after the first field; fields at most
:data:`MAX_GAP` tokens apart; none after a level, a component token ending in ``:`` or a word
of prose that no time follows); the message follows.

:func:`log_share` is the share of the non-blank lines that belong to the log: headed lines
whose first two field classes are the most common pair, plus the continuation lines under
them (indented lines, stack frames, exception lines). Tables are not logs
(:func:`looks_like_table`): CSV/TSV rows with the same number of delimiters and short cells,
Markdown table rows. Prose, Markdown lists, numbered lists and a stack trace alone have no
dominant header and score near zero.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

WINDOW = 10
MAX_GAP = 3
SAMPLE = 400

_TOKEN_RE = re.compile(r"\||[^\s|]+")
_STRIP_HEAD = "[(<{'\""
_STRIP_TAIL = ")]}>:,;'\""

_TIME = r"\d{1,2}:\d{1,2}(?::\d{1,2})?(?:[.,:]\d{1,9})?(?:Z|[+-]\d{2}:?\d{2})?"
_TIME_RE = re.compile(_TIME)
_DATE_RE = re.compile(
    r"\d{4}[-./]\d{1,2}[-./]\d{1,2}|\d{1,2}[-./]\d{1,2}[-./]\d{2,4}|\d{1,2}[-/][A-Z][a-z]{2}[-/]\d{2,4}|\d{8}"
)
_SHORT_DATE_RE = re.compile(r"\d{1,2}[-./]\d{1,2}")
_DT_RE = re.compile(
    r"(?:\d{4}[-./]\d{1,2}[-./]\d{1,2}|\d{1,2}[-./]\d{1,2}[-./]\d{2,4}|\d{1,2}/[A-Z][a-z]{2}/\d{4}|\d{8}|\d{4}[-/]\d{1,2})"
    r"(?:[-T_ :]|\.(?=\d{1,2}\.))"
    r"\d{1,2}[:.]\d{1,2}(?:[:.]\d{1,2})?(?:[.,:]\d{1,9})?(?:Z|[+-]\d{2}:?\d{2})?"
)
_EPOCH_RE = re.compile(r"1\d{9}(?:\d{3})?(?:\.\d{1,9})?")  # Unix time in seconds or milliseconds
_NUM_RE = re.compile(r"[-+]?\d+(?:\.\d+)?")
_IP_RE = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?")
_HEX_RE = re.compile(r"0x[0-9a-fA-F]+")
_MONTHS = frozenset(
    "jan feb mar apr may jun jul aug sep sept oct nov dec january february march april june july august september "
    "october november december mon tue wed thu fri sat sun".split()
)
LEVELS = frozenset(
    "trace debug info information informational notice note warn warning error err fatal severe critical crit alert "
    "emerg emergency panic fine finer finest config verbose log".split()
)
_LEVEL_PREFIX_RE = re.compile(r"(?i)(?:trace|debug|info|notice|warn|warning|error|fatal|severe|critical)(?=[:\]|])")
_LETTER_LEVELS = frozenset("VDIWEFA")
_PUNCT_RE = re.compile(r"[^\w\s]+")
_WORD_RE = re.compile(r"[A-Za-z_][A-Za-z_.\-/$]*")

FIELDS = frozenset({"T", "DT", "D", "M", "N", "L"})
STRONG = frozenset({"T", "DT"})

_CONT_RE = re.compile(
    r"^\s+\S"  # indented: a stack frame, a wrapped message
    r"|^(?:at |Caused by:|Suppressed:|\.\.\. \d+ (?:more|common frames)|Traceback \(most recent call last\))"
    r"|^[A-Za-z_$][\w.$]*(?:Error|Exception|Exit|Interrupt|Throwable)(?::|$)"
)


MAX_TOKEN = 64


def token_class(tok: str, position: int, *, in_pair: bool = False) -> str:
    """The class of one header token (see the module docstring); ``position`` is its index
    among the line's tokens (a lone capital letter is a level only after the first). Tokens
    longer than :data:`MAX_TOKEN` characters are ``X`` (no header field is that long)."""
    if len(tok) > MAX_TOKEN:
        return "X"
    if tok == "|" or _PUNCT_RE.fullmatch(tok):
        return "P"
    if "=" in tok[1:] and not tok.startswith(("=", "-")):
        if in_pair:
            return "X"
        key, _, value = tok.partition("=")
        value = value.strip("\"'")
        if key.lower() in ("level", "lvl", "severity") and value.lower() in LEVELS:
            return "L"
        if value:
            c = token_class(value, position, in_pair=True)
            return c if c in FIELDS else "X"
        return "X"
    if _LEVEL_PREFIX_RE.match(tok):
        return "L"
    t = tok.lstrip(_STRIP_HEAD).rstrip(_STRIP_TAIL)
    if not t:
        return "P"
    if t.isalpha():
        low = t.lower()
        if low in LEVELS and (t.isupper() or t[0].isupper() or tok[0] in "[<("):
            return "L"
        if len(t) == 1 and t in _LETTER_LEVELS and position > 0:
            return "L"
        if low in _MONTHS and t[0].isupper():
            return "M"
        return "W"
    if t[0].isdigit() or t[0] in "+-":
        if _DT_RE.fullmatch(t):
            return "DT"
        if _TIME_RE.fullmatch(t):
            return "T"
        if _IP_RE.fullmatch(t):
            return "N"
        if _DATE_RE.fullmatch(t):
            return "D"
        if _SHORT_DATE_RE.fullmatch(t):
            return "d"
        if _EPOCH_RE.fullmatch(t):
            return "DT"
        if _NUM_RE.fullmatch(t):
            return "N" if sum(c.isdigit() for c in t) >= 4 else "n"
        return "X"
    if _HEX_RE.fullmatch(t):
        return "X"
    if _WORD_RE.fullmatch(t):
        return "W"
    return "X"


@dataclass(frozen=True)
class Header:
    """A line's header: ``classes`` of its first tokens, the field classes in order
    (``fields``), and ``end``, the character offset where the message starts."""

    classes: tuple[str, ...]
    fields: tuple[str, ...]
    end: int


def _is_plain_word(tok: str) -> bool:
    """A word as prose writes it (``open``, ``Component``, ``onStandStepChanged``), not a
    header value (``RAS``, ``unix.hw``, ``Step_LSC``)."""
    t = tok.lstrip(_STRIP_HEAD).rstrip(_STRIP_TAIL)
    return t.isalpha() and not t.isupper()


def _is_flag(tok: str, cls: str) -> bool:
    """A token that may stand before the first field: an alert category (``KERNDTLB``), a file
    name or a level-and-date (``I0302``); not a capitalised word of prose (``On``, ``In``)."""
    return cls == "X" or (cls == "W" and (tok.isupper() and len(tok) >= 2 or any(c in tok for c in "_.-")))


def header_of(line: str) -> Header | None:
    """The header of ``line`` when it is a headed log line (module docstring), else None."""
    if not line or line[0].isspace():
        return None
    toks = []
    for m in _TOKEN_RE.finditer(line):
        toks.append(m)
        if len(toks) >= WINDOW:
            break
    if not toks:
        return None
    classes = [token_class(m.group(0), i) for i, m in enumerate(toks)]
    # a short date is a field only before a time
    for i, c in enumerate(classes):
        if c == "d":
            classes[i] = "D" if i + 1 < len(classes) and classes[i + 1] in STRONG else "d"
    i = 0
    while i < len(classes) and classes[i] == "P" and i < 3:
        i += 1
    if i >= len(classes):
        return None
    first = i
    if classes[first] not in FIELDS:
        # one flag token (an alert category, a file name) may come before the first field
        if first + 1 < len(classes) and classes[first + 1] in FIELDS and _is_flag(toks[first].group(0), classes[first]):
            first += 1
        else:
            return None
    last = first
    fields = [classes[first]]
    gap = 0
    for j in range(first + 1, len(classes)):
        c = classes[j]
        if classes[last] == "L":
            break  # the level is the header's last field: the message follows
        if c not in FIELDS and c != "P" and toks[j].group(0).endswith(":"):
            break  # a component ("sshd[24200]:", "kernel:") opens the message
        if c in FIELDS or c == "n":
            last = j
            fields.append("N" if c == "n" else c)
            gap = 0
        elif (
            c == "W"
            and _is_plain_word(toks[j].group(0))
            and not any(x in STRONG for x in classes[j + 1 : j + 1 + MAX_GAP])
        ):
            break  # a word of prose, no timestamp behind it: the message has started
        else:
            gap += 1
            if gap > MAX_GAP:
                break
    strong = any(c in STRONG for c in fields) or len(fields) >= 2 or (fields[0] == "L" and first == i)
    if not strong:
        return None
    end = toks[last].end()
    # the separator right after the header ("|", "-", "]") belongs to it
    if last + 1 < len(toks) and classes[last + 1] == "P":
        end = toks[last + 1].end()
    return Header(tuple(classes), tuple(fields), end)


def is_continuation(line: str) -> bool:
    """True for a line that continues the log line above it: indented text, a stack frame,
    ``Caused by:``, ``... 12 more``, an exception line, a traceback header."""
    return bool(_CONT_RE.match(line))


def looks_like_table(lines: list[str]) -> bool:
    """True when the non-blank ``lines`` are a table: Markdown rows (``| a | b |``) or CSV/TSV/
    semicolon rows where at least 90 % have the same number (2 or more) of delimiters and
    their cells are short (at most 3 words)."""
    sample = [ln for ln in lines if ln.strip()]
    if len(sample) < 3:
        return False
    if sum(1 for ln in sample if ln.strip().startswith("|") and ln.strip().endswith("|")) >= 0.8 * len(sample):
        return True
    for sep in (",", "\t", ";"):
        counts = Counter(ln.count(sep) for ln in sample)
        c, k = counts.most_common(1)[0]
        if c < 2 or k < 0.9 * len(sample):
            continue
        rows = [ln for ln in sample if ln.count(sep) == c]
        short = sum(1 for ln in rows if all(len(cell.split()) <= 3 for cell in ln.split(sep)))
        if short >= 0.9 * len(rows):
            return True
    return False


@dataclass(frozen=True)
class LogShape:
    """What :func:`analyse` found: ``share`` of the non-blank lines that belong to the log,
    the dominant ``pair`` of leading field classes, and the number of ``headed`` lines."""

    share: float
    pair: tuple[str, ...]
    headed: int


def analyse(lines: list[str]) -> LogShape:
    """The log structure of ``lines`` (the first :data:`SAMPLE` non-blank ones are looked at)."""
    sample = [ln.rstrip("\r") for ln in lines if ln.strip()][:SAMPLE]
    if len(sample) < 2 or looks_like_table(sample):
        return LogShape(0.0, (), 0)
    heads = [header_of(ln) for ln in sample]
    pairs = Counter(h.fields[:2] for h in heads if h is not None)
    if not pairs:
        return LogShape(0.0, (), 0)
    pair, _ = pairs.most_common(1)[0]
    belongs = 0
    prev = False  # the line above belongs to the log
    for ln, h in zip(sample, heads):
        if h is not None and h.fields[:2] == pair:
            belongs += 1
            prev = True
        elif prev and h is None and is_continuation(ln):
            belongs += 1
        else:
            prev = False
    return LogShape(belongs / len(sample), pair, sum(pairs.values()))


def log_share(lines: list[str]) -> float:
    """The share (0-1) of the non-blank ``lines`` that are lines of one log (see :func:`analyse`)."""
    return analyse(lines).share
