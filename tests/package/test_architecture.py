"""The shape of the metatrace package: its modules import each other without cycles.

The import graph is read from the source with ``ast`` (nothing is imported): every ``import
metatrace.x``, ``from metatrace.x import ...``, ``from metatrace import x`` and relative import,
at module level and inside functions alike. A function-level import only hides a cycle from
Python's import machinery; the modules still depend on each other.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

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


# The subpackages in pipeline order: each may import only those before it. metas (what runs
# inside a rewritten meta) imports none; codegen writes and loads metas; proxies, guards and
# interpret work while thunder interprets the function (the prologue's guard programs are
# guards', the grad transform's reservation among them); grad and passes run after it.
PIPELINE = ("state", "metas", "codegen", "proxies", "guards", "interpret", "mutations", "grad", "passes", "entry_cache")


def test_subpackages_import_along_the_pipeline():
    wrong = sorted(
        (module, imported)
        for module, edges in import_graph().items()
        for imported in edges
        if len(module.split(".")) > 2 and len(imported.split(".")) > 2
        and (here := module.split(".")[1]) != (there := imported.split(".")[1])
        and (here not in PIPELINE or there not in PIPELINE or PIPELINE.index(there) > PIPELINE.index(here))
    )
    assert wrong == [], f"imports against the pipeline's direction: {wrong}"


def test_no_private_name_is_imported_across_modules():
    """A name with a leading underscore is its module's own: another module that needs it gets
    a public name (or the function moves to where both can reach it)."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("metatrace")):
                found += [f"{path.relative_to(PACKAGE)}: {node.module}.{alias.name}" for alias in node.names
                          if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert found == []


# Sizes a reader can hold (issue 16): the public face at the top, everything else in a stage's
# package; no module a reader must page through, no function longer than a screen.
MAX_TOP_LEVEL_MODULES = 12
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80


def test_the_top_level_holds_at_most_a_dozen_modules():
    modules = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(modules) <= MAX_TOP_LEVEL_MODULES, modules


def test_no_module_is_over_400_lines():
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}


def test_no_function_is_over_80_lines():
    long = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}"] = lines
    assert long == {}


# ---------------------------------------------------------------------------------------------
# The patch table: what metatrace changes in thunder, and that disable() undoes all of it
# ---------------------------------------------------------------------------------------------


def thunder_snapshot() -> dict[tuple[str, str], tuple[str, object]]:
    """(where, name) -> what is there, for every global of every loaded thunder module, every
    attribute of every class they define, the items of every dict or set they hold, the op maps of
    every executor, and the meta of every Symbol reachable from those. Labels as the Patch rows'
    ``where`` (``metatrace.patching``); a dict or set that several modules hold (``from
    thunder.core.transforms import backward_impls``) is one location, named by the first module
    holding it in import order."""
    import sys

    from thunder.core.symbol import Symbol
    from thunder.extend import get_all_executors

    from metatrace.install import SYMBOL_METAS

    import torch

    where: dict[tuple[str, str], tuple[str, object]] = {}
    # the one attribute outside thunder that metatrace changes (metatrace.thunderfx: torch.compile
    # given a ThunderCompiler captures dynamic graphs)
    where[("torch", "compile")] = ("object", torch.compile)
    classes: dict[int, type] = {}
    symbols: dict[int, Symbol] = {}
    containers: set[int] = set()
    for module_name, module in list(sys.modules.items()):
        if module is None or not (module_name == "thunder" or module_name.startswith("thunder.")):
            continue
        for name, value in list(vars(module).items()):
            where[(module_name, name)] = ("object", value)
            if isinstance(value, (dict, set)):
                if id(value) in containers:
                    continue
                containers.add(id(value))
            if isinstance(value, dict):
                where[(f"{module_name}.{name}", "[]")] = ("items", dict(value))
            elif isinstance(value, set):
                where[(f"{module_name}.{name}", "[]")] = ("set", frozenset(value))
            elif isinstance(value, type) and getattr(value, "__module__", "").startswith("thunder"):
                classes[id(value)] = value
            elif isinstance(value, Symbol):
                symbols[id(value)] = value
    for cls in classes.values():
        for name, value in list(cls.__dict__.items()):
            where[(f"{cls.__module__}.{cls.__qualname__}", name)] = ("object", value)
    for ex in get_all_executors():
        for map_name in ("opmap", "implmap"):
            mapping = getattr(ex, map_name, None)
            if isinstance(mapping, dict):
                where[(f"executor {ex.name}.{map_name}", "[]")] = ("items", dict(mapping))
                symbols.update({id(s): s for s in mapping.values() if isinstance(s, Symbol)})
    for sym in symbols.values():
        where[(f"{SYMBOL_METAS} {id(sym)}", "meta")] = ("object", sym.meta)
    return where


def _differs(a: tuple[str, object], b: tuple[str, object]) -> bool:
    if a[0] != b[0]:
        return True
    if a[0] == "object":
        return a[1] is not b[1]
    if a[0] == "set":
        return a[1] != b[1]
    x, y = a[1], b[1]
    return x.keys() != y.keys() or any(x[k] is not y[k] for k in x)


def changed_locations(before: dict, after: dict) -> set[tuple[str, str]]:
    """Locations whose object differs (by identity), or that were removed. Additions are left
    out: enabling may import a thunder submodule, which binds it on its parent package."""
    from metatrace.install import SYMBOL_METAS

    out = set()
    for key, value in before.items():
        if key not in after or _differs(value, after[key]):
            out.add((SYMBOL_METAS, "meta") if key[0].startswith(SYMBOL_METAS) else key)
    return out


def _listed(location: tuple[str, str], rows) -> bool:
    target, name = location
    return any(p.where == target and p.name == name for p in rows)


@pytest.fixture(scope="module")
def enable_disable_snapshots():
    """thunder before enable(), while enabled, and after disable(); the Patch rows enable() applied."""
    import warnings

    import metatrace
    from metatrace.install import applied_patches

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import thunder.dynamo  # noqa: F401  (metatrace.thunderfx patches ThunderCompiler when it exists)

    assert not metatrace.is_enabled(), "the snapshot before enable() must be of thunder without metatrace"
    before = thunder_snapshot()
    metatrace.enable()
    try:
        during = thunder_snapshot()
        rows = applied_patches()
    finally:
        metatrace.disable()
    after = thunder_snapshot()
    return before, during, after, rows


def test_snapshot_sees_a_patch():
    from metatrace import patching
    from metatrace.proxies import clang_math

    before = thunder_snapshot()
    undo = patching.apply(clang_math.patches())
    try:
        during = thunder_snapshot()
    finally:
        patching.undo(undo)
    assert changed_locations(before, during) == {("thunder.clang", "math")}
    assert changed_locations(before, thunder_snapshot()) == set()


def test_patch_undo_deletes_what_was_missing():
    import types

    from metatrace import patching

    module, mapping, members = types.ModuleType("m"), {"a": 1}, {1}
    module.x = 1
    rows = [
        patching.attribute(module, "x", lambda x: x + 1, "a wrapper", wrap=True),
        patching.attribute(module, "y", 2, "a new attribute"),
        patching.item(mapping, "a", 3, "a replaced item"),
        patching.item(mapping, "b", 4, "a new item"),
        patching.member(members, 2, "a new member"),
        patching.member(members, 1, "a member already there"),
        patching.attribute("metatrace.patching.Patch", "extra", 5, "a dotted path, resolved when applied"),
    ]
    undo = patching.apply(rows)
    assert (module.x, module.y, mapping, members) == (2, 2, {"a": 3, "b": 4}, {1, 2})
    assert patching.Patch.extra == 5 and rows[-1].where == "metatrace.patching.Patch"
    patching.undo(undo)
    assert (module.x, hasattr(module, "y"), mapping, members) == (1, False, {"a": 1}, {1})
    assert not hasattr(patching.Patch, "extra")


def test_patch_table_lists_every_change_metatrace_makes(enable_disable_snapshots):
    before, during, _, rows = enable_disable_snapshots
    unlisted = sorted(loc for loc in changed_locations(before, during) if not _listed(loc, rows))
    assert unlisted == [], f"metatrace changes these thunder attributes without a Patch row: {unlisted}"


def test_every_patch_table_row_is_applied(enable_disable_snapshots):
    before, during, _, rows = enable_disable_snapshots
    changed = changed_locations(before, during)
    # rows labelled metatrace.* change metatrace's own state (the registered operators' symbols)
    stale = sorted({(p.where, p.name) for p in rows if not p.where.startswith("metatrace.")} - changed)
    assert stale == [], f"Patch rows that enable() does not change: {stale}"


def test_disable_restores_every_patched_attribute(enable_disable_snapshots):
    before, _, after, rows = enable_disable_snapshots
    assert sorted(loc for loc in changed_locations(before, after) if _listed(loc, rows)) == []


def test_disable_leaves_nothing_else_changed_in_thunder(enable_disable_snapshots):
    before, _, after, _ = enable_disable_snapshots
    assert sorted(changed_locations(before, after)) == []


# Exceptions that never reach a user: caught inside metatrace where they are raised.
INTERNAL_EXCEPTIONS = {"Unprojectable", "_AsRecorded",
                       "NotACopy", "NotRenamable"}  # (a block is interpreted instead of stamped: never raised to a user)


def test_every_error_metatrace_raises_to_a_user_is_a_metatrace_error():
    """One base to catch (``except metatrace.MetatraceError``), each error exported by name."""
    import importlib
    import inspect
    import pkgutil

    found = {}
    for info in pkgutil.walk_packages(metatrace.__path__, "metatrace."):
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == info.name:
                found[name] = obj
    outside = sorted(n for n, cls in found.items()
                     if n not in INTERNAL_EXCEPTIONS and not issubclass(cls, metatrace.MetatraceError))
    assert outside == []


def test_every_metatrace_error_is_exported():
    import importlib
    import pkgutil

    errors = set()
    for info in pkgutil.walk_packages(metatrace.__path__, "metatrace."):
        module = importlib.import_module(info.name)
        errors.update(n for n, obj in vars(module).items()
                      if isinstance(obj, type) and issubclass(obj, metatrace.MetatraceError) and obj.__module__ == info.name)
    assert errors - set(metatrace.__all__) == set()


def test_no_metatrace_attribute_is_set_on_thunder_objects():
    """A compile's state lives in metatrace's own objects (``state.compile_session``; weakly
    keyed tables beside thunder's objects), never in attributes stuck onto thunder's."""
    found = [f"{path.relative_to(PACKAGE)}:{n}" for path in PACKAGE.rglob("*.py")
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if "_metatrace_" in line and not line.lstrip().startswith("#")]
    assert found == []


def test_guard_programs_are_built_in_one_place():
    """The prologue's and the grad transform's guard programs come from one builder
    (``metatrace.guards.program_builder``): no other module compiles guards into a program itself."""
    builders = {"guards/program_builder.py", "guards/compiled_program.py"}
    found = sorted(
        f"{p.relative_to(PACKAGE)}:{node.lineno}" for p in PACKAGE.rglob("*.py")
        if str(p.relative_to(PACKAGE)) not in builders
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "GuardProgram"
    )
    assert found == []


def test_guards_are_told_apart_by_their_reasons_kind_not_its_text():
    # ``guard.why == "branch"`` decided by a string before issue 29; a Reason carries its kind
    found = sorted(f"{p.relative_to(PACKAGE)}:{i}" for p in PACKAGE.rglob("*.py")
                   for i, line in enumerate(p.read_text().splitlines(), 1)
                   if re.search(r"\.why\s*(==|!=|\bin\b)", line))
    assert found == []


# Attributes of thunder's objects that metatrace changes (a proxy's shape, element count, class,
# grad flag and tags; a provenance record's flags and inputs; a wrapped value's item and
# attribute wrappers): only ``metatrace.metas.proxy_edits`` writes them, and says when that is safe.
THUNDER_ATTRIBUTES = {"_shape", "_numel", "__class__", "_requires_grad", "_tags", "tags", "ext_flag", "history",
                      "provenance", "item_wrappers", "key_wrappers", "attribute_wrappers", "original_value"}
# written only as items (``record.inputs[i] = ...``): a plain ``x.inputs = ...`` is metatrace's own objects'
THUNDER_ITEM_ATTRIBUTES = {"inputs"}


def _writes_to_thunder_attributes(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        for target in targets:
            item = isinstance(target, ast.Subscript)
            while isinstance(target, ast.Subscript):
                target = target.value
            if isinstance(target, ast.Attribute) and (
                    target.attr in THUNDER_ATTRIBUTES or item and target.attr in THUNDER_ITEM_ATTRIBUTES):
                if not (isinstance(target.value, ast.Name) and target.value.id == "self"):
                    lines.append(node.lineno)
        if (isinstance(node, ast.Call) and ast.unparse(node.func) in ("setattr", "object.__setattr__")
                and len(node.args) >= 2 and not (isinstance(node.args[1], ast.Constant)
                                                 and node.args[1].value not in THUNDER_ATTRIBUTES)):
            lines.append(node.lineno)
    return lines


# Writes that are no edit of a thunder object: the Patch rows applied and undone (patching), a frozen
# dataclass of metatrace's normalizing its field (guard_record), metatrace's own int class given its
# operators (numel), the user's objects restored after tracing (snapshots)
OWN_OBJECT_WRITES = {"patching.py", "guards/guard_record.py", "proxies/numel.py", "mutations/snapshots.py"}


def test_thunder_objects_are_changed_in_place_in_one_module():
    """Any form of write (assignment, augmented assignment, item assignment, ``setattr``,
    ``object.__setattr__``) to a thunder object's attributes happens in ``metas/proxy_edits.py``."""
    found = sorted(
        f"{p.relative_to(PACKAGE).as_posix()}:{line}" for p in PACKAGE.rglob("*.py")
        if p.relative_to(PACKAGE).as_posix() not in {"metas/proxy_edits.py", *OWN_OBJECT_WRITES}
        for line in _writes_to_thunder_attributes(ast.parse(p.read_text()))
    )
    assert found == []


def test_the_write_check_sees_each_form_of_write():
    source = ("p._requires_grad = True\nr.ext_flag |= 4\nr.inputs[0] = b\nw.item_wrappers[k] = v\n"
              "setattr(p, '_tags', s)\nobject.__setattr__(p, name, s)\nstate.inputs = x\nself._tags = t\n")
    assert _writes_to_thunder_attributes(ast.parse(source)) == [1, 2, 3, 4, 5, 6]


def test_the_grad_transform_has_one_wrapper():
    """thunder's grad transform is wrapped by one row (``metatrace.passes.grad_transform``), whose
    body states the steps in order, not by several rows whose nesting only their order in
    ``install.py`` fixes."""
    import thunder.transforms.autodiff as autodiff

    with metatrace.enable():
        rows = [p for p in metatrace.install.applied_patches()
                if p.target is autodiff and p.key == "grad_transform_on_trace"]
    assert [p.new.__module__ for p in rows] == ["metatrace.passes.grad_transform"]


# The one context variable outside metatrace.state.compile_context: the simplifier's out-parameter for
# the conditions an expression needs not to raise (a pure algebra's internal, not compile context;
# issue 39 asks for it to become a return value).
CONTEXT_OUTSIDE: set[str] = set()


def test_compile_context_is_declared_in_one_module():
    """Every ``ContextVar`` metatrace keeps is declared in ``metatrace/state/compile_context.py``."""
    found = sorted(
        f"{p.relative_to(PACKAGE)}:{node.lineno}" for p in PACKAGE.rglob("*.py")
        if str(p.relative_to(PACKAGE)) != "state/compile_context.py" and str(p.relative_to(PACKAGE)) not in CONTEXT_OUTSIDE
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "ContextVar"
    )
    assert found == []


def test_no_test_folder_shadows_an_importable_package():
    """tests/ is on ``sys.path`` (conftest, tools/fuzz.py): a folder there without ``__init__``
    named like a package (``rewrites``) would be imported as an empty namespace package instead."""
    import importlib.util

    tests = Path(__file__).resolve().parents[1]
    shadowing = sorted(p.name for p in tests.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))
                       and (spec := importlib.util.find_spec(p.name)) is not None
                       and spec.origin is not None)
    assert shadowing == []


def test_no_module_defines_a_top_level_name_twice():
    """A second ``class Slotted`` further down a test module silently replaced the first for
    every test that looked it up at call time (its matrix cells tested an empty object)."""
    import collections

    tests = Path(__file__).resolve().parents[1]
    twice = []
    for path in sorted([*PACKAGE.rglob("*.py"), *tests.rglob("*.py")]):
        tree = ast.parse(path.read_text())
        names = collections.Counter(n.name for n in tree.body
                                    if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))
        twice += [f"{path.name}: {name}" for name, count in names.items() if count > 1 and name != "_"]
    assert twice == []


# Reading the stack (a frame, its code, its locals) to decide something: a refactor of thunder's or
# metatrace's files would change the answer. Size-oblivious decisions say where they are made
# (issue 39): the rewritten metas enter their site in the generated code, thunder's functions
# through Patch rows (metatrace.metas.oblivious_sites), metatrace's copies explicitly.
_FRAME_READS = {"_getframe", "currentframe", "stack", "f_code", "f_back", "f_locals", "f_globals"}
NO_FRAME_READS = ("metas", "proxies/size_oblivious.py")


def test_size_decisions_read_no_frame():
    found = sorted(
        f"{p.relative_to(PACKAGE)}:{node.lineno} {node.attr}"
        for where in NO_FRAME_READS for p in ([PACKAGE / where] if where.endswith(".py") else (PACKAGE / where).rglob("*.py"))
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute) and node.attr in _FRAME_READS
    )
    assert found == []


# Relations are typed (issue 39): the size decisions and the guard simplifier compare
# ``metatrace.metas.relations.Relation`` members, not the strings that name them.
_RELATION_TEXTS = {"eq", "ne", "lt", "le", "gt", "ge", "==", "!=", "<", "<=", ">", ">="}
TYPED_RELATIONS = ("metas/unbacked.py", "metas/oblivious_answers.py", "guards/simplify", "guards/guard_record.py", "guards/collect.py",
                   "guards/program_builder.py", "guards/projection.py")


def test_relations_are_not_named_by_strings():
    found = []
    for where in TYPED_RELATIONS:
        for p in [PACKAGE / where] if where.endswith(".py") else sorted((PACKAGE / where).rglob("*.py")):
            tree = ast.parse(p.read_text(encoding="utf-8"))
            docstrings = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
            found += [f"{p.relative_to(PACKAGE)}:{node.lineno} {node.value!r}" for node in ast.walk(tree)
                      if isinstance(node, ast.Constant) and node.value in _RELATION_TEXTS and id(node) not in docstrings]
    assert found == []


def _string_constants(node: ast.AST):
    """The string constants a comparison's operand is: ``"eq"``, or those of ``("eq", "ne")``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        for element in node.elts:
            yield from _string_constants(element)


def test_no_relation_is_decided_by_comparing_strings():
    """Anywhere in metatrace, a decision on a relation compares ``Relation`` members
    (``guard.op is Relation.EQ``, ``op.ordered``), never a relation's name or symbol
    (``op == "eq"``, ``parts[1] in ("==", "!=")``)."""
    found = sorted(
        f"{p.relative_to(PACKAGE)}:{node.lineno} {ast.unparse(node)}"
        for p in PACKAGE.rglob("*.py")
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if isinstance(node, ast.Compare)
        and any(text in _RELATION_TEXTS for operand in (node.left, *node.comparators) for text in _string_constants(operand))
    )
    assert found == []


# The guard algebra's operations and kinds are typed too (issue 39): its nodes carry
# ``metatrace.metas.algebra_ops.Op`` and ``NumberKind`` members, and it builds and decides on them
# by member (``e.op is Op.FLOORDIV``, ``op in DIVIDING``), never by the strings that name them.
TYPED_OPS = ("guards/simplify", "guards/projection.py")


def _op_and_kind_texts() -> set[str]:
    from metatrace.metas.algebra_ops import NumberKind, Op

    return {member.value for member in Op} | {member.value for member in NumberKind}


def test_algebra_ops_are_not_named_by_strings():
    texts = _op_and_kind_texts()
    found = []
    for where in TYPED_OPS:
        for p in [PACKAGE / where] if where.endswith(".py") else sorted((PACKAGE / where).rglob("*.py")):
            tree = ast.parse(p.read_text(encoding="utf-8"))
            # docstrings, and ``__all__`` (the function ``const`` is exported by its name)
            skipped = {id(sub) for node in ast.walk(tree) if isinstance(node, ast.Expr) or _assigns_all(node)
                       for sub in ast.walk(node.value)}
            found += [f"{p.relative_to(PACKAGE)}:{node.lineno} {node.value!r}" for node in ast.walk(tree)
                      if isinstance(node, ast.Constant) and node.value in texts and id(node) not in skipped]
    assert found == []


def _assigns_all(node: ast.AST) -> bool:
    return isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)


# One wrapper per thunder hook (issue 55): a target of thunder's that two of metatrace's modules
# wrap would nest by the order of install.py's rows, which no reader sees; one module owns each hook
# and states its steps in order (interpret/calls/sequence_lookasides.py, mutations/tracing_context.py,
# passes/size_producers.py's split).


def _defining_module(new) -> str:
    """The module that wrote a row's replacement or wrapper factory: the module of its code (a
    ``functools.wraps`` replacement carries the ``__module__`` of the function it wraps)."""
    import functools

    new = new.func if isinstance(new, functools.partial) else new
    code_globals = getattr(new, "__globals__", None)
    if code_globals is not None:
        return code_globals.get("__name__", "")
    return getattr(new, "__module__", None) or ""


def _wrapping_modules(rows) -> dict[tuple[str, str], set[str]]:
    """(thunder location, key) -> the metatrace modules whose rows replace or wrap it."""
    from metatrace.install import SYMBOL_METAS

    found: dict[tuple[str, str], set[str]] = {}
    for row in rows:
        if row.where == SYMBOL_METAS:
            continue
        module = _defining_module(row.new)
        if module.startswith("metatrace"):
            found.setdefault((row.where, repr(row.key)), set()).add(module)
    return found


def test_each_thunder_hook_is_wrapped_by_one_module(enable_disable_snapshots):
    rows = enable_disable_snapshots[3]
    several = {target: modules for target, modules in _wrapping_modules(rows).items() if len(modules) > 1}
    assert several == {}


def test_the_hook_check_sees_two_modules_wrapping_one_target():
    from metatrace.interpret.costs import interpreter_costs
    from metatrace.interpret.calls import sequence_lookasides

    rows = [*interpreter_costs.patches(), *sequence_lookasides.patches()]
    doubled = rows[-1].__class__(rows[-1].target, rows[-1].key, interpreter_costs.patches()[-1].new, "test",
                                 rows[-1].kind, rows[-1].wrap, rows[-1].label)
    several = {t for t, m in _wrapping_modules([*rows, doubled]).items() if len(m) > 1}
    assert several == {(rows[-1].where, repr(rows[-1].key))}


def test_the_hook_check_names_a_replacement_by_the_module_that_wrote_it():
    import functools

    import thunder

    @functools.wraps(thunder.jit)
    def replacement(*args, **kwargs):
        return thunder.jit(*args, **kwargs)

    assert replacement.__module__ == "thunder"
    assert _defining_module(replacement) == _defining_module(functools.partial(replacement, 1)) == __name__


# The compile's and the process's state lives in state/ (issue 55), each table with its lifetime:
# outside it, a module-level container is a constant table (an UPPER_CASE name, filled at import),
# never a weak or identity table, a thread-local, a ``global`` rebinding, or a table (of any name)
# that a function writes after import. Any left outside would be listed here, each with why it is
# not moved yet: the list may only shrink.
STATE_OUTSIDE_STATE: set[str] = set()

_MUTABLE_MAKERS = {"dict", "list", "set", "defaultdict", "OrderedDict", "deque", "Counter", "count"}
_WEAK_OR_LOCAL = {"WeakKeyDictionary", "WeakValueDictionary", "WeakSet", "local", "WeakTable", "IdentityTable"}
# methods that change a container in place: ``TABLE.setdefault(k, v)`` in a function is a write after import
_MUTATING_METHODS = {"append", "appendleft", "extend", "insert", "add", "update", "setdefault", "clear", "pop",
                     "popitem", "popleft", "remove", "discard", "sort", "reverse"}
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _module_level_names(tree: ast.Module) -> set[str]:
    return {n.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            for n in ast.walk(target) if isinstance(n, ast.Name)}


def _in_scope(scope: ast.AST):
    """The nodes of ``scope``'s body, not descending into the functions and classes it defines."""
    for node in ast.iter_child_nodes(scope):
        yield node
        if not isinstance(node, _SCOPES):
            yield from _in_scope(node)


def _local_names(fn: ast.AST) -> set[str]:
    """The names a function binds itself (parameters, assignments, imports, nested definitions),
    less those it declares ``global``."""
    args = fn.args
    names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg) if a}
    declared = set()
    for node in _in_scope(fn):
        if isinstance(node, ast.Global):
            declared.update(node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names - declared


def _written_name(node: ast.AST) -> str | None:
    """The name a statement or call changes in place: ``NAME[k] = v`` (also augmented, ``del``,
    ``NAME[a][b] = v``) or ``NAME.append(x)`` and the other mutating methods."""
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
        targets = [node.target] if isinstance(node, ast.AugAssign) else node.targets
        subscripts = [t for t in targets if isinstance(t, ast.Subscript)]
        target = subscripts[0] if subscripts else None
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MUTATING_METHODS:
        target = node.func.value
    else:
        return None
    while isinstance(target, ast.Subscript):
        target = target.value
    return target.id if isinstance(target, ast.Name) else None


def _written_after_import(tree: ast.Module) -> list[str]:
    """The module's own module-level names that a function body changes in place (a name the
    function binds itself is its local, and not the module's)."""
    module_names, found = _module_level_names(tree), []

    def visit(scope: ast.AST, shadowed: set[str]) -> None:
        for node in _in_scope(scope):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(node, (shadowed or set()) | _local_names(node))
            elif isinstance(node, ast.ClassDef):
                visit(node, shadowed)
            elif shadowed is not None and (name := _written_name(node)) in module_names and name not in shadowed:
                found.append(name)

    visit(tree, None)  # (None: at module level, the import itself fills its tables)
    return list(dict.fromkeys(found))


def _module_state(tree: ast.Module) -> list[str]:
    found = []
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            value = node.value
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            maker = value.func.attr if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) else (
                value.func.id if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) else None)
            container = isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp))
            for t in targets:
                if not isinstance(t, ast.Name) or t.id == "__all__":
                    continue
                if maker in _WEAK_OR_LOCAL or ((container or maker in _MUTABLE_MAKERS) and not t.id.lstrip("_").isupper()):
                    found.append(t.id)
    found += [name for name in _written_after_import(tree) if name not in found]
    found += [f"global {name}" for node in ast.walk(tree) if isinstance(node, ast.Global) for name in node.names]
    return found


def test_state_lives_in_state():
    found = {f"{p.relative_to(PACKAGE).as_posix()}: {name}"
             for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] != "state"
             for name in _module_state(ast.parse(p.read_text(encoding="utf-8")))}
    assert found == STATE_OUTSIDE_STATE


def test_the_state_check_sees_a_thread_local_and_a_lowercase_table():
    tree = ast.parse("import threading\nSEEN = {}\n_local = threading.local()\n_cache = {}\nNAMES = ('a',)\n")
    assert _module_state(tree) == ["_local", "_cache"]


def test_the_state_check_sees_each_write_after_import():
    forms = {"ITEM": "ITEM[k] = v", "NESTED": "NESTED[a][b] = v", "AUG": "AUG[k] += 1", "DELETED": "del DELETED[k]",
             **{f"M_{m.upper()}": f"M_{m.upper()}.{m}(x)" for m in ("append", "add", "update", "setdefault", "clear",
                                                                    "pop")}}
    source = "".join(f"{name} = {{}}\n" for name in forms) + "".join(
        f"def f{i}(x, k=0, v=0, a=0, b=0):\n    {write}\n" for i, write in enumerate(forms.values()))
    assert _module_state(ast.parse(source)) == list(forms)
    # not writes after import: filled at import, a local of the same name, a method's own table,
    # a table imported from state/, a table only read
    quiet = ("TABLE = {}\nTABLE['a'] = 1\nREAD = {}\nfrom metatrace.state.object_tables import SHARED\n"
             "def f(TABLE):\n    TABLE['b'] = 2\n    SHARED.clear()\n    return READ.get(1)\n"
             "def g():\n    TABLE = {}\n    TABLE.update(x=1)\n"
             "class C:\n    def m(self):\n        self.TABLE.append(1)\n")
    assert _module_state(ast.parse(quiet)) == []
    # a nested function's write reaches the module's table past its enclosing function
    nested = "TABLE = {}\ndef f():\n    def g():\n        TABLE.add(1)\n    return g\n"
    assert _module_state(ast.parse(nested)) == ["TABLE"]
