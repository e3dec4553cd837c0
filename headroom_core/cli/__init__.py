"""The ``headroom`` command (typer + rich): :func:`run` is the executable's entry point."""

from __future__ import annotations

import sys


def run() -> int:
    """Run ``headroom`` with ``sys.argv``; returns its exit status. Ctrl-C at any moment, the
    command's own imports included, ends it with status 130 and one line on standard error
    instead of a traceback."""
    try:
        from headroom_core.cli.main import app

        app()
    except KeyboardInterrupt:
        print("headroom: interrupted", file=sys.stderr)
        return 130
    except SystemExit as e:  # typer's normal end: its code (None or 0 for success)
        code = e.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    return 0
