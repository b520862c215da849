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


# The control's program; the cells below are variations of it.
_CONTROL = _src("""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            return torch.tanh(self.lin(x)) * 2.0

    def build():
        return Model()
""")

CELLS: tuple[Cell, ...] = (
    Cell("control", {"": _CONTROL}, notes="no change: the second process loads the entry and hits"),

    Cell("forward_code", {"": _CONTROL}, edits=(("", "* 2.0", "* 3.0 + 1.0"),),
         notes="the forward's code edited in the cell's file"),

    Cell("helper_code", {
        "": _src("""
            import stale_cell_helper_code_lib as lib

            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = nn.Linear(4, 4)

                def forward(self, x):
                    return lib.mix(self.lin(x))

            def build():
                return Model()
        """),
        "_lib": _src("""
            def mix(x):
                return torch.tanh(x) * 2.0
        """)},
        edits=(("_lib", "torch.tanh(x) * 2.0", "torch.sigmoid(x) * 3.0 - 1.0"),),
        notes="a helper's code edited in its own file (the cell's file unchanged)"),

    Cell("class_attribute", {
        "": _src("""
            class Model(nn.Module):
                scale = 2.0

                def __init__(self):
                    super().__init__()
                    self.lin = nn.Linear(4, 4)

                def forward(self, x):
                    y = self.lin(x) * self.scale
                    return torch.tanh(y) if self.scale < 2.5 else torch.sigmoid(y)

            def build():
                return Model()
        """)},
        edits=(("", "scale = 2.0", "scale = 3.0"),),
        notes="a class attribute edited in the class's body (the cell's file)"),

    Cell("class_attribute_of_base", {
        "": _src("""
            from stale_cell_class_attribute_of_base_lib import Base

            class Model(Base):
                def __init__(self):
                    super().__init__()
                    self.lin = nn.Linear(4, 4)

                def forward(self, x):
                    y = self.lin(x) * self.scale
                    return torch.tanh(y) if self.scale < 2.5 else torch.sigmoid(y)

            def build():
                return Model()
        """),
        "_lib": _src("""
            class Base(nn.Module):
                scale = 2.0
        """)},
        edits=(("_lib", "scale = 2.0", "scale = 3.0"),),
        notes="a base class's attribute edited in a file whose code the compile never runs"),

    Cell("config_value", {
        "": _src("""
            from stale_cell_config_value_lib import ALPHA, Config

            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.config = Config(alpha=ALPHA)
                    self.lin = nn.Linear(4, 4)

                def forward(self, x):
                    y = self.lin(x) * self.config.alpha + self.config.beta
                    return torch.tanh(y) if self.config.alpha > 0.4 else torch.sigmoid(y)

            def build():
                return Model()
        """),
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

    Cell("global_in_file", {
        "": _src("""
            SCALE = 2.0

            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = nn.Linear(4, 4)

                def forward(self, x):
                    y = self.lin(x) * SCALE
                    return torch.tanh(y) if SCALE < 2.5 else torch.sigmoid(y)

            def build():
                return Model()
        """)},
        edits=(("", "SCALE = 2.0", "SCALE = 3.0"),),
        notes="a module global's initial value edited"),

    Cell("global_rebound", {
        "": _src("""
            import contextlib
            import sys

            SCALE = 2.0

            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = nn.Linear(4, 4)

                def forward(self, x):
                    y = self.lin(x) * SCALE
                    return torch.tanh(y) if SCALE < 2.5 else torch.sigmoid(y)

            def build():
                return Model()

            @contextlib.contextmanager
            def changed(model):
                module = sys.modules[__name__]
                module.SCALE = 3.0
                try:
                    yield {}
                finally:
                    module.SCALE = 2.0
        """)},
        notes="a module global rebound at run time (no file changes)"),

    Cell("global_of_other_module", {
        "": _src("""
            import stale_cell_global_of_other_module_lib as settings

            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = nn.Linear(4, 4)

                def forward(self, x):
                    y = self.lin(x) * settings.SCALE
                    return torch.tanh(y) if settings.SCALE < 2.5 else torch.sigmoid(y)

            def build():
                return Model()
        """),
        "_lib": "SCALE = 2.0\n"},
        edits=(("_lib", "SCALE = 2.0", "SCALE = 3.0"),),
        notes="another module's global, read as its attribute, edited in a file the compile never runs"),

    Cell("default_in_file", {
        "": _src("""
            def scaled(x, k=2.0):
                return torch.tanh(x * k) if k < 2.5 else torch.sigmoid(x * k)

            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = nn.Linear(4, 4)

                def forward(self, x):
                    return scaled(self.lin(x))

            def build():
                return Model()
        """)},
        edits=(("", "k=2.0", "k=3.0"),),
        notes="a function's default edited (the function's code object is the same)"),

    Cell("default_rebound", {
        "": _src("""
            import contextlib

            def scaled(x, k=2.0):
                return torch.tanh(x * k) if k < 2.5 else torch.sigmoid(x * k)

            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = nn.Linear(4, 4)

                def forward(self, x):
                    return scaled(self.lin(x))

            def build():
                return Model()

            @contextlib.contextmanager
            def changed(model):
                scaled.__defaults__ = (3.0,)
                try:
                    yield {}
                finally:
                    scaled.__defaults__ = (2.0,)
        """)},
        notes="a function's __defaults__ rebound at run time (no file, no code changes)"),

    Cell("enum_member", {
        "": _src("""
            from stale_cell_enum_member_lib import Mode

            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = nn.Linear(4, 4)

                def forward(self, x):
                    y = self.lin(x) * Mode.SCALE.value
                    return torch.tanh(y) if Mode.SCALE.value < 2.5 else torch.sigmoid(y)

            def build():
                return Model()
        """),
        "_lib": _src("""
            import enum

            class Mode(enum.Enum):
                SCALE = 2.0
                SHIFT = 1.0
        """)},
        edits=(("_lib", "SCALE = 2.0", "SCALE = 3.0"),),
        notes="an enum member's value edited in a file the compile never runs"),

    Cell("enum_member_chosen", {
        "": _src("""
            from stale_cell_enum_member_chosen_lib import CHOSEN, Mode

            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.mode = Mode[CHOSEN]
                    self.lin = nn.Linear(4, 4)

                def forward(self, x):
                    y = self.lin(x)
                    if self.mode is Mode.TANH:
                        return torch.tanh(y)
                    return torch.sigmoid(y)

            def build():
                return Model()
        """),
        "_lib": _src("""
            import enum

            CHOSEN = "TANH"

            class Mode(enum.Enum):
                TANH = 1
                SIGMOID = 2
        """)},
        edits=(("_lib", 'CHOSEN = "TANH"', 'CHOSEN = "SIGMOID"'),),
        notes="the enum member the module holds (checked by identity) chosen from a file the compile never runs"),

    Cell("callee_on_instance", {
        "": _src("""
            import contextlib

            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.act = torch.relu
                    self.lin = nn.Linear(4, 4)

                def forward(self, x):
                    return self.act(self.lin(x))

            def build():
                return Model()

            @contextlib.contextmanager
            def changed(model):
                model.act = torch.sigmoid
                yield {}
        """)},
        notes="the callee an nn.Module instance holds swapped after construction"),

    Cell("callee_on_module", {
        "": _src("""
            import contextlib

            import stale_cell_callee_on_module_lib as lib

            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = nn.Linear(4, 4)

                def forward(self, x):
                    return lib.act(self.lin(x))

            def build():
                return Model()

            @contextlib.contextmanager
            def changed(model):
                original = lib.act
                lib.act = lib.other_act
                try:
                    yield {}
                finally:
                    lib.act = original
        """),
        "_lib": _src("""
            def act(x):
                return torch.relu(x)

            def other_act(x):
                return torch.sigmoid(x)
        """)},
        notes="a function swapped on a Python module at run time (the files unchanged)"),

    Cell("submodule_rebound", {
        "": _src("""
            import contextlib

            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = nn.Linear(4, 4)
                    self.act = nn.ReLU()

                def forward(self, x):
                    return self.act(self.lin(x))

            def build():
                return Model()

            @contextlib.contextmanager
            def changed(model):
                model.act = nn.Tanh()
                yield {}
        """)},
        notes="a submodule rebound to another module class after construction"),

    Cell("submodule_attribute", {
        "": _src("""
            import contextlib

            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = nn.Linear(4, 4)
                    self.act = nn.LeakyReLU(0.2)

                def forward(self, x):
                    return self.act(self.lin(x))

            def build():
                return Model()

            @contextlib.contextmanager
            def changed(model):
                model.act = nn.LeakyReLU(0.05)
                yield {}
        """)},
        notes="a submodule rebound to one of the same class with another setting"),

    Cell("buffer_rebound", {
        "": _src("""
            import contextlib

            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = nn.Linear(4, 4)
                    self.register_buffer("offset", torch.ones(4))

                def forward(self, x):
                    return self.lin(x) + self.offset

            def build():
                return Model()

            @contextlib.contextmanager
            def changed(model):
                model.offset = torch.full((4,), 2.0, dtype=torch.float64)
                yield {}
        """)},
        notes="a buffer rebound to a tensor of another dtype (and values) after construction"),

    Cell("buffer_removed", {
        "": _src("""
            import contextlib

            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = nn.Linear(4, 4)
                    self.register_buffer("offset", torch.ones(4))

                def forward(self, x):
                    y = self.lin(x)
                    if self.offset is not None:
                        y = y + self.offset
                    return y

            def build():
                return Model()

            @contextlib.contextmanager
            def changed(model):
                model.offset = None
                yield {}
        """)},
        notes="a buffer rebound to None after construction (the forward branches on it)"),

    Cell("parameter_dtype", {
        "": _src("""
            from stale_cell_parameter_dtype_lib import DTYPE

            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.w = nn.Parameter(torch.randn(4, dtype=DTYPE))

                def forward(self, x):
                    return torch.tanh(x) * self.w

            def build():
                return Model()
        """),
        "_lib": _src("""
            DTYPE = torch.float32
        """)},
        edits=(("_lib", "DTYPE = torch.float32", "DTYPE = torch.float64"),),
        notes="a parameter's dtype, chosen from a constant in a file the compile never runs"),

    Cell("env_var", {
        "": _src("""
            import contextlib
            import os

            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = nn.Linear(4, 4)

                def forward(self, x):
                    scale = float(os.environ.get("STALE_CELL_SCALE", "2.0"))
                    y = self.lin(x) * scale
                    return torch.tanh(y) if scale < 2.5 else torch.sigmoid(y)

            def build():
                return Model()

            @contextlib.contextmanager
            def changed(model):
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

    Cell("executors", {
        "": _src("""
            import contextlib

            from thunder.extend import get_executor

            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = nn.Linear(4, 4)

                def forward(self, x):
                    return torch.tanh(self.lin(x)) * 2.0

            def build():
                return Model()

            @contextlib.contextmanager
            def changed(model):
                yield {"executors": [get_executor("torch")]}
        """)},
        changes_output=False,
        notes="the executors list: thunder's defaults first, then the torch executor alone"),

    Cell("version_string", {
        "": _src("""
            import contextlib

            from metatrace.entry_cache import program_key

            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = nn.Linear(4, 4)

                def forward(self, x):
                    return torch.tanh(self.lin(x)) * 2.0

            def build():
                return Model()

            @contextlib.contextmanager
            def changed(model):
                original = program_key.library_versions
                versions = {**original(), "lightning-thunder": original()["lightning-thunder"] + ".post1"}
                program_key.library_versions = lambda: dict(versions)
                try:
                    yield {}
                finally:
                    program_key.library_versions = original
        """)},
        changes_output=False,
        notes="lightning-thunder's version string (patched before the first jitted call)"),
)

# The same changes to a jitted function (named in the program key by its code, not by a class),
# which calls no Python function of the user's but in fn_helper_code.
_FN_CONTROL = _src("""
    def f(x):
        return torch.tanh(x) * 2.0

    def build():
        return f
""")

FUNCTION_CELLS: tuple[Cell, ...] = (
    Cell("fn_control", {"": _FN_CONTROL}, notes="no change: the second process loads the entry and hits"),

    Cell("fn_code", {"": _FN_CONTROL}, edits=(("", "* 2.0", "* 3.0 + 1.0"),),
         notes="the jitted function's code edited"),

    Cell("fn_helper_code", {
        "": _src("""
            import stale_cell_fn_helper_code_lib as lib

            def f(x):
                return lib.mix(x)

            def build():
                return f
        """),
        "_lib": _src("""
            def mix(x):
                return torch.tanh(x) * 2.0
        """)},
        edits=(("_lib", "torch.tanh(x) * 2.0", "torch.sigmoid(x) * 3.0 - 1.0"),),
        notes="a helper's code edited in its own file"),

    Cell("fn_class_attribute", {
        "": _src("""
            import stale_cell_fn_class_attribute_lib as lib

            def f(x):
                y = torch.tanh(x) * lib.Settings.scale
                return torch.tanh(y) if lib.Settings.scale < 2.5 else torch.sigmoid(y)

            def build():
                return f
        """),
        "_lib": _src("""
            class Settings:
                scale = 2.0
        """)},
        edits=(("_lib", "scale = 2.0", "scale = 3.0"),),
        notes="a class attribute edited in a file the compile never runs"),

    Cell("fn_config_value", {
        "": _src("""
            import stale_cell_fn_config_value_lib as lib

            def f(x):
                y = torch.tanh(x) * lib.CONFIG.alpha + lib.CONFIG.beta
                return torch.tanh(y) if lib.CONFIG.alpha > 0.4 else torch.sigmoid(y)

            def build():
                return f
        """),
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
        "": _src("""
            import contextlib
            import sys

            SCALE = 2.0

            def f(x):
                y = torch.tanh(x) * SCALE
                return torch.tanh(y) if SCALE < 2.5 else torch.sigmoid(y)

            def build():
                return f

            @contextlib.contextmanager
            def changed(fn):
                module = sys.modules[__name__]
                module.SCALE = 3.0
                try:
                    yield {}
                finally:
                    module.SCALE = 2.0
        """)},
        notes="a module global rebound at run time (no file changes)"),

    Cell("fn_global_of_other_module", {
        "": _src("""
            import stale_cell_fn_global_of_other_module_lib as settings

            def f(x):
                y = torch.tanh(x) * settings.SCALE
                return torch.tanh(y) if settings.SCALE < 2.5 else torch.sigmoid(y)

            def build():
                return f
        """),
        "_lib": "SCALE = 2.0\n"},
        edits=(("_lib", "SCALE = 2.0", "SCALE = 3.0"),),
        notes="another module's global edited in a file the compile never runs"),

    Cell("fn_default", {
        "": _src("""
            import contextlib

            def f(x, k=2.0):
                y = torch.tanh(x) * k
                return torch.tanh(y) if k < 2.5 else torch.sigmoid(y)

            def build():
                return f

            @contextlib.contextmanager
            def changed(fn):
                fn.__defaults__ = (3.0,)
                try:
                    yield {}
                finally:
                    fn.__defaults__ = (2.0,)
        """)},
        notes="the jitted function's __defaults__ rebound at run time (its code, in the key, unchanged)"),

    Cell("fn_enum_member", {
        "": _src("""
            import stale_cell_fn_enum_member_lib as lib

            def f(x):
                y = torch.tanh(x) * lib.Mode.SCALE.value
                return torch.tanh(y) if lib.Mode.SCALE.value < 2.5 else torch.sigmoid(y)

            def build():
                return f
        """),
        "_lib": _src("""
            import enum

            class Mode(enum.Enum):
                SCALE = 2.0
                SHIFT = 1.0
        """)},
        edits=(("_lib", "SCALE = 2.0", "SCALE = 3.0"),),
        notes="an enum member's value edited in a file the compile never runs"),

    Cell("fn_callee_on_module", {
        "": _src("""
            import contextlib

            import stale_cell_fn_callee_on_module_lib as lib

            def f(x):
                return lib.act(x) * 2.0

            def build():
                return f

            @contextlib.contextmanager
            def changed(fn):
                original = lib.act
                lib.act = torch.sigmoid
                try:
                    yield {}
                finally:
                    lib.act = original
        """),
        "_lib": _src("""
            act = torch.relu
        """)},
        notes="a (builtin) callee swapped on a Python module at run time"),

    Cell("fn_dtype_constant", {
        "": _src("""
            import stale_cell_fn_dtype_constant_lib as lib

            def f(x):
                return torch.tanh(x).to(lib.DTYPE) * 2.0

            def build():
                return f
        """),
        "_lib": _src("""
            DTYPE = torch.float32
        """)},
        edits=(("_lib", "DTYPE = torch.float32", "DTYPE = torch.float64"),),
        notes="a dtype read from another module's constant, edited in a file the compile never runs"),

    Cell("fn_env_var", {
        "": _src("""
            import contextlib
            import os

            def f(x):
                scale = float(os.environ.get("STALE_CELL_FN_SCALE", "2.0"))
                y = torch.tanh(x) * scale
                return torch.tanh(y) if scale < 2.5 else torch.sigmoid(y)

            def build():
                return f

            @contextlib.contextmanager
            def changed(fn):
                os.environ["STALE_CELL_FN_SCALE"] = "3.0"
                try:
                    yield {}
                finally:
                    del os.environ["STALE_CELL_FN_SCALE"]
        """)},
        notes="an environment variable the function reads, set to another value"),

    Cell("fn_executors", {
        "": _src("""
            import contextlib

            from thunder.extend import get_executor

            def f(x):
                return torch.tanh(x) * 2.0

            def build():
                return f

            @contextlib.contextmanager
            def changed(fn):
                yield {"executors": [get_executor("torch")]}
        """)},
        changes_output=False,
        notes="the executors list: thunder's defaults first, then the torch executor alone"),

    Cell("fn_version_string", {
        "": _src("""
            import contextlib

            from metatrace.entry_cache import program_key

            def f(x):
                return torch.tanh(x) * 2.0

            def build():
                return f

            @contextlib.contextmanager
            def changed(fn):
                original = program_key.library_versions
                versions = {**original(), "lightning-thunder": original()["lightning-thunder"] + ".post1"}
                program_key.library_versions = lambda: dict(versions)
                try:
                    yield {}
                finally:
                    program_key.library_versions = original
        """)},
        changes_output=False,
        notes="lightning-thunder's version string (patched before the first jitted call)"),
)

CELLS += FUNCTION_CELLS

# A number that decides nothing: under symbolic values the trace may take it as an input, so the
# stored entry may serve the new value (a hit); the claim is only that the output equals eager.
VALUE_ONLY_CELLS: tuple[Cell, ...] = (
    Cell("value_only_global", {
        "": _src("""
            import contextlib
            import sys

            SCALE = 2.0

            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = nn.Linear(4, 4)

                def forward(self, x):
                    return self.lin(x) * SCALE

            def build():
                return Model()

            @contextlib.contextmanager
            def changed(model):
                module = sys.modules[__name__]
                module.SCALE = 3.0
                try:
                    yield {}
                finally:
                    module.SCALE = 2.0
        """)},
        expect_miss=False, notes="a module global used only as a factor, rebound at run time"),

    Cell("fn_value_only_global", {
        "": _src("""
            import contextlib
            import sys

            SCALE = 2.0

            def f(x):
                return torch.tanh(x) * SCALE

            def build():
                return f

            @contextlib.contextmanager
            def changed(fn):
                module = sys.modules[__name__]
                module.SCALE = 3.0
                try:
                    yield {}
                finally:
                    module.SCALE = 2.0
        """)},
        expect_miss=False, notes="a module global used only as a factor, rebound at run time"),

    Cell("fn_value_only_config", {
        "": _src("""
            import stale_cell_fn_value_only_config_lib as lib

            def f(x):
                return torch.tanh(x) * lib.CONFIG.alpha + lib.Mode.SHIFT.value

            def build():
                return f
        """),
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
