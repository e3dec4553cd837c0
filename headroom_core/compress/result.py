"""Value types every compressor returns."""

from __future__ import annotations

from dataclasses import dataclass

#: The strategy of a decision made without time to compress: the output went upstream whole and
#: is decided again when there is time (late compression, :mod:`headroom_core.cache.late`).
DEFERRED = "deferred"
#: The reason of a :data:`DEFERRED` decision, as the stats show it.
DEFERRED_REASON = "no time to compress: sent whole, decided later"


@dataclass(frozen=True)
class Offload:
    """An original the compressed text no longer holds in full.

    ``key`` is :func:`headroom_core.compress.markers.offload_key` of ``original``; ``original`` is
    the exact text to give back on retrieval; ``what`` says what was dropped (marker wording).
    """

    key: str
    original: str
    what: str


@dataclass(frozen=True)
class CompressResult:
    """The outcome of compressing one piece of content.

    ``text`` is what goes upstream (the original itself when ``changed`` is False);
    ``offloads`` are the originals the markers in ``text`` refer to; ``kind`` is the content kind
    (``"json"``, ``"code"``, …); ``strategy`` names what was done (``"crush"``, ``"table"``,
    ``"unchanged"``); ``reason`` says why, in a few words, for the stats.
    """

    text: str
    changed: bool
    kind: str
    strategy: str
    reason: str
    offloads: tuple[Offload, ...] = ()

    @staticmethod
    def unchanged(text: str, kind: str, reason: str) -> "CompressResult":
        """The result that leaves ``text`` as it is, with the reason why."""
        return CompressResult(text=text, changed=False, kind=kind, strategy="unchanged", reason=reason)

    @staticmethod
    def deferred(text: str) -> "CompressResult":
        """The decision for ``text`` when there was no time to compress it (a compression
        timeout's fallback): sent as it is, strategy :data:`DEFERRED`. Recorded like any other
        decision, so every proxy of a team sends the same bytes; replaced once, when compressing
        it later pays (:mod:`headroom_core.cache.late`)."""
        return CompressResult(text=text, changed=False, kind="", strategy=DEFERRED, reason=DEFERRED_REASON)

    @property
    def is_deferred(self) -> bool:
        """Whether this is a :meth:`deferred` decision (to be decided again)."""
        return self.strategy == DEFERRED
