"""Registers the failure learner with the request walk (imported by
:func:`headroom_core.runtime.load_extensions`): the live learner as an observer, the
past-failures block as an injector."""

from __future__ import annotations

from typing import TYPE_CHECKING

from headroom_core.extensions import Extensions
from headroom_core.learn.live import observe, past_failures

if TYPE_CHECKING:
    from headroom_core.runtime import Runtime


def register(ext: "Extensions[Runtime]") -> None:
    """Add :func:`~headroom_core.learn.live.past_failures` to the injectors and
    :func:`~headroom_core.learn.live.observe` to the observers."""
    ext.injectors.append(past_failures)
    ext.observers.append(observe)
