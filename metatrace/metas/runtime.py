"""What rewritten metas call (bound to ``_mt`` in the generated module).

Every function here computes exactly what the Python operation it replaces computes. The
difference is on NumberProxies while a recorder is active (a rewritten meta running during
tracing with ``cache="symbolic values"``):

- arithmetic is recorded as an ordinary thunder bound symbol (``prims.sub``, ``prims.maximum``,
  ...) in the scope of the prim's caller, so the result has a producer in the trace;
- comparisons return a :class:`SymBool` that remembers the relation, so a branch or check that
  consumes it can be guarded by the relation itself;
- every place that turns a symbolic number into a Python value (``truth``, ``index``, ``int_``,
  ``pyval``...) reports the concretization to the active guard sink (see ``metatrace.guards.collect``).

With no recorder active (plain numbers, constant-values caching, a meta called outside a trace)
each function does exactly what thunder's own code did.
"""

from __future__ import annotations

import builtins
import inspect
import operator
import sys
from collections.abc import Callable, Iterable
from numbers import Number
from typing import Any

import thunder.core.baseutils as baseutils
import thunder.core.prims as prims
from thunder.core.proxies import IntegerProxy, NumberProxy, TensorProxy
from thunder.core.proxies import pyval as _thunder_pyval

from metatrace.state.weak_tables import IdentityTable
from metatrace.metas import concretizations, number_ops, peeks, settled_checks, unbacked
from metatrace.metas.relations import Relation
from metatrace.metas.record_state import current_recorder, functional_trace, value_propagation
from metatrace.metas.record_state import record as _record

from metatrace.metas.folds import (MISSING as _MISSING, fold_add as _fold_add, fold_floordiv as _fold_floordiv,
                                   fold_mod as _fold_mod, fold_mul as _fold_mul, fold_sub as _fold_sub,
                                   int_literal as _int_literal, is_symbolic_int as _is_symbolic_int)


def _is_symbolic(x: Any) -> bool:
    return isinstance(x, NumberProxy)


def _operator(sym, fn: Callable, arity: int, fold: Callable | None = None) -> Callable:
    """An arithmetic operator of ``arity`` operands that records ``sym`` on symbolic numbers (``fn``
    computes the value).

    ``fold(a, b)`` returns an operand when the operation is an identity (``x - 0``) so nothing
    needs recording, or ``_MISSING``.
    """

    def op(*args):
        if current_recorder() is None or not any(map(_is_symbolic, args)):
            if any(_thunder_pyval(a) is None for a in args if _is_symbolic(a)):
                # outside a compile (thunder's check_trace re-running metas): the identity the
                # compile folded (``n + 0`` is n), or the symbol it recorded (unbacked.recorded_op)
                if fold is not None and (folded := fold(*args)) is not _MISSING:
                    return folded
                if (recorded := unbacked.recorded_op(sym.name, args)) is not None:
                    return recorded
                if sym.name == "mul" and all(isinstance(a, IntegerProxy) or type(a) is int for a in args):
                    return unbacked.product_outside_compile(*args)
            return fn(*args)
        if not all(isinstance(a, (Number, NumberProxy)) and not isinstance(a, TensorProxy) for a in args):
            return fn(*args)
        if fold is not None and (folded := fold(*args)) is not _MISSING:
            return folded
        values = tuple(map(_thunder_pyval, args))
        if any(v is None for v in values):  # an operand read from tensor data: no value
            return _record_unbacked(sym, *args)
        return _record(sym, fn(*values), *args)

    op.__name__ = fn.__name__
    op.__signature__ = inspect.Signature([inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in "ab"[:arity]])
    return op


# Identities fold for an integer symbol and an integer literal only: ``i * 1.0`` is a float, and
# for a float ``-0.0 + 0`` is 0.0 and ``inf // 1`` is nan, so a float (or a float literal) is
# recorded. One table for the rewritten metas' operators and NumberProxy's (proxies.number_concretizations).


# The recording operators of the number_ops rows with a ``meta`` name, as the rewritten metas call
# them: _add, _sub (under add/sub below), mul, floordiv, mod, pow, bitand, bitor, xor, _maximum,
# _minimum (under max_/min_), neg, abs_, ceil, floor, trunc, invert.
_FOLDS = {"add": _fold_add, "sub": _fold_sub, "mul": _fold_mul, "py_floordiv": _fold_floordiv, "remainder": _fold_mod}
globals().update({row.runtime_name: _operator(getattr(prims, row.name), row.evaluate, row.arity, _FOLDS.get(row.name))
                  for row in number_ops.PRIM_OPS if row.runtime_name})


def _record_unbacked(sym, *args):  # an operand has no value: neither has the result (metas.unbacked)
    if (folded := unbacked.fold_division(sym.name, *args)) is not None:
        return folded
    python_type = int if all(number_ops.number_type(a) in (int, bool) for a in args) else float
    return _record(sym, None, *args, python_type=python_type, tags=unbacked.tag_of(sym.name, *args))


# a number recorded as ``base + total`` -> [base, total, the recorder it was recorded in]
_OFFSETS = IdentityTable(list)


def forget_offset(a) -> None:
    """``a`` is no longer folded through its chain of offsets (its base lives in another trace)."""
    entry = _OFFSETS.get(a, create=False)
    if entry:
        entry.clear()


def _offset(a, k: int):
    """``a + k`` for a symbolic int and a literal int, folding chains of constant offsets:
    ``(x + 1) - 1`` is ``x`` and ``(x + 1) + 2`` is ``x + 3``, so shape formulas like
    ``(stop - start + stride - 1) // stride`` record only what they compute."""
    recorder = current_recorder()
    base, total, scope = _OFFSETS.get(a, create=False) or (a, 0, recorder)
    if scope is not recorder:  # the chain's base may not be bound in this scope: start from a
        base, total = a, 0
    total += k
    if total == 0:
        return base
    if _thunder_pyval(base) is None:  # no value (read from tensor data)
        if recorder is None:  # outside a compile (a checker re-running metas): the compile's symbol
            name, k = ("add", total) if total > 0 else ("sub", -total)
            out = unbacked.recorded_op(name, (base, k))
            if out is None:
                out = base + total if total > 0 else base - (-total)
        else:
            out = _record_unbacked(prims.add, base, total) if total > 0 else _record_unbacked(prims.sub, base, -total)
        _OFFSETS.get(out)[:] = (base, total, recorder)
        return out
    value = _thunder_pyval(base) + total
    out = _record(prims.add, value, base, total) if total > 0 else _record(prims.sub, value, base, -total)
    _OFFSETS.get(out)[:] = (base, total, recorder)
    return out


def _offsets(a) -> bool:  # while recording; on a number with no value always (a checker's re-run)
    return current_recorder() is not None or (_is_symbolic_int(a) and _thunder_pyval(a) is None)


def add(a, b):
    if _is_symbolic_int(a) and type(b) is int and _offsets(a):
        return _offset(a, b)
    if _is_symbolic_int(b) and type(a) is int and _offsets(b):
        return _offset(b, a)
    return _add(a, b)


def sub(a, b):
    if _is_symbolic_int(a) and type(b) is int and _offsets(a):
        return _offset(a, -b)
    return _sub(a, b)


# The identity fold of each operator NumberProxy's arithmetic methods call (proxies.number_concretizations
# folds ``size - size`` and ``n * 1`` there with the same rules); mul and floordiv are rows' operators.
FOLDS = {add: _fold_add, sub: _fold_sub, mul: _fold_mul, floordiv: _fold_floordiv, mod: _fold_mod}  # noqa: F821


# Python's ``/`` on floats; prims.div's own evaluation truncates ints (see truediv).
_true_division = _operator(prims.div, operator.truediv, 2)


def truediv(a, b):
    # prims.div is C-style (truncating) on integers, so only float division can be recorded;
    # int / int on a symbol is rare in metas and is concretized instead.
    if (_is_symbolic(a) or _is_symbolic(b)) and current_recorder() is not None:
        if isinstance(_thunder_pyval(a), float) or isinstance(_thunder_pyval(b), float):
            return _true_division(a, b)
        return concretize(a, "int / int") / concretize(b, "int / int")
    return a / b


def lshift(a, b):
    return concretize(a, "<<") << concretize(b, "<<")


def rshift(a, b):
    return concretize(a, ">>") >> concretize(b, ">>")


def pos(a):
    return a if _is_symbolic(a) else +a


# ``a <op>= b``: the recording operator and Python's in-place one, by the name the rewriter uses.
_INPLACE = {name: (globals()[name], getattr(operator, inplace)) for name, inplace in (
    ("add", "iadd"), ("sub", "isub"), ("mul", "imul"), ("truediv", "itruediv"), ("floordiv", "ifloordiv"),
    ("mod", "imod"), ("pow", "ipow"), ("bitand", "iand"), ("bitor", "ior"), ("xor", "ixor"),
    ("lshift", "ilshift"), ("rshift", "irshift"))}


def iop(name: str, a, b):
    """``a <op>= b``: records on symbols, mutates in place otherwise (``lst += [x]``)."""
    recording, inplace = _INPLACE[name]
    if _is_symbolic(a) or _is_symbolic(b):
        return recording(a, b)
    return inplace(a, b)


# ---------------------------------------------------------------------------------------------
# Comparisons and truth
# ---------------------------------------------------------------------------------------------

_COMPARE: dict[str, Callable] = {name: row.evaluate for name, row in number_ops.BY_RELATION.items()}
# What a comparison of a symbol with itself always is.
_REFLEXIVE = number_ops.REFLEXIVE


class SymBool:
    """The result of comparing symbolic numbers: ``lhs <op> rhs`` and its value on this trace.

    Nothing is recorded until its truth is taken; then the relation (or its negation) becomes a
    guard. Converting it to ``bool`` anywhere, even in unrewritten code, goes through ``truth``.
    """

    __slots__ = ("op", "lhs", "rhs", "value")

    def __init__(self, op: str, lhs: Any, rhs: Any, value: bool):
        self.op, self.lhs, self.rhs, self.value = op, lhs, rhs, value

    def __bool__(self) -> bool:
        return truth(self)

    def __repr__(self) -> str:
        return f"SymBool({self.lhs} {self.op} {self.rhs} = {self.value})"


def _comparison(name: str) -> Callable:
    fn = _COMPARE[name]

    def compare(a, b):
        if not (_is_symbolic(a) or _is_symbolic(b)):
            return fn(a, b)
        if not isinstance(a, (Number, NumberProxy)) or not isinstance(b, (Number, NumberProxy)):
            return fn(a, b)  # NumberProxy == () and the like: thunder's own answer
        if a is b:
            return _REFLEXIVE[name]
        va, vb = _thunder_pyval(a), _thunder_pyval(b)
        if va is None or vb is None:  # read from tensor data: decided where every value agrees
            decided = unbacked.decide(name, a, b, functional_trace())
            return SymBool(name, a, b, None) if decided is None else decided
        return SymBool(name, a, b, fn(va, vb))

    compare.__name__ = name
    return compare


# eq, ne, lt, le, gt, ge
globals().update({name: _comparison(name) for name in number_ops.BY_RELATION})


def truth(x) -> bool:
    """``bool(x)``, reporting the relation it decided when ``x`` is symbolic."""
    if type(x) is bool:
        return x
    if isinstance(x, SymBool):
        concretizations.relation(x.op, x.lhs, x.rhs, x.value)
        if x.value is None:  # (the guard collector raised DataDependentError if one listens)
            raise unbacked.undecided(x.op, x.lhs, x.rhs)
        return x.value
    if _is_symbolic(x):
        if _thunder_pyval(x) is None:  # read from tensor data: decided where every value (or the site) agrees
            if (decided := unbacked.decide(Relation.NE, x, 0, functional_trace())) is not None:
                return decided
            raise concretizations.relation(Relation.NE, x, 0, None) or unbacked.undecided(Relation.NE, x, 0)  # (the collector raises first)
        value = bool(_thunder_pyval(x))
        concretizations.relation(Relation.NE, x, 0, value)
        return value
    return bool(x)


def not_(x) -> bool:
    return not truth(x)


def and_(a, rest: Callable):
    """``a and rest()`` with Python's semantics (returns an operand)."""
    return rest() if truth(a) else a


def or_(a, rest: Callable):
    return a if truth(a) else rest()


def settled_first(settles: bool, a, rest: Callable) -> bool:
    """``a or rest()`` (``settles`` True) or ``a and rest()`` (False) of two comparisons of plain
    operands (rewrites.conditions): ``rest()`` that is ``settles`` deciding nothing (metas.peeks)
    decides alone, and ``a`` is not guarded; otherwise Python's order, guards and all."""
    if type(a) is not bool and peeks.value_deciding_nothing(rest) is settles:
        return settles
    return settles if truth(a) is settles else truth(rest())


def compare_chain(first, *ops_and_operands):
    """``first <op1> b <op2> c ...`` with each operand (a thunk) evaluated once, lazily."""
    left, result = first, True
    for i in range(0, len(ops_and_operands), 2):
        name, right = ops_and_operands[i], ops_and_operands[i + 1]()
        result = _chain_link(name, left, right)
        if not truth(result):
            return result
        left = right
    return result


def _chain_link(name: str, a, b):
    if name == "in":
        return contains(b, a)
    if name == "not in":
        return not_contains(b, a)
    if name == "is":
        return a is b
    if name == "is not":
        return a is not b
    return _comparison(name)(a, b)


def contains(container, item) -> bool:
    """``item in container``: symbolic elements are compared through ``eq`` and guarded."""
    if not isinstance(item, (Number, NumberProxy)) or isinstance(container, (str, bytes)):
        return item in container
    if isinstance(container, (dict, set, frozenset)):
        return index(item) in container  # hashing: only the value can be looked up
    if not _is_symbolic(item) and not any(_is_symbolic(el) for el in container):
        return item in container
    return any(el is item or truth(eq(el, item)) for el in container)


def not_contains(container, item) -> bool:
    return not contains(container, item)


def check(cond, *args, **kwargs) -> None:
    """thunder's ``check``: same error type and lazy message, with the condition guarded."""
    baseutils.check(truth(cond), *args, **kwargs)


# The size-oblivious sites of the rewritten metas (``rewrites.size_oblivious``): the meta's body
# runs inside ``with size_oblivious("<meta name>"):``; its broadcast check calls ``one_or_same``.
size_oblivious = unbacked.size_oblivious
one_or_same = settled_checks.one_or_same


# ---------------------------------------------------------------------------------------------
# Concretization
# ---------------------------------------------------------------------------------------------


def concretize(x, why: str):
    """The Python value of ``x``; for a symbol, reports that this value was baked in."""
    if not _is_symbolic(x):
        return x
    value = _thunder_pyval(x)
    if not value_propagation():
        concretizations.bake_in(x, value, why)
    return value


def index(x):
    """``x`` used as an index or a key: a symbol's value is baked in."""
    if isinstance(x, SymBool):
        return truth(x)
    if not _is_symbolic(x):
        return x
    value = _thunder_pyval(x)
    concretizations.bake_in(x, value, "index")
    return value


def pyval(x):
    return concretize(x, "pyval") if _is_symbolic(x) else _thunder_pyval(x)


def value_of(x):
    return concretize(x, ".value") if _is_symbolic(x) else x.value


def int_(x=0, *args):
    return builtins.int(concretize(x, "int()"), *args)


def float_(x=0.0):
    return builtins.float(concretize(x, "float()"))


def range_(*args):
    return builtins.range(*(index(a) for a in args))


# ---------------------------------------------------------------------------------------------
# Builtins over several numbers
# ---------------------------------------------------------------------------------------------


def _extreme(combine: Callable, pick: Callable, builtin: Callable, args, key, default):
    items = list(args[0]) if len(args) == 1 else list(args)
    if not any(_is_symbolic(x) for x in items):
        kwargs = {} if key is None else {"key": key}
        if default is not _MISSING:
            kwargs["default"] = default
        # args[0] may be a generator that building ``items`` consumed: pass the items instead.
        return builtin(items, **kwargs) if len(args) == 1 else builtin(*items, **kwargs)
    if not items:
        if default is _MISSING:
            raise ValueError(f"{builtin.__name__}() arg is an empty sequence")
        return default
    best = items[0]
    for x in items[1:]:
        best = combine(best, x) if key is None else (x if truth(pick(key(x), key(best))) else best)
    return best


def max_(*args, key=None, default=_MISSING):
    return _extreme(_maximum, gt, builtins.max, args, key, default)


def min_(*args, key=None, default=_MISSING):
    return _extreme(_minimum, lt, builtins.min, args, key, default)


def sum_(iterable: Iterable, /, start=0):
    total = start
    for x in iterable:
        total = add(total, x)
    return total


def prod_(iterable: Iterable, /, *, start=1):
    total = start
    for x in iterable:
        total = mul(total, x)
    return total


def divmod_(a, b):
    if _is_symbolic(a) or _is_symbolic(b):
        return floordiv(a, b), mod(a, b)
    return builtins.divmod(a, b)


# operator.* functions passed to functools.reduce map to their recording versions.
_REDUCE_OPS = {operator.add: add, operator.mul: mul, operator.sub: sub, operator.floordiv: floordiv,
               operator.mod: mod, builtins.max: max_, builtins.min: min_}


def reduce_(fn: Callable, iterable: Iterable, initial=_MISSING):
    fn = _REDUCE_OPS.get(fn, fn)
    it = iter(iterable)
    if initial is _MISSING:
        try:
            acc = next(it)
        except StopIteration:
            raise TypeError("reduce() of empty iterable with no initial value") from None
    else:
        acc = initial
    for x in it:
        acc = fn(acc, x)
    return acc


# ---------------------------------------------------------------------------------------------
# Builtins that hash or order their elements: each symbol's value is baked in
# ---------------------------------------------------------------------------------------------


def _concrete_elements(iterable: Iterable, why: str) -> list:
    return [concretize(x, why) if _is_symbolic(x) else x for x in iterable]


def set_(iterable: Iterable = ()) -> set:
    return builtins.set(_concrete_elements(iterable, "set()"))


def frozenset_(iterable: Iterable = ()) -> frozenset:
    return builtins.frozenset(_concrete_elements(iterable, "frozenset()"))


def sorted_(iterable: Iterable, /, *, key=None, reverse=False) -> list:
    return builtins.sorted(_concrete_elements(iterable, "sorted()"), key=key, reverse=reverse)


def hash_(x) -> int:
    return builtins.hash(concretize(x, "hash()"))


def round_(x, ndigits=None):
    return builtins.round(concretize(x, "round()"), ndigits)


def symbolic_int(x):
    """``int`` as the converter of ``tree_map``/``map`` in a rewritten autograd rule: an integer
    symbol stays a symbol (whatever consumes it records its arithmetic); a float symbol is
    converted as ``int()`` does, guarded; numpy and Python numbers become ints."""
    if isinstance(x, NumberProxy) and x.python_type is builtins.int:
        return x
    return int_(x)
