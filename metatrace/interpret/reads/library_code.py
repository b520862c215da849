"""Which Python modules are code (installed packages, the standard library, builtins) and which
are the user's own, whose attributes are state the prologue checks.

A trace reads functions and values through modules, classes and function globals. Checking every
such read would cost a litgpt call dozens of prologue checks for ``torch.float32``,
``torch.nn.functional.linear`` or ``litgpt.model.apply_rope``, which no program changes after
compiling. So, as ``torch.compile`` does for ``torch.*``, metatrace treats what is defined in an
installed package or the standard library as code, and what is defined in the user's own modules
(a script, a project checked out or installed editable) as state: rebinding
``my_helpers.scale = other``, ``my_helpers.DTYPE = torch.float64``, ``MyBlock.forward = f`` or
editing a function in place (IPython's autoreload replaces ``__code__``) misses the entry, while
monkeypatching ``torch`` or ``litgpt`` after a compile is not detected, as in stock thunder.

A module is code when its ``__file__`` lies under one of the interpreter's installation paths
(``sysconfig``'s stdlib, platstdlib, purelib, platlib, i.e. site-packages), or when it is built
into the interpreter or frozen (``builtins``, ``sys``). ``__main__`` is always the user's, with or
without a file (a notebook's has none); so is any other module without a file. The answer is kept per module name
for the life of the process: a module's file does not move.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import types

from metatrace.state.process_tables import LIBRARY_MODULES

_INSTALL_PATHS = tuple(
    sorted({os.path.realpath(p) + os.sep
            for key in ("stdlib", "platstdlib", "purelib", "platlib")
            if (p := sysconfig.get_paths().get(key))})
)


def _module_file_is_installed(module: types.ModuleType) -> bool:
    if module.__name__ == "__main__":
        return False
    path = getattr(module, "__file__", None)
    if not path:
        spec = getattr(module, "__spec__", None)
        return getattr(spec, "origin", None) in ("built-in", "frozen")
    return is_library_file(path)


def is_library_file(path: str) -> bool:
    """Whether the source file ``path`` lies in an installed package or the standard library."""
    return os.path.realpath(path).startswith(_INSTALL_PATHS)


def is_library_module(module: types.ModuleType) -> bool:
    """Whether ``module`` is an installed package's or the standard library's."""
    name = getattr(module, "__name__", None)
    if not isinstance(name, str):
        return False
    known = LIBRARY_MODULES.get(name)
    if known is None:
        known = LIBRARY_MODULES[name] = _module_file_is_installed(module)
    return known


def is_library_module_name(name: object) -> bool:
    """Whether the module called ``name`` (a ``__module__`` or a globals' ``__name__``) is code;
    a name with no imported module (``__main__`` run by ``exec``, a generated function) is not."""
    if not isinstance(name, str):
        return False
    known = LIBRARY_MODULES.get(name)
    if known is not None:
        return known
    module = sys.modules.get(name)
    return module is not None and is_library_module(module)


def is_library_function(fn: types.FunctionType) -> bool:
    """Whether ``fn`` was defined in a library module (by its globals, which ``__module__``
    assignments do not change)."""
    return is_library_module_name(fn.__globals__.get("__name__"))
