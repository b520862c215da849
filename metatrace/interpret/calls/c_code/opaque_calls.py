"""C code never meets a symbol: an opaque call gets the numbers' values, each guarded by equality.

thunder's interpreter runs a C-implemented callable that has no lookaside (``str.join``,
``math.gcd``, ``int.to_bytes``, ``"{:>4}".format``) on the unwrapped arguments. A number proxy
among them reached the C code as an object: the C code printed its name (``"x".join(map(str,
x.shape))`` was ``"i0=2xi1=3"`` on every call), failed on it (``"{:>4}".format(n)``: TypeError),
or read a value through a dunder the trace never saw. While metatrace compiles, such a callable
gets the number's Python value instead (directly, inside a list, tuple, dict or set argument, or
as ``self``), and the value is reported to the guard sink: the prologue checks it and
``explain()`` names the function and line.

The exceptions are the ones where the value stays symbolic today:

- :data:`_DUNDER`: the callable only calls a dunder of its argument (``abs``, ``divmod``,
  ``operator.add``, ``math.floor``, 2-argument ``pow``), which the proxy models (recorded
  ``prims``, metatrace's number semantics).
- :data:`_MOVES_OBJECTS`: the callable stores, moves or names objects without reading their value
  (attribute access, ``id``, ``iter``, a list's or tuple's methods: a sort or an ``index`` compares
  through the proxy's own comparison, a guarded relation). A dict's or set's key is hashed by value
  in eager and by identity on a proxy: a key there is concretized.
- torch's callables (thunder's symbols, or errors of thunder's own) and calls made by thunder's
  interpreted helpers (its Python versions of builtins, which call C slots on proxies on purpose).

A proxy's missing number attributes (``n.bit_length()``) are
:mod:`metatrace.interpret.calls.numbers.number_attributes`'; a ``functools.lru_cache`` wrapper runs
the function it wraps (:mod:`metatrace.interpret.calls.python.memoized_functions`); ``map`` and
``filter`` run their function under the interpreter
(:mod:`metatrace.interpret.calls.c_code.container_builtins`).
"""

from __future__ import annotations

import collections
import functools
import inspect
import math
import operator
import types

from thunder.core.interpreter import WrappedValue, do_raise, is_opaque, unwrap, wrap, wrap_const
from thunder.core.proxies import NumberProxy

from metatrace.errors import MetatraceError
from metatrace.guards import provenance
from metatrace.interpret.interpreted_frames import calling_file, package_dir
from metatrace.interpret.calls.c_code.concrete_values import concrete, has_number_proxy
from metatrace.interpret.calls.c_code.eager_views import eager_view, may_differ
from metatrace.interpret.calls.python.memoized_functions import LRU_CACHE_WRAPPER, memoized_function

_THUNDER = package_dir(__import__("thunder"))


def _operator_dunders() -> dict:
    """``operator.add`` -> ``__add__``: the operator module's functions call the dunder of that name."""
    found = {}
    for name in dir(operator):
        in_place = name.startswith("__i") and name not in ("__invert__", "__index__")
        if name.startswith("__") and name.endswith("__") and not in_place and name != "__call__":
            fn = getattr(operator, name)
            if callable(fn):
                found[fn] = name
    return found


# C callables whose result is the dunder of a number argument (modelled on proxies); ``None``: any
# arity, else how many positional arguments (3-argument ``pow`` has no dunder the proxy models).
_DUNDER: dict = {
    **{fn: (name, None) for fn, name in _operator_dunders().items()},
    abs: ("__abs__", 1), divmod: ("__divmod__", 2), pow: ("__pow__", 2), round: ("__round__", None),
    math.floor: ("__floor__", 1), math.ceil: ("__ceil__", 1), math.trunc: ("__trunc__", 1),
}

# Callables that store, move or name their arguments: the value is never read.
_MOVES_OBJECTS = {
    getattr, setattr, hasattr, delattr, id, type, isinstance, issubclass, callable, iter, next, len, vars, dir,
    print, super, object.__setattr__, object.__getattribute__, object.__delattr__, object.__init__, object.__new__,
    type.__call__, functools.partial.__call__,
}
# The descriptor protocol binds an object (``list.reverse.__get__(items)``): it reads no value.
_BINDING = ("__get__", "__set__", "__delete__", "__set_name__")
# Owners whose methods store or move elements (comparisons go through the proxy's own dunders).
_STORING_OWNERS = (list, tuple, collections.deque, slice, types.SimpleNamespace, functools.partial, super, type)
# A dict's or set's methods: values are stored, keys are hashed (by value in eager).
_HASHING_OWNERS = (dict, set, frozenset, collections.OrderedDict, collections.defaultdict)
_STORES_VALUE = {"__setitem__": 2, "setdefault": 2, "get": 2, "pop": 2, "fromkeys": 2, "update": 1}

# Containers longer than this are not looked into (a module's globals reach ``dict.get``), nor
# deeper than _DEPTH (a config's nested dicts for ``json.dumps``): a number C code reads is an
# argument or an element of short containers.
_LOOKED_INTO = 64
_DEPTH = 4


def _has_proxy(x) -> bool:
    return has_number_proxy(x, depth=_DEPTH, length=_LOOKED_INTO)


def _concrete(x, why: str):
    """``x`` with its number proxies (and those of the containers it holds) replaced by their
    values, each guarded by equality."""
    return concrete(x, why, depth=_DEPTH, length=_LOOKED_INTO)


def _owner(fn):
    owner = getattr(fn, "__objclass__", None)
    if owner is None:
        self = getattr(fn, "__self__", None)
        owner = self if isinstance(self, type) else None
    return owner


def _models_dunder(fn, args: list) -> bool:
    try:
        entry = _DUNDER.get(fn)
    except TypeError:  # an unhashable callable
        return False
    if entry is None:
        return False
    name, arity = entry
    if arity is not None and len(args) != arity:
        return False
    return any(isinstance(a, NumberProxy) and hasattr(type(a), name) for a in args)


def _kept_positions(fn, args: list) -> set | None:
    """None where the callable only moves objects or models the result: its arguments stay."""
    try:
        if fn in _MOVES_OBJECTS:
            return None
    except TypeError:
        return None
    if getattr(fn, "__name__", None) in _BINDING:
        return None
    owner = _owner(fn)
    module = getattr(fn, "__module__", None) or getattr(owner, "__module__", None) or ""
    if module.startswith("torch") or (owner is not None and issubclass(owner, _STORING_OWNERS)):
        return None
    if _models_dunder(fn, args):
        return None
    return set()


def _hashed(fn) -> bool:
    """A dict's or set's method: only a key (a number proxy passed directly) is read, by its hash."""
    owner = _owner(fn)
    return owner is not None and issubclass(owner, _HASHING_OWNERS)


def _hashed_argument(fn, i: int, arg, value, why: str):
    """A dict's or set's method's argument ``i`` (``value``: its eager view): a key's number by its
    value, guarded; an input container whose items become keys (``s.union(l)``) with its numbers'
    values, guarded (C code hashes them); the container itself, a value it stores and a dict (its
    keys hashed already, as keys) as they are."""
    name = getattr(fn, "__name__", "")
    if i == 0 or (i == _STORES_VALUE.get(name) and name != "update") or type(unwrap(arg)) is dict:
        return arg  # (a dict given whole: its keys are hashed already, its values stored)
    return arg if value is unwrap(arg) and not isinstance(value, NumberProxy) else wrap_const(_concrete(value, why))


def _name(fn) -> str:
    owner = _owner(fn)
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__
    return name if owner is None or "." in name else f"{owner.__name__}.{name}"


def _rebind_on_value(fn, args: list):
    """``object.__format__(n, spec)``: a method the proxy inherits from ``object`` is its number's
    type's method on the value (``int.__format__``)."""
    if args and isinstance(args[0], NumberProxy) and _owner(fn) is object:
        own = getattr(args[0].python_type, getattr(fn, "__name__", ""), None)
        if own is not None:
            return own
    return fn


def concretized_call(fn, args: tuple, kwargs: dict):
    """``(fn or None when unchanged, args, kwargs)`` for the opaque call: the numbers' values where
    C code would read them, or None to leave the call as it is."""
    if _kept_positions(fn, [unwrap(a) for a in args]) is None:
        return None
    # eager's objects: an input list's numbers as proxies (C code reads them as plain numbers,
    # ``json.dumps(l)``), a tensor's shape as a torch.Size (``"{}".format(x.shape)``)
    values = [eager_view(a, _DEPTH, _LOOKED_INTO) for a in args]
    kvalues = {k: eager_view(v, _DEPTH, _LOOKED_INTO) for k, v in kwargs.items()}
    changed = [v is not unwrap(a) or _has_proxy(v) for a, v in zip(args, values)]
    kchanged = {k: kvalues[k] is not unwrap(v) or _has_proxy(kvalues[k]) for k, v in kwargs.items()}
    if not any(changed) and not any(kchanged.values()):
        return None
    why = f"an argument of {_name(fn)} (C code reads the value)"
    if _hashed(fn):  # keys only; stored values and the container itself stay as they are
        new_args = tuple(_hashed_argument(fn, i, a, v, why) for i, (a, v) in enumerate(zip(args, values)))
        return (None, new_args, kwargs) if any(a is not b for a, b in zip(new_args, args)) else None
    rebound = _rebind_on_value(fn, values)
    new_args = tuple(wrap_const(_concrete(v, why)) if c else a for a, v, c in zip(args, values, changed))
    new_kwargs = {k: (wrap_const(_concrete(kvalues[k], why)) if kchanged[k] else v) for k, v in kwargs.items()}
    return (wrap_const(rebound) if rebound is not fn else None), new_args, new_kwargs


def would_call_opaque(compilectx, fn, args, kwargs) -> bool:
    """thunder's ``_call_dispatch`` would reach its opaque step: no canonicalization of a bound
    builtin method first (the canonical call comes back here), no lookaside."""
    if not is_opaque(fn):
        return False
    if isinstance(fn, (types.BuiltinMethodType, types.MethodWrapperType)):
        slf = fn.__self__
        if slf is not None and not isinstance(slf, (type, types.ModuleType)) and type(slf).__name__ != "PyCapsule":
            return False
    found = compilectx.lookaside(fn, *args, **kwargs)
    return found is None


def _from_thunder() -> bool:
    path = calling_file()
    return path is None or path.startswith(_THUNDER)


# A proxy's conversions read ``self.value``: interpreted (``n.__index__()`` in user code) that read
# became an input the prologue unpacked (``subscr0.value``). They run as thunder's code, which
# reports the value it bakes in (metatrace.proxies.number_concretizations).
_CONVERSIONS = ("__index__", "__int__", "__float__", "__complex__", "__bool__")


def _conversion(fn, args):
    """``NumberProxy.__index__`` called on a number proxy, else None."""
    if not isinstance(fn, types.FunctionType) or fn.__name__ not in _CONVERSIONS or not args:
        return None
    n = unwrap(args[0])
    return fn if isinstance(n, NumberProxy) and inspect.getattr_static(type(n), fn.__name__, None) is fn else None


def _converting(fn, args):
    n = unwrap(args[0])
    try:
        fn(*(unwrap(a) for a in args))  # (reports the value it bakes in)
        # Python's own method on the value: ``True.__index__()`` is 1
        result = getattr(n.python_type, fn.__name__)(n.value, *(unwrap(a) for a in args[1:]))
    except Exception as e:
        return do_raise(e)
    return wrap(result, provenance=provenance.opaque_record([wrap_const(fn).provenance, *(a.provenance for a in args)]))


class Result:
    """What :func:`before_call` answers instead of a call: the call's result (or a raised signal)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def before_call(compilectx, fn, args: tuple, kwargs: dict):
    """The call to dispatch instead, as ``(fn, args, kwargs)`` (numbers' values for an opaque
    callable), or a :class:`Result` (a number proxy's conversion, an error of the values)."""
    ufn = unwrap(fn)
    if type(ufn) is LRU_CACHE_WRAPPER and type(fn) is WrappedValue:
        fn, ufn = memoized_function(fn), ufn.__wrapped__
    if not kwargs and _conversion(ufn, args) is not None:
        return Result(_converting(ufn, args))
    if (callable(ufn) and _would_call_opaque_cheap(ufn, args, kwargs) and not _from_thunder()
            and would_call_opaque(compilectx, ufn, args, kwargs)):
        try:
            call = concretized_call(ufn, args, kwargs)
        except MetatraceError as e:  # (a value read from tensor data: raised as the C code's __int__ would)
            return Result(do_raise(e))
        if call is not None:
            new_fn, args, kwargs = call
            fn = fn if new_fn is None else new_fn
    return fn, args, kwargs


def _would_call_opaque_cheap(fn, args, kwargs) -> bool:
    """The cheap half: an opaque callable and a proxy (or a container that may hold an input's
    numbers) among the arguments."""
    return is_opaque(fn) and (any(_has_proxy(unwrap(a)) or may_differ(a) for a in args)
                              or any(_has_proxy(unwrap(v)) or may_differ(v) for v in kwargs.values()))
