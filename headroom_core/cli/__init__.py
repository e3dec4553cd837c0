"""The ``headroom`` command (typer + rich): :func:`run` is the executable's entry point."""

from __future__ import annotations

import sys


def run() -> int:
    """Run ``headroom`` with ``sys.argv``; returns its exit status. Ctrl-C at any moment, the
    command's own imports included, ends it with status 130 and one line on standard error
    instead of a traceback.

    An exception that escapes a command is caught by its level (:mod:`headroom_core.errors`): a
    :class:`~headroom_core.errors.UsageError` prints ``headroom <command>: <message>`` on
    standard error and returns 2, an :class:`~headroom_core.errors.EnvironmentProblem` the same
    line and 1; anything else (an :class:`~headroom_core.errors.InternalError`, a
    :class:`~headroom_core.errors.DataProblem`, a builtin exception) propagates with its
    traceback, a bug to report."""
    try:
        from headroom_core.cli.main import app

        app()
    except KeyboardInterrupt:
        print("headroom: interrupted", file=sys.stderr)
        return 130
    except SystemExit as e:  # typer's normal end: its code (None or 0 for success)
        code = e.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except Exception as e:
        from headroom_core.errors import exit_status

        status = exit_status(e)
        if status is None:
            raise
        from rich.markup import escape

        from headroom_core.cli.ui import err

        command = _command(sys.argv[1:])
        message = " ".join((str(e) or type(e).__name__).split())  # one line, whatever the message holds
        err.print(
            f"[red]headroom{' ' + command if command else ''}:[/] {escape(message)}", soft_wrap=True, highlight=False
        )
        return status
    return 0


def _command(args: list[str]) -> str:
    """The command a ``headroom`` argument list runs (its first word that is not an option), or
    ``""``: the prefix of a one-line error (``headroom stats: …``, ``headroom: …``)."""
    from headroom_core.cli.main import COMMANDS

    word = next((a for a in args if not a.startswith("-")), "")
    return word if word in COMMANDS else ""
