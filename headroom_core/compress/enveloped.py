"""Compress a tool output inside an agent's envelope: the payload by its own kind, the envelope
byte for byte (:mod:`~headroom_core.compress.envelope`).

The payload goes to the content router as if it were the whole output. When the agent cut it
(:func:`~headroom_core.compress.envelope.find_cuts`, or a preview that stops mid-document), each
piece between cuts is routed on its own, except cut JSON: there the complete records on each
side of a cut (:mod:`~headroom_core.compress.json_cut`) are compressed as one JSON array each,
and the partial records at the cut and the agent's marker stay as they are. A cut JSON array
is thus crushed like the whole array would be (the records the agent kept, minus those the
crusher drops), where routing it as text would drop nothing.

Every marker in the result names the key of the whole tool output, and the result holds one
offload with the whole output byte for byte (:func:`~headroom_core.compress.gain.finish`), so
``headroom_retrieve`` gives back exactly what the agent sent, envelope included.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from headroom_core.compress.envelope import Envelope
from headroom_core.compress.gain import finish
from headroom_core.compress.json_crush import compress_json
from headroom_core.compress.json_cut import Records, head_records, tail_records
from headroom_core.compress.markers import offload_key
from headroom_core.compress.result import CompressResult
from headroom_core.compress.tokens import TokenCounter

#: ``(text, min_tokens)`` -> the router's result for ``text`` (no envelope handling inside).
Route = Callable[[str, int], CompressResult]


@dataclass(frozen=True)
class _Piece:
    """One compressed piece: its new ``text``, the ``kind`` it was routed as, a ``note`` for the
    reason (empty when unchanged), ``size`` the characters it covered, and ``transient`` when
    its compressor could not decide yet (:data:`TRANSIENT_REASON`)."""

    text: str
    kind: str
    note: str
    size: int
    transient: bool = False


#: A compressor's reason for "no decision yet" (the embedding model is still loading): the
#: pipeline does not keep such an answer, so the output is decided again on a later turn.
TRANSIENT_REASON = "model loading"


def _rekey(result: CompressResult, original: str, whole: str) -> str:
    """``result.text`` with markers naming ``original``'s key renamed to the whole output's."""
    return result.text.replace(f"key={offload_key(original)}]", f"key={whole}]")


def _records_side(piece: str, rec: Records, query: str, counter: TokenCounter, min_tokens: int,
                  min_saving_ratio: float, lossless: bool, whole: str) -> _Piece:  # fmt: skip
    """``piece`` with its complete records compressed as one JSON array (written back without
    the array's brackets when the result is an array, as one element when it is a table)."""
    arr = rec.array_text(piece)
    r = compress_json(arr, query, counter, min_tokens=min_tokens, min_saving_ratio=min_saving_ratio, lossless=lossless)
    if not r.changed:
        return _Piece(piece, "json", "", len(piece))
    out = _rekey(r, arr, whole)
    inner = out[1:-1] if out.startswith("[") and out.endswith("]") else out
    return _Piece(
        piece[: rec.start] + inner + piece[rec.end :], "json", f"{len(rec.values)} records: {r.reason}", len(piece)
    )


def _routed(piece: str, route: Route, min_tokens: int, whole: str) -> _Piece:
    if not piece.strip():
        return _Piece(piece, "text", "", len(piece))
    r = route(piece, min_tokens)
    if not r.changed:
        return _Piece(piece, r.kind, "", len(piece), r.reason == TRANSIENT_REASON)
    return _Piece(_rekey(r, piece, whole), r.kind, r.reason, len(piece))


def _cut_pieces(env: Envelope) -> tuple[list[str], list[str]]:
    """The payload's pieces between cuts and the cut markers between them."""
    pieces: list[str] = []
    marks: list[str] = []
    pos = 0
    for c in env.cuts:
        pieces.append(env.payload[pos : c.start])
        marks.append(env.payload[c.start : c.end])
        pos = c.end
    pieces.append(env.payload[pos:])
    return pieces, marks


def _payload(env: Envelope, route: Route, query: str, counter: TokenCounter, min_tokens: int,
             min_saving_ratio: float, lossless: bool, whole: str) -> list[_Piece]:  # fmt: skip
    """The payload's pieces compressed (module docstring), in order, cut markers included."""
    pieces, marks = _cut_pieces(env)
    head = head_records(pieces[0])
    if head is None:
        if lossless:
            return [_Piece(env.payload, "text", "", len(env.payload))]
        out: list[_Piece] = []
        for i, p in enumerate(pieces):
            out.append(_routed(p, route, min_tokens, whole))
            if i < len(marks):
                out.append(_Piece(marks[i], "text", "", 0))
        return out
    out = [_records_side(pieces[0], head, query, counter, min_tokens, min_saving_ratio, lossless, whole)]
    for i in range(1, len(pieces)):
        out.append(_Piece(marks[i - 1], "json", "", 0))
        p = pieces[i]
        tail = tail_records(p, head.values[0]) if i == len(pieces) - 1 else None
        if tail is None:
            out.append(_Piece(p, "json", "", len(p)))
        else:
            out.append(_records_side(p, tail, query, counter, min_tokens, min_saving_ratio, lossless, whole))
    return out


def compress_enveloped(text: str, env: Envelope, route: Route, query: str, counter: TokenCounter, *,
                       min_tokens: int, min_saving_ratio: float, lossless: bool = False) -> CompressResult:  # fmt: skip
    """Compress the tool output ``text`` split as ``env`` (``env.join(env.payload) == text``).

    ``route(piece, min_tokens)`` is the content router for a piece of payload; ``lossless``
    allows only transforms that drop nothing (JSON re-encoding; a lossless result carries no
    offload). Returns the unchanged ``text`` when nothing in the payload could be compressed or
    the whole output saves less than ``min_saving_ratio`` of its tokens. Never raises on bad
    input (a router failure leaves its piece as it is).
    """
    whole = offload_key(text)
    if env.join(env.payload) != text:
        return CompressResult.unchanged(text, "text", "envelope does not round-trip")
    if lossless and not env.cuts and head_records(env.payload) is None:
        r = compress_json(
            env.payload, query, counter, min_tokens=min_tokens, min_saving_ratio=min_saving_ratio, lossless=True
        )
        if not r.changed:
            return CompressResult.unchanged(
                text, r.kind if r.reason != "not json" else "text", f"{env.shape}: {r.reason}"[:300]
            )
        new = env.join(r.text)
        out = finish(text, new, counter, kind="json", strategy=f"envelope+{r.strategy}", reason=f"{env.shape}: {r.reason}"[:300],
                     what="envelope", min_saving_ratio=min_saving_ratio)  # fmt: skip
        return CompressResult(out.text, out.changed, out.kind, out.strategy, out.reason) if out.changed else out
    parts = _payload(env, route, query, counter, min_tokens, min_saving_ratio, lossless, whole)
    sizes: dict[str, int] = {}
    for p in parts:
        sizes[p.kind] = sizes.get(p.kind, 0) + p.size
    kind = max(sizes, key=lambda k: sizes[k]) if sizes else "text"
    if any(p.transient for p in parts):
        return CompressResult.unchanged(text, kind, TRANSIENT_REASON)  # no decision yet: same answer later
    notes = [p.note for p in parts if p.note]
    if not notes:
        return CompressResult.unchanged(text, kind, f"{env.shape}: payload kept ({kind})"[:300])
    cut = f"; {len(env.cuts)} agent cut(s)" if env.cuts else ""
    reason = f"{env.shape}{cut}: " + "; ".join(notes)
    new = env.join("".join(p.text for p in parts))
    out = finish(text, new, counter, kind=kind, strategy="envelope", reason=reason[:300],
                 what="parts of the payload", min_saving_ratio=min_saving_ratio)  # fmt: skip
    if lossless and out.changed:
        return CompressResult(out.text, True, out.kind, out.strategy, out.reason)  # nothing dropped: no offload
    return out
