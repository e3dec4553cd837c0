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


def test_a_pause_lasts_until_the_last_block_that_paused_ends_and_restores_the_state() -> None:
    import threading

    from headroom_core.gc_tuning import paused

    assert gc.isenabled()
    inner_started, outer_may_end = threading.Event(), threading.Event()

    def other() -> None:
        with paused():
            inner_started.set()
            outer_may_end.wait(10)

    t = threading.Thread(target=other)
    with paused():
        assert not gc.isenabled()
        t.start()
        inner_started.wait(10)
    assert not gc.isenabled()  # the other thread's block still runs
    outer_may_end.set()
    t.join(10)
    assert gc.isenabled()
    with paused(False):
        assert gc.isenabled()
    gc.disable()
    try:
        with paused():
            pass
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()
