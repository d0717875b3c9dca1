"""Import layering of the xlc package (docs/architecture.md, "Layout").

Every module under xlc/ is parsed with `ast`; its imports (module level and inside functions)
give a graph over *units*: a sub-package (`xlc/hlo/`, `xlc/artifact/`, ...) or a top-level
module (`xlc/api.py`, `xlc/backends.py`, ...). The rules:
* `xlc/hlo` imports nothing else of xlc but `xlc.errors` (the error hierarchy, a leaf);
* `xlc/artifact` imports no backend package and not `xlc.api` (backends only through the
  `xlc.backends` table, which names them by string);
* no import cycle spans two folders: no strongly connected component of the unit graph holds
  units of two folders (the top-level modules all sit in folder `xlc`).
The package root `xlc/__init__.py` is the public facade, not a unit: every module is imported
after it, so `from xlc import __version__` adds no edge.
"""
from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import ROOT

PACKAGE = ROOT / "xlc"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    """Every xlc module name -> its file."""
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str, path: Path, modules: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """(imported xlc module, line) for every import statement in the file, at any depth;
    `from pkg import name` counts as importing `pkg.name` when that is a module."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                yield (sub if sub in modules else target), node.lineno


def _resolve(target: str, modules: dict[str, Path]) -> str | None:
    """The xlc module `target` names (its longest known prefix), or None outside xlc."""
    if target != "xlc" and not target.startswith("xlc."):
        return None
    while target not in modules and "." in target:
        target = target.rpartition(".")[0]
    return target


def _unit(module: str, modules: dict[str, Path]) -> str | None:
    """`xlc/hlo/` for xlc.hlo.ir, `xlc/api.py` for xlc.api, None for the package root."""
    parts = module.split(".")
    if len(parts) == 1:
        return None
    top = "xlc." + parts[1]
    if modules[top].name == "__init__.py":
        return f"xlc/{parts[1]}/"
    return f"xlc/{parts[1]}.py"


def _folder(unit: str) -> str:
    return unit if unit.endswith("/") else "xlc/"


@functools.lru_cache(maxsize=1)
def import_edges() -> tuple[tuple[str, str, str, int], ...]:
    """(importing module, imported module, file, line) for every xlc-internal import."""
    modules = _modules()
    out = []
    for name, path in modules.items():
        for target, line in _imports(name, path, modules):
            resolved = _resolve(target, modules)
            if resolved is not None and resolved != name:
                out.append((name, resolved, str(path.relative_to(ROOT)), line))
    return tuple(out)


def unit_graph() -> dict[str, dict[str, tuple[str, int, str]]]:
    """unit -> {imported unit: (file, line, imported module) of one import making the edge}."""
    modules = _modules()
    graph: dict[str, dict[str, tuple[str, int, str]]] = {}
    for src, dst, file, line in import_edges():
        a, b = _unit(src, modules), _unit(dst, modules)
        if a is None or b is None or a == b:
            continue
        graph.setdefault(a, {}).setdefault(b, (file, line, dst))
    return graph


def strongly_connected(graph: dict[str, dict[str, object]]) -> list[list[str]]:
    """Tarjan's strongly connected components (iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    nodes = sorted(set(graph) | {d for e in graph.values() for d in e})
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, {}))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, {})))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out


def cross_folder_cycles() -> list[list[str]]:
    """The components of the unit graph that hold units of more than one folder."""
    return [c for c in strongly_connected(unit_graph()) if len({_folder(u) for u in c}) > 1]


def _path(graph: dict[str, dict[str, tuple[str, int, str]]], members: set[str], a: str,
          b: str) -> list[str]:
    """A shortest import path from unit `a` to unit `b` inside `members` (breadth first)."""
    parent: dict[str, str] = {a: a}
    queue = [a]
    while b not in parent:
        nxt = []
        for u in queue:
            for d in sorted(graph.get(u, {})):
                if d in members and d not in parent:
                    parent[d] = u
                    nxt.append(d)
        queue = nxt
    path = [b]
    while path[-1] != a:
        path.append(parent[path[-1]])
    return path[::-1]


def _cycle_text(component: list[str], graph: dict[str, dict[str, tuple[str, int, str]]]
                ) -> str:
    """One cycle through two folders of `component`, each edge with the import making it."""
    members = set(component)
    a = component[0]
    b = next(u for u in component if _folder(u) != _folder(a))
    cycle = _path(graph, members, a, b) + _path(graph, members, b, a)[1:]
    lines = [" -> ".join(cycle)]
    for x, y in zip(cycle, cycle[1:]):
        file, line, module = graph[x][y]
        lines.append(f"  {x} -> {y}: {file}:{line} imports {module}")
    return "\n".join(lines)


def test_hlo_imports_nothing_else_of_xlc() -> None:
    bad = [f"{file}:{line} imports {dst}" for src, dst, file, line in import_edges()
           if src.startswith("xlc.hlo") and not dst.startswith("xlc.hlo")
           and dst != "xlc.errors"]
    assert not bad, "xlc/hlo must import only xlc.hlo and xlc.errors:\n" + "\n".join(bad)


def test_artifact_imports_no_backend_and_not_the_api() -> None:
    forbidden = ("xlc.api", "xlc.backend_cpu", "xlc.backend_gpu", "xlc.interpreter", "xlc.cli")
    bad = [f"{file}:{line} imports {dst}" for src, dst, file, line in import_edges()
           if src.startswith("xlc.artifact") and dst.startswith(forbidden)]
    assert not bad, ("xlc/artifact reaches backends only through xlc.backends:\n"
                     + "\n".join(bad))


def test_no_import_cycle_spans_two_folders() -> None:
    graph = unit_graph()
    cycles = cross_folder_cycles()
    assert not cycles, "import cycles across folders:\n" + "\n".join(
        _cycle_text(c, graph) for c in cycles)


def test_the_graph_sees_function_level_imports() -> None:
    edges = {(src, dst) for src, dst, _f, _l in import_edges()}
    # function-level imports: api's persistent cache, the backends' lazy compilers
    assert ("xlc.api", "xlc.artifact.cache") in edges
    assert ("xlc.backend_cpu.backend", "xlc.backend_cpu.compiler") in edges
    assert {"xlc/api.py", "xlc/artifact/", "xlc/hlo/"} <= set(unit_graph())
