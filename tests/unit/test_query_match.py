"""passages_with: the passages holding each query word, as one regular-expression search per
(word, passage) pair finds them, for any text (ASCII or not, either case, newlines inside
passages), and fast for a long query (a pasted log)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from headroom_core.compress import logs, text
from headroom_core.compress.json_select import query_words
from headroom_core.compress.query_match import WORD_START, passages_with, passages_with_any


def _reference(words, passages, most, ignore_case):
    """The definition: one search per word and passage."""
    out = {}
    for w in words:
        rx = re.compile(WORD_START + re.escape(w), re.IGNORECASE if ignore_case else 0)
        found = [i for i, p in enumerate(passages) if rx.search(p)]
        if 0 < len(found) <= most:
            out[w] = found
    return out


# letters whose case-insensitive matches go beyond ASCII lower(): dotted/dotless i, long s,
# the Kelvin sign, sharp s; plus separators that do and do not start a word
_ALPHABET = "abcisk KSI_-'\n .:/0123456789İıſKßé"
_passage = st.text(alphabet=_ALPHABET, max_size=60)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(
    passages=st.lists(_passage, min_size=1, max_size=12),
    query=st.text(alphabet=_ALPHABET, max_size=80),
    share=st.sampled_from([0.2, 0.5, 1.0]),
    ignore_case=st.booleans(),
)
def test_the_passages_of_each_word_are_those_one_search_per_pair_finds(passages, query, share, ignore_case):
    words = query_words(query)
    texts = passages if ignore_case else [p.lower() for p in passages]
    most = int(share * len(texts))
    want = _reference(words, texts, most, ignore_case)
    got = passages_with(words, texts, most=most, ignore_case=ignore_case)
    assert got == want
    assert list(got) == list(want)  # in the query's order
    assert passages_with_any(words, texts, most=most, ignore_case=ignore_case) == {i for f in want.values() for i in f}


def test_a_word_at_a_passage_start_after_an_underscore_or_inside_a_word():
    passages = ["Timeout waiting", "read_timeout=5", "notimeout here", "TIMEOUTS: 3", "no match"]
    assert passages_with(("timeout",), passages, most=4, ignore_case=True) == {"timeout": [0, 1, 3]}
    assert passages_with(("timeout",), passages, most=2, ignore_case=True) == {}  # in too many
    assert passages_with(("timeout",), passages, most=4, ignore_case=False) == {"timeout": [1]}


def test_a_pasted_log_as_the_query_picks_the_lines_it_mentions():
    # the latest user text is a pasted log (thousands of distinct words); the tool output a log
    # of 2,000 lines of which three name a block the pasted log names too
    pasted = "\n".join(
        f"2026-11-30 10:{i % 60:02d} INFO worker{i} handled request{i} blk_{i:06d} in {i % 97} ms" for i in range(4000)
    )
    lines = [
        f"081109 {i:06d} INFO dfs.DataNode: Receiving block blk_{900000 + i} src: /10.0.0.{i % 250}"
        for i in range(2000)
    ]
    for k, i in enumerate((400, 700, 1500)):
        lines[i] = f"081109 {i:06d} WARN dfs.DataNode: block blk_{k:06d} lost"
    words = query_words(pasted)
    assert len(words) > 10000
    assert passages_with_any(words, lines, most=len(lines) // 2, ignore_case=True) == {400, 700, 1500}
    sel = logs.select_lines(lines, pasted)
    assert {i for i, r in sel.reasons.items() if r == "query"} == {400, 700, 1500}


def test_prose_passages_named_by_the_query_are_kept_for_it(counter):
    paragraphs = [f"Paragraph {i} talks about topic{i} and nothing else of note." for i in range(30)]
    paragraphs[17] = "The flux capacitor overheats when the gigawatt relay is left on."
    doc = "\n\n".join(paragraphs)
    sel = text.select_passages(doc, "Why does the flux capacitor overheat?", counter, use_model=False)
    query_kept = [i for i, r in sel.reasons.items() if r == "query"]
    assert [doc[sel.passages[i].start : sel.passages[i].end] for i in query_kept] == [paragraphs[17]]
