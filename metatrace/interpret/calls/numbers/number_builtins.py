"""Interpreter lookasides for symbolic numbers in user code: indexing, len, isinstance, opaque calls.

While metatrace is enabled, in the function thunder interprets:

- A number proxy used as an index into a Python tuple or list (``x.shape[d]``) bakes its value
  in: an equality guard, as for any concretization.
- ``len`` of a tensor returns its symbolic first size (the interpreter insisted on an int).
- ``isinstance(n, int)`` on a number proxy answers for the number it stands for.
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

from metatrace.state import compile_context
from metatrace.metas import concretizations
from metatrace.metas.torch_ops.torch_metas import concrete_numbers
from metatrace.patching import Patch, item

# Opaque torch functions that take a bool (thunder's no_autocast calls them with a closure's flag).
_OPAQUE_WITH_VALUES = (torch.set_autocast_enabled,)


def _concrete_index(idx: WrappedValue) -> WrappedValue:
    uidx = idx.value
    if isinstance(uidx, IntegerProxy) and compile_context.collector() is not None:
        value = uidx.value
        concretizations.bake_in(uidx, value, "index into a tuple or list")
        return wrap_const(value)
    return idx


def _indexing(original):
    @functools.wraps(original)
    def getitem(self, idx, /):
        return original(self, _concrete_index(idx))

    return getitem


def _len_lookaside(original):
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
        return original(obj)

    return len_lookaside


def _opaque_with_values(fn, why: str):
    """A lookaside for an opaque function (no proxies reach it: it runs at trace time, as under
    constant values) whose number arguments are baked in, guarded by value."""

    def impl(*args, **kwargs):
        return fn(*concrete_numbers(args, why), **concrete_numbers(kwargs, why))

    return jit_ext.interpreter_needs_wrap(impl)


def _isinstance_lookaside(original):
    def isinstance_lookaside(obj, cls):
        """``isinstance(n, int)`` on a number proxy answers for the number it stands for (thunder's
        lookaside asked the proxy class: False, and ``if isinstance(a, int)`` took the wrong branch).
        The number's type is checked by the prologue (``metatrace.guards.structure``'s type check)."""
        u, ucls = obj.value, cls.value
        if isinstance(u, NumberProxy) and getattr(u, "python_type", None) in (bool, int, float, complex):
            try:
                res = issubclass(u.python_type, ucls) or isinstance(u, ucls)
            except TypeError:
                return original(obj, cls)
            pr = ProvenanceRecord(
                PseudoInst.LOOKASIDE, inputs=[wrap_const(isinstance).provenance, obj.provenance, cls.provenance]
            )
            return wrap(res, provenance=pr)
        return original(obj, cls)

    return isinstance_lookaside


def patches() -> list[Patch]:
    general = "thunder.core.jit_ext._general_jit_lookaside_map"
    return [
        *(item(interpreter._default_provenance_tracking_lookaside_map, key, _indexing,
               "tuple/list indexing by a symbolic number is guarded by equality", wrap=True,
               label="thunder.core.interpreter._default_provenance_tracking_lookaside_map")
          for key in (tuple.__getitem__, list.__getitem__)),
        item(interpreter._default_lookaside_map, len, _len_lookaside, "len() of a tensor is its symbolic first size",
             wrap=True, label="thunder.core.interpreter._default_lookaside_map"),
        item(jit_ext._general_jit_lookaside_map, isinstance, _isinstance_lookaside,
             "isinstance(n, int) answers for the number a proxy stands for", wrap=True, label=general),
        *(item(jit_ext._general_jit_lookaside_map, fn, _opaque_with_values(fn, f"an argument of {fn.__name__}"),
               "an opaque torch function taking a bool gets the value, guarded", label=general)
          for fn in _OPAQUE_WITH_VALUES),
    ]
