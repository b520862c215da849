"""The rows that send torch functions to metatrace's decompositions while thunder interprets.

One function in three tables (``torch_decompositions``, ``data_dependent``, ``histc``): each
decomposition is the interpreter's lookaside for the torch function, the Tensor method and the
decomposition itself (a tensor proxy's method, from thunder's method table, is called through
the interpreter, which must run it as an opaque function, as it does a symbol), and the method
table's entry for the method's name.
"""

from __future__ import annotations

import importlib
from typing import Callable

import thunder.core.jit_ext as jit_ext

from metatrace.patching import Patch, item

_GENERAL = "thunder.core.jit_ext._general_jit_lookaside_map"
_METHODS = "thunder.torch.langctx._method_name_to_fn_map"


def lookaside(fn: Callable) -> Callable:
    """``fn`` as thunder's interpreter runs a lookaside: opaque, its arguments proxies."""
    return jit_ext.ensure_recursive_proxies(
        jit_ext.interpreter_needs_wrap(jit_ext.record_source_loc_in_symbol_header(fn))
    )


def rows(table, why: str, *, add_method: bool = False) -> list[Patch]:
    """``table``: (torch function or None, Tensor method or None, the method's name in thunder's
    method table or None, decomposition) per row. ``add_method``: the method table gets the name
    even where thunder has none (a method thunder lacks)."""
    methods = importlib.import_module("thunder.torch.langctx")._method_name_to_fn_map
    out = []
    for function, method, method_name, decomposition in table:
        wrapped = lookaside(decomposition)
        for fn in (function, method, decomposition):
            if fn is not None:
                out.append(item(jit_ext._general_jit_lookaside_map, fn, wrapped, why, label=_GENERAL))
        if method_name is not None and (add_method or method_name in methods):
            out.append(item(methods, method_name, decomposition, why, label=_METHODS))
    return out
