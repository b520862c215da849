"""Libraries' compile-time global state, kept as it is in eager (a table, one row per library).

thunder answers ``torch.compiler.is_compiling()`` with True, so libraries take their
torch.compile paths, which is what thunder wants for tracing (no data-dependent checks). Some of
those paths keep per-call state in a global object instead of a ``ContextVar`` (dynamo replays
global stores; thunder's epilogue cannot replay a store into a plain object's ``__dict__``, and
its prologue cannot unpack the value read back through the library's closure and globals).
For those, the state's accessors run as in eager, opaquely: the value lives in the ContextVar
for the duration of the call, as it does without compilation.

- transformers 5's output collector (``transformers.utils.output_capturing.CompileableContextVar``,
  ``_active_collector``: set by every model's ``capture_outputs`` wrapper, read by its output
  hooks): under thunder every Hugging Face model failed on its first call with "trying to set
  .global_var of ... to object of type dict" or "Exception occured unpacking object from ...
  '_active_collector' ... 'global_var'".

A library that is not installed contributes no row; an installed one is imported when metatrace
is enabled (transformers' output_capturing: 0.65 s once per process).
"""

from __future__ import annotations

import importlib.util

import thunder.core.jit_ext as jit_ext

from metatrace.patching import Patch, item

_GENERAL = "thunder.core.jit_ext._general_jit_lookaside_map"


def _context_var_get(self):
    return self.context_var.get()


def _context_var_set(self, value):
    return self.context_var.set(value)


def _context_var_reset(self, token):
    # a token of None came from the global path, which these accessors never take
    if token is not None:
        self.context_var.reset(token)


# (package that must be installed, module, class, {method: its eager behaviour})
TABLE = (
    ("transformers", "transformers.utils.output_capturing", "CompileableContextVar",
     {"get": _context_var_get, "set": _context_var_set, "reset": _context_var_reset}),
)


def patches() -> list[Patch]:
    rows = []
    for package, module, cls_name, methods in TABLE:
        if importlib.util.find_spec(package) is None:
            continue
        try:
            cls = getattr(importlib.import_module(module), cls_name)
        except (ImportError, AttributeError):  # another version of the library: nothing to keep
            continue
        for name, eager in methods.items():
            rows.append(item(jit_ext._general_jit_lookaside_map, getattr(cls, name), jit_ext.interpreter_needs_wrap(eager),
                             f"{module}.{cls_name}.{name} keeps its state as in eager", label=_GENERAL))
    return rows
