"""Which tool outputs show a file's text that the agent may have to reproduce byte for byte.

Claude Code's ``Edit`` refuses an ``old_string`` that does not match the file, and an agent
builds that string from the last text of the file it saw. So every *view* of a file (a read,
or the ``cat -n`` snippet an edit result shows) stays verbatim until a later *full* view of the
same path replaces it in the agent's knowledge: a later full read (no offset/limit, ``cat
FILE``) or a ``Write`` of the whole file. Older views, superseded that way, may be compressed.

An ``Edit``/``MultiEdit`` alone does not supersede an earlier read: the agent keeps composing
further edits of the same file from that read (the edit result shows only a snippet), so
compressing it would alter bytes the agent must reproduce.

Recognised calls (tool name → arguments):

* Claude Code: ``Read`` (``file_path``, optional ``offset``/``limit``), ``Write``
  (``file_path``), ``Edit``/``MultiEdit`` (``file_path``), ``NotebookRead``/``NotebookEdit``
  (``notebook_path``), ``Bash`` (``command``, see shell reads).
* Shell tools (Claude Code ``Bash``, Codex ``shell``/``local_shell``/``exec_command``, any
  ``arguments.command`` or ``arguments.cmd``): a single command (no pipe, redirect or ``;``)
  ``cat [-n] FILE…`` or ``nl FILE`` (full reads), ``sed -n 'A,Bp' FILE``, ``head``/``tail``
  (partial reads).
* Codex ``apply_patch`` (``*** Update File: PATH`` / ``*** Add File: PATH``): edits.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from typing import Any, Mapping

from headroom_core.wire.blocks import ToolCall

READ_TOOLS = frozenset({"Read", "NotebookRead", "read_file", "view", "open_file"})
WRITE_TOOLS = frozenset({"Write", "write_file", "create_file"})
EDIT_TOOLS = frozenset({"Edit", "MultiEdit", "NotebookEdit", "str_replace_based_edit_tool", "edit_file"})


@dataclass(frozen=True)
class FileAccess:
    """What one call did to files: ``paths`` (normalised), ``action`` ``"read"``, ``"write"``
    or ``"edit"``, and ``full`` (the whole file's text is now known to the agent)."""

    paths: tuple[str, ...]
    action: str
    full: bool


def _norm(p: Any) -> str:
    return os.path.normpath(p.strip()) if isinstance(p, str) and p.strip() else ""


def command_of(args: Any) -> str:
    """The shell command a call's arguments hold (``command`` or ``cmd``, a string or an argv
    list such as ``["bash", "-lc", "cat x"]``), as one string; "" when none."""
    if not isinstance(args, dict):
        return ""
    c = args.get("command", args.get("cmd"))
    if isinstance(c, list) and all(isinstance(x, str) for x in c):
        if len(c) >= 3 and c[0] in ("bash", "sh", "zsh", "/bin/bash", "/bin/sh") and c[1] in ("-lc", "-c"):
            return c[2]
        return shlex.join(c)
    return c if isinstance(c, str) else ""


def shell_read(command: str) -> FileAccess | None:
    """The file read a simple shell command does, or None (see module docstring)."""
    if not command or re.search(r"[|;&<>`$]", command):
        return None
    try:
        argv = shlex.split(command)
    except ValueError:
        return None
    if not argv:
        return None
    prog, rest = os.path.basename(argv[0]), argv[1:]
    files = [a for a in rest if not a.startswith("-")]
    if prog in ("cat", "nl") and files and all(a in ("-n", "-b", "-A") or not a.startswith("-") for a in rest):
        return FileAccess(tuple(_norm(f) for f in files), "read", True)
    if prog == "sed" and rest[:1] == ["-n"] and len(files) >= 2 and re.fullmatch(r"\d+(,\d+)?p", files[0]):
        return FileAccess(tuple(_norm(f) for f in files[1:]), "read", False)
    if prog in ("head", "tail") and files:
        return FileAccess(tuple(_norm(f) for f in files if not re.fullmatch(r"\d+", f)), "read", False)
    return None


def file_access(call: ToolCall) -> FileAccess | None:
    """What ``call`` did to files, or None when it touched none that matter here."""
    a = call.arguments if isinstance(call.arguments, dict) else {}
    path = _norm(a.get("file_path") or a.get("notebook_path") or a.get("path") or "")
    if call.name in READ_TOOLS and path:
        partial = any(a.get(k) not in (None, "", 0) for k in ("offset", "limit", "view_range", "line_range"))
        return FileAccess((path,), "read", not partial)
    if call.name in WRITE_TOOLS and path:
        return FileAccess((path,), "write", True)
    if call.name in EDIT_TOOLS and path:
        if call.name == "str_replace_based_edit_tool" and a.get("command") == "view":
            return FileAccess((path,), "read", not a.get("view_range"))
        if call.name == "str_replace_based_edit_tool" and a.get("command") == "create":
            return FileAccess((path,), "write", True)
        return FileAccess((path,), "edit", False)
    if call.name == "apply_patch" or (isinstance(a.get("input"), str) and "*** Begin Patch" in a["input"]):
        text = a.get("input") if isinstance(a.get("input"), str) else command_of(a)
        paths = tuple(_norm(p) for p in re.findall(r"^\*\*\* (?:Update|Add) File: (.+)$", text or "", re.M))
        return FileAccess(paths, "edit", False) if paths else None
    return shell_read(command_of(a))


def verbatim_call_ids(calls: Mapping[str, ToolCall]) -> frozenset[str]:
    """Ids of the calls whose outputs must stay verbatim: every read, write or edit of a path
    with no later full read or write of that path (``calls`` in conversation order)."""
    accesses = [(cid, file_access(c)) for cid, c in calls.items()]
    last_full: dict[str, int] = {}
    for i, (_, acc) in enumerate(accesses):
        if acc is not None and acc.full:
            for p in acc.paths:
                last_full[p] = i
    keep = set()
    for i, (cid, acc) in enumerate(accesses):
        if acc is None:
            continue
        if any(last_full.get(p, -1) <= i for p in acc.paths):
            keep.add(cid)
    return frozenset(keep)
