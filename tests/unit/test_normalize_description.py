"""``normalize_description``'s short ways (a one-line text; runs without a tab made one space by
splitting at spaces) give exactly what its line walk gives (the walk as it was written before
the short ways, kept here as the reference)."""

from __future__ import annotations

import random
import re

import pytest

from headroom_core.tools.minify import normalize_description

_INNER_WS = re.compile(r"[ \t]*\t[ \t]*| {2,}")
_FENCE = re.compile(r"^[ \t]*(```|~~~)")


def _common_indent(lines: list[str]) -> str:
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


def line_walk(text: str) -> str:
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    lines = [ln.rstrip(" \t") for ln in lines]
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        return ""
    first = lines[0]
    rest = [ln for ln in lines[1:] if ln]
    if first[:1] in (" ", "\t"):
        margin = _common_indent([first, *rest])
        lines = [ln[len(margin) :] if ln else ln for ln in lines]
        lines[0] = lines[0].lstrip(" \t")
    else:
        margin = _common_indent(rest)
        if margin:
            lines = [first] + [ln[len(margin) :] if ln else ln for ln in lines[1:]]
    out: list[str] = []
    in_fence = False
    for ln in lines:
        if _FENCE.match(ln):
            in_fence = not in_fence
        elif not in_fence:
            body = ln.lstrip(" \t")
            if "  " in body or "\t" in body:
                ln = ln[: len(ln) - len(body)] + _INNER_WS.sub(" ", body)
        if not ln and out and not out[-1]:
            continue
        out.append(ln)
    return "\n".join(out)


ONE_LINE = ["a", "b", "-", " ", " ", " ", "\t", "\u00a0", "\x0b", "\x0c", "\u2028", "é", "```", "~~~", "`"]


@pytest.mark.parametrize("seed", range(8))
def test_one_line_texts(seed: int) -> None:
    rnd = random.Random(seed)
    for _ in range(800):
        text = "".join(rnd.choice(ONE_LINE) for _ in range(rnd.randint(0, 24)))
        assert normalize_description(text) == line_walk(text), repr(text)


@pytest.mark.parametrize("seed", range(4))
def test_texts_of_several_lines(seed: int) -> None:
    rnd = random.Random(seed)
    for _ in range(500):
        text = "".join(rnd.choice([*ONE_LINE, "\n", "\n", "\r", "\r\n"]) for _ in range(rnd.randint(0, 30)))
        assert normalize_description(text) == line_walk(text), repr(text)


def test_the_corpus_descriptions_with_runs() -> None:
    """Every description of the corpus session's tools, as sent, with some single spaces doubled
    (as bench_capacity makes each agent's copy distinct) and indented: the walk's output."""
    from tests.unit.test_tool_defs import flow_tools

    found: set[str] = set()

    def walk(v: object) -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                if k == "description" and isinstance(x, str):
                    found.add(x)
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    for _f, tools in flow_tools():
        walk(tools)
    assert len(found) > 500
    rnd = random.Random(7)
    for d in sorted(found):
        doubled = re.sub(" ", lambda m: "  " if rnd.random() < 0.3 else " ", d)
        for text in (d, doubled, "  " + doubled.replace("\n", "\n  ")):
            assert normalize_description(text) == line_walk(text), repr(text[:80])


def test_a_parameter_description() -> None:
    assert normalize_description("  The   file\tpath  ") == "The file path"
    assert normalize_description("```  code  ```") == "```  code  ```"  # a fence line keeps its runs
