"""Interpreter lookasides for symbolic numbers in user code: indexing, len, isinstance, opaque calls.

While metatrace is enabled, in the function thunder interprets:

- A number proxy used as an index into a Python tuple or list (``x.shape[d]``) bakes its value
  in: an equality guard, as for any concretization (a step of
  :mod:`metatrace.interpret.calls.sequence_lookasides`' wrapper).
- ``len`` of a tensor returns its symbolic first size (the interpreter insisted on an int).
- ``isinstance(n, int)`` on a number proxy answers for the number it stands for (a step of
  :mod:`metatrace.interpret.calls.sequence_lookasides`' wrapper).
- Opaque torch functions that take a bool (``torch.set_autocast_enabled``, which thunder's
  ``no_autocast`` calls with a closure's flag) get the numbers' values, guarded by value.
"""

from __future__ import annotations

import functools

import thunder.core.interpreter as interpreter
import thunder.core.jit_ext as jit_ext
import torch
from thunder.core.interpreter import ProvenanceRecord, PseudoInst, WrappedValue, _interpret_call, wrap, wrap_const
from thunder.core.proxies import IntegerProxy, NumberProxy, TensorProxy

from metatrace.interpret.costs.fast_paths import direct_len
from metatrace.state import compile_context
from metatrace.metas import concretizations
from metatrace.metas.torch_ops.torch_metas import concrete_numbers
from metatrace.patching import Patch, item

# Opaque torch functions that take a bool (thunder's no_autocast calls them with a closure's flag).
_OPAQUE_WITH_VALUES = (torch.set_autocast_enabled,)


def concrete_index(idx: WrappedValue) -> WrappedValue:
    """A number proxy used as an index into a tuple or list: its value, baked in (guarded)."""
    uidx = idx.value
    if isinstance(uidx, IntegerProxy) and compile_context.collector() is not None:
        value = uidx.value
        concretizations.bake_in(uidx, value, "index into a tuple or list")
        return wrap_const(value)
    return idx


def _len_lookaside(original, fast: bool):
    """``len``'s one wrapper: (1) of a tensor proxy, while metatrace collects guards, its symbolic
    first size; (2) with the fast paths, of an exact dict, list or tuple, the container's
    ``__len__`` lookaside (:func:`metatrace.interpret.costs.fast_paths.direct_len`); (3) thunder's."""

    def len_lookaside(obj):
        def impl(obj):
            if not hasattr(obj, "__len__"):
                raise TypeError(f"object of type '{type(obj).__name__}' has no len()")
            result = getattr(obj, "__len__")()
            if isinstance(result, IntegerProxy):
                return result  # a tensor's symbolic first size
            if not isinstance(result, int):
                raise TypeError(f"'{type(result).__name__}' object cannot be interpreted as an integer")
            if result < 0:
                raise ValueError("__len__() should return >= 0")
            return result

        u = obj.value
        if isinstance(u, TensorProxy) and compile_context.collector() is not None:
            return _interpret_call(impl, obj)
        if fast:
            direct = direct_len(obj)
            if direct is not None:
                return direct
        return original(obj)

    return len_lookaside


def _opaque_with_values(fn, why: str):
    """A lookaside for an opaque function (no proxies reach it: it runs at trace time, as under
    constant values) whose number arguments are baked in, guarded by value."""

    def impl(*args, **kwargs):
        return fn(*concrete_numbers(args, why), **concrete_numbers(kwargs, why))

    return jit_ext.interpreter_needs_wrap(impl)


def isinstance_of_number(obj, cls):
    """``isinstance(n, int)`` on a number proxy answers for the number it stands for (thunder's
    lookaside asked the proxy class: False, and ``if isinstance(a, int)`` took the wrong branch);
    None for any other object, or a class ``issubclass`` refuses. The number's type is checked by
    the prologue (``metatrace.guards.structure``'s type check)."""
    u, ucls = obj.value, cls.value
    if isinstance(u, NumberProxy) and getattr(u, "python_type", None) in (bool, int, float, complex):
        try:
            res = issubclass(u.python_type, ucls) or isinstance(u, ucls)
        except TypeError:
            return None
        pr = ProvenanceRecord(
            PseudoInst.LOOKASIDE, inputs=[wrap_const(isinstance).provenance, obj.provenance, cls.provenance]
        )
        return wrap(res, provenance=pr)
    return None


def patches(with_fast_paths: bool = True) -> list[Patch]:
    general = "thunder.core.jit_ext._general_jit_lookaside_map"
    return [
        item(interpreter._default_lookaside_map, len, functools.partial(_len_lookaside, fast=with_fast_paths),
             "len() of a tensor is its symbolic first size; of a plain dict, list or tuple (fast paths) the "
             "container's __len__ lookaside, not thunder's interpreted impl",
             wrap=True, label="thunder.core.interpreter._default_lookaside_map"),
        *(item(jit_ext._general_jit_lookaside_map, fn, _opaque_with_values(fn, f"an argument of {fn.__name__}"),
               "an opaque torch function taking a bool gets the value, guarded", label=general)
          for fn in _OPAQUE_WITH_VALUES),
    ]
