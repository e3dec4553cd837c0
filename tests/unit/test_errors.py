"""Every exception class Headroom defines is under :class:`headroom_core.errors.HeadroomError`
at the level that says what can be done (issue 35), keeps the builtin base its callers catch,
or is one of the control-flow signals listed here with the reason.

The classes are found by importing every module of ``headroom_core`` and ``addons`` and
keeping the ``BaseException`` subclasses each defines; a source scan (:mod:`ast`) checks that
no class was missed (a module that failed to import, a class defined inside a function).
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import sys
from pathlib import Path

import headroom_core
from headroom_core.errors import DataProblem, EnvironmentProblem, HeadroomError, InternalError, UsageError, exit_status

ROOT = Path(__file__).resolve().parents[2]

#: Not under HeadroomError, on purpose: signals raised and caught inside one function or module
#: to leave a deep walk early. They never reach a caller, so no level applies (an
#: ``except HeadroomError`` must never swallow one by accident).
SIGNALS = {
    "headroom_core.request_plan.PlanAbandoned": "the commit gate says the caller stopped waiting; caught in plan_request",
    "headroom_core.wire.canonical._Unusual": "the fast path cannot write a value; caught in reserialize_canonical (slow path)",
    "headroom_core.compress.json_crush._Unfaithful": "a text that cannot be re-serialised faithfully; caught in the same module (text kept)",
}

#: The level of each class and the builtin it still is, so that no caller's ``except`` changed.
LEVELS = {
    "headroom_core.settings.SettingsError": (UsageError, ValueError),
    "headroom_core.pricing.PriceError": (UsageError, ValueError),
    "headroom_core.learn.writers.TargetError": (UsageError, ValueError),
    "headroom_core.learn.readers.LogError": (UsageError, ValueError),
    "headroom_core.mcpserver.install.InstallError": (UsageError, ValueError),
    "headroom_core.memory.store.MemoryInputError": (UsageError, ValueError),
    "headroom_core.db.engine.DatabaseError": (EnvironmentProblem, RuntimeError),
    "headroom_core.db.sealed.SecretError": (EnvironmentProblem, RuntimeError),
    "headroom_core.ledger_writer.DatabaseUnavailable": (
        EnvironmentProblem,
        Exception,
    ),  # and sqlalchemy's OperationalError
    "headroom_core.cli.proxy_process.ProxyError": (EnvironmentProblem, RuntimeError),
    "headroom_core.compress.embeddings.EmbeddingModelUnavailable": (EnvironmentProblem, RuntimeError),
    "headroom_core.compress.tokens.TokenizerUnavailable": (EnvironmentProblem, RuntimeError),
    "headroom_core.compress.worker.CompressTimeout": (EnvironmentProblem, TimeoutError),
    "headroom_core.ccr.followup_error.FollowUpLost": (EnvironmentProblem, ConnectionError),
    "headroom_stream_relay.RelayError": (EnvironmentProblem, RuntimeError),
    "headroom_core.wire.decode.TooLarge": (DataProblem, ValueError),
    "headroom_core.wire.envelope.EnvelopeError": (DataProblem, ValueError),
    "headroom_core.wire.jsonedit.JSONPathError": (DataProblem, LookupError),
    "headroom_core.wire.view.ViewError": (DataProblem, ValueError),
    "headroom_core.cache.breakpoints.BreakpointError": (InternalError, ValueError),
}


def _module_names() -> list[str]:
    names = [m.name for m in pkgutil.walk_packages(headroom_core.__path__, "headroom_core.")]
    return names + sorted(p.stem for p in (ROOT / "addons").glob("*.py"))


def _defined_exceptions() -> dict[str, type[BaseException]]:
    """``module.Class`` -> class, for every exception class a module of ours defines (the
    hierarchy's own module aside)."""
    if str(ROOT / "addons") not in sys.path:
        sys.path.insert(0, str(ROOT / "addons"))
    out = {}
    for name in _module_names():
        if name == "headroom_core.errors":
            continue
        module = importlib.import_module(name)
        for attr, obj in vars(module).items():
            if isinstance(obj, type) and issubclass(obj, BaseException) and obj.__module__ == name:
                out[f"{name}.{attr}"] = obj
    return out


def test_every_exception_class_is_under_headroom_error_or_a_listed_signal():
    found = _defined_exceptions()
    outside = {n for n, c in found.items() if not issubclass(c, HeadroomError)}
    assert outside == set(SIGNALS), "derive it from a level of headroom_core.errors (or list a signal here, with why)"
    levels = (UsageError, EnvironmentProblem, DataProblem, InternalError)
    for n, c in found.items():
        if n in SIGNALS:
            continue
        assert sum(issubclass(c, lv) for lv in levels) == 1, n  # exactly one level, never the bare base
    assert {n for n in found if n not in SIGNALS} == set(LEVELS)
    for n, (level, builtin) in LEVELS.items():
        assert issubclass(found[n], level) and issubclass(found[n], builtin), n


def test_the_import_scan_missed_no_class():
    """Classes whose bases name an exception, read from the source: each was found by import."""
    found = set(_defined_exceptions())
    written = set()
    for path in [*(ROOT / "headroom_core").rglob("*.py"), *(ROOT / "addons").glob("*.py")]:
        if path == ROOT / "headroom_core" / "errors.py":
            continue
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts[1:] if rel.parts[0] == "addons" else rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(
                ast.unparse(b).split(".")[-1].endswith(("Error", "Exception", "Unavailable", "Timeout", "TooLarge"))
                for b in node.bases
            ):
                written.add(".".join([*parts, node.name]))
    assert written <= found, written - found


def test_exit_status_by_level():
    from headroom_core.db.engine import DatabaseError
    from headroom_core.settings import SettingsError
    from headroom_core.wire.view import ViewError

    assert exit_status(SettingsError("x")) == 2
    assert exit_status(DatabaseError("x")) == 1
    assert exit_status(ViewError("x")) is None
    assert exit_status(InternalError("x")) is None
    assert exit_status(KeyError("x")) is None
