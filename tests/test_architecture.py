"""The shape of the metatrace package: its modules import each other without cycles.

The import graph is read from the source with ``ast`` (nothing is imported): every ``import
metatrace.x``, ``from metatrace.x import ...``, ``from metatrace import x`` and relative import,
at module level and inside functions alike. A function-level import only hides a cycle from
Python's import machinery; the modules still depend on each other.
"""

from __future__ import annotations

import ast
from pathlib import Path

import metatrace

PACKAGE = Path(metatrace.__file__).parent


def _module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve_relative(module: str, is_package: bool, level: int, target: str | None) -> str:
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module of ``package`` -> the modules of the package it imports (anywhere in its source).
    Imports of the package itself (its ``__init__``) are left out: every submodule's import runs it."""
    files = {_module_name(p, package): p for p in package.rglob("*.py")}
    root = package.name
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        is_package = path.name == "__init__.py"
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            candidates: list[str] = []
            if isinstance(node, ast.Import):
                candidates = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                source = (
                    _resolve_relative(module, is_package, node.level, node.module) if node.level else node.module or ""
                )
                # ``from metatrace import x`` imports the submodule x; ``from metatrace.x import f`` imports x.
                candidates = [source] + [f"{source}.{alias.name}" for alias in node.names]
            for name in candidates:
                # the longest prefix of the name that is a module of the package
                parts = name.split(".")
                for n in range(len(parts), 0, -1):
                    prefix = ".".join(parts[:n])
                    if prefix in files:
                        if prefix != module and prefix != root:
                            edges.add(prefix)
                        break
        graph[module] = edges
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

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
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(components)


def test_find_cycles_reports_a_cycle():
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_find_cycles_accepts_a_dag():
    assert find_cycles({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def _write_package(tmp_path: Path, modules: dict[str, str]) -> Path:
    package = tmp_path / "pkg"
    package.mkdir()
    for name, text in modules.items():
        (package / f"{name}.py").write_text(text)
    return package


def test_import_graph_sees_function_level_imports(tmp_path):
    package = _write_package(tmp_path, {
        "__init__": "",
        "a": "def f():\n    from pkg.b import g\n    return g()\n",
        "b": "def g():\n    return 1\n",
    })
    assert import_graph(package)["pkg.a"] == {"pkg.b"}


def test_import_graph_sees_relative_and_from_package_imports(tmp_path):
    package = _write_package(tmp_path, {
        "__init__": "", "a": "from . import b\nfrom .c import h\n", "b": "", "c": "def h(): pass\n",
    })
    assert import_graph(package)["pkg.a"] == {"pkg.b", "pkg.c"}


def test_function_level_import_cycle_is_a_cycle(tmp_path):
    package = _write_package(tmp_path, {
        "__init__": "", "a": "import pkg.b\n", "b": "def f():\n    import pkg.a\n",
    })
    assert find_cycles(import_graph(package)) == [["pkg.a", "pkg.b"]]


def test_import_graph_sees_from_package_imports():
    assert "metatrace.install" in import_graph()["metatrace"]


def test_metatrace_has_no_import_cycles():
    cycles = find_cycles(import_graph())
    assert cycles == [], f"import cycles among metatrace modules: {cycles}"
