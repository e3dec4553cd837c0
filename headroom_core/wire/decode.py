"""HTTP content-codings undone incrementally: bounded for request bodies, chunk by chunk for
streamed responses.

Codings (RFC 9110 §8.4.1 and the IANA registry): ``gzip`` (and ``x-gzip``), ``deflate`` (zlib
format, or raw DEFLATE as some servers send it), ``br`` (RFC 7932), ``zstd`` (RFC 8878) and
``identity``; a list such as ``gzip, br`` was applied left to right, so it is undone right to
left. The libraries are the ones mitmproxy itself uses (``zlib``, ``brotli``, ``zstandard``).

A small compressed body may expand enormously (a "zip bomb": 1 MB of gzip can hold 1 GiB).
:func:`decode_limited` never holds more than about ``limit`` bytes of output: it decodes in
slices and stops with :class:`TooLarge` as soon as the output passes the limit.
"""

from __future__ import annotations

import io
import zlib
from typing import Protocol

import brotli
import zstandard

from headroom_core.errors import DataProblem

#: Output per step while decoding a body with a limit (bytes).
STEP = 64 * 1024
#: Input per step for brotli, whose decoder has no output bound: at most this many compressed
#: bytes are expanded at once (a brotli meta-block holds at most 16 MiB, RFC 7932 §9.2).
_BROTLI_SLICE = 64


class TooLarge(ValueError, DataProblem):
    """The decoded body passed the limit; ``size`` is how far decoding got (bytes), more than
    ``limit``."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"decoded body exceeds {limit} bytes")
        self.size = size
        self.limit = limit


class Decoder(Protocol):
    """Undoes one content-coding: :meth:`feed` successive pieces, then :meth:`flush`."""

    def feed(self, data: bytes, max_out: int = 0) -> bytes:
        """Decoded bytes for ``data`` (``max_out`` > 0: at most that many now; the rest of the
        input is kept and comes out on the next calls, which may pass ``b""``). Raises
        ``ValueError`` on corrupt input."""
        ...

    def pending(self) -> bool:
        """Whether input is kept that has not been decoded yet."""
        ...

    def flush(self) -> bytes:
        """What is left at the end of the input; raises ``ValueError`` when the input was cut
        short in a way the coding detects."""
        ...


class _Zlib:
    """gzip (members one after another) or deflate (zlib format, else raw DEFLATE)."""

    def __init__(self, gzip: bool) -> None:
        self.gzip = gzip
        self._wbits = 31 if gzip else 15
        self._d = zlib.decompressobj(self._wbits)
        self._tail = b""
        self._started = False

    def feed(self, data: bytes, max_out: int = 0) -> bytes:
        buf = self._tail + data
        self._tail = b""
        out = bytearray()
        while buf:
            try:
                piece = self._d.decompress(buf, max_out - len(out) if max_out else 0)
            except zlib.error as e:
                if not self.gzip and not self._started and self._wbits == 15:
                    self._wbits = -15  # deflate without the zlib wrapper (RFC 9110 §8.4.1.2 note)
                    self._d = zlib.decompressobj(-15)
                    continue
                raise ValueError(f"{'gzip' if self.gzip else 'deflate'}: {e}") from e
            self._started = True
            out += piece
            if self._d.eof:
                # the member ended; what follows (``unused_data``) is a further gzip member, or
                # trailing bytes that are ignored (zlib keeps the same bytes in unconsumed_tail)
                rest = self._d.unused_data
                if self.gzip and rest.lstrip(b"\0"):
                    self._d = zlib.decompressobj(31)
                    buf = rest
                    if max_out and len(out) >= max_out:
                        self._tail = rest
                        break
                    continue
                break
            if self._d.unconsumed_tail:
                self._tail = self._d.unconsumed_tail
            break
        return bytes(out)

    def pending(self) -> bool:
        return bool(self._tail)

    def flush(self) -> bytes:
        out = self.feed(b"") if self._tail else b""
        out += self._d.flush()
        if self._started and not self._d.eof:
            raise ValueError(f"{'gzip' if self.gzip else 'deflate'}: the compressed data ends early")
        return out


class _Brotli:
    def __init__(self) -> None:
        self._d = brotli.Decompressor()
        self._tail = b""

    def feed(self, data: bytes, max_out: int = 0) -> bytes:
        buf = self._tail + data
        self._tail = b""
        out = bytearray()
        i = 0
        try:
            while i < len(buf):
                n = _BROTLI_SLICE if max_out else len(buf)
                out += self._d.process(buf[i : i + n])
                i += n
                if max_out and len(out) >= max_out:
                    break
        except brotli.error as e:
            raise ValueError(f"br: {e}") from e
        self._tail = buf[i:]
        return bytes(out)

    def pending(self) -> bool:
        return bool(self._tail)

    def flush(self) -> bytes:
        out = self.feed(b"") if self._tail else b""
        if not self._d.is_finished():
            raise ValueError("br: the compressed data ends early")
        return out


class _Zstd:
    def __init__(self) -> None:
        self._dctx = zstandard.ZstdDecompressor()
        self._d = self._dctx.decompressobj()
        self._tail = b""
        self._started = False

    def feed(self, data: bytes, max_out: int = 0) -> bytes:
        buf = self._tail + data
        self._tail = b""
        out = bytearray()
        i = 0
        try:
            while i < len(buf):
                n = _BROTLI_SLICE if max_out else len(buf)
                piece = buf[i : i + n]
                i += n
                self._started = True
                out += self._d.decompress(piece)
                while self._d.eof and self._d.unused_data:  # frames one after another
                    rest = self._d.unused_data
                    self._d = self._dctx.decompressobj()
                    out += self._d.decompress(rest)
                if self._d.eof:
                    self._d = self._dctx.decompressobj()
                if max_out and len(out) >= max_out:
                    break
        except zstandard.ZstdError as e:
            raise ValueError(f"zstd: {e}") from e
        self._tail = buf[i:]
        return bytes(out)

    def pending(self) -> bool:
        return bool(self._tail)

    def flush(self) -> bytes:
        return self.feed(b"") if self._tail else b""


class _Chain:
    """Several codings: ``decoders`` in the order they are undone."""

    def __init__(self, decoders: list[Decoder]) -> None:
        self.decoders = decoders

    def feed(self, data: bytes, max_out: int = 0) -> bytes:
        for d in self.decoders:  # each stage keeps what it could not expand yet
            data = d.feed(data, max_out)
        return data

    def pending(self) -> bool:
        return any(d.pending() for d in self.decoders)

    def flush(self) -> bytes:
        data = b""
        for i, d in enumerate(self.decoders):
            data = (d.feed(data) if data else b"") + d.flush()
        return data


def _one(coding: str) -> Decoder | None:
    c = coding.strip().lower()
    if c in ("", "identity", "none"):
        return None
    if c in ("gzip", "x-gzip"):
        return _Zlib(gzip=True)
    if c in ("deflate", "deflateraw"):
        return _Zlib(gzip=False)
    if c == "br":
        return _Brotli()
    if c == "zstd":
        return _Zstd()
    raise ValueError(f"unknown content-encoding {coding.strip()!r}")


def decoder_for(content_encoding: str) -> Decoder | None:
    """A decoder for a ``content-encoding`` header value (None: nothing to undo). Raises
    ``ValueError`` for a coding this module does not know."""
    ds = [d for d in (_one(c) for c in reversed(content_encoding.split(","))) if d is not None]
    if not ds:
        return None
    return ds[0] if len(ds) == 1 else _Chain(ds)


def decode_limited(body: bytes, content_encoding: str, limit: int) -> bytes:
    """``body`` with its content-codings undone, never holding much more than ``limit`` bytes
    of output. Raises :class:`TooLarge` once the output passes ``limit`` bytes, ``ValueError``
    for an unknown coding or corrupt data."""
    d = decoder_for(content_encoding)
    if d is None:
        if len(body) > limit:
            raise TooLarge(len(body), limit)
        return body
    out = io.BytesIO()
    size = 0
    data = body
    while True:
        piece = d.feed(data, STEP)
        data = b""
        size += len(piece)
        if size > limit:
            raise TooLarge(size, limit)
        out.write(piece)
        if not piece and not d.pending():
            break
    rest = d.flush()
    size += len(rest)
    if size > limit:
        raise TooLarge(size, limit)
    out.write(rest)
    return out.getvalue()
