"""Compress a log tool output: group lines by template, keep what matters, offload the rest.

Input: text made of log lines (one event per line, continuation lines such as Java stack
frames or Python traceback lines allowed). Sizes are in tokens of the caller's
:class:`~headroom_core.compress.tokens.TokenCounter`.

**Templates.** The message of every non-blank line (the text after its header when the line
carries the log's dominant header shape, :func:`messages_of` and
:mod:`~headroom_core.compress.logshape`; else the whole line) is given to a fresh Drain3
``TemplateMiner`` (He et al., "Drain: An Online Log Parsing Approach with Fixed Depth Tree",
ICWS 2017; the ``drain3`` package), configured in code (:func:`miner_config`): no config file
is read, nothing persists, and variable values (timestamps, IPs, UUIDs, hex, numbers) are
masked before clustering, so the same text always gives the same clusters.

**Kept lines** (verbatim, in their original order), each with the first reason that picked it:

``anchor``
    the first :data:`HEAD` and last :data:`TAIL` lines;
``error``
    every line with an error word or an error level (:func:`is_error_line`: ``error``,
    ``fatal``, ``severe``, ``critical``, ``exception``, ``fail…``, ``panic``, ``denied`` in any
    case and inside longer words, ``[crit]``, ``ALERT``, ``Traceback (most recent call
    last):``, stack frames) together with its stack trace (:func:`trace_end`: indented lines,
    ``at …``, ``Caused by:``, ``... 12 more``, and unindented exception lines such as
    ``java.io.IOException: …`` or ``ValueError: …``). A single-line error event repeated
    (the same template and variant, 520 ``Failed password for root … ssh2``) shows its first
    :data:`ERROR_FIRST` and last :data:`ERROR_LAST` lines; the others are left out like any
    repeated line, counted in the template summary and retrievable, so every error line is
    represented by a verbatim line of its kind and its count;
``query``
    lines holding a word of the user's latest query (matched at a word start, case-insensitive;
    words found on more than half the lines do not discriminate and are ignored), at most
    :data:`MAX_QUERY` of them (the first and last halves of that many);
``template``
    the first line of every Drain3 template, and of every variant of a template (lines that
    share the values of its few-valued wildcard positions and the words at its other wildcard
    positions, :func:`mine_templates`), so each kind of event is seen at least once and a
    template seen once is kept verbatim.

**Layout.** The first line is the one marker, ``[headroom omitted 1490 of 2000 lines, …;
headroom_retrieve key=…]``: its key (:func:`~headroom_core.compress.markers.offload_key` of the whole
text) retrieves the original byte for byte (the result holds one
:class:`~headroom_core.compress.result.Offload`). Then the kept lines in order; each run of
left-out lines is one short gap line ``[… 37 lines]`` (a run no longer than its gap line
stays); a block of lines repeated in a row (:mod:`~headroom_core.compress.repeats`) that holds
a kept line shows its first copy and ``[… 49 more copies of the line above, 50 in a row]``.
A summary closes: one line per template that lost lines, ``412× <template>``, most frequent
first (``<*>``, ``<NUM>``, ``<IP>``, ``<TS>``, ``<HEX>``, ``<ID>`` stand for varying values).
Line ends are kept (``\r\n`` text gets ``\r\n`` added lines).

Unchanged results: ``"not text"``, ``"small"`` (under ``min_tokens``), ``"few lines"`` (under
:data:`MIN_LINES` non-blank lines), ``"nothing to drop"``, ``"no gain"`` (not at least
``min_saving_ratio`` fewer tokens). Deterministic: the same ``(text, query)`` gives the same
bytes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from drain3 import TemplateMiner
from drain3.masking import AbstractMaskingInstruction
from drain3.template_miner_config import TemplateMinerConfig

from headroom_core.compress.gain import precheck
from headroom_core.compress.json_select import query_words
from headroom_core.compress.logshape import analyse, header_of
from headroom_core.compress.markers import make_marker, offload_key
from headroom_core.compress.query_match import passages_with_any
from headroom_core.compress.repeats import Run, find_runs, fold_note
from headroom_core.compress.result import CompressResult, Offload
from headroom_core.compress.tokens import TokenCounter

KIND = "log"
HEAD = 5
TAIL = 5
MAX_QUERY = 40
MIN_LINES = 12
# Drain's similarity threshold and tree depth. drain3's defaults (0.4, 4) suit the message part
# of a line; here whole lines are clustered, and their shared header (timestamp, host, level,
# component) inflates similarity, so a higher threshold keeps unrelated messages apart. 0.6
# was chosen on the eight loghub logs (bench/bench_logs_text.py): template text close to the
# ground truth, every ground-truth template kept.
SIM_TH = 0.6
DEPTH = 4
# A wildcard position of a template with at most this many distinct values holds a choice
# between a few literal words (Transitioned from NEW / RUNNING / …), not a free value (a user
# name, an id): the first line of each such variant is kept too.
VARIANT_MAX_VALUES = 12

# Lines shown of one variant of a single-line error event (same template, same categorical
# values and words: "Failed password for root from <IP> port <NUM> ssh2"): its first and last.
# The others are left out like any repeated line, their number in the template summary, and
# retrievable; an error variant of at most ERROR_FIRST + ERROR_LAST lines is shown whole.
ERROR_FIRST = 3
ERROR_LAST = 1

REASONS = ("anchor", "error", "query", "template")

# Variable values masked before clustering, in one pass (at a position the first listed wins).
_MASKS = (
    # 2015-10-18 18:01:47,978 / 2017-05-16T00:00:00.008Z / 2017-05-16 00:00:00+02:00
    (r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?", "TS"),
    # Sun Dec 04 04:47:44 2005 / Jun 14 15:16:01 (syslog, Apache)
    (
        r"(?:(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) )?(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
        r" {1,2}\d{1,2} \d{2}:\d{2}:\d{2}(?: \d{4})?",
        "TS",
    ),
    (r"(?<![\w/.:-])\d{2,4}[/-]\d{2}[/-]\d{2,4}(?![\w/.-])", "TS"),
    (r"(?<![\w:.])\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?(?![\w:])", "TS"),
    (
        r"(?<![0-9a-fA-F])[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?![0-9a-fA-F])",
        "ID",
    ),
    (r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?(?![\w.])", "IP"),
    (r"(?<![\w])0x[0-9a-fA-F]+(?![\w])", "HEX"),
    (r"(?<![\w])[0-9a-f]{16,}(?![\w])", "HEX"),
    (r"(?<![A-Za-z0-9<>])[-+]?\d+(?:\.\d+)?(?![A-Za-z0-9<>])", "NUM"),
)

_EXCEPTION_RE = re.compile(
    r"(?<![\w$])(?:[A-Za-z_$][\w$]*\.)*[A-Z][\w$]*(?:Exception|Error)(?![\w$])"
    r"|(?<![\w$])Exception(?![\w$])"
    r"|Traceback \(most recent call last\)"
)
_UPPER_LEVEL_RE = re.compile(r"(?<![\w.$-])(?:ERROR|ERR|FATAL|SEVERE|CRITICAL|ALERT|PANIC|EMERG|EMERGENCY)(?![\w-])")
_LOWER_LEVEL_RE = re.compile(
    r"[\[<(](?:error|err|crit|critical|alert|emerg|fatal|severe|panic)[\]>)]"
    r"|\blevel[=:]\s*\"?(?:error|err|fatal|critical|crit|severe|panic)\b"
    r"|(?<![\w.-])(?:error|fatal|panic):\s",
    re.IGNORECASE,
)
# Words that make a line an error line wherever they stand (lowercased substrings).
ERROR_WORDS = (
    "error",
    "fatal",
    "severe",
    "critical",
    "exception",
    "fail",
    "panic",
    "denied",
    "segfault",
    "segmentation fault",
    "core dumped",
)
_STACK_FRAME_RE = re.compile(r"^\s+at [\w$.<>/]+\(|^\s+File \".*\", line \d+|^Caused by: ")
# Every error-level line holds one of these (lowercased): a cheap test before the regular expressions.
_CHEAP_WORDS = ("err", "fatal", "severe", "crit", "panic", "emerg", "alert", "exception", "traceback")
_FRAME_RE = re.compile(r"^\s*(?:at [\w$.<>/]|Caused by:|Suppressed:|\.\.\. \d+ (?:more|common frames))")
_PY_CHAIN_RE = re.compile(r"^(?:During handling of the above exception|The above exception was the direct cause)")
_EXC_LINE_RE = re.compile(r"^[A-Za-z_$][\w.$]*(?:Error|Exception|Exit|Interrupt|Iteration|Throwable)(?::|$)")


class _Masker(AbstractMaskingInstruction):
    """All of :data:`_MASKS` in one left-to-right pass (at a position, the first mask listed wins)."""

    def __init__(self) -> None:
        super().__init__("*")
        self._names = [name for _, name in _MASKS]
        self._rx = re.compile("|".join(f"(?P<m{k}>{p})" for k, (p, _) in enumerate(_MASKS)))

    def mask(self, content: str, mask_prefix: str, mask_suffix: str) -> str:
        names = self._names
        # every alternative is a named group, so a match always has a lastindex
        return self._rx.sub(lambda m: f"{mask_prefix}{names[(m.lastindex or 0) - 1]}{mask_suffix}", content)


def miner_config() -> TemplateMinerConfig:
    """The Drain3 configuration used here, built in code (no ``drain3.ini`` is read)."""
    cfg = TemplateMinerConfig()
    cfg.profiling_enabled = False
    cfg.drain_sim_th = SIM_TH
    cfg.drain_depth = DEPTH
    cfg.drain_max_children = 100
    cfg.drain_max_clusters = None  # no LRU eviction: the clusters depend on the text alone
    cfg.drain_extra_delimiters = []
    cfg.parametrize_numeric_tokens = True
    cfg.masking_instructions = [_Masker()]
    cfg.mask_prefix = "<"
    cfg.mask_suffix = ">"
    return cfg


def is_error_line(line: str) -> bool:
    """True when ``line`` reports an error or a failure, in any form a log writes it.

    An error word anywhere, in any case and inside longer words (:data:`ERROR_WORDS`:
    ``error``, ``fatal``, ``severe``, ``critical``, ``exception``, ``fail…``, ``panic``,
    ``denied``, so ``ERROR``, ``Errors``, ``IOException``, ``failed``, ``Permission denied``);
    an error level (``[crit]``, ``<emerg>``, ``level=err``, ``ALERT``); Python's
    ``Traceback (most recent call last)``; or a stack frame (``at a.b.C(C.java:12)``,
    ``File "x.py", line 3``, ``Caused by:``). Over-keeping costs tokens; losing the one error
    line that matters costs the answer.
    """
    low = line.lower()
    if any(w in low for w in ERROR_WORDS):
        return True
    if any(w in low for w in _CHEAP_WORDS) and (_UPPER_LEVEL_RE.search(line) or _LOWER_LEVEL_RE.search(line)):
        return True
    return "traceback (most recent call last)" in low or bool(_STACK_FRAME_RE.match(line))


def trace_end(lines: list[str], i: int) -> int:
    """Index one past the stack trace that follows the error line ``lines[i]``.

    Continuation lines: indented lines, Java frames (``at …``, ``Caused by:``, ``... 3 more``),
    Python chained-traceback lines, and unindented exception lines (``java.io.IOException: …``
    under the error line, ``ValueError: …`` closing a Python traceback). A blank line ends the trace unless a chained traceback
    follows it.
    """
    n = len(lines)
    py = "Traceback (most recent call last)" in lines[i]
    j = i + 1
    while j < n:
        s = lines[j].rstrip("\r")
        if s.strip() == "":
            # A blank line inside a chained Python traceback.
            k = j + 1
            while k < n and lines[k].strip() == "":
                k += 1
            if py and k < n and _PY_CHAIN_RE.match(lines[k]):
                j = k
                continue
            break
        if s[:1] in (" ", "\t") or _FRAME_RE.match(s) or _PY_CHAIN_RE.match(s):
            j += 1
            continue
        if "Traceback (most recent call last)" in s:
            py = True
            j += 1
            continue
        if _EXC_LINE_RE.match(s):
            # Java's "java.io.IOException: …" under its error line, or the line that closes a
            # Python traceback ("ValueError: …"); a chain may follow either.
            j += 1
            continue
        break
    return j


@dataclass(frozen=True)
class Template:
    """One Drain3 template of a log: its text, number of lines, first line index (0-based)."""

    template: str
    count: int
    first: int


@dataclass(frozen=True)
class LogSelection:
    """Which lines to keep: ``reasons`` maps a kept line index to its reason (:data:`REASONS`);
    ``cluster_of`` gives each line's template number (-1 for blank lines); ``templates`` lists
    the templates in order of first appearance."""

    reasons: dict[int, str]
    cluster_of: tuple[int, ...]
    templates: tuple[Template, ...]


def mine_templates(lines: list[str]) -> tuple[tuple[int, ...], tuple[Template, ...], tuple[int, ...]]:
    """Cluster ``lines`` with Drain3: each line's template number, the templates, and the first
    line of every variant (:func:`mine_variants`, without each line's variant)."""
    cluster_of, templates, firsts, _ = mine_variants(lines)
    return cluster_of, templates, firsts


def mine_variants(lines: list[str]) -> tuple[tuple[int, ...], tuple[Template, ...], tuple[int, ...], tuple[int, ...]]:
    """Cluster ``lines`` with Drain3.

    Returns each line's template number (-1 for a blank line), the templates in order of first
    appearance, the first line of every *variant*, and each line's variant number (-1 for a
    blank line; numbered across templates). A variant is the lines of one template that share the
    values of its categorical wildcard positions (:data:`VARIANT_MAX_VALUES`), so that two
    kinds of event Drain put in one template (``Transitioned from NEW to UNASSIGNED`` and
    ``… from RUNNING to SUCCESS``) are both seen, while free values (user names, ids) are not.
    Drain3 is used through ``TemplateMiner``'s masker and ``Drain`` directly (its
    ``add_log_message`` would mask each line a second time).
    """
    miner = TemplateMiner(persistence_handler=None, config=miner_config())
    raw_ids: list[int] = []
    masked: list[list[str]] = []
    for line in lines:
        s = line.strip()
        if s:
            # TemplateMiner.add_log_message without its snapshot bookkeeping: mask once, keep
            # the masked tokens for the variants below.
            m = miner.masker.mask(s)
            cluster, _ = miner.drain.add_log_message(m)
            raw_ids.append(cluster.cluster_id)
            masked.append(m.split())
        else:
            raw_ids.append(-1)
            masked.append([])
    order: dict[int, int] = {}
    for cid in raw_ids:
        if cid >= 0 and cid not in order:
            order[cid] = len(order)
    cluster_of = tuple(order[c] if c >= 0 else -1 for c in raw_ids)
    by_id = {c.cluster_id: c for c in miner.drain.clusters}
    members: list[list[int]] = [[] for _ in order]
    for i, c in enumerate(cluster_of):
        if c >= 0:
            members[c].append(i)
    templates = tuple(Template(by_id[cid].get_template(), len(members[k]), members[k][0]) for cid, k in order.items())
    firsts: list[int] = []
    variant_of = [-1] * len(lines)
    for cid, k in order.items():
        tokens = by_id[cid].log_template_tokens
        rows = [masked[i] for i in members[k]]
        cat_positions = []
        word_positions = []
        for p, tok in enumerate(tokens):
            if tok != "<*>":
                continue
            values = {r[p] if p < len(r) else "" for r in rows}
            if len(values) <= VARIANT_MAX_VALUES:
                cat_positions.append(p)
            else:
                word_positions.append(p)
        seen: dict[tuple[str, ...], int] = {}
        for i, r in zip(members[k], rows):
            shape = tuple(r[p] if p < len(r) else "" for p in cat_positions) + tuple(
                _word_or_star(r[p] if p < len(r) else "") for p in word_positions
            )
            if shape not in seen:
                seen[shape] = len(firsts)
                firsts.append(i)
            variant_of[i] = seen[shape]
    return cluster_of, templates, tuple(sorted(firsts)), tuple(variant_of)


_WORD_TOKEN_RE = re.compile(r"[A-Za-z][a-z]{1,29}")


def _word_or_star(token: str) -> str:
    """``token`` when it is a word (``opened``, ``Closing``, ``channels:``): a wildcard position
    where words vary may hide two kinds of event (``session opened`` / ``session closed``);
    ``*`` for any other value (numbers, ids, paths, host names), which is a free value."""
    t = token.strip(":,.;()[]'\"")
    return t if _WORD_TOKEN_RE.fullmatch(t) else "*"


def messages_of(lines: list[str]) -> list[str]:
    """The message part of each line: the text after the header when the line carries the log's
    dominant header shape (:mod:`~headroom_core.compress.logshape`), else the whole line.
    Templates are mined on messages, as log parsers do (loghub's ground truth is templates of
    the message): varying timestamps, hosts and pids no longer split or blur them."""
    shape = analyse(lines)
    if not shape.pair:
        return list(lines)
    out = []
    for ln in lines:
        h = header_of(ln)
        out.append(ln[h.end :] if h is not None and h.fields[:2] == shape.pair and ln[h.end :].strip() else ln)
    return out


def select_lines(lines: list[str], query: str) -> LogSelection:
    """The lines of a log to keep for ``query`` (see the module docstring), pure."""
    n = len(lines)
    cluster_of, templates, variants, variant_of = mine_variants(messages_of(lines))
    reasons: dict[int, str] = {}

    def keep(i: int, why: str) -> None:
        reasons.setdefault(i, why)

    for i in list(range(min(HEAD, n))) + list(range(max(0, n - TAIL), n)):
        keep(i, "anchor")
    # single-line error events, by variant: a run of one error (520 "Failed password for root
    # … ssh2") shows its first and last lines; its count is in the template summary
    single: dict[int, list[int]] = {}
    i = 0
    while i < n:
        if lines[i].strip() and is_error_line(lines[i]):
            end = trace_end(lines, i)
            if end == i + 1 and variant_of[i] >= 0:
                single.setdefault(variant_of[i], []).append(i)
            else:  # a stack trace is kept whole
                for j in range(i, end):
                    keep(j, "error")
            i = max(end, i + 1)
        else:
            i += 1
    for rows in single.values():
        for j in rows[:ERROR_FIRST] + rows[-ERROR_LAST:]:
            keep(j, "error")
    # a query word found in at most half of the non-blank lines picks the lines holding it
    nonblank = [i for i, ln in enumerate(lines) if ln.strip()]
    found = passages_with_any(
        query_words(query), [lines[i] for i in nonblank], most=len(nonblank) // 2, ignore_case=True
    )
    if found:
        hits = sorted(nonblank[k] for k in found)
        if len(hits) > MAX_QUERY:
            half = MAX_QUERY // 2
            hits = hits[:half] + hits[-(MAX_QUERY - half) :]
        for i in hits:
            keep(i, "query")
    for i in variants:
        keep(i, "template")
    return LogSelection(reasons=reasons, cluster_of=cluster_of, templates=templates)


def _split_lines(text: str) -> tuple[list[str], str, bool]:
    """The lines of ``text`` without line ends, the line end (``"\r\n"`` when every line ends
    so, else ``"\n"``; a lone ``\r`` stays in its line), and whether the text ended with one."""
    lines = text.split("\n")
    ends_nl = lines[-1] == ""
    if ends_nl:
        lines.pop()
    body = lines if ends_nl else lines[:-1]
    if body and all(ln.endswith("\r") for ln in body):
        return [ln[:-1] for ln in body] + lines[len(body) :], "\r\n", ends_nl
    return lines, "\n", ends_nl


def gap_line(count: int) -> str:
    """The line that stands for ``count`` consecutive lines left out (see the module docstring)."""
    return f"[… {count} line{'s' if count != 1 else ''}]"


@dataclass(frozen=True)
class Rendering:
    """The compressed log's lines (``out``), which original lines it shows (``shown``, first
    copies of folded runs included), which it leaves out in gaps (``gapped``), and the number
    of lines folded away as copies (``folded``)."""

    out: tuple[str, ...]
    shown: frozenset[int]
    gapped: frozenset[int]
    folded: int


def render(lines: list[str], keep: set[int], runs: list[Run]) -> Rendering:
    """The kept lines in order, each run of left-out lines as one :func:`gap_line` (a run no
    longer than its gap line stays), each repeated block that holds a kept line as its first
    copy and one :func:`~headroom_core.compress.repeats.fold_note`."""
    n = len(lines)
    out: list[str] = []
    shown: set[int] = set()
    gapped: set[int] = set()
    gap: list[int] = []
    folded = 0

    def flush() -> None:
        if not gap:
            return
        g = gap_line(len(gap))
        if sum(len(lines[j]) + 1 for j in gap) > len(g) + 1:
            out.append(g)
            gapped.update(gap)
        else:  # the gap line would cost more than the lines it hides
            out.extend(lines[j] for j in gap)
            shown.update(gap)
        gap.clear()

    run_at = {r.start: r for r in runs}
    i = 0
    while i < n:
        r = run_at.get(i)
        if r is not None:
            # a kept line anywhere in the run is a kept line of its first copy
            if any(j in keep for j in range(r.start, r.end)):
                flush()
                out.extend(lines[r.start : r.start + r.period])
                shown.update(range(r.start, r.start + r.period))
                out.append(fold_note(r))
                folded += r.period * (r.copies - 1)
            else:
                gap.extend(range(r.start, r.end))
            i = r.end
            continue
        if i in keep:
            flush()
            out.append(lines[i])
            shown.add(i)
        else:
            gap.append(i)
        i += 1
    flush()
    return Rendering(tuple(out), frozenset(shown), frozenset(gapped), folded)


def compress_logs(
    text: str,
    query: str,
    counter: TokenCounter,
    *,
    min_tokens: int = 250,
    min_saving_ratio: float = 0.10,
) -> CompressResult:
    """Compress the log tool output ``text`` for a request whose latest user text is ``query``.

    Returns the kept lines (verbatim, in order) with a gap line per left-out run, repeated
    blocks folded, one marker and a template summary (see the module docstring), with one
    offload holding ``text`` byte for byte; or the unchanged text with the reason. Never raises
    on bad input.
    """
    declined, original = precheck(text, KIND, counter, min_tokens)
    if declined is not None:
        return declined
    lines, eol, ends_nl = _split_lines(text)
    if sum(1 for ln in lines if ln.strip()) < MIN_LINES:
        return CompressResult.unchanged(text, KIND, "few lines")
    sel = select_lines(lines, query or "")
    n = len(lines)
    key = offload_key(text)
    runs = find_runs(lines)
    ren = render(lines, set(sel.reasons), runs)
    if len(ren.shown) == n and not ren.folded:
        return CompressResult.unchanged(text, KIND, "nothing to drop")
    hidden = n - len(ren.shown)
    out = [make_marker(f"{hidden} of {n} lines, each gap below marked … N lines or … N more copies", key)]
    out.extend(ren.out)
    dropped_per: dict[int, int] = {}
    for i in ren.gapped:  # copies folded under a shown first copy are counted by their fold line
        c = sel.cluster_of[i]
        if c >= 0:
            dropped_per[c] = dropped_per.get(c, 0) + 1
    summary = sorted(dropped_per, key=lambda c: (-sel.templates[c].count, c))
    if summary:
        out.append(
            f"[headroom log templates (Drain3): {len(sel.templates)} in {n} lines; lines per template "
            "for those with lines left out; <*> and <NUM>, <TS>, <IP>, <HEX>, <ID> stand for varying values]"
        )
        for c in summary:
            t = sel.templates[c]
            out.append(f"{t.count}× {t.template}")
    result = eol.join(out) + (eol if ends_nl else "")
    tokens = counter.count(result)
    if tokens > original * (1.0 - min_saving_ratio):
        return CompressResult.unchanged(text, KIND, "no gain")
    counts = {r: 0 for r in (*REASONS, "context")}
    for i in ren.shown:
        # A line without a reason sat in a gap too short to be worth a gap line, or in the
        # first copy of a folded block.
        counts[sel.reasons.get(i, "context")] += 1
    parts = ", ".join(f"{c} {r}" for r, c in counts.items() if c)
    folded = f", {ren.folded} folded as repeats" if ren.folded else ""
    return CompressResult(
        text=result,
        changed=True,
        kind=KIND,
        strategy="templates",
        reason=f"kept {len(ren.shown)} of {n} lines{folded}, {len(sel.templates)} templates: {parts} ({original}->{tokens} tokens)",
        offloads=(Offload(key=key, original=text, what=f"{hidden} of {n} lines"),),
    )
