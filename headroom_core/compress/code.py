"""Compress source code with tree-sitter: keep the outline, drop long function bodies.

Grammars come from the per-language PyPI wheels (``tree-sitter-python``, ``-javascript``,
``-typescript`` (TypeScript and TSX), ``-go``, ``-rust``, ``-java``); nothing is downloaded.

What stays: everything outside function bodies — imports, module-level statements, class,
interface, struct, enum and type definitions, decorators, signatures, class attributes — plus the
first line of a Python docstring. What goes: the body of every function, method, closure or
lambda whose body spans at least :data:`MIN_BODY_LINES` lines; it is replaced by one line holding
a marker of the one grammar (``compress/markers.py``) inside a comment that keeps the code valid
(a long Python module or class docstring likewise keeps its first line, then a marker comment)::

    def load(path):
        \"\"\"Read the file.\"\"\"
        ...  # [headroom omitted body of load, lines 12-48; headroom_retrieve key=…]

    function load(path) {
      /* [headroom omitted body of load, lines 12-48; headroom_retrieve key=…] */
    }

Elision works on whole lines, so line-numbered reads (Claude Code ``Read``, ``cat -n``,
SWE-agent windows; :mod:`~headroom_core.compress.numbered`) keep each kept line with its own
number; inserted lines get a prefix without a number. Line numbers in markers are those shown in
the input (1-based lines of the text when it has none).

Guards: the input must parse without error with the language's grammar, and the result must parse
without error with the same grammar and define the same names (:func:`defined_names`), or the
original is kept. Deterministic: the same text and language give the same bytes.
"""

from __future__ import annotations

import functools
import re
from typing import Callable

import tree_sitter
import tree_sitter_go
import tree_sitter_java
import tree_sitter_javascript
import tree_sitter_python
import tree_sitter_rust
import tree_sitter_typescript

from headroom_core.compress.gain import finish, too_small
from headroom_core.compress.markers import make_marker, offload_key
from headroom_core.compress.numbered import Numbered, split_numbered
from headroom_core.compress.result import CompressResult
from headroom_core.compress.tokens import TokenCounter

KIND = "code"
# A body shorter than this many lines stays: its marker (about 30 tokens) would save too little.
MIN_BODY_LINES = 5

# language -> the function of its grammar wheel that returns the grammar pointer
GRAMMARS: dict[str, Callable[[], object]] = {
    "python": tree_sitter_python.language,
    "javascript": tree_sitter_javascript.language,
    "typescript": tree_sitter_typescript.language_typescript,
    "tsx": tree_sitter_typescript.language_tsx,
    "go": tree_sitter_go.language,
    "rust": tree_sitter_rust.language,
    "java": tree_sitter_java.language,
}

EXTENSIONS: dict[str, str] = {
    ".py": "python", ".pyi": "python", ".pyw": "python",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "typescript", ".mts": "typescript", ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go", ".rs": "rust", ".java": "java",
}  # fmt: skip

_JS_FUNCS = frozenset(
    {"function_declaration", "function_expression", "function", "generator_function_declaration",
     "generator_function", "method_definition", "arrow_function"}
)  # fmt: skip
FUNCTIONS: dict[str, frozenset[str]] = {
    "python": frozenset({"function_definition"}),
    "javascript": _JS_FUNCS,
    "typescript": _JS_FUNCS,
    "tsx": _JS_FUNCS,
    "go": frozenset({"function_declaration", "method_declaration", "func_literal"}),
    "rust": frozenset({"function_item", "closure_expression"}),
    "java": frozenset(
        {"method_declaration", "constructor_declaration", "lambda_expression", "compact_constructor_declaration"}
    ),
}
_BLOCKS = frozenset({"block", "statement_block", "constructor_body"})

_JS_DEFS = frozenset(
    {"function_declaration", "generator_function_declaration", "class_declaration", "abstract_class_declaration",
     "method_definition", "interface_declaration", "type_alias_declaration", "enum_declaration",
     "public_field_definition", "field_definition"}
)  # fmt: skip
DEFINITIONS: dict[str, frozenset[str]] = {
    "python": frozenset({"function_definition", "class_definition"}),
    "javascript": _JS_DEFS,
    "typescript": _JS_DEFS,
    "tsx": _JS_DEFS,
    "go": frozenset({"function_declaration", "method_declaration", "type_spec"}),
    "rust": frozenset({"function_item", "struct_item", "enum_item", "trait_item", "type_item", "const_item",
                       "static_item", "mod_item", "macro_definition", "union_item"}),
    "java": frozenset({"class_declaration", "interface_declaration", "enum_declaration", "record_declaration",
                       "method_declaration", "constructor_declaration", "annotation_type_declaration"}),
}  # fmt: skip


@functools.lru_cache(maxsize=None)
def grammar(language: str):
    """The ``tree_sitter.Language`` for ``language`` (a key of :data:`GRAMMARS`), or None when the
    name is unknown or the wheel's grammar is not one this tree-sitter can load."""
    pointer = GRAMMARS.get(language)
    if pointer is None:
        return None
    try:
        return tree_sitter.Language(pointer())
    except ValueError:
        return None


def parse(code: str, language: str):
    """The tree-sitter tree of ``code`` (UTF-8) in ``language``; None when no grammar."""
    lang = grammar(language)
    if lang is None:
        return None
    return tree_sitter.Parser(lang).parse(code.encode("utf-8", "surrogatepass"))


def parses(code: str, language: str) -> bool:
    """True when ``code`` parses in ``language`` without any error or missing node."""
    tree = parse(code, language)
    return tree is not None and not tree.root_node.has_error


def language_for_path(path: str) -> str | None:
    """The language of a file name by its extension (:data:`EXTENSIONS`), or None."""
    m = re.search(r"(\.[A-Za-z0-9]+)$", path or "")
    return EXTENSIONS.get(m.group(1).lower()) if m else None


_SIGNS: dict[str, tuple[str, ...]] = {
    "python": (r"^(async\s+)?def \w+\(.*", r"^class \w+.*:\s*$", r"^(from [\w.]+ import |import [\w.]+)", r"^\s+self\.\w+",
               r"^\s+(def|return|elif|raise) ", r"^\s*@\w+"),
    "go": (r"^package \w+\s*$", r"^func (\(.+?\) )?\w+\(", r"^import \($", r"\b\w+ := ", r"^type \w+ (struct|interface) \{"),
    "rust": (r"^\s*(pub(\(\w+\))? )?(async )?fn \w+", r"^use [\w:{}, ]+;", r"^\s*impl\b", r"^\s*let (mut )?\w+", r"^\s*#\[\w+"),
    "java": (r"^package [\w.]+;", r"^import (static )?[\w.]+(\.\*)?;",
             r"^\s*(public|private|protected)( static)?( final)?( abstract)? (class|interface|enum|record|[\w<>\[\], ]+ \w+\()"),
    "typescript": (r"^\s*(export )?(declare )?(interface|type|enum) \w+", r"\b\w+\??: (string|number|boolean|void|any|unknown)\b",
                   r"^import .* from ['\"]", r"^\s*(export )?(const|let|function)\b"),
    "javascript": (r"^\s*(const|let|var) \w+ = ", r"^\s*(async )?function\*? \w+\(", r"require\(['\"]", r"^import .* from ['\"]",
                   r"^\s*export (default )?", r"=> \{\s*$", r"^\s*return \(\s*$", r"\bclassName=[\"{]"),
}  # fmt: skip
MAX_SIGN_LINE = 1000  # characters
_SIGN_RX = {lang: tuple(re.compile(p) for p in pats) for lang, pats in _SIGNS.items()}


def guess_language(code: str, max_lines: int = 400) -> str | None:
    """The language ``code`` is most likely written in, or None.

    Counts lines of the first ``max_lines`` that look like each language (imports, definitions,
    declarations), then takes the best-scoring language whose grammar parses the whole text
    without error (TypeScript also as TSX). At least two telling lines are needed.
    """
    # only lines of ordinary length are looked at: a regex over one huge line (minified code,
    # base64) costs time the proxy does not have, and Python's re holds the GIL meanwhile
    lines = [ln for ln in code.split("\n", max_lines)[:max_lines] if len(ln) <= MAX_SIGN_LINE]
    scores = []
    for lang, rxs in _SIGN_RX.items():
        s = sum(1 for ln in lines if any(rx.search(ln) for rx in rxs))
        if s >= 2:
            scores.append((-s, lang))
    for _, lang in sorted(scores):
        cands = (
            ("typescript", "tsx")
            if lang == "typescript"
            else ("javascript", "tsx")
            if lang == "javascript"
            else (lang,)
        )
        for c in cands:
            if parses(code, c):
                return c
    return None


def _text(node) -> str:
    return node.text.decode("utf-8", "replace") if node is not None and node.text is not None else ""


def _last_row(node) -> int:
    end = node.end_point
    return end.row if end.column > 0 or end.row == node.start_point.row else end.row - 1


def _name_of(node) -> str:
    name = node.child_by_field_name("name")
    if (
        name is None
        and node.parent is not None
        and node.parent.type in ("variable_declarator", "pair", "assignment_expression")
    ):
        name = (
            node.parent.child_by_field_name("name")
            or node.parent.child_by_field_name("key")
            or node.parent.child_by_field_name("left")
        )
    s = re.sub(r"[;\]\[\n\r]", "", _text(name))[:60]
    return s or "function"


def defined_names(code: str, language: str) -> list[str]:
    """Names of the definitions outside function bodies, in order: functions, classes, methods,
    interfaces, types, structs (per :data:`DEFINITIONS`), and for Python module-level assignment
    targets too. These are the names compression must keep. Empty when no grammar."""
    tree = parse(code, language)
    if tree is None:
        return []
    defs, funcs = DEFINITIONS[language], FUNCTIONS[language]
    out: list[str] = []

    def walk(node, top: bool) -> None:
        for ch in node.named_children:
            if ch.type in defs:
                n = ch.child_by_field_name("name")
                if n is None and ch.type in ("public_field_definition", "field_definition"):
                    n = ch.child_by_field_name("property")
                if n is not None:
                    out.append(_text(n))
            if language == "python" and top and ch.type == "expression_statement":
                a = ch.named_children[0] if ch.named_children else None
                if a is not None and a.type == "assignment":
                    left = a.child_by_field_name("left")
                    if left is not None and left.type == "identifier":
                        out.append(_text(left))
            if ch.type in funcs:
                continue  # bodies are what compression drops
            walk(ch, top and ch.type in ("decorated_definition", "module", "program", "source_file"))

    walk(tree.root_node, True)
    return out


class _Plan:
    """Line replacements: start row -> (end row, [(content, source row or None)])."""

    def __init__(self, lines: list[str], display: list[int], key: str, language: str) -> None:
        self.lines = lines
        self.display = display
        self.key = key
        self.language = language
        self.repl: dict[int, tuple[int, list[tuple[str, int | None]]]] = {}
        self.dropped_lines = 0

    def marker(self, name: str, a: int, b: int) -> str:
        what = name if name.endswith("docstring") or name.startswith("docstring") else f"body of {name}"
        return make_marker(f"{what}, lines {self.display[a]}-{self.display[b]}", self.key)

    def indent_of(self, row: int) -> str:
        ln = self.lines[row] if row < len(self.lines) else ""
        return ln[: len(ln) - len(ln.lstrip(" \t"))]

    def python(self, node, body) -> None:
        b0, b1 = body.start_point.row, _last_row(body)
        if b0 <= node.start_point.row or b1 >= len(self.lines):
            return
        new: list[tuple[str, int | None]] = []
        start = drop_from = b0  # first row replaced / first row the marker stands for
        first = body.named_children[0] if body.named_children else None
        if (
            first is not None
            and first.type == "expression_statement"
            and first.named_child_count == 1
            and first.named_children[0].type == "string"
        ):
            d0, d1 = first.start_point.row, _last_row(first)
            if d0 == d1:
                start = drop_from = d1 + 1
            else:
                doc = _doc_first_line(_text(first.named_children[0]))
                if doc is None:
                    return
                new.append((self.indent_of(d0) + doc, d0))
                start, drop_from = d0, d0 + 1
        if b1 - drop_from + 1 < MIN_BODY_LINES:
            return
        new.append((f"{self.indent_of(b0)}...  # {self.marker(_name_of(node), drop_from, b1)}", None))
        self.repl[start] = (b1, new)
        self.dropped_lines += b1 - drop_from + 1

    def braces(self, node, body) -> None:
        r0, r1 = body.start_point.row, body.end_point.row
        if r1 - r0 - 1 < MIN_BODY_LINES or r1 >= len(self.lines):
            return
        inner = self.indent_of(r0 + 1) or self.indent_of(r0) + "  "
        self.repl[r0 + 1] = (r1 - 1, [(f"{inner}/* {self.marker(_name_of(node), r0 + 1, r1 - 1)} */", None)])
        self.dropped_lines += r1 - r0 - 1

    def docstring(self, node, body, what: str) -> bool:
        """Shorten a long class or module docstring (the first statement of ``body``) to its first
        line plus a marker comment; True when planned."""
        first = body.named_children[0] if body.named_children else None
        if (
            first is None
            or first.type != "expression_statement"
            or first.named_child_count != 1
            or first.named_children[0].type != "string"
        ):
            return False
        d0, d1 = first.start_point.row, _last_row(first)
        if d1 - d0 < MIN_BODY_LINES or d1 >= len(self.lines) or d0 in self.repl:
            return False
        doc = _doc_first_line(_text(first.named_children[0]))
        if doc is None:
            return False
        indent = self.indent_of(d0)
        self.repl[d0] = (d1, [(indent + doc, d0), (f"{indent}# {self.marker(what, d0 + 1, d1)}", None)])
        self.dropped_lines += d1 - d0
        return True

    def walk(self, node) -> int:
        """Plan elisions under ``node``; returns the number of bodies and docstrings elided."""
        n = 0
        funcs = FUNCTIONS[self.language]
        if self.language == "python":
            if node.type == "module":
                n += self.docstring(node, node, "module docstring")
            elif node.type == "class_definition" and node.child_by_field_name("body") is not None:
                n += self.docstring(node, node.child_by_field_name("body"), f"docstring of {_name_of(node)}")
        for ch in node.named_children:
            if ch.type in funcs:
                body = ch.child_by_field_name("body")
                if body is not None and body.type in _BLOCKS and not body.has_error:
                    before = len(self.repl)
                    (self.python if self.language == "python" else self.braces)(ch, body)
                    if len(self.repl) > before:
                        n += 1
                        continue
            n += self.walk(ch)
        return n

    def render(self) -> list[tuple[str, int | None]]:
        out: list[tuple[str, int | None]] = []
        r = 0
        while r < len(self.lines):
            hit = self.repl.get(r)
            if hit is not None:
                out.extend(hit[1])
                r = hit[0] + 1
            else:
                out.append((self.lines[r], r))
                r += 1
        return out


_DOC_RX = re.compile(r'^([rRuUbBfF]{0,2})("""|\'\'\'|"|\')(.*)$', re.S)


def _doc_first_line(literal: str) -> str | None:
    """A one-line docstring holding the first non-empty line of the string ``literal``."""
    m = _DOC_RX.match(literal)
    if not m:
        return None
    prefix, quote, rest = m.groups()
    inner = rest[: -len(quote)] if rest.endswith(quote) else rest
    first = next((ln.strip() for ln in inner.split("\n") if ln.strip()), "")
    first = first.rstrip("\\\"'").rstrip()
    if quote[0] in first or "\\" in first[-1:]:
        return None
    q = quote if len(quote) == 3 else quote * 3 if quote == '"' else "'''"
    return f"{prefix}{q}{first}{q}"


def compress_code(
    text: str,
    query: str,
    counter: TokenCounter,
    *,
    min_tokens: int = 250,
    min_saving_ratio: float = 0.10,
    language: str | None = None,
) -> CompressResult:
    """Compress the source code ``text`` (plain, or every line number-prefixed) in ``language``
    (a key of :data:`GRAMMARS`; guessed by :func:`guess_language` when None).

    ``query`` is unused (code structure, not relevance, decides) but kept for the common
    compressor signature. Returns unchanged, with the reason, when the text is under
    ``min_tokens`` tokens, the language is unknown or its grammar not installed, the source does
    not parse cleanly, no body is long enough, the result would not parse or would lose a name,
    or the saving is under ``min_saving_ratio``. Otherwise strategy ``"outline"`` with one
    offload holding ``text`` byte for byte. Never raises on bad input.
    """
    try:
        return _compress(text, counter, min_tokens, min_saving_ratio, language)
    except (UnicodeError, RecursionError, ValueError) as e:
        return CompressResult.unchanged(text, KIND, f"code not compressed: {type(e).__name__}")


def _compress(
    text: str, counter: TokenCounter, min_tokens: int, min_saving_ratio: float, language: str | None
) -> CompressResult:
    if too_small(text, counter, min_tokens):
        return CompressResult.unchanged(text, KIND, "small")
    num: Numbered | None = split_numbered(text)
    code = num.code if num is not None else text
    if language is None:
        language = guess_language(code)
        if language is None:
            return CompressResult.unchanged(text, KIND, "language not recognised")
    if grammar(language) is None:
        return CompressResult.unchanged(text, KIND, f"no grammar for {language}")
    tree = parse(code, language)
    if tree.root_node.has_error:
        return CompressResult.unchanged(text, KIND, f"source does not parse as {language}")
    lines = code.split("\n")
    display = list(num.numbers) if num is not None else list(range(1, len(lines) + 1))
    plan = _Plan(lines, display, offload_key(text), language)
    n = plan.walk(tree.root_node)
    if n == 0:
        return CompressResult.unchanged(text, KIND, f"{language}: no body of {MIN_BODY_LINES}+ lines")
    rendered = plan.render()
    new_code = "\n".join(c for c, _ in rendered)
    if not parses(new_code, language):
        return CompressResult.unchanged(text, KIND, f"{language}: outline would not parse")
    if defined_names(new_code, language) != defined_names(code, language):
        return CompressResult.unchanged(text, KIND, f"{language}: outline would lose a name")
    if num is None:
        new_text = new_code
    else:
        blank = num.blank_prefix()
        new_text = "\n".join((num.prefixes[src] if src is not None else blank) + c for c, src in rendered)
        if text.endswith("\n"):
            new_text += "\n"
    reason = f"{language}: {n} bodies elided ({plan.dropped_lines} lines), signatures and definitions kept"
    return finish(text, new_text, counter, kind=KIND, strategy="outline", reason=reason,
                  what=f"{n} function bodies", min_saving_ratio=min_saving_ratio)  # fmt: skip
