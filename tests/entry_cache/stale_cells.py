"""The stale-entry matrix's cells and the driver that runs them in a process of its own.

Each cell is a small program in generated module files (``stale_cell_<name>.py`` and, for some, a
``stale_cell_<name>_lib.py`` beside it), written into a directory by :func:`write_cells`. Between
the two processes a cell changes one thing the compile read: by an edit of one of its files
(:func:`apply_edits`), or by a ``changed(model)`` context manager in its module that the second
process enters around building the jitted callable, calling it and running eager (a value rebound
at run time, an environment variable, the executors, a version string). Each change alters the
output of the program, except where it changes the program key itself (executors, versions), so a
stale hit in the second process would show as an output unlike eager. A number a cell changes also
decides a branch (``tanh if v < 2.5 else sigmoid``), so the stored trace cannot serve it: under
symbolic values a number that only scales may be an input of the trace, which the ``value_only``
cells (``expect_miss=False``) change. Cells named ``fn_*`` jit a function instead of a module.

Run as a script, it is that process::

    python stale_cells.py <cells dir> first|second <report.json> [cell ...]

for each cell: the model built with a fixed seed, jitted with ``cache="symbolic values"`` under
``metatrace.enable()`` (the entry cache as the environment says), called on two input shapes,
eager run on the same model and inputs; the report says whether they agree, the cache's misses
and the entry cache's statistics. The first process keeps its eager outputs (``first_outputs.pt``
in the cells directory), and the second says whether its own eager outputs differ from them (the
change reached the program's output).
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

INPUT_SHAPES = ((2, 4), (3, 4))
FIRST_OUTPUTS = "first_outputs.pt"

_HEADER = "import torch\nfrom torch import nn\n"


@dataclass(frozen=True)
class Cell:
    name: str
    files: dict[str, str]  # suffix ("" for the cell's module, "_lib" for its library) -> source
    edits: tuple[tuple[str, str, str], ...] = ()  # (suffix, old text, new text) applied between the processes
    changes_output: bool = True  # False: the change is in the program key (executors, versions)
    # False: a hit is as good as a miss (a number the trace takes as an input under symbolic
    # values, the change not deciding anything); the output must still equal eager
    expect_miss: bool = True
    notes: str = field(default="", compare=False)

    def module(self, suffix: str = "") -> str:
        return f"stale_cell_{self.name}{suffix}"


def _src(text: str) -> str:
    return _HEADER + textwrap.dedent(text)


def _block(text: str, depth: int = 0) -> str:
    """``text`` dedented, stripped of blank edges, indented by ``depth`` levels, with a final newline."""
    return textwrap.indent(textwrap.dedent(text).strip("\n"), "    " * depth) + "\n"


def _program(head: str, defined: str, built: str, argument: str, changed: str) -> str:
    """A cell's module: the header, ``head`` (imports, globals, helpers), the jitted thing's
    definition, ``build()`` returning ``built``, and where given the ``changed(argument)`` context
    manager whose body ``changed`` is; the parts a blank line apart."""
    parts = [_block(head)] if head else []
    parts += [defined, f"def build():\n    return {built}\n"]
    if changed:
        parts.append(f"@contextlib.contextmanager\ndef changed({argument}):\n" + _block(changed, 1))
    return _HEADER + "\n" + "\n".join(parts)


def _model(forward: str, *, head: str = "", attributes: str = "", init: str = "self.lin = nn.Linear(4, 4)",
           base: str = "nn.Module", changed: str = "") -> str:
    """A module's cell: ``class Model(base)`` with the class ``attributes``, ``init``'s lines after
    ``super().__init__()`` and ``forward``'s lines as ``forward(self, x)``; ``changed(model)``."""
    defined = f"class Model({base}):\n" + (_block(attributes, 1) + "\n" if attributes else "")
    defined += "    def __init__(self):\n        super().__init__()\n" + _block(init, 2)
    defined += "\n    def forward(self, x):\n" + _block(forward, 2)
    return _program(head, defined, "Model()", "model", changed)


def _function(body: str, *, head: str = "", params: str = "x", changed: str = "") -> str:
    """A function's cell: ``def f(params)`` of ``body``'s lines; ``changed(fn)``."""
    return _program(head, f"def f({params}):\n" + _block(body, 1), "f", "fn", changed)


def _decides(value: str, of: str, plus: str = "", tanh_if: str = "< 2.5") -> str:
    """A forward's lines that scale ``of`` by ``value`` (and add ``plus``) and branch on the value:
    tanh where it is ``tanh_if``, sigmoid where not."""
    y = f"{of} * {value}" + (f" + {plus}" if plus else "")
    return f"y = {y}\nreturn torch.tanh(y) if {value} {tanh_if} else torch.sigmoid(y)\n"


def _rebinding(target: str, new: str, old: str | None = None, before: str = "") -> str:
    """A ``changed`` body that binds ``target`` to ``new`` around the second run and then to ``old``
    (by default to what it was, kept as ``original`` first); ``before``'s lines ahead of the binding."""
    save = f"original = {target}\n" if old is None else ""
    return f"{save}{before}{target} = {new}\ntry:\n    yield {{}}\nfinally:\n    {target} = {old or 'original'}\n"


# What several cells share: a change at run time, a library and its edit.
_REBIND_SCALE = _rebinding("module.SCALE", "3.0", "2.0", before="module = sys.modules[__name__]\n")
_SCALE_EDIT = ("_lib", "SCALE = 2.0", "SCALE = 3.0")
_MODE_LIB = _src("""
    import enum

    class Mode(enum.Enum):
        SCALE = 2.0
        SHIFT = 1.0
""")
_DTYPE_LIB = _src("""
    DTYPE = torch.float32
""")
_DTYPE_EDIT = ("_lib", "DTYPE = torch.float32", "DTYPE = torch.float64")
_WITH_OFFSET = 'self.lin = nn.Linear(4, 4)\nself.register_buffer("offset", torch.ones(4))'  # a model's init


def _set_on_model(name: str, forward: str, init: str, attribute: str, value: str, notes: str) -> Cell:
    """A module's cell whose change sets ``attribute`` of the built model to ``value``."""
    changed = f"model.{attribute} = {value}\nyield {{}}"
    return Cell(name, {"": _model(forward, head="import contextlib", init=init, changed=changed)}, notes=notes)


def _code_cells(names: tuple[str, str, str], control: str, helper: str, code_notes: str) -> tuple[Cell, ...]:
    """A kind's first cells: the ``control`` program (the cells after are variations of it)
    unchanged, its code edited, and a ``helper`` program whose ``lib.mix`` is edited in its own file."""
    mix = _src("""
        def mix(x):
            return torch.tanh(x) * 2.0
    """)
    return (
        Cell(names[0], {"": control}, notes="no change: the second process loads the entry and hits"),
        Cell(names[1], {"": control}, edits=(("", "* 2.0", "* 3.0 + 1.0"),), notes=code_notes),
        Cell(names[2], {"": helper, "_lib": mix},
             edits=(("_lib", "torch.tanh(x) * 2.0", "torch.sigmoid(x) * 3.0 - 1.0"),),
             notes="a helper's code edited in its own file (the cell's file unchanged)"),
    )


def _key_cells(prefix: str, program: Callable[..., str], control: str) -> tuple[Cell, ...]:
    """A kind's cells whose change is in the program key, not in the output: its ``control``
    program run under another executors list, and under another version of lightning-thunder."""
    newer_thunder = _rebinding("program_key.library_versions", "lambda: dict(versions)", before=(
        'versions = {**original(), "lightning-thunder": original()["lightning-thunder"] + ".post1"}\n'))
    executors = program(control, changed='yield {"executors": [get_executor("torch")]}',
                        head="import contextlib\n\nfrom thunder.extend import get_executor")
    version = program(control, changed=newer_thunder,
                      head="import contextlib\n\nfrom metatrace.entry_cache import program_key")
    return (
        Cell(f"{prefix}executors", {"": executors}, changes_output=False,
             notes="the executors list: thunder's defaults first, then the torch executor alone"),
        Cell(f"{prefix}version_string", {"": version}, changes_output=False,
             notes="lightning-thunder's version string (patched before the first jitted call)"),
    )


CELLS: tuple[Cell, ...] = _code_cells(
    ("control", "forward_code", "helper_code"), _model("return torch.tanh(self.lin(x)) * 2.0"),
    _model("return lib.mix(self.lin(x))", head="import stale_cell_helper_code_lib as lib"),
    code_notes="the forward's code edited in the cell's file") + (

    Cell("class_attribute", {"": _model(_decides("self.scale", "self.lin(x)"), attributes="scale = 2.0")},
         edits=(("", "scale = 2.0", "scale = 3.0"),),
         notes="a class attribute edited in the class's body (the cell's file)"),

    Cell("class_attribute_of_base", {
        "": _model(_decides("self.scale", "self.lin(x)"), base="Base",
                   head="from stale_cell_class_attribute_of_base_lib import Base"),
        "_lib": _src("""
            class Base(nn.Module):
                scale = 2.0
        """)},
        edits=(("_lib", "scale = 2.0", "scale = 3.0"),),
        notes="a base class's attribute edited in a file whose code the compile never runs"),

    Cell("config_value", {
        "": _model(_decides("self.config.alpha", "self.lin(x)", "self.config.beta", "> 0.4"),
                   head="from stale_cell_config_value_lib import ALPHA, Config",
                   init="self.config = Config(alpha=ALPHA)\nself.lin = nn.Linear(4, 4)"),
        "_lib": _src("""
            import dataclasses

            ALPHA = 0.5

            @dataclasses.dataclass
            class Config:
                alpha: float
                beta: float = 1.0
        """)},
        edits=(("_lib", "ALPHA = 0.5", "ALPHA = 0.25"),),
        notes="a config object's value set by the constructor from a constant in a file the compile never runs"),

    Cell("global_in_file", {"": _model(_decides("SCALE", "self.lin(x)"), head="SCALE = 2.0")},
         edits=(("", "SCALE = 2.0", "SCALE = 3.0"),), notes="a module global's initial value edited"),

    Cell("global_rebound", {
        "": _model(_decides("SCALE", "self.lin(x)"), changed=_REBIND_SCALE, head="""
            import contextlib
            import sys

            SCALE = 2.0
        """)},
        notes="a module global rebound at run time (no file changes)"),

    Cell("global_of_other_module", {
        "": _model(_decides("settings.SCALE", "self.lin(x)"),
                   head="import stale_cell_global_of_other_module_lib as settings"),
        "_lib": "SCALE = 2.0\n"},
        edits=(_SCALE_EDIT,),
        notes="another module's global, read as its attribute, edited in a file the compile never runs"),

    Cell("default_in_file", {"": _model("return scaled(self.lin(x))", head="""
            def scaled(x, k=2.0):
                return torch.tanh(x * k) if k < 2.5 else torch.sigmoid(x * k)
        """)},
        edits=(("", "k=2.0", "k=3.0"),),
        notes="a function's default edited (the function's code object is the same)"),

    Cell("default_rebound", {
        "": _model("return scaled(self.lin(x))", head="""
            import contextlib

            def scaled(x, k=2.0):
                return torch.tanh(x * k) if k < 2.5 else torch.sigmoid(x * k)
        """, changed=_rebinding("scaled.__defaults__", "(3.0,)", "(2.0,)"))},
        notes="a function's __defaults__ rebound at run time (no file, no code changes)"),

    Cell("enum_member", {
        "": _model(_decides("Mode.SCALE.value", "self.lin(x)"), head="from stale_cell_enum_member_lib import Mode"),
        "_lib": _MODE_LIB},
        edits=(_SCALE_EDIT,), notes="an enum member's value edited in a file the compile never runs"),

    Cell("enum_member_chosen", {
        "": _model("""
            y = self.lin(x)
            if self.mode is Mode.TANH:
                return torch.tanh(y)
            return torch.sigmoid(y)
        """, head="from stale_cell_enum_member_chosen_lib import CHOSEN, Mode",
            init="self.mode = Mode[CHOSEN]\nself.lin = nn.Linear(4, 4)"),
        "_lib": _src("""
            import enum

            CHOSEN = "TANH"

            class Mode(enum.Enum):
                TANH = 1
                SIGMOID = 2
        """)},
        edits=(("_lib", 'CHOSEN = "TANH"', 'CHOSEN = "SIGMOID"'),),
        notes="the enum member the module holds (checked by identity) chosen from a file the compile never runs"),

    _set_on_model("callee_on_instance", "return self.act(self.lin(x))",
                  "self.act = torch.relu\nself.lin = nn.Linear(4, 4)", "act", "torch.sigmoid",
                  notes="the callee an nn.Module instance holds swapped after construction"),

    Cell("callee_on_module", {
        "": _model("return lib.act(self.lin(x))", head="""
            import contextlib

            import stale_cell_callee_on_module_lib as lib
        """, changed=_rebinding("lib.act", "lib.other_act")),
        "_lib": _src("""
            def act(x):
                return torch.relu(x)

            def other_act(x):
                return torch.sigmoid(x)
        """)},
        notes="a function swapped on a Python module at run time (the files unchanged)"),

    _set_on_model("submodule_rebound", "return self.act(self.lin(x))",
                  "self.lin = nn.Linear(4, 4)\nself.act = nn.ReLU()", "act", "nn.Tanh()",
                  notes="a submodule rebound to another module class after construction"),

    _set_on_model("submodule_attribute", "return self.act(self.lin(x))",
                  "self.lin = nn.Linear(4, 4)\nself.act = nn.LeakyReLU(0.2)", "act", "nn.LeakyReLU(0.05)",
                  notes="a submodule rebound to one of the same class with another setting"),

    _set_on_model("buffer_rebound", "return self.lin(x) + self.offset", _WITH_OFFSET,
                  "offset", "torch.full((4,), 2.0, dtype=torch.float64)",
                  notes="a buffer rebound to a tensor of another dtype (and values) after construction"),

    _set_on_model("buffer_removed", """
            y = self.lin(x)
            if self.offset is not None:
                y = y + self.offset
            return y
        """, _WITH_OFFSET, "offset", "None",
                  notes="a buffer rebound to None after construction (the forward branches on it)"),

    Cell("parameter_dtype", {
        "": _model("return torch.tanh(x) * self.w", head="from stale_cell_parameter_dtype_lib import DTYPE",
                   init="self.w = nn.Parameter(torch.randn(4, dtype=DTYPE))"),
        "_lib": _DTYPE_LIB},
        edits=(_DTYPE_EDIT,), notes="a parameter's dtype, chosen from a constant in a file the compile never runs"),

    Cell("env_var", {
        "": _model('scale = float(os.environ.get("STALE_CELL_SCALE", "2.0"))\n' + _decides("scale", "self.lin(x)"),
                   head="import contextlib\nimport os", changed="""
            old = os.environ.get("STALE_CELL_SCALE")
            os.environ["STALE_CELL_SCALE"] = "3.0"
            try:
                yield {}
            finally:
                if old is None:
                    del os.environ["STALE_CELL_SCALE"]
                else:
                    os.environ["STALE_CELL_SCALE"] = old
        """)},
        notes="an environment variable the forward reads, set to another value"),
) + _key_cells("", _model, "return torch.tanh(self.lin(x)) * 2.0")

# The same changes to a jitted function (named in the program key by its code, not by a class),
# which calls no Python function of the user's but in fn_helper_code.
FUNCTION_CELLS: tuple[Cell, ...] = _code_cells(
    ("fn_control", "fn_code", "fn_helper_code"), _function("return torch.tanh(x) * 2.0"),
    _function("return lib.mix(x)", head="import stale_cell_fn_helper_code_lib as lib"),
    code_notes="the jitted function's code edited") + (

    Cell("fn_class_attribute", {
        "": _function(_decides("lib.Settings.scale", "torch.tanh(x)"),
                      head="import stale_cell_fn_class_attribute_lib as lib"),
        "_lib": _src("""
            class Settings:
                scale = 2.0
        """)},
        edits=(("_lib", "scale = 2.0", "scale = 3.0"),),
        notes="a class attribute edited in a file the compile never runs"),

    Cell("fn_config_value", {
        "": _function(_decides("lib.CONFIG.alpha", "torch.tanh(x)", "lib.CONFIG.beta", "> 0.4"),
                      head="import stale_cell_fn_config_value_lib as lib"),
        "_lib": _src("""
            import dataclasses

            @dataclasses.dataclass
            class Config:
                alpha: float
                beta: float = 1.0

            CONFIG = Config(alpha=0.5)
        """)},
        edits=(("_lib", "Config(alpha=0.5)", "Config(alpha=0.25)"),),
        notes="a config object's value edited in a file the compile never runs"),

    Cell("fn_global_rebound", {
        "": _function(_decides("SCALE", "torch.tanh(x)"), head="import contextlib\nimport sys\n\nSCALE = 2.0",
                      changed=_REBIND_SCALE)},
        notes="a module global rebound at run time (no file changes)"),

    Cell("fn_global_of_other_module", {
        "": _function(_decides("settings.SCALE", "torch.tanh(x)"),
                      head="import stale_cell_fn_global_of_other_module_lib as settings"),
        "_lib": "SCALE = 2.0\n"},
        edits=(_SCALE_EDIT,), notes="another module's global edited in a file the compile never runs"),

    Cell("fn_default", {
        "": _function(_decides("k", "torch.tanh(x)"), params="x, k=2.0", head="import contextlib",
                      changed=_rebinding("fn.__defaults__", "(3.0,)", "(2.0,)"))},
        notes="the jitted function's __defaults__ rebound at run time (its code, in the key, unchanged)"),

    Cell("fn_enum_member", {
        "": _function(_decides("lib.Mode.SCALE.value", "torch.tanh(x)"),
                      head="import stale_cell_fn_enum_member_lib as lib"),
        "_lib": _MODE_LIB},
        edits=(_SCALE_EDIT,), notes="an enum member's value edited in a file the compile never runs"),

    Cell("fn_callee_on_module", {
        "": _function("return lib.act(x) * 2.0", head="""
            import contextlib

            import stale_cell_fn_callee_on_module_lib as lib
        """, changed=_rebinding("lib.act", "torch.sigmoid")),
        "_lib": _src("""
            act = torch.relu
        """)},
        notes="a (builtin) callee swapped on a Python module at run time"),

    Cell("fn_dtype_constant", {
        "": _function("return torch.tanh(x).to(lib.DTYPE) * 2.0",
                      head="import stale_cell_fn_dtype_constant_lib as lib"),
        "_lib": _DTYPE_LIB},
        edits=(_DTYPE_EDIT,),
        notes="a dtype read from another module's constant, edited in a file the compile never runs"),

    Cell("fn_env_var", {
        "": _function('scale = float(os.environ.get("STALE_CELL_FN_SCALE", "2.0"))\n'
                      + _decides("scale", "torch.tanh(x)"), head="import contextlib\nimport os", changed="""
            os.environ["STALE_CELL_FN_SCALE"] = "3.0"
            try:
                yield {}
            finally:
                del os.environ["STALE_CELL_FN_SCALE"]
        """)},
        notes="an environment variable the function reads, set to another value"),
) + _key_cells("fn_", _function, "return torch.tanh(x) * 2.0")

CELLS += FUNCTION_CELLS

# A number that decides nothing: under symbolic values the trace may take it as an input, so the
# stored entry may serve the new value (a hit); the claim is only that the output equals eager.
VALUE_ONLY_CELLS: tuple[Cell, ...] = (
    Cell("value_only_global", {
        "": _model("return self.lin(x) * SCALE", head="import contextlib\nimport sys\n\nSCALE = 2.0",
                   changed=_REBIND_SCALE)},
        expect_miss=False, notes="a module global used only as a factor, rebound at run time"),

    Cell("fn_value_only_global", {
        "": _function("return torch.tanh(x) * SCALE", head="import contextlib\nimport sys\n\nSCALE = 2.0",
                      changed=_REBIND_SCALE)},
        expect_miss=False, notes="a module global used only as a factor, rebound at run time"),

    Cell("fn_value_only_config", {
        "": _function("return torch.tanh(x) * lib.CONFIG.alpha + lib.Mode.SHIFT.value",
                      head="import stale_cell_fn_value_only_config_lib as lib"),
        "_lib": _src("""
            import dataclasses
            import enum

            @dataclasses.dataclass
            class Config:
                alpha: float

            class Mode(enum.Enum):
                SHIFT = 1.0

            CONFIG = Config(alpha=0.5)
        """)},
        edits=(("_lib", "Config(alpha=0.5)", "Config(alpha=0.25)"), ("_lib", "SHIFT = 1.0", "SHIFT = -1.0")),
        expect_miss=False, notes="a config value and an enum member's value used only in arithmetic, edited"),
)

CELLS += VALUE_ONLY_CELLS

CELL_NAMES = tuple(cell.name for cell in CELLS)
BY_NAME = {cell.name: cell for cell in CELLS}


def write_cells(directory: Path) -> None:
    for cell in CELLS:
        for suffix, text in cell.files.items():
            (directory / f"{cell.module(suffix)}.py").write_text(text)


def apply_edits(directory: Path) -> None:
    """Each cell's edits of its files (a larger file each time, so no stale bytecode either)."""
    for cell in CELLS:
        for suffix, old, new in cell.edits:
            path = directory / f"{cell.module(suffix)}.py"
            text = path.read_text()
            assert text.count(old) == 1, (cell.name, old)
            path.write_text(text.replace(old, new))


# --- the driver (one process) ---------------------------------------------------------------------


def _run_cell(cell: Cell, phase: str, first_outputs: dict) -> dict:
    import contextlib
    import importlib

    import thunder
    import torch

    from metatrace.entry_cache import entry_cache_stats

    module = importlib.import_module(cell.module())
    torch.manual_seed(0)
    model = module.build()
    gen = torch.Generator().manual_seed(1)
    inputs = [torch.randn(shape, generator=gen) for shape in INPUT_SHAPES]
    changed = getattr(module, "changed", None)
    context = changed(model) if phase == "second" and changed is not None else contextlib.nullcontext({})
    with context as jit_kwargs:
        jitted = thunder.jit(model, cache="symbolic values", **jit_kwargs)
        outputs = [jitted(x) for x in inputs]
        with torch.no_grad():
            eager = [model(x) for x in inputs]
    report: dict = {"equals_eager": True, "mismatch": ""}
    for got, want in zip(outputs, eager):
        try:
            torch.testing.assert_close(got, want)
        except AssertionError as e:
            report["equals_eager"] = False
            report["mismatch"] = str(e)[:600]
            break
    stats = entry_cache_stats(jitted)
    report.update(
        cache_misses=thunder.cache_misses(jitted),
        cache_hits=thunder.cache_hits(jitted),
        loaded=None if stats is None else stats.loaded,
        stored=None if stats is None else stats.stored,
        kept_local=None if stats is None else list(stats.kept_local),
        skipped=None if stats is None else list(stats.skipped),
    )
    eager = [t.detach() for t in eager]
    if phase == "first":
        first_outputs[cell.name] = eager
    else:
        before = first_outputs.get(cell.name)
        report["differs_from_first"] = before is None or any(
            a.dtype != b.dtype or a.shape != b.shape or not torch.allclose(a.double(), b.double())
            for a, b in zip(eager, before))
    return report


def main(argv: list[str]) -> int:
    directory, phase, report_path, *names = argv
    assert phase in ("first", "second"), phase
    directory = Path(directory)
    sys.path.insert(0, str(directory))
    import torch

    import metatrace

    metatrace.enable()
    first_path = directory / FIRST_OUTPUTS
    first_outputs = torch.load(first_path) if phase == "second" else {}
    reports = {}
    for name in names or CELL_NAMES:
        try:
            reports[name] = _run_cell(BY_NAME[name], phase, first_outputs)
        except Exception as e:  # noqa: BLE001 - one cell's failure is that cell's report
            import traceback

            reports[name] = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-3000:]}
    if phase == "first":
        torch.save(first_outputs, first_path)
    Path(report_path).write_text(json.dumps(reports, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
