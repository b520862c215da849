"""What rewritten metas call (bound to ``_mt`` in the generated module).

Every function here computes exactly what the Python operation it replaces computes. The
difference is on NumberProxies while a recorder is active (a rewritten meta running during
tracing with ``cache="symbolic values"``):

- arithmetic is recorded as an ordinary thunder bound symbol (``prims.sub``, ``prims.maximum``,
  ...) in the scope of the prim's caller, so the result has a producer in the trace
  (:mod:`metatrace.metas.runtime_arithmetic`);
- comparisons return a :class:`SymBool` that remembers the relation, so a branch or check that
  consumes it can be guarded by the relation itself (:mod:`metatrace.metas.runtime_comparisons`);
- every place that turns a symbolic number into a Python value (``truth``, ``index``, ``int_``,
  ``pyval``...) reports the concretization to the active guard sink
  (:mod:`metatrace.metas.runtime_truth`, see ``metatrace.guards.collect``).

With no recorder active (plain numbers, constant-values caching, a meta called outside a trace)
each function does exactly what thunder's own code did.

This module is the namespace the rewrites emit names into (``_mt.add``, ``_mt.truth``): it names
each function the rewrites call, and defines the builtins over several numbers, which combine
the arithmetic and the comparisons.
"""

from __future__ import annotations

import builtins
import operator
from collections.abc import Callable, Iterable

from metatrace.metas import oblivious_answers, settled_checks
from metatrace.metas.folds import MISSING
from metatrace.metas.runtime_arithmetic import (FOLDS, abs_, add, bitand, bitor, ceil, floor, floordiv,
                                                forget_offset, invert, iop, lshift, maximum, minimum, mod, mul,
                                                neg, pos, pow, recorded_add, recorded_sub, rshift, sub, truediv,
                                                trunc, xor)
from metatrace.metas.runtime_comparisons import (check, compare_chain, contains, eq, ge, gt, le, lt, ne,
                                                 not_contains)
from metatrace.metas.runtime_truth import (SymBool, and_, concretize, float_, frozenset_, hash_, index, int_,
                                           is_symbolic, not_, or_, pyval, range_, round_, set_, settled_first,
                                           sorted_, symbolic_int, truth, value_of)

__all__ = [
    # arithmetic (runtime_arithmetic)
    "FOLDS", "abs_", "add", "bitand", "bitor", "ceil", "floor", "floordiv", "forget_offset", "invert", "iop",
    "lshift", "maximum", "minimum", "mod", "mul", "neg", "pos", "pow", "recorded_add", "recorded_sub", "rshift",
    "sub", "truediv", "trunc", "xor",
    # comparisons (runtime_comparisons)
    "check", "compare_chain", "contains", "eq", "ge", "gt", "le", "lt", "ne", "not_contains",
    # truth and concretization (runtime_truth)
    "SymBool", "and_", "concretize", "float_", "frozenset_", "hash_", "index", "int_", "not_", "or_", "pyval",
    "range_", "round_", "set_", "settled_first", "sorted_", "symbolic_int", "truth", "value_of",
    # size-oblivious sites, builtins over several numbers (here)
    "size_oblivious", "one_or_same", "max_", "min_", "sum_", "prod_", "divmod_", "reduce_",
]


# The size-oblivious sites of the rewritten metas (``rewrites.size_oblivious``): the meta's body
# runs inside ``with size_oblivious("<meta name>"):``; its broadcast check calls ``one_or_same``.
size_oblivious = oblivious_answers.size_oblivious
one_or_same = settled_checks.one_or_same


# ---------------------------------------------------------------------------------------------
# Builtins over several numbers
# ---------------------------------------------------------------------------------------------


def _extreme(combine: Callable, pick: Callable, builtin: Callable, args, key, default):
    items = list(args[0]) if len(args) == 1 else list(args)
    if not any(is_symbolic(x) for x in items):
        kwargs = {} if key is None else {"key": key}
        if default is not MISSING:
            kwargs["default"] = default
        # args[0] may be a generator that building ``items`` consumed: pass the items instead.
        return builtin(items, **kwargs) if len(args) == 1 else builtin(*items, **kwargs)
    if not items:
        if default is MISSING:
            raise ValueError(f"{builtin.__name__}() arg is an empty sequence")
        return default
    best = items[0]
    for x in items[1:]:
        best = combine(best, x) if key is None else (x if truth(pick(key(x), key(best))) else best)
    return best


def max_(*args, key=None, default=MISSING):
    return _extreme(maximum, gt, builtins.max, args, key, default)


def min_(*args, key=None, default=MISSING):
    return _extreme(minimum, lt, builtins.min, args, key, default)


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
    if is_symbolic(a) or is_symbolic(b):
        return floordiv(a, b), mod(a, b)
    return builtins.divmod(a, b)


# operator.* functions passed to functools.reduce map to their recording versions.
_REDUCE_OPS = {operator.add: add, operator.mul: mul, operator.sub: sub, operator.floordiv: floordiv,
               operator.mod: mod, builtins.max: max_, builtins.min: min_}


def reduce_(fn: Callable, iterable: Iterable, initial=MISSING):
    fn = _REDUCE_OPS.get(fn, fn)
    it = iter(iterable)
    if initial is MISSING:
        try:
            acc = next(it)
        except StopIteration:
            raise TypeError("reduce() of empty iterable with no initial value") from None
    else:
        acc = initial
    for x in it:
        acc = fn(acc, x)
    return acc
