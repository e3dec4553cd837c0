"""The import graph of ``headroom_core`` has no cycles.

The graph is read from the source with :mod:`ast` (nothing is imported). An edge ``a -> b``
is an import of ``b`` (or a name from it) written at the top level of module ``a``, including
under ``if TYPE_CHECKING:`` (readers and type checkers follow those too). Imports inside a
function or method body are not edges: they run when the function is first called, after every
module has loaded, so they cannot meet a half-initialised module; the code uses them on purpose
for heavy dependencies loaded on first use and for the composition root that loads the features
(:func:`headroom_core.runtime.load_extensions`). ``from package import name`` is an edge to the
submodule ``package.name`` when there is one, else to the package.

Two levels are checked: modules, and the subpackages (``wire``, ``compress``, ``tools``, ``ccr``,
``cache``, …) taken whole, so a cycle cannot hide by going through different modules of two
packages. The top-level modules (``runtime``, ``extensions``, ``request_plan``, …) are checked
as modules only: ``runtime`` builds the services of several packages whose feature hooks name
``Runtime`` in their types.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "headroom_core"
ROOT = Path(__file__).resolve().parents[2] / PACKAGE


def _modules() -> dict[str, tuple[Path, bool]]:
    """Module name -> (file, is a package's ``__init__``)."""
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts.pop()
        out[".".join(parts)] = (path, is_pkg)
    return out


def _top_level(nodes: list[ast.stmt]):
    """The import statements of a module body, outside any function (descending into ``if``,
    ``try`` and ``with`` blocks and class bodies)."""
    for node in nodes:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        else:
            for field in ("body", "orelse", "finalbody", "handlers"):
                yield from _top_level(getattr(node, field, []))


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of ``headroom_core`` it imports at its top level."""
    modules = _modules()

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for mod, (path, is_pkg) in modules.items():
        deps: set[str] = set()
        for node in _top_level(ast.parse(path.read_text(encoding="utf-8")).body):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    pkg = mod if is_pkg else mod.rpartition(".")[0]
                    for _ in range(node.level - 1):
                        pkg = pkg.rpartition(".")[0]
                    base = f"{pkg}.{base}" if base else pkg
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for t in targets:
                if t.split(".")[0] == PACKAGE and (k := known(t)) and k != mod:
                    deps.add(k)
        graph[mod] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _subpackage(mod: str) -> str | None:
    parts = mod.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or (len(parts) == 2 and (ROOT / parts[1]).is_dir()) else None


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph between subpackages of ``headroom_core`` (edges between top-level modules left out)."""
    out: dict[str, set[str]] = {}
    for mod, deps in graph.items():
        a = _subpackage(mod)
        if a is None:
            continue
        for d in deps:
            b = _subpackage(d)
            if b is not None and b != a:
                out.setdefault(a, set()).add(b)
    return out


def test_the_walker_sees_top_level_and_type_checking_imports_only():
    g = import_graph()
    assert "headroom_core.extensions" in g["headroom_core.runtime"]  # a plain top-level import
    assert "headroom_core.runtime" in g["headroom_core.cache.hooks"]  # under `if TYPE_CHECKING:`
    assert "headroom_core.ccr.retrieve" not in g["headroom_core.runtime"]  # inside load_extensions
    assert "headroom_core.compress.markers" in g["headroom_core.compress.router"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycle_between_modules():
    assert cycles(import_graph()) == []


def test_no_import_cycle_between_subpackages():
    pg = package_graph(import_graph())
    assert {
        "headroom_core.wire",
        "headroom_core.compress",
        "headroom_core.tools",
        "headroom_core.ccr",
        "headroom_core.cache",
    } <= set(pg) | {d for ds in pg.values() for d in ds}
    assert cycles(pg) == []


def test_the_core_never_imports_mitmproxy():
    """``headroom_core`` is testable without mitmproxy (docs/architecture.md, "Layering rules"):
    no import of it anywhere in the package, top level or inside a function."""
    found = []
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            found += [f"{path.relative_to(ROOT.parent)}: {n}" for n in names if n.split(".")[0] == "mitmproxy"]
    assert found == []
