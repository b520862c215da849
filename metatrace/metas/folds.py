"""Identity folds of number ops: an operand (or 0) when the operation computes nothing new
(``x - 0``, ``x * 1``, ``x - x``, ``(n * C) // C`` of a size read from data), else ``MISSING``.

The runtime folds before recording an op (:mod:`metatrace.metas.runtime`), NumberProxy's arithmetic
methods with the same rules (:mod:`metatrace.proxies.number_concretizations`). Integer symbols and integer
literals only: no NaN can make ``x * 0`` other than 0.
"""

from __future__ import annotations

from typing import Any

from thunder.core.proxies import NumberProxy

from metatrace.metas import unbacked

MISSING = object()


def is_symbolic_int(x) -> bool:
    return isinstance(x, NumberProxy) and x.python_type is int


def int_literal(x: Any, v: int) -> bool:
    return type(x) is int and x == v  # not a bool: True + 0 is the int 1


def fold_add(a, b):
    if is_symbolic_int(a) and int_literal(b, 0):
        return a
    if is_symbolic_int(b) and int_literal(a, 0):
        return b
    return MISSING


def fold_sub(a, b):
    if is_symbolic_int(a):
        if int_literal(b, 0):
            return a
        if a is b:
            return 0  # x - x: pad's ``(dim - 1) * 0`` interior terms and ``size - size`` widths
    return MISSING


def fold_mul(a, b):
    for x, k in ((a, b), (b, a)):
        if is_symbolic_int(x) and type(k) is int:
            if k == 1:
                return x
            if k == 0:
                return 0  # no NaN among integers: pad's interior padding term
    return MISSING


def fold_floordiv(a, b):
    if is_symbolic_int(a) and int_literal(b, 1):
        return a
    folded = unbacked.fold_division("py_floordiv", a, b)  # (n * C) // C of a size read from data
    return MISSING if folded is None else folded


def fold_mod(a, b):
    folded = unbacked.fold_division("remainder", a, b)  # (n * C) % C of a size read from data
    return MISSING if folded is None else folded
