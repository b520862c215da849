"""Relations: a guard as ``P >= 0``, ``P == 0`` or ``P != 0`` over a canonical polynomial, and the
conditions (a divisor's ``!= 0``) that a guard checks by raising."""

from __future__ import annotations

import math
from dataclasses import dataclass

from metatrace.guards.simplify.expressions import (
    ZERO,
    Expr,
    Poly,
    float_source,
    int_of,
    node_const,
    build,
    pconst,
)
from metatrace.metas.algebra_ops import DIVIDING, FINITE, NumberKind, Op
from metatrace.metas.relations import Relation

# The kind of a relation kept as written, ``lhs rop rhs`` (a side that is no polynomial).
RAW = "raw"


@dataclass
class Rel:
    """A canonical relation. ``op`` ``Relation.GE``/``EQ``/``NE``: ``poly op 0``, poly's
    non-constant coefficients coprime (and the first positive for eq/ne); :data:`RAW`: ``lhs rop
    rhs`` (``rop`` the relation's Python symbol)."""

    op: Relation | str
    poly: Poly | None = None
    lhs: Expr | None = None
    rop: str = ""
    rhs: Expr | None = None
    implicit: bool = False  # a divisor's ``!= 0``: dropped where a kept guard divides by it
    order: int = 0
    solved: str | None = None  # "eq" solved for this leaf (substituted everywhere else)
    strict: bool = False  # a "ge" written as > or < (flag > 5 shows as it was written)

    def __post_init__(self):
        if self.op != RAW:
            self.op = Relation(self.op)

    def key(self):
        if self.op == RAW:
            return (RAW, self.lhs.key, self.rop, self.rhs.key)
        return (self.op, self.poly.key)

    def exprs(self) -> list[Expr]:
        return [self.poly] if self.op != RAW else [self.lhs, self.rhs]


# ``p op 0`` as ``sign * p + shift >= 0`` (integer p)
_TO_GE = {Relation.GE: (1, 0), Relation.GT: (1, -1), Relation.LE: (-1, 0), Relation.LT: (-1, -1)}


def canonical(op: Relation | str, p: Poly) -> Rel | bool:
    """``p op 0`` as a canonical relation, or True/False when it always/never holds."""
    op = Relation(op)
    strict = op in (Relation.GT, Relation.LT)
    if op in _TO_GE:
        sign, shift = _TO_GE[op]
        p, op = p * sign + shift, Relation.GE
    lin, c = p.linear(), p.const
    if not lin.terms:
        return op.evaluate(c, 0)
    g = math.gcd(*(k for _, k in lin.terms))
    if op is Relation.GE:
        return Rel(Relation.GE, Poly({m: k // g for m, k in lin.terms}) + c // g, strict=strict and g == 1)
    if c % g:
        return op is Relation.NE
    sign = 1 if lin.terms[0][1] > 0 else -1
    return Rel(op, Poly({m: sign * k // g for m, k in p.terms}))


# ``p o v`` for an integer p and a fractional float v, as ``p o' bound`` on integers
_INTEGER_BOUND = {
    Relation.GE: (Relation.GE, math.ceil), Relation.GT: (Relation.GE, lambda v: math.floor(v) + 1),
    Relation.LE: (Relation.LE, math.floor), Relation.LT: (Relation.LE, lambda v: math.ceil(v) - 1),
}


def relation(op: Relation | str, lhs: Expr, rhs: Expr) -> Rel | bool:
    """``lhs op rhs`` (a :class:`Relation` or its name) as a canonical relation."""
    op = Relation(op)
    pl, pr = int_of(lhs), int_of(rhs)
    if pl is not None and pr is not None:
        return canonical(op, pl - pr)
    for p, other, o in ((pl, rhs, op), (pr, lhs, op.swapped())):
        v = node_const(other)
        if p is not None and type(v) is float and math.isfinite(v):  # int p against a fractional float
            if not o.ordered:
                return o is Relation.NE
            integer_op, bound = _INTEGER_BOUND[o]
            return canonical(integer_op, p - pconst(bound(v)))
    if lhs.key > rhs.key:
        lhs, rhs, op = rhs, lhs, op.swapped()
    if lhs == rhs and lhs.typ is NumberKind.INT:
        return op.reflexive
    return Rel(RAW, lhs=lhs, rop=op.symbol, rhs=rhs)


def collect_covered(e: Expr, out: set) -> None:
    """Keys of the conditions that a guard evaluating ``e`` checks by raising where they fail:
    ``d != 0`` for each divisor ``d``, ``isfinite(x)`` for ``int(x)`` of a float ``x``."""
    if isinstance(e, Poly):
        for m, _ in e.terms:
            for n in m:
                collect_covered(n, out)
        return
    if e.op.structural:
        return
    needs = []
    if e.op in DIVIDING:
        needs.append(e.args[1])
    if e.op in FINITE and float_source(e.args[0]):
        needs.append(build(Op.ISFINITE, [e.args[0]]).expr)
    for x in needs:
        r = relation(Relation.NE, x, ZERO)
        if isinstance(r, Rel):
            out.add(r.key())
    for a in e.args:
        collect_covered(a, out)


def never_relation() -> Rel:
    """A relation that never holds (not expected: every guard held when the entry was traced)."""
    return Rel(RAW, lhs=ZERO, rop=Relation.NE.symbol, rhs=ZERO)


def add_relation(rels: list, r, order: int, implicit: bool = False) -> None:
    if r is True:
        return
    r = never_relation() if r is False else r
    r.order, r.implicit = order, implicit
    rels.append(r)
