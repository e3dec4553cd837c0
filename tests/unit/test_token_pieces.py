"""A long text counted in pieces has exactly the count of the whole (cl100k_base): the cuts fall
where the pre-tokenizer always cuts. Checked on every kind of corpus text, cut far more often
than the counter does, and on text made to sit on the edges of the pattern."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from headroom_core.compress.tokens import PIECE_CHARS, TokenCounter, pieces
from tests.conftest import CORPUS

#: Text built to sit on the edges of CL100K_PATTERN: contractions, digit runs, punctuation
#: runs with newlines, runs of spaces before words and before newlines, Unicode spaces.
EDGES = (
    "it 's a b  c   d    e\t f \n g  \n\n h 's 've 'LL x  'd 123 4567 89 0 , ; ... !! ?? }} {{ "
    "a .b ,c  :d ;\ne \u00a0f \u2003g \u3000h a\u00a0 b a \u00a0b \" ' ` ~ ^ | \\ / é ü ß 日本 🙂 "
    "x+y=z (a) [b] {c} <d> #e @f $g %h &i *j -k _l =m +n ~o |p ;q :r 'sss' \"t\" \r\n\r\n  end"
)


def _texts() -> list[str]:
    """Real texts of each kind: tool lists and messages of recorded requests, logs, sessions."""
    out = [EDGES * 20]
    for f in sorted((CORPUS / "anthropic-flows").glob("*.json"))[:6]:
        body = json.loads(f.read_text())["request"]["body"]
        out += [json.dumps(body.get("tools", [])), json.dumps(body.get("messages", []))[:60_000]]
    for kind in ("logs", "claude-code-sessions", "github-api", "openai-flows", "swe-agent"):
        for f in sorted(p for p in (CORPUS / kind).rglob("*") if p.is_file())[:4]:
            out.append(f.read_text(errors="replace")[:40_000])
    return [t for t in out if t]


@pytest.fixture(scope="module")
def whole():
    """Counts of a text in one piece, straight from the tokenizer (no pieces, no cache)."""
    return TokenCounter(Path.home() / ".headroom").lengths


def test_pieces_join_back_and_cut_at_spaces():
    text = EDGES * 50
    ps = pieces(text, 40)
    assert "".join(ps) == text and len(ps) > 20
    for a, b in zip(ps, ps[1:]):
        assert b[0] == " " and a[-1] != " " and b[1] != " "  # a space between two non-spaces
    assert pieces("short", 40) == ["short"]
    assert pieces("x" * 500, 40) == ["x" * 500]  # nowhere to cut: one piece
    with pytest.raises(ValueError):
        pieces(text, 0)


@pytest.mark.parametrize("size", [1, 16, 200])
def test_the_pieces_count_what_the_whole_counts(whole, size):
    texts = _texts()
    assert len(texts) >= 20
    for text in texts:
        ps = pieces(text, size)
        assert sum(whole(ps)) == whole([text])[0], (size, text[:80])


def test_counter_counts_long_texts_exactly_and_reuses_pieces(whole):
    counter = TokenCounter(Path.home() / ".headroom")  # its own cache: the run's shared one may hold these
    tools = json.loads((CORPUS / "anthropic-flows" / "session-a-05.json").read_text())["request"]["body"]["tools"]
    text = json.dumps(tools)
    assert len(text) > 4 * PIECE_CHARS
    assert counter.count(text) == whole([text])[0]
    # one tool more at the front: the pieces after the first are the ones counted before
    more = json.dumps([{"name": "Extra", "description": "One more tool.", "input_schema": {"type": "object"}}] + tools)
    before = len(counter._cache)
    assert counter.count(more) == whole([more])[0]
    # the whole text's own count, and the piece or two the new tool falls in: of ~190
    assert 2 <= len(counter._cache) - before <= 1 + 2


def test_pieces_fall_back_in_step_after_an_edit_anywhere():
    """Content-defined cuts: an edit anywhere in a long text changes the piece it falls in (and
    rarely the next), never a run of pieces after it, and the cuts are the same in every process."""
    body = json.loads((CORPUS / "anthropic-flows" / "session-a-05.json").read_text())["request"]["body"]
    text = json.dumps(body["tools"]) + json.dumps(body["messages"])[:100_000]
    before = set(pieces(text))
    for i in range(40):
        at = (i * 7919 * 97) % len(text)
        edited = text[:at] + f' "an edit {i}" ' + text[at + i % 50 :]
        after = pieces(edited)
        assert "".join(after) == edited
        assert 1 <= sum(p not in before for p in after) <= 3, at
    sizes = [len(p) for p in pieces(text)[:-1]]
    assert min(sizes) >= PIECE_CHARS // 4 and PIECE_CHARS // 2 < sum(sizes) / len(sizes) < 2 * PIECE_CHARS
