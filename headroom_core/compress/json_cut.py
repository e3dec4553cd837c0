"""JSON records on each side of a cut: a JSON document an agent truncated is no longer JSON.

Codex cuts a long output in its middle (``…N tokens truncated…``, often inside a record);
Claude Code's persisted preview keeps only the first 2 KB. Neither piece parses, but the
records they hold whole still do. :func:`head_records` finds, in the piece before a cut, the
array whose complete elements cover most of it (the root array, or ``items`` of an object) and
those elements; :func:`tail_records` finds, in the piece after a cut, the first position from
which the rest parses as elements of the same kind up to the array's closing bracket. The
partial records at the cut stay as they are; the caller compresses each side's complete
records as one JSON array and writes the result back in their place.

Pure functions over text; sizes in characters. Scanning is linear in the piece (a tail parses at
most :data:`MAX_TAIL_WORK` times its length).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from json.decoder import JSONDecodeError

#: Positions tried in a tail piece before giving up, and the characters parsed in all tries
#: together, in multiples of the piece's length (a flat array of the wrong kind would otherwise
#: be parsed again from every comma).
MAX_TAIL_TRIES = 20_000
MAX_TAIL_WORK = 8
#: A side is worth handling from this many complete records on.
MIN_RECORDS = 2


@dataclass(frozen=True)
class Records:
    """Complete records in a piece of cut JSON: ``piece[start:end]`` holds them (the text of
    ``values``, separated by commas, without the enclosing brackets); ``values`` parsed."""

    start: int
    end: int
    values: tuple[object, ...]

    def array_text(self, piece: str) -> str:
        """The records as the text of one JSON array (the piece's own bytes inside brackets)."""
        return "[" + piece[self.start : self.end] + "]"


def _same_kind(a: object, b: object) -> bool:
    """Records of one array: objects sharing at least half of their keys (Jaccard), or values
    of one JSON type."""
    if isinstance(a, dict) and isinstance(b, dict):
        union = a.keys() | b.keys()
        return not union or len(a.keys() & b.keys()) >= 0.5 * len(union)
    return type(a) is type(b)


def head_records(piece: str) -> Records | None:
    """The complete records of the piece before a cut (module docstring), or None when the piece
    does not start a JSON array or object, or holds fewer than :data:`MIN_RECORDS` whole records
    of one array."""
    i = 0
    n = len(piece)
    while i < n and piece[i] in " \t\r\n":
        i += 1
    if i >= n or piece[i] not in "[{":
        return None
    # stack of (bracket, opening position, [positions of commas at this level])
    stack: list[tuple[str, int, list[int]]] = []
    in_str = esc = False
    best: tuple[int, int, int] | None = None  # (covered chars, start, end)

    def consider(frame: tuple[str, int, list[int]]) -> None:
        nonlocal best
        if frame[0] == "[" and len(frame[2]) >= MIN_RECORDS:
            start, end = frame[1] + 1, frame[2][-1]
            if best is None or end - start > best[0]:
                best = (end - start, start, end)

    for j in range(i, n):
        c = piece[j]
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
            continue
        if c == '"':
            in_str = True
        elif c in "[{":
            stack.append((c, j, []))
        elif c in "]}":
            if not stack or "[{"["]}".index(c)] != stack[-1][0]:
                return None  # not JSON
            stack.pop()
            if not stack:
                return None  # a complete document: not cut
        elif c == "," and stack:
            stack[-1][2].append(j)
    for frame in stack:
        consider(frame)
    if best is None:
        return None
    _, start, end = best
    try:
        values = json.loads("[" + piece[start:end] + "]")
    except (JSONDecodeError, RecursionError, ValueError):
        return None
    if len(values) < MIN_RECORDS or not all(_same_kind(values[0], v) for v in values):
        return None
    return Records(start, end, tuple(values))


def tail_records(piece: str, like: object) -> Records | None:
    """The complete records of the piece after a cut: from the first comma after which the rest
    parses as a JSON array (closed by the piece's own ``]``) of at least :data:`MIN_RECORDS`
    values of the same kind as ``like`` (a record of the head), or None."""
    dec = json.JSONDecoder()
    tries = work = 0
    pos = piece.find(",")
    while pos >= 0 and tries < MAX_TAIL_TRIES and work <= MAX_TAIL_WORK * len(piece):
        tries += 1
        try:
            values, end = dec.raw_decode("[" + piece[pos + 1 :])
            work += end
        except JSONDecodeError as e:
            values, end = None, 0
            work += e.pos
        except (RecursionError, ValueError):
            values, end = None, 0
        if isinstance(values, list) and len(values) >= MIN_RECORDS and all(_same_kind(like, v) for v in values):
            # index k of the synthetic text is index pos + k of the piece: its "]" is at pos + end - 1
            return Records(pos + 1, pos + end - 1, tuple(values))
        pos = piece.find(",", pos + 1)
    return None
