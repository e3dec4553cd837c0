"""Which project a request belongs to: memories, learned rules, failures and tool statistics
are kept apart per project.

The project is the ``x-headroom-project`` header, else the working directory the agent states,
found by the structure of what agents send rather than one release's sentence: an absolute path
after a key that names a working directory (``Working directory: /p``, ``- Primary working
directory: /p``, ``cwd = /p``, ``<cwd>/p</cwd>``, ``I'm currently working in the directory: /p``),
in an environment-looking block (inside an XML-ish element such as ``<env>``,
``<environment_context>``, ``<system-reminder>``, or among other ``Key: value`` lines) or, failing
that, a working-directory key after a sentence with the path ending its line, in the
system prompt, the first user messages or any system/developer message. A key that names a
workspace or project directory (``Workspace root folder: /p``, ``- **Workspace Directories:**``
followed by a list of paths) counts only when no working directory is stated. Agents state it
like this (looked up in their sources, 2025-2026): Claude Code 1.x ``Working directory: /p`` in
``<env>`` of the system prompt; Claude Code 2.x `` - Primary working directory: /p`` in a
``<system-reminder>`` of the first user message; Codex ``<cwd>/p</cwd>`` in
``<environment_context>`` of a user or developer item; opencode ``  Working directory: /p`` in
``<env>`` of its system prompt; Gemini CLI ``I'm currently working in the directory: /p``, later
``- **Workspace Directories:**`` and ``  - /p`` in ``<session_context>`` of the first user message.

Where no project is found, the conversation is its own project
(:func:`conversation_project`, marked by :data:`CONVERSATION_PREFIX`): nothing of it is pooled
with any other conversation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from headroom_core.wire.dialects import for_body

PROJECT_HEADER = "x-headroom-project"
#: The project of a conversation that states none: this prefix and 16 hex digits of its session key.
CONVERSATION_PREFIX = "conversation:"
#: Most characters of a project key (the database columns hold 512).
MAX_PROJECT = 512

MAX_SCAN = 64 * 1024  # characters of each text searched: environment blocks sit near the start
#: Conversation elements looked at whatever their role (user messages; Codex's environment item).
FIRST_ELEMENTS = 3
#: Conversation elements searched for a later system/developer message with an environment block.
MAX_ELEMENTS = 256

# An absolute path: POSIX, a Windows drive, or a UNC share; up to the end of the line or a tag.
_ABS = r"(?:/|[A-Za-z]:[\\/]|\\\\)[^\n<>\"|?*]*"
#: The same, lazy: blanks and marks after it stay outside.
_PATH = _ABS + "?"
_MARK = r"(?:\*\*|__|`)?"
# "Key: value" on one line, after optional indentation, quote marks and a list bullet; the key
# is up to ~10 words (a sentence like "I'm currently working in the directory" included).
_LINE = re.compile(
    rf"^[ \t>]*(?:[-*+\u2022][ \t]+)?{_MARK}(?P<key>[A-Za-z][\w' ()./-]{{0,80}}?){_MARK}[ \t]*[:=]{_MARK}[ \t]*{_MARK}(?P<path>{_PATH})[ \t]*{_MARK}[ \t]*$",
    re.M,
)
# "Key:" ending its line, its value the first item of the list that follows.
_LIST = re.compile(
    rf"^[ \t>]*(?:[-*+\u2022][ \t]+)?{_MARK}(?P<key>[A-Za-z][\w' ()./-]{{0,80}}?){_MARK}[ \t]*:[ \t]*{_MARK}[ \t]*\n[ \t]*[-*+\u2022][ \t]+{_MARK}(?P<path>{_PATH}){_MARK}[ \t]*$",
    re.M,
)
# "<key>path</key>"
_ELEMENT = re.compile(rf"<(?P<key>[A-Za-z][\w.-]{{0,40}})>[ \t\r\n]*(?P<path>{_PATH})[ \t\r\n]*</(?P=key)>")
# "… sentence. Key: /path" ending its line: a working-directory statement after other text
_TAIL = re.compile(rf"(?:^|[.!?;][ \t]+)(?P<key>[A-Z][\w' -]{{0,40}}?)[ \t]*:[ \t]*(?P<path>{_PATH})[ \t]*$", re.M)
# any "Key: value" line (a neighbour that makes a block of them)
_PAIR = re.compile(r"^[ \t>]*(?:[-*+\u2022][ \t]+)?\S[^:\n]{0,80}:[ \t]*\S")
_OPEN = re.compile(r"<([A-Za-z][\w.-]{0,40})(?:[ \t][^<>\n]*)?>")

_WORD = re.compile(r"[a-z]+")
_DIR_WORDS = frozenset({"directory", "directories", "dir", "dirs", "folder", "folders", "path", "root"})
#: Keys about some other directory (Gemini's "project's temporary directory", a cache, logs, ...).
_OTHER_DIRS = frozenset(
    {
        "temporary",
        "temp",
        "tmp",
        "cache",
        "log",
        "logs",
        "output",
        "config",
        "home",
        "data",
        "backup",
        "install",
        "build",
        "plugin",
        "plugins",
    }
)


def _words(key: str) -> list[str]:
    """The lowercase words of a key, ``_``/``-``/``.`` and camel case splitting words."""
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", key)
    return _WORD.findall(spaced.lower())


def key_rank(key: str) -> int | None:
    """How surely ``key`` names the working directory: 0 it does (``cwd``, ``pwd``,
    ``workdir``, "working …directory/folder", "current directory"), 1 it names a workspace or
    project directory, None neither (or a directory of another kind: temporary, cache, …).
    Keys of more than 10 words are no keys."""
    w = _words(key)
    if not w or len(w) > 10 or _OTHER_DIRS.intersection(w):
        return None
    ws = set(w)
    if (
        ws & {"cwd", "pwd", "workdir", "wd"}
        or ("working" in ws and ws & _DIR_WORDS)
        or (ws & {"current", "currently"} and ws & _DIR_WORDS - {"root"})
    ):
        return 0
    if ws & {"workspace", "project", "worktree", "repository", "repo"} and ws & _DIR_WORDS:
        return 1
    if "worktree" in ws:
        return 1
    return None


def _clean(path: str) -> str | None:
    """The path as a project key (trailing blanks and separators off, at most
    :data:`MAX_PROJECT` characters), or None when it is empty or not absolute."""
    p = path.strip().rstrip("`*").strip()
    if len(p) > 1:
        p = p.rstrip("/\\") or p[0]
        if re.fullmatch(r"[A-Za-z]:", p):
            p += "\\"
    return p[:MAX_PROJECT] if re.match(_ABS, p) else None


def _in_element(text: str, pos: int) -> bool:
    """Whether ``pos`` lies inside an XML-ish element of ``text`` (an opening tag before it
    whose closing tag follows it)."""
    for m in _OPEN.finditer(text, 0, pos):
        if text.find(f"</{m.group(1)}>", pos) >= 0:
            return True
    return False


def _has_pair_neighbour(text: str, start: int, end: int) -> bool:
    """Whether the line just before or just after ``text[start:end]`` (one line) is another
    ``Key: value`` line (blank lines end a block)."""
    before = text.rfind("\n", 0, max(0, start - 1))
    prev = text[before + 1 : max(0, start - 1)] if start > 0 else ""
    nxt_end = text.find("\n", end + 1)
    nxt = text[end + 1 : nxt_end if nxt_end >= 0 else len(text)] if end < len(text) else ""
    return bool(_PAIR.match(prev)) or bool(_PAIR.match(nxt))


@dataclass(frozen=True)
class Found:
    """A working directory stated in a text: ``path`` (a project key), ``rank`` (0 a working
    directory key, 1 a workspace/project key: :func:`key_rank`; 2 a working directory stated
    after a sentence on its line, outside any block) and ``pos`` (its offset)."""

    path: str
    rank: int
    pos: int


def stated_directory(text: str) -> Found | None:
    """The working directory ``text`` states in an environment-looking block (module
    docstring), or None: the best rank, then the earliest. Only the first :data:`MAX_SCAN`
    characters are read. Pure; never raises."""
    text = text[:MAX_SCAN]
    best: Found | None = None

    def offer(key: str, path: str, pos: int, block: bool) -> None:
        nonlocal best
        rank = key_rank(key)
        p = _clean(path) if rank is not None and block else None
        if rank is not None and p is not None and (best is None or (rank, pos) < (best.rank, best.pos)):
            best = Found(p, rank, pos)

    if "<" in text:
        for m in _ELEMENT.finditer(text):
            offer(m.group("key"), m.group("path"), m.start(), True)
    if ":" in text or "=" in text:
        for m in _LINE.finditer(text):
            if key_rank(m.group("key")) is not None:
                offer(
                    m.group("key"),
                    m.group("path"),
                    m.start(),
                    _has_pair_neighbour(text, m.start(), m.end()) or _in_element(text, m.start()),
                )
        for m in _LIST.finditer(text):
            if key_rank(m.group("key")) is not None:
                offer(m.group("key"), m.group("path"), m.start(), True)
        if best is None:
            # a working directory (never a workspace) stated after a sentence on its line, the
            # path ending the line ("You are a coding agent. Working directory: /p"): weaker
            for m in _TAIL.finditer(text):
                if key_rank(m.group("key")) == 0 and (p := _clean(m.group("path"))) is not None:
                    best = Found(p, 2, m.start())
                    break
    return best


def _strings(v: Any, depth: int = 0) -> Iterator[str]:
    """The texts of a system value or a message's content: strings, and the ``text``/``content``
    of parts that are not tool calls or tool results."""
    if isinstance(v, str):
        yield v
    elif isinstance(v, list) and depth < 4:
        for part in v:
            yield from _strings(part, depth + 1)
    elif isinstance(v, dict) and depth < 4:
        kind = str(v.get("type") or "")
        if "tool" in kind or "function" in kind or "call" in kind:
            return
        for k in ("text", "content"):
            if k in v:
                yield from _strings(v[k], depth + 1)


def _texts(body: Mapping[str, Any]) -> Iterator[str]:
    """Where a client states its environment, in order: the system values (``system``,
    ``instructions``), then the conversation's first :data:`FIRST_ELEMENTS` user, system and
    developer messages, then its later system and developer messages (up to element
    :data:`MAX_ELEMENTS`). Assistant turns and tool results are never read."""
    for value in for_body(body).environment(body, FIRST_ELEMENTS, MAX_ELEMENTS):  # the body's dialect says where
        yield from _strings(value)


def find_project(headers: Mapping[str, str], body: Mapping[str, Any] | None) -> str | None:
    """The project a request names: the ``x-headroom-project`` header (stripped, at most
    :data:`MAX_PROJECT` characters), else the working directory the agent states
    (:func:`stated_directory` over the texts of the module docstring: the best rank, then the
    first text), else None. ``headers`` keys are lowercase."""
    explicit = (headers.get(PROJECT_HEADER) or "").strip()
    if explicit:
        return explicit[:MAX_PROJECT]
    best: tuple[int, int, int, str] | None = None
    for i, text in enumerate(_texts(body or {})):
        f = stated_directory(text)
        if f is not None and (best is None or (f.rank, i, f.pos) < best[:3]):
            best = (f.rank, i, f.pos, f.path)
            if f.rank == 0:
                break
    return best[3] if best is not None else None


def conversation_project(session_key: str) -> str:
    """The project of a conversation that names none: :data:`CONVERSATION_PREFIX` and the
    first 16 hex digits of ``session_key`` (its key computed without a project)."""
    return CONVERSATION_PREFIX + session_key[:16]


def is_conversation(project: str) -> bool:
    """Whether ``project`` is a conversation's own (:func:`conversation_project`), not a named
    project."""
    return project.startswith(CONVERSATION_PREFIX)


def resolve_project(headers: Mapping[str, str], body: Mapping[str, Any] | None, conversation: str) -> str:
    """:func:`find_project`, else :func:`conversation_project` of ``conversation`` (the
    request's session key computed without a project)."""
    return find_project(headers, body) or conversation_project(conversation)


def project_label(project: str) -> str:
    """``project`` for people: a conversation's own project reads ``(conversation 1a2b3c4d)``."""
    return f"(conversation {project[len(CONVERSATION_PREFIX) :][:8]})" if is_conversation(project) else project
