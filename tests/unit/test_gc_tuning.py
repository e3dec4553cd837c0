"""GC tuning: what lived before a freeze is left out of later collections; garbage is not kept."""

from __future__ import annotations

import gc
import weakref

from headroom_core.gc_tuning import freeze_long_lived


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_objects_alive_at_the_freeze_leave_the_collected_generations_and_garbage_cycles_are_freed() -> None:
    kept = _Node()
    kept.other = _Node()
    kept.other.other = kept  # a live cycle: must survive, and stop being walked
    a, b = _Node(), _Node()
    a.other, b.other = b, a  # a garbage cycle at freeze time: must be collected, not frozen
    gone = weakref.ref(a)
    del a, b
    try:
        n = freeze_long_lived("a test")
        # the count itself moves after (frozen objects freed by reference counting, or another
        # freeze by an embedding model an earlier test started loading): what matters is below
        assert n > 0 and gc.get_freeze_count() > 0
        assert gone() is None
        assert not any(o is kept for o in gc.get_objects())
        later = _Node()
        assert any(o is later for o in gc.get_objects())
        assert kept.other.other is kept
    finally:
        gc.unfreeze()
    assert any(o is kept for o in gc.get_objects())
