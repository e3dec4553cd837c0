"""Headroom's exception hierarchy: one base, four levels that say what can be done about it.

Every exception class Headroom defines (in ``headroom_core`` and ``addons``) derives from one of
the levels below, in its own module: the class stays where it is raised, only its base says its
level. A class that was a ``ValueError``, ``RuntimeError``, … before keeps that base too
(multiple inheritance), so every ``except`` that caught it still does::

    HeadroomError
    ├── UsageError          the user's input, option or configuration cannot be used   exit 2
    ├── EnvironmentProblem  the machine, database, files, CA, network or an installed
    │                       package is not as needed                                   exit 1
    ├── DataProblem         data handed to Headroom (a request or response body, a
    │                       frame) is not in a form it reads, or over a size limit      traceback
    └── InternalError       a bug: Headroom broke one of its own rules                  traceback

What the ``headroom`` command does with one that escapes a command (its entry point,
:func:`headroom_core.cli.run`): a :class:`UsageError` or an :class:`EnvironmentProblem` prints one
line, ``headroom <command>: <message>``, on standard error and exits 2 or 1 (no traceback: the
message says what to fix); anything else, a :class:`DataProblem` and an :class:`InternalError`
included, keeps Python's traceback and exit status 1, because a command that lets one escape
has a bug worth reporting. Commands still catch what they expect where they can say more
(``headroom stats`` names the ``--db-url`` it could not open); the entry point is the net under
them. In the proxy nothing escapes to a user: a request whose handling raises goes upstream as
sent (fail open), size limits answer 413 or close a WebSocket with 1009 (fail closed).

Not under :class:`HeadroomError`, on purpose (``tests/unit/test_errors.py`` lists them with
the reason): control-flow signals, raised and caught inside one function or module to leave a
deep walk early (``request_plan.PlanAbandoned``, ``wire.canonical._Unusual``,
``compress.json_crush._Unfaithful``); they never reach a caller.

A new exception class: derive it from the level that says what the user can do (and from the
builtin it replaces, if callers catch that), say in its docstring when it is raised, and add a
test that gives its message.
"""

from __future__ import annotations

__all__ = ["DataProblem", "EnvironmentProblem", "HeadroomError", "InternalError", "UsageError", "exit_status"]


class HeadroomError(Exception):
    """The base of every exception Headroom defines; catch a level below, not this, unless the
    code only reports (the CLI's entry point does: see :func:`exit_status`)."""


class UsageError(HeadroomError):
    """The user's input, command-line option or configuration cannot be used: a setting, a
    price entry, a ``--target`` name, a log file that is not an agent's log, a memory that
    cannot be saved as asked, a config file that cannot be changed safely. The message names
    the value and its source (option, ``HEADROOM_*`` variable, ``config.toml``) and what a valid
    one looks like. The CLI prints ``headroom <command>: <message>`` and exits 2 (the status of
    click's own usage errors)."""


class EnvironmentProblem(HeadroomError):
    """The machine is not as Headroom needs it, and the user can change that: the database
    cannot be opened or migrated, the secret key file is unreadable, the proxy cannot start or
    be reached, a model or vocabulary package is missing, a connection went away, a worker ran
    out of time on a busy machine. (Not named ``EnvironmentError``: that is Python's alias of
    ``OSError``.) The message names the resource and what to do. The CLI prints ``headroom
    <command>: <message>`` and exits 1."""


class DataProblem(HeadroomError):
    """Data handed to Headroom from outside (a request or response body, a WebSocket frame, a
    JSON document and a path into it) is not in the form the code reads, or passes a size limit.
    The user cannot fix it; the caller decides: the proxy sends such a request upstream as sent
    (fail open), or refuses it when it passes a size limit (413, WebSocket close 1009). One that
    escapes a CLI command keeps its traceback (the command should have said which input)."""


class InternalError(HeadroomError):
    """A bug: Headroom broke a rule of its own (for example a planned edit that moved a
    ``cache_control`` breakpoint). Where a request is at stake the proxy catches it and sends
    the request as sent; the CLI keeps the traceback and exits 1, so it gets reported."""


def exit_status(e: BaseException) -> int | None:
    """The ``headroom`` exit status for ``e`` when it escapes a command and is told in one line:
    2 for a :class:`UsageError`, 1 for an :class:`EnvironmentProblem`; None for anything else
    (the traceback is kept)."""
    if isinstance(e, UsageError):
        return 2
    if isinstance(e, EnvironmentProblem):
        return 1
    return None
