"""Deterministic minification of tool definitions (the ``tools`` array of a request).

Coding agents resend every tool definition on every turn; in a real Claude Code session with
MCP servers the ``tools`` array is about three quarters of each request. This module shrinks it
without changing what it means, and always to the same bytes for the same input, so the prompt
cache prefix that holds ``tools`` stays byte-stable from turn to turn.

Shapes understood (one ``tools`` entry each):

* Anthropic Messages: ``{"name", "description", "input_schema", ...}`` (no ``type``, or
  ``"type": "custom"``);
* OpenAI Chat Completions: ``{"type": "function", "function": {"name", "description", "parameters"}}``;
* OpenAI Responses: ``{"type": "function", "name", "description", "parameters"}``.

Anything else (Anthropic server tools such as ``web_search_20250305``, ``bash_20250124``,
``text_editor_…``, ``computer_20241022``; OpenAI built-in tools, ``namespace`` groups and
``tool_search``; non-dicts; entries without a string ``name``), every tool the client defers
itself (``"defer_loading": true``, :mod:`headroom_core.wire.tool_deferral`: it goes upstream
as the client wrote it, and is no dedupe source, since its text is not in the model's context)
and every tool whose name matches an ``exclude`` glob is returned as the very same object. Other keys of an entry (``cache_control``, ``strict``, …) are kept as they are, in
their original order.

Minification (always on) never changes names, parameter names, types, enums, ``required``,
defaults, formats, ``additionalProperties`` or any other JSON-Schema keyword, and never changes
the words of a description (``original.split() == minified.split()``). It only:

1. normalises whitespace in the tool's description and in every ``description`` keyword of its
   JSON Schema (:func:`normalize_description`); a description with no words at all (``""``,
   ``"  \n"``) is left exactly as written;
2. drops ``$schema`` keywords and ``title`` keywords that merely repeat the
   property name (compared ignoring case, ``_``, ``-`` and spaces) or, at the schema root, the
   tool name (or its last ``__`` segment) optionally followed by a generated suffix such as
   ``Arguments`` or ``Request`` (pydantic model names like ``GitStatus`` or
   ``get_user_infoArguments``).

Deduplication (``dedupe=True``, the one step that removes words) replaces a long passage that
an earlier tool already carries by a reference to it. See :func:`minify_tools` for the rule and
:func:`expand_references` for the exact way back.

:func:`minify_tools` works on parsed JSON; what goes upstream is written from the client's own
text by :func:`headroom_core.wire.jsonedit.reserialize` (``tools/minifier.py``), so every
value the minifier does not change (numbers such as ``1e400`` or 25-digit decimals, escapes,
data keywords) keeps the client's exact characters. Any ``str`` is handled, lone surrogates
included.
"""

from __future__ import annotations

import copy
import fnmatch
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from headroom_core.wire.tool_deferral import is_deferred
from headroom_core.wire.tool_defs import ToolShape, tool_shape

#: A dialect's :meth:`~headroom_core.wire.protocol.WireDialect.tool_shape` (the default: the
#: Messages, Chat Completions and Responses shapes, :func:`headroom_core.wire.tool_defs.tool_shape`).
ShapeOf = Callable[[Any], "ToolShape | None"]

__all__ = [
    "ToolsResult",
    "minify_tools",
    "normalize_description",
    "expand_references",
    "REFERENCE_PREFIX",
]

#: Every dedupe reference starts with this text; dedupe is disabled for a ``tools`` list whose
#: descriptions already contain it, so a reference is always one the proxy wrote.
REFERENCE_PREFIX = "[same text as in "

#: Passages shorter than this many characters are never replaced by a reference.
DEFAULT_DEDUPE_MIN_CHARS = 200

_REF_WORDS = 8
_REF_RE = re.compile(
    r"\[same text as in (?P<tool>\S+) (?P<where>description|schema|param \S+): "
    r"\"(?P<words>.*?)…\"(?: \((?P<n>\d+) paragraphs\))?\]"
)

# JSON-Schema keywords whose value is a subschema, a list of subschemas, or a map of them.
# Every other keyword's value is data (enum, const, default, examples, required, …) and is
# copied untouched.
_SUBSCHEMA_KEYS = (
    "additionalProperties",
    "additionalItems",
    "unevaluatedProperties",
    "unevaluatedItems",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "items",
)
_SUBSCHEMA_LIST_KEYS = ("anyOf", "oneOf", "allOf", "prefixItems", "items")
_SUBSCHEMA_MAP_KEYS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")
_ROOT_TITLE_SUFFIXES = ("", "arguments", "args", "request", "input", "inputs", "params", "parameters", "schema")


@dataclass(frozen=True)
class ToolsResult:
    """The outcome of :func:`minify_tools`.

    ``tools`` is the list to send (the input list object itself when ``changed`` is False;
    otherwise a new list whose untouched entries are the original objects and whose changed
    entries are new dicts, JSON-ready). ``changed_names`` lists the names of the changed tools in
    list order. ``reason`` says what was done, in a few words, for the stats. ``deduped``: the
    indexes of the tools whose text the dedupe changed (the others are each tool's own
    minification, which depends on that tool alone).
    """

    tools: list
    changed: bool
    changed_names: tuple[str, ...]
    reason: str
    deduped: frozenset[int] = frozenset()


# ---------------------------------------------------------------------------------------------
# whitespace


# Applied to a line without its indentation and trailing whitespace, so every match lies between
# two non-blank characters.
_INNER_WS = re.compile(r"[ \t]*\t[ \t]*| {2,}")
_FENCE = re.compile(r"^[ \t]*(```|~~~)")


def normalize_description(text: str) -> str:
    """Return ``text`` with its whitespace normalised; the words (``text.split()``) are unchanged.

    * ``\\r\\n`` and ``\\r`` become ``\\n``; trailing spaces/tabs of every line are removed;
    * leading and trailing blank lines are removed, and runs of blank lines become one blank
      line (a paragraph break stays a paragraph break);
    * common indentation is removed the way docstrings are cleaned: when the first line is not
      indented, the common leading whitespace of the following non-blank lines is removed
      (``inspect.cleandoc``); otherwise the common leading whitespace of all lines
      (``textwrap.dedent``); relative indentation (nested lists, code) is kept; the text as a
      whole is trimmed (so is the first line's remaining indentation);
    * outside fenced code blocks (```` ``` ```` / ``~~~``), runs of spaces/tabs between two
      non-blank characters become one space; inside fences only trailing whitespace goes.
    """
    if "\n" not in text and "\r" not in text:  # one line (most parameters'): the walk below, made short
        line = text.strip(" \t")
        if not line.strip():
            return ""
        if ("  " in line or "\t" in line) and not _FENCE.match(line):
            line = _inner_runs(line)
        return line
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    lines = [ln.rstrip(" \t") for ln in lines]
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        return ""
    # Dedent.
    first = lines[0]
    rest = [ln for ln in lines[1:] if ln]
    if first[:1] in (" ", "\t"):
        margin = _common_indent([first, *rest])
        lines = [ln[len(margin) :] if ln else ln for ln in lines]
        lines[0] = lines[0].lstrip(" \t")  # the text as a whole is trimmed
    else:
        margin = _common_indent(rest)
        if margin:
            lines = [first] + [ln[len(margin) :] if ln else ln for ln in lines[1:]]
    # Inner runs (outside fences) and blank-line runs.
    out: list[str] = []
    in_fence = False
    for ln in lines:
        if _FENCE.match(ln):
            in_fence = not in_fence
        elif not in_fence:
            body = ln.lstrip(" \t")
            if "  " in body or "\t" in body:
                ln = ln[: len(ln) - len(body)] + _inner_runs(body)
        if not ln and out and not out[-1]:
            continue
        out.append(ln)
    return "\n".join(out)


def _inner_runs(body: str) -> str:
    """``body`` (no space or tab at either end) with every run of spaces and tabs that holds a
    tab or two spaces made one space. Without a tab, by splitting at spaces: the parts between
    two spaces of a run are empty (1.7x the regular expression's speed on a line of a tool
    description)."""
    if "\t" in body:
        return _INNER_WS.sub(" ", body)
    return " ".join(filter(None, body.split(" ")))


def _common_indent(lines: list[str]) -> str:
    """The longest whitespace prefix shared by all of ``lines`` (non-blank lines only)."""
    margin: str | None = None
    for ln in lines:
        indent = ln[: len(ln) - len(ln.lstrip(" \t"))]
        if margin is None:
            margin = indent
        else:
            i = 0
            while i < len(margin) and i < len(indent) and margin[i] == indent[i]:
                i += 1
            margin = margin[:i]
        if not margin:
            return ""
    return margin or ""


# ---------------------------------------------------------------------------------------------
# schema


def _norm_name(s: str) -> str:
    return re.sub(r"[\s_\-]", "", s).lower()


def _is_redundant_root_title(title: str, tool_name: str) -> bool:
    t = _norm_name(title)
    bases = (_norm_name(tool_name), _norm_name(tool_name.rsplit("__", 1)[-1]))
    return any(t == b + suffix for b in bases if b for suffix in _ROOT_TITLE_SUFFIXES)


def _minify_schema(node: Any, prop_name: str | None, tool_name: str | None) -> Any:
    """Return a minified copy of the schema ``node`` (new dicts/lists for every schema node).

    ``prop_name`` is the property name this schema is the value of (for redundant titles);
    ``tool_name`` is set only for the root schema. Data keywords are shared, never copied.
    """
    if not isinstance(node, dict):
        return node
    out: dict = {}
    for key, value in node.items():
        if key == "$schema" and isinstance(value, str):
            continue
        if key == "description" and isinstance(value, str):
            value = normalize_description(value) or value  # no words: left as written
        elif key == "title" and isinstance(value, str):
            if prop_name is not None and _norm_name(value) == _norm_name(prop_name):
                continue
            if tool_name is not None and _is_redundant_root_title(value, tool_name):
                continue
        elif key in _SUBSCHEMA_MAP_KEYS and isinstance(value, dict):
            named = key in ("properties",)
            value = {k: _minify_schema(v, k if named else None, None) for k, v in value.items()}
        elif key in _SUBSCHEMA_LIST_KEYS and isinstance(value, list):
            value = [_minify_schema(v, None, None) for v in value]
        elif key in _SUBSCHEMA_KEYS and isinstance(value, dict):
            value = _minify_schema(value, None, None)
        out[key] = value
    return out


# ---------------------------------------------------------------------------------------------
# shapes


def _container(tool: Any, shape_of: ShapeOf = tool_shape) -> tuple[dict, ToolShape] | None:
    """``(dict holding name/description/schema, the tool's shape)`` for an understood tool
    (``shape_of``: the dialect's :class:`~headroom_core.wire.tool_defs.ToolShape` of a tool),
    else None (also None when the name is not a non-empty string, the description is not a
    string or the schema, if present, is not an object)."""
    shape = shape_of(tool)
    c = shape.container_of(tool) if shape is not None else None
    if shape is None or c is None or not isinstance(c.get("name"), str) or not c["name"]:
        return None
    present, schema = shape.schema_of(c)
    if present and not isinstance(schema, dict):
        return None
    if "description" in c and not isinstance(c["description"], str):
        return None
    return c, shape


def minify_container(c: dict, schema: tuple[str, ...]) -> dict:
    """One tool definition's container (``name``, ``description``, its JSON Schema at the keys
    ``schema``) minified on its own, before any dedupe across tools: a new dict (new objects
    down to the schema), the input not mutated."""
    name = c["name"]
    out: dict = {}
    for key, value in c.items():
        if key == "description" and isinstance(value, str):
            value = normalize_description(value) or value  # no words: left as written
        elif schema and key == schema[0]:
            value = _minify_at(value, schema[1:], name)
        out[key] = value
    return out


def _minify_at(value: Any, keys: tuple[str, ...], name: str) -> Any:
    """``value`` with the schema at ``keys`` below it minified (new objects on the way)."""
    if not keys:
        return _minify_schema(value, None, name) if isinstance(value, dict) else value
    if not isinstance(value, dict) or keys[0] not in value:
        return value
    return {k: (_minify_at(v, keys[1:], name) if k == keys[0] else v) for k, v in value.items()}


# ---------------------------------------------------------------------------------------------
# description fields (for dedupe)


@dataclass
class _Field:
    where: str  # "description", "schema" or "param <label>"
    holder: dict  # the dict whose "description" key holds the text
    text: str


def _schema_fields(node: Any, steps: list[str]) -> Iterator[_Field]:
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if key == "description" and isinstance(value, str):
            yield _Field("param " + ".".join(steps) if steps else "schema", node, value)
        elif key in _SUBSCHEMA_MAP_KEYS and isinstance(value, dict):
            for k, v in value.items():
                yield from _schema_fields(v, steps + ([k] if key == "properties" else [f"{key}.{k}"]))
        elif key in _SUBSCHEMA_LIST_KEYS and isinstance(value, list):
            for i, v in enumerate(value):
                yield from _schema_fields(v, steps + [f"{key}[{i}]"])
        elif key in _SUBSCHEMA_KEYS and isinstance(value, dict):
            yield from _schema_fields(value, steps + [key])


def _fields(container: dict, schema: tuple[str, ...]) -> list[_Field]:
    fields: list[_Field] = []
    if isinstance(container.get("description"), str):
        fields.append(_Field("description", container, container["description"]))
    node: Any = container
    for k in schema:
        node = node.get(k) if isinstance(node, dict) else None
    fields.extend(_schema_fields(node, []))
    return fields


def _first_words(paragraph: str) -> str:
    return " ".join(paragraph.split()[:_REF_WORDS])


def _reference(tool_name: str, where: str, run: list[str]) -> str:
    count = f" ({len(run)} paragraphs)" if len(run) > 1 else ""
    return f'{REFERENCE_PREFIX}{tool_name} {where}: "{_first_words(run[0])}…"{count}]'


def _resolve(m: re.Match, sources: dict[str, dict[str, list[str]]]) -> list[str] | None:
    """The paragraphs a parsed reference stands for, or None if it does not resolve."""
    field_paras = sources.get(m["tool"], {}).get(m["where"])
    if field_paras is None:
        return None
    n = int(m["n"]) if m["n"] else 1
    for i, para in enumerate(field_paras):
        if _first_words(para) == m["words"]:
            return field_paras[i : i + n] if i + n <= len(field_paras) else None
    return None


def _dedupe(entries: list[tuple[str, list[_Field]]], min_chars: int) -> tuple[int, set[int]]:
    """Replace passages found in an earlier tool by references, in place; return how many, and
    the indexes (in ``entries``) of the tools changed."""
    # Paragraph text -> index (in ``entries``) of the first tool that has it.
    owner: dict[str, int] = {}
    paras: list[list[list[str]]] = []
    for ti, (_name, fields) in enumerate(entries):
        tool_paras = []
        for f in fields:
            ps = f.text.split("\n\n")
            tool_paras.append(ps)
            for p in ps:
                owner.setdefault(p, ti)
        paras.append(tool_paras)
    # Where each paragraph first occurs inside its owner tool: text -> (field index, para index).
    first_pos: dict[str, tuple[int, int]] = {}
    for ti, tool_paras in enumerate(paras):
        for fi, ps in enumerate(tool_paras):
            for pi, p in enumerate(ps):
                if owner[p] == ti:
                    first_pos.setdefault(p, (fi, pi))
    # Source lookup by tool name and field label, as expand_references sees it (first tool wins).
    sources: dict[str, dict[str, list[str]]] = {}
    for ti, (name, fields) in enumerate(entries):
        if name in sources:
            continue
        by_where: dict[str, list[str]] = {}
        for fi, f in enumerate(fields):
            by_where.setdefault(f.where, paras[ti][fi])
        sources[name] = by_where

    replaced = 0
    touched_tools: set[int] = set()
    for tj, (_name, fields) in enumerate(entries):
        for fj, f in enumerate(fields):
            ps = paras[tj][fj]
            new: list[str] = []
            touched = False
            k = 0
            while k < len(ps):
                src_tool = owner[ps[k]]
                if src_tool >= tj:
                    new.append(ps[k])
                    k += 1
                    continue
                sfi, spi = first_pos[ps[k]]
                src = paras[src_tool][sfi]
                n = 1
                while (
                    k + n < len(ps)
                    and spi + n < len(src)
                    and ps[k + n] == src[spi + n]
                    and owner[src[spi + n]] == src_tool
                ):
                    n += 1
                run = ps[k : k + n]
                passage = "\n\n".join(run)
                src_name, src_fields = entries[src_tool]
                ref = _reference(src_name, src_fields[sfi].where, run)
                m = _REF_RE.fullmatch(ref)
                if (
                    len(passage) >= min_chars
                    and 2 * len(ref) <= len(passage)
                    and m is not None
                    and _resolve(m, sources) == run
                ):
                    new.append(ref)
                    touched = True
                    replaced += 1
                    k += n
                else:
                    new.append(ps[k])
                    k += 1
            if touched:
                f.holder["description"] = "\n\n".join(new)
                touched_tools.add(tj)
    return replaced, touched_tools


# ---------------------------------------------------------------------------------------------
# public API


def minify_tools(
    tools: list,
    *,
    exclude: tuple[str, ...] = (),
    dedupe: bool = True,
    dedupe_min_chars: int = DEFAULT_DEDUPE_MIN_CHARS,
    minify_one: Callable[[int, dict, tuple[str, ...]], dict] | None = None,
    shape_of: ShapeOf = tool_shape,
) -> ToolsResult:
    """Minify a request's ``tools`` array deterministically; the input is never mutated.

    ``tools``: the parsed JSON ``tools`` value (Anthropic, OpenAI Chat or OpenAI Responses
    shape, mixed shapes allowed; another dialect's tools with its ``shape_of``, one tool per
    entry: :mod:`headroom_core.tools.units` flattens Gemini's groups). A value that is not a
    list is returned unchanged.
    ``exclude``: ``fnmatch`` globs matched case-sensitively against tool names (e.g.
    ``("mcp__*",)``); matching tools are returned as the same object, and so are the tools
    the client defers (``"defer_loading": true``).
    ``dedupe``: replace long passages repeated across tools by references (below).
    ``dedupe_min_chars``: shortest passage, in characters, that may be replaced.
    ``minify_one``: ``(index, container, schema keys) -> minified container``, each tool's own
    minification (before dedupe) when the caller keeps them (it must return a new dict each
    time: dedupe edits it in place); default computed here.

    Dedupe rule. Descriptions (a tool's own and every schema ``description``) are split into
    paragraphs at blank lines (``"\\n\\n"`` after normalisation). Going through the tools in list
    order, a run of consecutive paragraphs of one description that also appears, consecutively
    and verbatim, in a description of an *earlier* tool (the first tool that has its first
    paragraph) is replaced by one paragraph::

        [same text as in <tool> <where>: "<first 8 words of the passage>…" (<n> paragraphs)]

    where ``<where>`` is ``description`` (the tool's own description), ``schema`` (the root
    schema's description) or ``param <path>`` (a parameter's description; nested parameters are
    joined with ``.``, e.g. ``param scrapeOptions.formats``; ``items``/``anyOf[0]`` steps are
    spelled out), and `` (<n> paragraphs)`` is present only when n > 1. A replacement is made
    only when the passage is at least ``dedupe_min_chars`` characters and the reference is at
    most half its length, and only when the reference resolves back to exactly the passage. The
    passage itself is never replaced in the tool that holds it, so references never chain.

    To recover the text (:func:`expand_references` does this): find the first tool named
    ``<tool>``, its description at ``<where>``, split it at ``"\\n\\n"``, take the first
    paragraph whose first 8 whitespace-separated words joined by single spaces equal the quoted
    words, and that paragraph and the ``n - 1`` following ones, joined with ``"\\n\\n"``, replace
    the reference paragraph. Dedupe is skipped for a list whose descriptions already contain
    :data:`REFERENCE_PREFIX`.

    Same input, same output: nothing here depends on hashing or set order.
    """
    if not isinstance(tools, list):
        return ToolsResult(tools, False, (), "tools is not a list")

    new_tools: list = list(tools)
    minified: dict[int, tuple[dict, dict, ToolShape]] = {}  # index -> (tool, new container, shape)
    for i, tool in enumerate(tools):
        found = _container(tool, shape_of)
        if found is None or is_deferred(tool):
            continue
        container, shape = found
        name = container["name"]
        if any(fnmatch.fnmatchcase(name, pat) for pat in exclude):
            continue
        own = (
            minify_one(i, container, shape.schema)
            if minify_one is not None
            else minify_container(container, shape.schema)
        )
        minified[i] = (tool, own, shape)

    if not minified:
        return ToolsResult(tools, False, (), "no tool definitions to minify")

    replaced = 0
    touched: set[int] = set()
    dedupe_note = ""
    if dedupe:
        entries = [(c["name"], _fields(c, sh.schema)) for _t, c, sh in minified.values()]
        if any(REFERENCE_PREFIX in f.text for _n, fs in entries for f in fs):
            dedupe_note = "; dedupe skipped (reference-shaped text present)"
        else:
            replaced, touched = _dedupe(entries, dedupe_min_chars)
    positions = list(minified)
    deduped = frozenset(positions[tj] for tj in touched)

    changed_names: list[str] = []
    for i, (tool, container, sh) in minified.items():
        rebuilt = sh.with_container(tool, container)
        if rebuilt != tool:
            new_tools[i] = rebuilt
            changed_names.append(container["name"])

    if not changed_names:
        return ToolsResult(tools, False, (), f"{len(minified)} tool definitions already minimal{dedupe_note}")
    reason = f"minified {len(changed_names)} of {len(minified)} tool definitions"
    if replaced:
        reason += f", {replaced} repeated passages referenced"
    return ToolsResult(new_tools, True, tuple(changed_names), reason + dedupe_note, deduped)


def expand_references(tools: list, shape_of: ShapeOf = tool_shape) -> list:
    """Return a copy of ``tools`` with every dedupe reference replaced by the text it stands for.

    The inverse of the dedupe step of :func:`minify_tools`:
    ``expand_references(minify_tools(t).tools) == minify_tools(t, dedupe=False).tools``.
    Entries without references are returned as the same objects; the input is not mutated.
    """
    if not isinstance(tools, list):
        return tools
    parsed: list[list[_Field] | None] = []
    sources: dict[str, dict[str, list[str]]] = {}
    for tool in tools:
        found = _container(tool, shape_of)
        if found is None:
            parsed.append(None)
            continue
        container, sh = found
        fields = _fields(container, sh.schema)
        parsed.append(fields)
        if container["name"] not in sources:
            by_where: dict[str, list[str]] = {}
            for f in fields:
                by_where.setdefault(f.where, f.text.split("\n\n"))
            sources[container["name"]] = by_where

    out = list(tools)
    for i, tool_fields in enumerate(parsed):
        if tool_fields is None or not any(REFERENCE_PREFIX in f.text for f in tool_fields):
            continue
        tool = copy.deepcopy(tools[i])
        container, sh = _container(tool, shape_of)  # type: ignore[misc]
        for f in _fields(container, sh.schema):
            paras: list[str] = []
            for para in f.text.split("\n\n"):
                m = _REF_RE.fullmatch(para)
                resolved = _resolve(m, sources) if m else None
                paras.extend(resolved if resolved is not None else [para])
            f.holder["description"] = "\n\n".join(paras)
        out[i] = tool
    return out
