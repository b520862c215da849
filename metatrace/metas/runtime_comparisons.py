"""What the rewritten metas call for ``==``, ``<``, chained comparisons, ``in`` and ``check``.

A comparison with a symbolic operand returns a :class:`~metatrace.metas.runtime_truth.SymBool`
that remembers the relation, so the branch or check that takes its truth is guarded by the
relation itself (:func:`~metatrace.metas.runtime_truth.truth`). With plain operands each function
is Python's operator. The operators are one row each, derived from ``number_ops``' comparison rows.
"""

from __future__ import annotations

from collections.abc import Callable
from numbers import Number

import thunder.core.baseutils as baseutils
from thunder.core.proxies import NumberProxy
from thunder.core.proxies import pyval as thunder_pyval

from metatrace.metas import number_ops, unbacked
from metatrace.metas.record_state import functional_trace
from metatrace.metas.relations import Relation
from metatrace.metas.runtime_truth import SymBool, index, is_symbolic, truth


def _comparison(name: str) -> Callable:
    """The comparison of the ``number_ops`` row of relation ``name``: a SymBool on symbols."""
    fn = number_ops.BY_RELATION[name].evaluate

    def compare(a, b):
        if not (is_symbolic(a) or is_symbolic(b)):
            return fn(a, b)
        if not isinstance(a, (Number, NumberProxy)) or not isinstance(b, (Number, NumberProxy)):
            return fn(a, b)  # NumberProxy == () and the like: thunder's own answer
        if a is b:
            return number_ops.REFLEXIVE[name]  # what a comparison of a symbol with itself always is
        va, vb = thunder_pyval(a), thunder_pyval(b)
        if va is None or vb is None:  # read from tensor data: decided where every value agrees
            decided = unbacked.decide(name, a, b, functional_trace())
            return SymBool(name, a, b, None) if decided is None else decided
        return SymBool(name, a, b, fn(va, vb))

    compare.__name__ = name
    return compare


eq = _comparison(Relation.EQ.value)
ne = _comparison(Relation.NE.value)
lt = _comparison(Relation.LT.value)
le = _comparison(Relation.LE.value)
gt = _comparison(Relation.GT.value)
ge = _comparison(Relation.GE.value)

# relation name -> its comparison
COMPARISONS: dict[str, Callable] = {compare.__name__: compare for compare in (eq, ne, lt, le, gt, ge)}
assert set(COMPARISONS) == set(number_ops.BY_RELATION), "a comparison row without its operator here"


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
    return COMPARISONS[name](a, b)


def contains(container, item) -> bool:
    """``item in container``: symbolic elements are compared through ``eq`` and guarded."""
    if not isinstance(item, (Number, NumberProxy)) or isinstance(container, (str, bytes)):
        return item in container
    if isinstance(container, (dict, set, frozenset)):
        return index(item) in container  # hashing: only the value can be looked up
    if not is_symbolic(item) and not any(is_symbolic(el) for el in container):
        return item in container
    return any(el is item or truth(eq(el, item)) for el in container)


def not_contains(container, item) -> bool:
    return not contains(container, item)


def check(cond, *args, **kwargs) -> None:
    """thunder's ``check``: same error type and lazy message, with the condition guarded."""
    baseutils.check(truth(cond), *args, **kwargs)
