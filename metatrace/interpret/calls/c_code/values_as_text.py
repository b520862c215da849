"""Numbers in user code seen as text, hashes and types: the number itself, not its proxy.

thunder's interpreter runs Python builtins opaquely on the unwrapped values. Under
``cache="symbolic values"`` that bakes in whatever the builtin returned: ``str(n)`` of a number
proxy was ``'i1=2'``, ``type(n)`` was ``IntegerProxy``. While metatrace is enabled, in user code
``str``, ``repr``, ``ascii``, ``format`` (and so f-strings) and ``hash`` of a number proxy (and
``set``/``frozenset`` of numbers: a proxy hashes by identity) see the number itself: its value is
baked in with an equality guard (a string has no symbolic form). ``type(n)`` is the number's
Python type (the prologue checks input number types; a derived number's type follows from them),
and ``type(x.shape)`` is eager's ``torch.Size`` (metatrace.interpret.calls.numbers.eager_sizes).

Which code is calling (:func:`calling_file`, :data:`OWN_CODE`) decides it: thunder's and
metatrace's own interpreted code asks ``type(x)`` of a proxy for its dunder methods and sees the
proxy's type.
"""

from __future__ import annotations

import types

import thunder.core.jit_ext as jit_ext
from thunder.core.interpreter import do_raise, interpreter_needs_wrap, wrap, wrap_attribute, wrap_const
import torch
from thunder.core.proxies import NumberProxy, Proxy

from metatrace.state import compile_context
from metatrace import patching
from metatrace.guards import provenance
from metatrace.interpret.calls.c_code.concrete_values import concrete, has_number_proxy
from metatrace.interpret.calls.numbers.eager_sizes import is_size
from metatrace.interpret.calls.c_code.eager_views import eager_view
from metatrace.interpret.interpreted_frames import called_from_thunder
from metatrace.patching import Patch


def _as_value_lookaside(fn, why: str, fallback):
    """``fn(x, ...)`` on the numbers' values (guarded) when an argument holds a number proxy, and
    on eager's objects (:mod:`metatrace.interpret.calls.c_code.eager_views`)."""

    def lookaside(*args, **kwargs):
        if compile_context.collector() is None:
            return fallback(*args, **kwargs)
        # (an input list's numbers too, ``set(l)``; a tensor's shape as a torch.Size, ``str(x.shape)``;
        # not a dict's values where only its keys are read, ``set(d)``)
        values = [a.value if fn in _KEYS_OF_A_DICT and type(a.value) is dict else eager_view(a) for a in args]
        if any(v is not a.value or has_number_proxy(v) for a, v in zip(args, values)):
            uargs = [concrete(v, why) for v in values]
            ukwargs = {k: concrete(eager_view(v), why) for k, v in kwargs.items()}
            try:
                res = fn(*uargs, **ukwargs)
            except Exception as e:  # (``set([[1]])``: the user's code sees eager's TypeError)
                return do_raise(e)
            pr = provenance.opaque_record([wrap_const(fn).provenance, *(a.provenance for a in args)])
            return wrap(res, provenance=pr)
        return fallback(*args, **kwargs)

    lookaside.__name__ = f"metatrace_{getattr(fn, '__name__', 'fn')}_lookaside"
    return lookaside


def _type_fallback(typ):  # str, set: types, which without a lookaside the interpreter calls through type.__call__
    from thunder.core.interpreter import _type_call_lookaside

    return lambda *args, **kwargs: _type_call_lookaside(wrap_const(typ), *args, **kwargs)




def _type_lookaside(default):
    """``default``: the interpreter's own lookaside for ``type``."""

    def type_lookaside(*args, **kwargs):
        if len(args) != 1 or kwargs or called_from_thunder():
            return default(*args, **kwargs)
        (obj,) = args
        u = obj.value
        if isinstance(u, NumberProxy):
            python_type = getattr(u, "python_type", None)
            if python_type in (bool, int, float, complex):
                pr = provenance.opaque_record([wrap_const(type).provenance, obj.provenance])
                return wrap(python_type, provenance=pr)
        elif is_size(obj):  # a tensor's shape: eager's torch.Size (metatrace.interpret.calls.numbers.eager_sizes)
            pr = provenance.opaque_record([wrap_const(type).provenance, obj.provenance])
            return wrap(torch.Size, provenance=pr)
        elif _read_as_class_attribute(obj):
            # ``type(self).calls``: the class read as ``self.__class__``, as the prologue can read it
            # again, so what the trace reads through it is checked like ``self.__class__.calls``
            # (one wrapper per object, as ``self.__class__`` has: a store into the class and a read
            # after it in the same call meet on it, as thunder's attribute wrappers do)
            return wrap_attribute(type(u), obj, wrap_const("__class__"))
        return default(*args, **kwargs)

    return type_lookaside


def _read_as_class_attribute(obj) -> bool:
    """``obj`` is a pre-existing object of a user's class (not a proxy, a tensor or a module of
    code) whose ``__class__`` is its type."""
    u, pr = obj.value, obj.provenance
    if isinstance(u, (Proxy, torch.Tensor, types.ModuleType, type)) or pr is None:
        return False
    if not (provenance.is_jitted_function(pr) or provenance.rooted_in_prologue(pr)):
        return False
    try:
        return object.__getattribute__(u, "__class__") is type(u)
    except Exception:
        return False


_AS_VALUE = {str: "str()", repr: "repr()", ascii: "ascii()", format: "format()", hash: "hash()", set: "set()",
             frozenset: "frozenset()"}  # a set of sizes decides by value (a proxy hashes by identity)
_KEYS_OF_A_DICT = (set, frozenset)  # (which read a dict argument's keys only)
_LOOKASIDES = "thunder.core.jit_ext._general_jit_lookaside_map"


def patches() -> list[Patch]:
    from thunder.core.interpreter import _default_lookaside_map

    lookasides = jit_ext._general_jit_lookaside_map
    return [
        *(patching.item(lookasides, fn,
                        _as_value_lookaside(fn, why, _type_fallback(fn) if isinstance(fn, type) else interpreter_needs_wrap(fn)),
                        "str/repr/ascii/format/hash/set see a number's value", label=_LOOKASIDES)
          for fn, why in _AS_VALUE.items()),
        patching.item(lookasides, type, _type_lookaside(_default_lookaside_map[type]),
                      "type() of a number is its Python type", label=_LOOKASIDES),
    ]
