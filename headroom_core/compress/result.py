"""Value types every compressor returns."""

from __future__ import annotations

from dataclasses import dataclass


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
