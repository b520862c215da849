"""Builtins over containers in user code, interpreted as the Python functions they are.

thunder's interpreter runs Python builtins opaquely on the unwrapped values. Under
``cache="symbolic values"`` that bakes in whatever the builtin returned: ``max(l)`` of a list
argument was a plain ``2`` with no guard on ``l`` (its elements were never read through the
interpreter, so never proxied). While metatrace is enabled, in user code ``max``, ``min``,
``sum``, ``sorted``, ``all``, ``math.prod`` over a container (and ``dict.fromkeys``, which
thunder refuses), and ``map`` and ``filter`` with a function, are interpreted as the Python
functions they are (``_py_*`` below; ``str`` of a size in a ``map`` goes through
:mod:`metatrace.interpret.calls.c_code.values_as_text`): every
element is read through the interpreter (a symbolic number, guarded by type), every comparison is
a guarded relation, so one entry serves every list on the same side of each comparison. A container larger than ``INTERPRET_LIMIT`` is not walked
element by element: it gets one prologue check of its contents
(``metatrace.guards.value_checks``) and the builtin runs on it as is.
"""

from __future__ import annotations

import collections
import math

import thunder.core.jit_ext as jit_ext
from thunder.core.interpreter import WrappedValue, _interpret_call, interpreter_needs_wrap, wrap_const
from thunder.core.proxies import Proxy

from metatrace.state import compile_context
from metatrace import patching
from metatrace.guards.value_checks import CONTAINER_TYPES, add_value_check
from metatrace.patching import Patch

# Containers up to this length are walked element by element (symbolic elements, relational
# guards); longer ones are checked by contents in one prologue operation.
INTERPRET_LIMIT = 64


def _py_extreme(is_max, args, kwargs):
    key = kwargs.get("key", None)
    if len(args) == 1:
        items = iter(args[0])
    elif len(args) == 0:
        raise TypeError(("max" if is_max else "min") + " expected at least 1 argument, got 0")
    else:
        if "default" in kwargs:
            raise TypeError("Cannot specify a default for " + ("max()" if is_max else "min()") + " with multiple positional arguments")
        items = iter(args)
    found = False
    best = None
    best_key = None
    for item in items:
        k = item if key is None else key(item)
        if not found:
            best, best_key, found = item, k, True
        elif is_max:
            if k > best_key:
                best, best_key = item, k
        elif k < best_key:
            best, best_key = item, k
    if not found:
        if "default" in kwargs:
            return kwargs["default"]
        raise ValueError(("max" if is_max else "min") + "() iterable argument is empty")
    return best


def _py_max(*args, **kwargs):
    return _py_extreme(True, args, kwargs)


def _py_min(*args, **kwargs):
    return _py_extreme(False, args, kwargs)


def _py_sum(iterable, /, start=0):
    total = start
    for item in iterable:
        total = total + item
    return total


def _py_prod(iterable, /, *, start=1):
    total = start
    for item in iterable:
        total = total * item
    return total


def _py_all(iterable, /):
    for item in iterable:
        if not item:
            return False
    return True


def _py_sorted(iterable, /, *, key=None, reverse=False):
    # Stable insertion sort with ``<`` only, as CPython's list.sort compares; ``reverse`` keeps
    # stability the way CPython does it (reverse, sort, reverse).
    items = list(iterable)
    if reverse:
        items.reverse()
    keys = [item if key is None else key(item) for item in items]
    out_items = []
    out_keys = []
    for i in range(len(items)):
        k = keys[i]
        j = len(out_keys)
        while j > 0 and k < out_keys[j - 1]:
            j -= 1
        # (thunder's interpreter has no list.insert: concatenation instead)
        out_items = out_items[:j] + [items[i]] + out_items[j:]
        out_keys = out_keys[:j] + [k] + out_keys[j:]
    if reverse:
        out_items.reverse()
    return out_items


def _py_fromkeys(cls):
    """``cls.fromkeys`` as Python: each key hashed through the interpreter (a number's proxy pins
    itself to its value); thunder's interpreter refuses ``dict.fromkeys`` (NotImplementedError)."""

    def fromkeys(iterable, value=None, /):
        d = cls()
        for key in iterable:
            d[key] = value
        return d

    return fromkeys


# (a class method: thunder looks the bound method up, equal to a fresh ``dict.fromkeys``)
_FROMKEYS = {dict.fromkeys: _py_fromkeys(dict), collections.OrderedDict.fromkeys: _py_fromkeys(collections.OrderedDict)}

_PY_BUILTINS = {max: _py_max, min: _py_min, sum: _py_sum, sorted: _py_sorted, all: _py_all, math.prod: _py_prod}


def _large_inputs(args) -> list[WrappedValue]:
    """The container arguments too long to walk element by element."""
    return [a for a in args if type(a.value) in CONTAINER_TYPES and len(a.value) > INTERPRET_LIMIT]


def _builtin_lookaside(fn):
    py_fn = _PY_BUILTINS[fn]
    opaque = interpreter_needs_wrap(fn)

    def lookaside(*args, **kwargs):
        if compile_context.collector() is None:
            return opaque(*args, **kwargs)  # thunder's own behaviour (constant values, no metatrace trace)
        large = _large_inputs(args)
        if large:
            ctx = jit_ext.get_jit_ctx()
            for a in large:
                if jit_ext.should_register_for_prologue(a.provenance):
                    add_value_check(ctx, a.provenance, a.value, f"{fn.__name__}() over {len(a.value)} elements")
            if not any(_holds_proxies(a.value) for a in args):
                return opaque(*args, **kwargs)
        return _interpret_call(py_fn, *args, **kwargs)

    lookaside.__name__ = f"metatrace_{fn.__name__}_lookaside"
    return lookaside


def _holds_proxies(x) -> bool:
    if isinstance(x, Proxy):
        return True
    if type(x) in (list, tuple, set, frozenset):
        return any(isinstance(e, Proxy) for e in x)
    if type(x) is dict:
        return any(isinstance(e, Proxy) for e in x.values())
    return False


_LOOKASIDES = "thunder.core.jit_ext._general_jit_lookaside_map"


def _interpreted(py_fn):
    def lookaside(*args, **kwargs):
        return _interpret_call(py_fn, *args, **kwargs)

    lookaside.__name__ = f"metatrace_{py_fn.__qualname__.split('.')[0]}_lookaside"
    return lookaside


def _py_map(fn, *iterables):
    for items in zip(*iterables):
        yield fn(*items)


def _py_filter(fn, iterable):
    for item in iterable:
        if (bool(item) if fn is None else fn(item)):
            yield item


def _interpreted_type(py_fn, typ):
    """A lookaside for ``map``/``filter``: the function runs under the interpreter (a generator
    instead of a ``map`` object) while metatrace compiles; thunder's type call otherwise."""

    def lookaside(*args, **kwargs):
        if compile_context.collector() is not None and args and not kwargs:
            return _interpret_call(py_fn, *args)
        from thunder.core.interpreter import _type_call_lookaside

        return _type_call_lookaside(wrap_const(typ), *args, **kwargs)

    lookaside.__name__ = f"metatrace_{typ.__name__}_lookaside"
    return lookaside


def patches() -> list[Patch]:
    lookasides = jit_ext._general_jit_lookaside_map
    return [
        *(patching.item(lookasides, fn, _builtin_lookaside(fn), "max/min/sum/sorted/all/math.prod are interpreted",
                        label=_LOOKASIDES)
          for fn in _PY_BUILTINS),
        *(patching.item(lookasides, fn, _interpreted(py_fn), "dict.fromkeys is interpreted", label=_LOOKASIDES)
          for fn, py_fn in _FROMKEYS.items()),
        *(patching.item(lookasides, typ, _interpreted_type(py_fn, typ), "map/filter run their function under the interpreter",
                        label=_LOOKASIDES)
          for typ, py_fn in ((map, _py_map), (filter, _py_filter))),
    ]
