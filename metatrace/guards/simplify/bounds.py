"""Interval bounds of int expressions, given a range per leaf."""

from __future__ import annotations

import math

from metatrace.guards.simplify.expressions import Expr, Node, Poly
from metatrace.metas.algebra_ops import BOOLEAN, NumberKind, Op

INF = math.inf
_EXTREMA = frozenset({Op.MAX, Op.MIN})
_BITWISE = frozenset({Op.BITAND, Op.BITOR, Op.BITXOR})


def _imul(a: tuple, b: tuple) -> tuple:
    if a == (0, 0) or b == (0, 0):
        return (0, 0)
    prods = [x * y if x and y else 0 for x in a for y in b]
    return (min(prods), max(prods))


def bounds(e: Expr, ranges: dict[str, tuple]) -> tuple:
    """(lo, hi) of an int expression given leaf ranges; ±inf where unknown."""
    if isinstance(e, Poly):
        lo = hi = 0
        for m, c in e.terms:
            iv = (c, c)
            for n in m:
                iv = _imul(iv, _node_bounds(n, ranges))
            lo, hi = lo + iv[0], hi + iv[1]
        return lo, hi
    return _node_bounds(e, ranges) if e.typ is NumberKind.INT else (-INF, INF)


def _node_bounds(n: Node, ranges) -> tuple:
    if n.op is Op.LEAF:
        return ranges.get(n.args[0], (-INF, INF))
    if n.op in BOOLEAN:
        return (0, 1)
    args = [bounds(a, ranges) if isinstance(a, (Poly, Node)) else (-INF, INF) for a in n.args]
    if n.op in _EXTREMA:
        f = max if n.op is Op.MAX else min
        return (f(args[0][0], args[1][0]), f(args[0][1], args[1][1]))
    if n.op is Op.ABS:
        lo, hi = args[0]
        if lo >= 0:
            return (lo, hi)
        if hi <= 0:
            return (-hi, -lo)
        return (0, max(-lo, hi))
    if n.op is Op.FLOORDIV and args[1][0] > 0:
        (lo, hi), (dlo, dhi) = args
        cands = [x / y for x in (lo, hi) for y in (dlo, dhi) if not (math.isinf(x) and math.isinf(y))]
        return (math.floor(min(cands)) if lo > -INF else -INF, math.floor(max(cands)) if hi < INF else INF)
    if n.op is Op.MOD and args[1][0] > 0:
        return (0, args[1][1] - 1)
    if n.op in _BITWISE and all(0 <= lo and hi <= 1 for lo, hi in args):
        return (0, 1)
    return (-INF, INF)
