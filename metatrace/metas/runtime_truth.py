"""Where a symbolic number becomes a Python value: a comparison's truth, an index, ``int()``.

The rewritten metas call these (through :mod:`metatrace.metas.runtime`) wherever the Python code
they replace turns a number into a ``bool``, an index, a hash key or a Python ``int``/``float``.
On a symbol each one reports what it decided to the active guard sink
(:mod:`metatrace.metas.concretizations`): a relation for a truth, a baked-in value for the rest.
On plain values each does exactly what Python does. Kept apart from the arithmetic and the
comparisons because both of those end here (``int / int`` is concretized, a comparison's result
is a :class:`SymBool` whose truth is taken here).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable
from typing import Any

from thunder.core.proxies import NumberProxy
from thunder.core.proxies import pyval as thunder_pyval

from metatrace.metas import concretizations, peeks, unbacked
from metatrace.metas.record_state import functional_trace, value_propagation
from metatrace.metas.relations import Relation


def is_symbolic(x: Any) -> bool:
    return isinstance(x, NumberProxy)


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


def truth(x) -> bool:
    """``bool(x)``, reporting the relation it decided when ``x`` is symbolic."""
    if type(x) is bool:
        return x
    if isinstance(x, SymBool):
        concretizations.relation(x.op, x.lhs, x.rhs, x.value)
        if x.value is None:  # (the guard collector raised DataDependentError if one listens)
            raise unbacked.undecided(x.op, x.lhs, x.rhs)
        return x.value
    if is_symbolic(x):
        if thunder_pyval(x) is None:  # read from tensor data: decided where every value (or the site) agrees
            if (decided := unbacked.decide(Relation.NE, x, 0, functional_trace())) is not None:
                return decided
            raise concretizations.relation(Relation.NE, x, 0, None) or unbacked.undecided(Relation.NE, x, 0)  # (the collector raises first)
        value = bool(thunder_pyval(x))
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


# ---------------------------------------------------------------------------------------------
# Concretization: a symbol's value baked in
# ---------------------------------------------------------------------------------------------


def concretize(x, why: str):
    """The Python value of ``x``; for a symbol, reports that this value was baked in."""
    if not is_symbolic(x):
        return x
    value = thunder_pyval(x)
    if not value_propagation():
        concretizations.bake_in(x, value, why)
    return value


def index(x):
    """``x`` used as an index or a key: a symbol's value is baked in."""
    if isinstance(x, SymBool):
        return truth(x)
    if not is_symbolic(x):
        return x
    value = thunder_pyval(x)
    concretizations.bake_in(x, value, "index")
    return value


def pyval(x):
    return concretize(x, "pyval") if is_symbolic(x) else thunder_pyval(x)


def value_of(x):
    return concretize(x, ".value") if is_symbolic(x) else x.value


def int_(x=0, *args):
    return builtins.int(concretize(x, "int()"), *args)


def float_(x=0.0):
    return builtins.float(concretize(x, "float()"))


def range_(*args):
    return builtins.range(*(index(a) for a in args))


def symbolic_int(x):
    """``int`` as the converter of ``tree_map``/``map`` in a rewritten autograd rule: an integer
    symbol stays a symbol (whatever consumes it records its arithmetic); a float symbol is
    converted as ``int()`` does, guarded; numpy and Python numbers become ints."""
    if isinstance(x, NumberProxy) and x.python_type is builtins.int:
        return x
    return int_(x)


# Builtins that hash or order their elements: each symbol's value is baked in.


def _concrete_elements(iterable: Iterable, why: str) -> list:
    return [concretize(x, why) if is_symbolic(x) else x for x in iterable]


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
