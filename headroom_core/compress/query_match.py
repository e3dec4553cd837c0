"""Which passages of a tool output hold which words of the user's query.

The compressors keep the lines, passages or array items that mention the latest user text's
discriminating words (:func:`~headroom_core.compress.json_select.query_words`): a word counts
where it starts a word of the passage (not preceded by a letter or digit; the regular
expression ``(?<![^\\W_])`` followed by the word, as :mod:`re` matches it) and only when it is
found in some passages but not in too many (a word every line holds picks nothing out).

A coding agent's latest user text is often long (its reminders, a pasted log or file: hundreds
to tens of thousands of distinct words), so testing each word against each passage, one
regular expression search per pair, grew with words × passages (a 2,000-line log against a
pasted 240 KB log: over a minute). Here the passages are joined by newlines (a word never holds
a newline, so no match spans two passages, and the newline before a passage is no letter or
digit, as its start has none) and each word is searched once in the joined text, with the same
regular expression, and only when it can match at all: a match starts one of the text's maximal
runs of letters and digits, so a word of one run is a prefix of such a run, and the first run
of a longer word (``read-only``) is such a run. That test runs on sets, on the text folded the
way :data:`re.IGNORECASE` matches ASCII letters (``str.lower`` plus the four characters beyond
ASCII it matches with one: İ ı ſ K); a word holding other characters than ASCII is searched
without it.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence

#: a match starts a word: not preceded by a letter or a digit (an underscore may precede it)
WORD_START = r"(?<![^\W_])"


def passages_with(
    words: Sequence[str], passages: Sequence[str], *, most: int, ignore_case: bool
) -> dict[str, list[int]]:
    """For each of ``words`` found at a word start in at least one and at most ``most`` of
    ``passages``: the indexes of the passages holding it, ascending. Words found in none, or in
    more than ``most``, are left out; the dict keeps the order of ``words``.

    The same as testing every passage with ``re.search(WORD_START + re.escape(word), passage,
    re.IGNORECASE if ignore_case else 0)``, with one search per word that can match (module
    docstring). ``words`` hold no newline (they are
    :func:`~headroom_core.compress.json_select.query_words`: runs of letters and digits joined
    by ``-``, ``_`` or ``'``). Raises nothing."""
    if not words or not passages:
        return {}
    blob = "\n".join(passages)
    starts: list[int] = []
    at = 0
    for p in passages:
        starts.append(at)
        at += len(p) + 1
    screen = _Screen(blob, {len(w) for w in words}, ignore_case)
    out: dict[str, list[int]] = {}
    for w in words:
        if not w or w in out or not screen.may_match(w):
            continue
        found = screen.passages(w, starts, most)
        if 0 < len(found) <= most:
            out[w] = found
    return out


#: the characters beyond ASCII that re.IGNORECASE matches with an ASCII letter, folded to it
_FOLD_TO_ASCII = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})
_RUN = re.compile(r"[^\W_]+")


class _Screen:
    """Searches one text (passages joined, their offsets ``starts``) for words at word starts.

    A word is ruled out without a search when it cannot start any of the text's maximal runs
    of letters and digits (sets of the runs and of their prefixes of the lengths asked for);
    else it is found with ``str.find`` in the text folded as the search matches (module
    docstring), each hit kept when no letter or digit precedes it. A word beyond ASCII, when
    ignoring case, is searched with the regular expression itself."""

    def __init__(self, text: str, lengths: set[int], ignore_case: bool) -> None:
        self.text = text
        self.ignore_case = ignore_case
        folded = text.translate(_FOLD_TO_ASCII).lower() if ignore_case else text
        # folding keeps every position (no character left lowers to two); else only the regex
        self.folded = folded if len(folded) == len(text) else None
        self.runs = set(_RUN.findall(folded))
        self.prefixes = {r[:n] for r in self.runs for n in lengths if n <= len(r)}

    def _key(self, word: str) -> str | None:
        """``word`` as it appears in the folded text; None when it must go to the regex."""
        if not self.ignore_case:
            return word
        if self.folded is None or not word.isascii():
            return None
        return word.lower()

    def may_match(self, word: str) -> bool:
        """False only when ``word`` cannot match at a word start of the text."""
        key = self._key(word)
        if key is None:
            return True
        first = _RUN.match(key)
        if first is None:
            return True
        if first.end() == len(key):
            return key in self.prefixes
        return first.group() in self.runs

    def passages(self, word: str, starts: list[int], most: int) -> list[int]:
        """Indexes of the passages holding ``word`` at a word start, ascending; stops past
        ``most`` + 1 of them."""
        found: list[int] = []
        key = self._key(word)
        if key is None or self.folded is None:
            for m in re.finditer(WORD_START + re.escape(word), self.text, re.IGNORECASE if self.ignore_case else 0):
                i = bisect_right(starts, m.start()) - 1
                if not found or found[-1] != i:
                    found.append(i)
                    if len(found) > most:
                        break
            return found
        text, folded = self.text, self.folded
        q = folded.find(key)
        while q != -1:
            if q and text[q - 1].isalnum():  # inside a run: not a word start ([^\W_] is isalnum)
                q = folded.find(key, q + 1)
                continue
            i = bisect_right(starts, q) - 1
            found.append(i)
            if len(found) > most or i + 1 >= len(starts):
                break
            q = folded.find(key, starts[i + 1])  # the next passage
        return found


def passages_with_any(words: Sequence[str], passages: Sequence[str], *, most: int, ignore_case: bool) -> set[int]:
    """Indexes of the passages holding any word :func:`passages_with` keeps (as a search with
    one regular expression of those words as alternatives)."""
    return {i for found in passages_with(words, passages, most=most, ignore_case=ignore_case).values() for i in found}
