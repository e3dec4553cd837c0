"""Column types and a statement hook so any JSON string can be written to any database.

A JSON string may hold a lone surrogate (``"\\ud83d"``) or a NUL (``"\\u0000"``). SQLite's
driver refuses the first (no UTF-8 form), PostgreSQL refuses both. Two layers handle them:

* :class:`AnyText`, for columns that must give back exactly what was stored (originals,
  compression results, system prompts compared later): such values are stored escaped and
  unescaped on load, so the round trip is exact on every database;
* :func:`scrub_parameters`, a ``before_cursor_execute`` hook on every engine
  (``db/engine.py``), for every other text (labels, summaries, names): what the database
  refuses becomes U+FFFD (lone surrogates everywhere, NULs on PostgreSQL only: SQLite stores a
  NUL as it is, and keys such as learned rules' ``"tool\0signature"`` must come back exactly),
  so a write never fails. Values :class:`AnyText` escaped pass it unchanged.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy.types import Text, TypeDecorator

#: First character of an escaped :class:`AnyText` value: U+FDD0, a Unicode noncharacter
#: ("for internal use"). A value that itself starts with it is escaped too, so loads are exact.
MARK = "\ufdd0"
_NEEDS = re.compile(r"[\ud800-\udfff\x00]")
_ESCAPE = re.compile(r"[\\\ud800-\udfff\x00]")
_UNESCAPE = re.compile(r"\\(\\|u([0-9a-f]{4}))")
_BAD = re.compile(r"[\ud800-\udfff\x00]")  # what PostgreSQL refuses
_BAD_SQLITE = re.compile(r"[\ud800-\udfff]")  # what SQLite's driver refuses


def escape_text(value: str) -> str:
    """``value`` unchanged when every database stores it as it is; else :data:`MARK` followed
    by ``value`` with ``\\`` written ``\\\\`` and each lone surrogate or NUL written ``\\uXXXX``."""
    if not value.startswith(MARK) and _NEEDS.search(value) is None:
        return value
    return MARK + _ESCAPE.sub(lambda m: "\\\\" if m.group() == "\\" else "\\u%04x" % ord(m.group()), value)


def unescape_text(value: str) -> str:
    """The inverse of :func:`escape_text`."""
    if not value.startswith(MARK):
        return value
    return _UNESCAPE.sub(lambda m: "\\" if m.group(1) == "\\" else chr(int(m.group(2), 16)), value[1:])


class AnyText(TypeDecorator):
    """``Text`` that stores any Python ``str`` exactly, lone surrogates and NULs included (see
    :func:`escape_text`); values without them are stored as they are, so existing rows and other
    readers see plain text. No migration: the column is ``TEXT`` as before."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Any) -> Any:
        return escape_text(value) if isinstance(value, str) else value

    def process_result_value(self, value: Any, dialect: Any) -> Any:
        return unescape_text(value) if isinstance(value, str) else value


def _scrub(value: Any, bad: re.Pattern) -> Any:
    if isinstance(value, str) and bad.search(value) is not None:
        return bad.sub("\ufffd", value)
    return value


def _scrub_one(params: Any, bad: re.Pattern) -> Any:
    if isinstance(params, dict):
        if any(isinstance(v, str) and bad.search(v) is not None for v in params.values()):
            return {k: _scrub(v, bad) for k, v in params.items()}
        return params
    if isinstance(params, (tuple, list)):
        if any(isinstance(v, str) and bad.search(v) is not None for v in params):
            return type(params)(_scrub(v, bad) for v in params)
        return params
    return params


def _values(params: Any) -> Any:
    """The values of one row's parameters (a mapping or a sequence; nothing else is scrubbed)."""
    if isinstance(params, dict):
        return params.values()
    return params if isinstance(params, (tuple, list)) else ()


def scrub_parameters(conn, cursor, statement, parameters, context, executemany):  # noqa: ANN001 - SQLAlchemy's hook signature
    """``before_cursor_execute`` hook (``retval=True``): in every ``str`` parameter, each lone
    surrogate (and on PostgreSQL each NUL) becomes U+FFFD. Returns ``(statement, parameters)``."""
    if executemany and isinstance(parameters, (list, tuple)):
        return statement, scrub_for(conn.dialect.name, parameters)[1]
    return statement, _scrub_one(parameters, _BAD_SQLITE if conn.dialect.name == "sqlite" else _BAD)


def scrub_for(dialect: str, rows: Any) -> tuple[bool, Any]:
    """``rows`` (a list or tuple of one statement's parameter rows: mappings or sequences) as
    :func:`scrub_parameters` leaves them for a database of ``dialect`` (``"sqlite"``, else
    PostgreSQL's rule), and whether any value changed."""
    bad = _BAD_SQLITE if dialect == "sqlite" else _BAD
    # one search over every string first: a bulk write of thousands of rows rarely holds one
    if bad.search("".join([v for p in rows for v in _values(p) if isinstance(v, str)])) is None:
        return False, rows
    return True, type(rows)(_scrub_one(p, bad) for p in rows)
