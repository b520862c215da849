"""Python's number semantics on symbolic numbers, where thunder lowers them through tensor ops.

While metatrace is enabled (``math.floor(-3.25)`` was -3, ``7 ** -2`` was 0):

- ``math.floor``/``ceil``/``trunc`` are ``int(prims.floor(x))`` ..., float ``a // b`` is
  ``prims.py_floordiv``, and ``round``, ``<<``/``>>`` and ``where`` on three
  numbers run as the Python functions themselves (operators of the python executor,
  ``metatrace.metas.python_executor``).
- ``a ** b`` has Python's type (metatrace.proxies.powers).
- ``divmod`` on number proxies is ``(a // b, a % b)`` (thunder has no ``divmod`` method).
- ``-b``, ``+b``, ``abs(b)``, ``~b`` of a bool number are the int operations.
- ``where`` with a symbolic number condition and tensor branches (``copysign(t, n)``) makes the
  condition a 0-d tensor: no executor runs ``prims.where`` on a number condition.
- Slices clamp as in eager (``clang._basic_indexing``); ``torch.tensor([n, n])``'s numbers are
  baked in (``clang.tensor_from_sequence``).
- ``shallow_copy`` of a number, in ``Symbol.__call__``, stays a number the prologue can replay.
- ``hash(n)`` (a number in a set literal, a dict key, ``n in {...}``) pins the number to its value:
  thunder hashes a number proxy by its value, so a set or dict decided by the values of one call
  (``len({x.shape[0], n})``: 2 when they differed, never compared) and the entry served calls where
  they are equal. (``set()`` and ``frozenset()`` calls decide by value in metatrace.interpret.calls.c_code.values_as_text.)
  Not where thunder's interpreter looks up the function it is about to call in its lookaside
  tables: calling a number (``t.numel()``, metatrace.proxies.numel) hashed it there, and every
  decode step of a Hugging Face cache (``self.keys.numel() == 0``) recompiled for the product
  ``keys.numel() == 80``. The tables hold functions, never numbers: the lookup misses whatever
  the value.
- ``utils.same_shape`` of shapes of different lengths is False without comparing sizes: Python's
  tuple ``==`` compares elements first, so ``maybe_broadcast``'s ``(n,)`` against ``(4, n)`` guarded
  ``n != 4`` and a call with ``n == 4`` recompiled for nothing.
"""

from __future__ import annotations

import builtins
import functools
import importlib
import sys
from numbers import Number
from typing import Any

import thunder.clang as clang
import thunder.core.jit_ext as jit_ext
import thunder.core.prims as prims
import thunder.core.utils as thunder_utils
from thunder.core.proxies import IntegerProxy, NumberProxy, TensorProxy

from thunder.core.compile_data import using_symbolic_values

from metatrace.metas import concretizations, python_executor
from metatrace.metas.oblivious_sites import entering, site_of
from metatrace.metas.torch_ops.torch_metas import concrete_numbers, tracing
from metatrace.patching import Patch, attribute, item
from metatrace.proxies import number_concretizations, size_oblivious
from metatrace.proxies.powers import power_method

# (thunder.clang re-exports a ``langctx`` name that hides the submodule from attribute access)
clang_langctx = importlib.import_module("thunder.clang.langctx")
symbol_module = importlib.import_module("thunder.core.symbol")


def _is_integer(x) -> bool:
    return python_executor.number_type(x) in (bool, int)


def _divmod(self, other):
    return (self // other, self % other)


def _rdivmod(self, other):
    return (other // self, other % self)


def _to_integer(name: str, original):
    # Written with number prims the prologue's guards can replay (a size computed by
    # ``math.ceil``, as ``clang.arange``'s length, stays expressible in the inputs) and the grad
    # transform knows as non-differentiable: floor(x) = int(prims.floor(x)), likewise ceil,
    # trunc(x) = int(x).
    def method(self):
        if not tracing():
            return original(self)
        if isinstance(self, IntegerProxy):
            if self.python_type is int:
                return self  # math.floor(7) is 7
            return prims.convert_element_type(self, int)
        if name == "__floor__":
            return prims.convert_element_type(prims.floor(self), int)
        if name == "__ceil__":
            return prims.convert_element_type(prims.ceil(self), int)
        return prims.convert_element_type(self, int)

    method.__name__ = name
    return method


def _round(name: str, original):
    def _round(self, ndigits=None):
        if not tracing():
            return original(self) if ndigits is None else builtins.round(self.value, ndigits)
        if ndigits is None:
            if isinstance(self, IntegerProxy) and self.python_type is int:
                return self
            return python_executor.py_op("round")(self)
        return python_executor.py_op("round_digits")(self, ndigits)

    return _round


def _floor_divide(original):
    @functools.wraps(original)
    def _floor_divide(a, b):
        """``a // b`` on real numbers: thunder's clang composes it from fmod, div, where and a floor
        through ``int()`` for a float, and from signbit, fmod, ne, logical_and, where and sub for
        integers (eight bound symbols that every later pass re-traces: ``clang.reshape``'s
        ``a.numel // numel`` on every reshape); Python's own ``//`` is one ``prims.py_floordiv`` (the
        prologue's guards replay it; metatrace.metas.python_executor makes it non-differentiable, as floor is)."""
        if (
            isinstance(a, (Number, NumberProxy))
            and isinstance(b, (Number, NumberProxy))
            and any(isinstance(x, NumberProxy) for x in (a, b))
            and complex not in (python_executor.number_type(a), python_executor.number_type(b))
            and tracing()
        ):
            a, b = number_concretizations.bool_as_int(a), number_concretizations.bool_as_int(b)
            if float in (python_executor.number_type(a), python_executor.number_type(b)):
                # float // int is a float in Python; py_floordiv's meta wants one number type
                a, b = _as_float(a), _as_float(b)
            return prims.py_floordiv(a, b)
        return original(a, b)

    return _floor_divide


def _as_float(x):
    if isinstance(x, NumberProxy):
        return x if x.python_type is float else prims.convert_element_type(x, float)
    return float(x)


def _unary_on_bool(name: str, original):
    """``-b``, ``+b``, ``abs(b)``, ``~b`` of a bool number are the int operations (``-True`` is -1);
    thunder's prims keep the bool type and fail their output check."""

    def method(self):
        if not tracing():
            return original(self)
        if getattr(self, "python_type", None) is bool:
            self = prims.convert_element_type(self, int)
            if name == "__pos__":
                return self
        if name == "__pos__" and getattr(self, "python_type", None) in (int, float, complex):
            return self  # +n is n (thunder resolves no "pos" method for numbers)
        return original(self)

    method.__name__ = name
    return method


def _shift(name: str, original):
    """``<<`` and ``>>`` on integers (thunder 0.2.6 raises NotImplementedError): Python's operator
    itself, run by the python executor (``metatrace.metas.python_executor``)."""
    reflected = name.startswith("__r") and name != "__rshift__"

    def method(self, other):
        a, b = (other, self) if reflected else (self, other)
        if not (tracing() and _is_integer(a) and _is_integer(b)):
            return original(self, other)
        return python_executor.py_op(name.strip("_")[1:] if reflected else name.strip("_"))(  # __rrshift__ -> rshift
            number_concretizations.bool_as_int(a), number_concretizations.bool_as_int(b)
        )

    method.__name__ = name
    return method


def _basic_indexing(original):
    """metatrace's one wrapper of ``clang._basic_indexing``, its steps in order: 1. its
    size-oblivious site is entered (:func:`metatrace.metas.oblivious_sites.entering`); 2. eager's
    clamping: a slice bound below ``-length`` is 0 (``x[-5:]`` of 3 elements is all of them;
    thunder raised "start=-5 is not a valid index"), the comparison guarded like any other (a
    symbolic bound keeps its entry on its side); 3. a symbolic slice is sliced without thunder's
    no-op shortcut (:func:`metatrace.proxies.size_oblivious.basic_indexing`), any other by thunder."""

    @functools.wraps(original)
    def _basic_indexing(a, /, key):
        if not tracing():
            return original(a, key)
        clamped, dim = [], 0
        for x in key:
            if isinstance(x, slice) and dim < len(a.shape):
                length = a.shape[dim]
                start, stop = x.start, x.stop
                if _may_be_below(start) and start < -length:
                    start = 0
                if _may_be_below(stop) and stop < -length:
                    stop = 0
                x = slice(start, stop, x.step)
            if x is not None:
                dim += 1
            clamped.append(x)
        if any(isinstance(x, slice) and _has_symbolic_bound(x) for x in clamped) and using_symbolic_values():
            return size_oblivious.basic_indexing(a, clamped)  # (its no-op shortcut guards nothing)
        return original(a, clamped)

    return entering(site_of(original), original, _basic_indexing)


def _has_symbolic_bound(x: slice) -> bool:
    return any(isinstance(b, NumberProxy) for b in (x.start, x.stop, x.step))


def _may_be_below(bound) -> bool:
    """A bound that can be below ``-length`` (a length is never negative: a plain int >= 0 never is)."""
    return isinstance(bound, NumberProxy) or (isinstance(bound, int) and bound < 0)


def _where(original):
    @functools.wraps(original)
    def _where(pred, a, b):
        xs = (pred, a, b)
        if any(isinstance(x, NumberProxy) for x in xs) and tracing():
            if all(isinstance(x, (Number, NumberProxy)) for x in xs):
                # prims.where has no meta for three numbers
                return python_executor.py_op("where")(pred, a, b)
            if isinstance(pred, NumberProxy):
                # A symbolic condition with tensor branches (clang.copysign(t, n): where(signbit(n),
                # ...)): no executor runs prims.where on a number condition; as a 0-d tensor it
                # stays symbolic and broadcasts like the number would.
                import thunder.core.dtypes as dtypes

                device = next(x.device for x in (a, b) if isinstance(x, TensorProxy))
                pred = clang.full((), pred, device=device, dtype=dtypes.bool8)
        return original(pred, a, b)

    return _where


def _tensor_from_sequence(original):
    @functools.wraps(original)
    def _tensor_from_sequence(sequence, *, dtype=None, device=None):
        return original(concrete_numbers(sequence), dtype=dtype, device=device)

    return _tensor_from_sequence


class _SymbolPrims:
    """``thunder.core.symbol``'s view of ``thunder.core.prims``: the same module, except that
    ``shallow_copy`` of a number proxy is ``convert_element_type`` to its own type.

    ``Symbol.__call__`` copies an argument that a symbol returns unchanged, so that no bound
    symbol outputs its own input; ``prims.shallow_copy``'s meta accepts tensors only, and a
    symbol that returns its number argument (``ltorch.to(in_w / out_w, float32)`` in bilinear
    ``interpolate``) failed. ``convert_element_type`` makes a fresh number proxy that guards can
    replay (one the prologue can compute), and the python executor runs it."""

    def __getattr__(self, name: str):
        return getattr(prims, name)

    @staticmethod
    def shallow_copy(a):
        if isinstance(a, NumberProxy) and type(a.value) in (bool, int, float, complex):
            return prims.convert_element_type(a, type(a.value))
        return prims.shallow_copy(a)


def proxy_method(cls: type, name: str, fn, why: str) -> list[Patch]:
    """Rows replacing a proxy method and, as thunder does for its own proxy methods (jit_ext's
    ``get_methods_properties``), making the jit call it opaquely rather than interpret it."""
    lookaside = jit_ext.interpreter_needs_wrap(jit_ext.record_source_loc_in_symbol_header(fn))
    if cls is TensorProxy:
        lookaside = jit_ext.ensure_recursive_proxies(lookaside)
    return [
        attribute(cls, name, fn, why),
        item(jit_ext._general_jit_lookaside_map, fn, lookaside, f"{name} runs opaquely",
             label="thunder.core.jit_ext._general_jit_lookaside_map"),
    ]


_METHODS: dict[str, Any] = {
    "__divmod__": lambda name, original: _divmod,
    "__rdivmod__": lambda name, original: _rdivmod,
    "__floor__": _to_integer,
    "__ceil__": _to_integer,
    "__trunc__": _to_integer,
    "__round__": _round,
    "__pow__": power_method,
    "__rpow__": power_method,
    "__neg__": _unary_on_bool,
    "__pos__": _unary_on_bool,
    "__abs__": _unary_on_bool,
    "__invert__": _unary_on_bool,
    "__lshift__": _shift,
    "__rlshift__": _shift,
    "__rshift__": _shift,
    "__rrshift__": _shift,
}


# Bitwise operators take integers only: on a float Python raises TypeError (thunder's prims a
# RuntimeError of their own, or an int result).
_BITWISE = {"__and__": "&", "__rand__": "&", "__or__": "|", "__ror__": "|", "__xor__": "^", "__rxor__": "^",
            "__lshift__": "<<", "__rlshift__": "<<", "__rshift__": ">>", "__rrshift__": ">>", "__invert__": "~"}


def _integers_only(name: str, method):
    symbol = _BITWISE[name]

    def bitwise(self, *other):
        types = [python_executor.number_type(x).__name__ for x in (self, *other)]
        if any(t in ("float", "complex") for t in types):
            if not other:
                raise TypeError(f"bad operand type for unary {symbol}: '{types[0]}'")
            lhs, rhs = (types[1], types[0]) if name.startswith("__r") else types
            raise TypeError(f"unsupported operand type(s) for {symbol}: '{lhs}' and '{rhs}'")
        return method(self, *other)

    bitwise.__name__ = name
    return bitwise


HASHED = "hash(): a set element or dict key decides by value"


# The functions that hash the callee to look it up in thunder's lookaside tables.
_CALLEE_LOOKUPS = (jit_ext.general_jit_lookaside.__code__, importlib.import_module("thunder.core.interpreter").default_lookaside.__code__)


def _hash(original):
    @functools.wraps(original)
    def __hash__(self):
        if sys._getframe(1).f_code not in _CALLEE_LOOKUPS:
            concretizations.bake_in(self, self.value, HASHED)
        return original(self)

    return __hash__


def _same_shape(original):
    @functools.wraps(original)
    def same_shape(a, b, /) -> bool:
        a, b = tuple(a), tuple(b)
        return len(a) == len(b) and original(a, b)

    return same_shape


def patches() -> list[Patch]:
    rows = [attribute(NumberProxy, "__hash__", _hash, "hash() of a symbolic number pins it to its value", wrap=True),
            attribute(thunder_utils, "same_shape", _same_shape,
                      "shapes of different lengths differ with no decision on a size", wrap=True)]
    for name in sorted(set(_METHODS) | set(_BITWISE)):
        method = NumberProxy.__dict__[name]
        method = _METHODS[name](name, method) if name in _METHODS else method
        method = _integers_only(name, method) if name in _BITWISE else method
        rows += proxy_method(NumberProxy, name, method,
                             "Python semantics on symbolic numbers in user code (a bool in arithmetic is an int; shifts)")
    clang_why = "Python // semantics, where() and torch.tensor() on symbolic numbers; slices clamp as in eager"
    rows += [
        attribute(clang, "tensor_from_sequence", _tensor_from_sequence, clang_why, wrap=True),
        attribute(clang, "where", _where, clang_why, wrap=True),
        attribute(clang, "_basic_indexing", _basic_indexing, clang_why, wrap=True),
        attribute(clang, "floor_divide", _floor_divide, clang_why, wrap=True),
        # NumberProxy's ``//`` resolves the method through the clang language context's own map
        item(clang_langctx._method_name_to_fn_map, "floor_divide", lambda _: clang.floor_divide,
             "NumberProxy // resolves to the new floor_divide", wrap=True,
             label="thunder.clang.langctx._method_name_to_fn_map"),
        attribute(symbol_module, "prims", _SymbolPrims(), "shallow_copy of a number stays replayable by the prologue"),
    ]
    return rows
